"""Marker detection, on a real folder with real inotify; no API server is asked anything
(the reconcile a marker triggers is only recorded)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from tfmw_operator.api.objects import Key
from tfmw_operator.core.decision import ProgressWatch
from tfmw_operator.storage import files as storage
from tfmw_operator.storage import job_files
from tfmw_operator.storage.files import SharedStorage
from tfmw_operator.storage.job_files import JobFileWatcher
from tfmw_operator.storage.watch import FolderEvents

KEY: Key = ("ns", "job")
MARKER = "ns/job/multiworker-complete.txt"
PROGRESS = "ns/job/progress.json"
T = TypeVar("T")


def watch(
    root: Path,
    setup: Callable[[JobFileWatcher], None],
    settle: float = 0.0,
    then: Callable[[], object] | None = None,
) -> tuple[list[Key], list[Key]]:
    """Run a watcher set up by `setup`; after `settle` seconds, what it triggered so far is
    returned first, `then` happens, and what it triggers after that (within 5 s) second."""

    async def scenario() -> tuple[list[Key], list[Key]]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(SharedStorage(root), triggered.append, lambda key, _: triggered.append(key))
        setup(watcher)
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(settle)
        before = list(triggered)
        triggered.clear()
        if then is not None:
            then()
        for _ in range(100):
            if triggered or (then is None and settle):
                break
            await asyncio.sleep(0.05)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return before, triggered

    return asyncio.run(scenario())


def test_marker_detection_outlives_a_look_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Already there when detection starts, so no inotify event announces it: only a look does.
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / MARKER).write_text("done\n")
    monkeypatch.setattr(job_files, "SWEEP_SECONDS", 0.5)
    looks = 0
    marker_exists = storage.marker_exists

    def first_look_breaks(root: Path, relpath: str) -> bool:
        nonlocal looks
        looks += 1
        if looks == 1:
            raise RuntimeError("the first look went wrong")
        return marker_exists(root, relpath)

    monkeypatch.setattr(job_files, "marker_exists", first_look_breaks)
    with caplog.at_level(logging.ERROR, logger="tfmw_operator.job_files"):
        _, triggered = watch(tmp_path, lambda w: w.track(KEY, MARKER, None))
    assert "the first look went wrong" in caplog.text  # the failure is told, not swallowed
    assert KEY in triggered


def test_a_marker_written_while_watched_triggers_its_job_only(tmp_path: Path) -> None:
    for job in ("job", "other"):
        (tmp_path / "ns" / job).mkdir(parents=True)
    other: Key = ("ns", "other")

    def setup(watcher: JobFileWatcher) -> None:
        watcher.track(KEY, MARKER, None)
        watcher.track(other, "ns/other/multiworker-complete.txt", None)

    # After half a second the watches are set up, and nothing is there yet.
    _, triggered = watch(tmp_path, setup, 0.5, lambda: (tmp_path / MARKER).write_text("done\n"))
    assert triggered == [KEY]


def test_the_steps_folder_made_in_a_watched_job_folder_triggers_its_job(tmp_path: Path) -> None:
    # The training pods' first step-times document makes the folder: the controller, which
    # sets no timer for a running job's step times while the folder is missing, reads them then.
    for job in ("job", "other"):
        (tmp_path / "ns" / job).mkdir(parents=True)
    told: list[tuple[bool, bool, bool]] = []

    def tells_of(watcher: JobFileWatcher, folder: str) -> bool:
        return watcher.folder_stamp(KEY, folder) is not None

    def setup(watcher: JobFileWatcher) -> None:
        watcher.track(KEY, None, ProgressWatch(PROGRESS))  # an exit-code job: no marker
        watcher.track(("ns", "other"), None, ProgressWatch("ns/other/progress.json"))
        told.append((tells_of(watcher, "ns/job"), False, False))

    async def scenario() -> list[tuple[Key, float]]:
        triggered: list[tuple[Key, float]] = []
        watcher = JobFileWatcher(
            SharedStorage(tmp_path),
            lambda k: triggered.append((k, 0.0)),
            lambda k, s: triggered.append((k, s)),
        )
        setup(watcher)
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.5)  # the watches are set up
        told.append((tells_of(watcher, "ns/job"), tells_of(watcher, "ns/other"), tells_of(watcher, "ns")))
        (tmp_path / "ns" / "job" / "steps").mkdir()
        for _ in range(100):
            if triggered:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return triggered

    # A second later: the folder is made right before the first document is written in it.
    assert asyncio.run(scenario()) == [(KEY, job_files.STEPS_FOLDER_SETTLE_SECONDS)]
    # Not before the watcher runs; then the job's own folder only.
    assert told == [(False, False, False), (True, False, False)]


def test_events_the_kernel_dropped_trigger_every_job_watched(tmp_path: Path) -> None:
    # A job with no marker (an exit-code job) may be waiting for its steps folder with no
    # timer (shell/controller.py): an overflow may have dropped that folder's creation.
    class Overflowed(FolderEvents):
        def changed(self) -> dict[Key, set[str]] | None:
            return None  # as after IN_Q_OVERFLOW

    triggered: list[Key] = []
    watcher = JobFileWatcher(SharedStorage(tmp_path), triggered.append, lambda k, _: triggered.append(k))
    watcher.track(KEY, MARKER, None)
    watcher.track(("ns", "exit-code"), None, ProgressWatch("ns/exit-code/progress.json"))
    events = FolderEvents.open(tmp_path)
    assert events is not None
    try:
        watcher._on_folder_events(Overflowed(tmp_path, events.fd, events._libc))
    finally:
        events.close()
    assert sorted(triggered) == [("ns", "exit-code"), KEY]


def test_a_forgotten_job_is_not_triggered(tmp_path: Path) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / MARKER).write_text("done\n")

    def setup(watcher: JobFileWatcher) -> None:
        watcher.track(KEY, MARKER, None)
        watcher.forget(KEY)
        assert watcher.awaiting_marker(KEY) is None

    assert watch(tmp_path, setup, 0.6) == ([], [])


def test_a_progress_document_unchanged_since_read_triggers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / PROGRESS).write_text('{"epoch": 1}')
    monkeypatch.setattr(job_files, "SWEEP_SECONDS", 0.2)
    monkeypatch.setattr(job_files, "PROGRESS_POLL_SECONDS", 0.2)
    seen = storage.file_signature(tmp_path, PROGRESS)

    def setup(watcher: JobFileWatcher) -> None:
        watcher.track(KEY, None, ProgressWatch(PROGRESS))
        watcher.saw_progress(KEY, seen)

    def new_size() -> None:
        (tmp_path / PROGRESS).write_text('{"epoch": 2, "totalEpochs": 4}')

    quiet, triggered = watch(tmp_path, setup, 0.8, new_size)
    assert quiet == [] and KEY in triggered


def test_nothing_runs_while_nothing_changes_and_a_new_job_is_looked_at_once(tmp_path: Path) -> None:
    # Where inotify watches the folders, the watcher wakes for nothing between sweeps unless a
    # job's folders change: idle CPU does not grow with the jobs running.
    for job in ("job", "other", "new"):
        (tmp_path / "ns" / job).mkdir(parents=True)
    (tmp_path / "ns" / "new" / "multiworker-complete.txt").write_text("done\n")  # before its watch
    looks: list[int] = []  # markers asked about, per look
    ticks: list[bool] = []  # sweep or not, per tick

    class Counted(SharedStorage):
        async def call(self, relpath: str, function: Callable[..., T], *args: object) -> T:
            looks.append(len(args[0]) if args and isinstance(args[0], list) else 0)
            return await super().call(relpath, function, *args)

    async def scenario() -> tuple[list[bool], list[int], list[Key]]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(Counted(tmp_path), triggered.append, lambda key, _: triggered.append(key))
        tick = watcher._tick

        async def counted_tick(sweep: bool, progress_due: bool) -> None:
            ticks.append(sweep)
            await tick(sweep, progress_due)

        watcher._tick = counted_tick  # type: ignore[method-assign]
        watcher.track(KEY, MARKER, ProgressWatch(PROGRESS))
        watcher.track(("ns", "other"), "ns/other/multiworker-complete.txt", None)
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(1.5)  # the first tick's sweep, then the time of more than seven ticks
        idle = list(ticks)
        watcher.track(("ns", "new"), "ns/new/multiworker-complete.txt", None)
        for _ in range(100):
            if triggered:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return idle, looks, triggered

    idle, looks, triggered = asyncio.run(scenario())
    assert idle == [True]  # the first tick sweeps: the jobs tracked before it ran
    assert looks == [2, 1]  # both markers; then the new job's alone, once its folder is watched
    assert ticks == [True, False]  # one tick for the new job's watch, and nothing after it
    assert triggered == [("ns", "new")]


def test_a_progress_document_renamed_in_before_its_folders_watch_began_triggers_its_job(
    tmp_path: Path,
) -> None:
    # A job tracked between sweeps, its chief's first document already there when the tick
    # adds the watch: no event comes for it (the integration suite's neighbour job, 3 ms
    # apart; stop 49). Looked at once, by hand, as its marker is.
    (tmp_path / "ns" / "job").mkdir(parents=True)

    async def scenario() -> tuple[list[Key], list[Key]]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(
            SharedStorage(tmp_path), triggered.append, lambda key, _: triggered.append(key)
        )
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.5)  # past the first tick's sweep
        (tmp_path / PROGRESS).write_text('{"epoch": 1}')
        watcher.track(KEY, MARKER, ProgressWatch(PROGRESS))
        for _ in range(40):
            if triggered:
                break
            await asyncio.sleep(0.05)
        first = list(triggered)
        triggered.clear()
        await asyncio.sleep(0.6)  # looked at once: nothing more while nothing changes
        assert watcher._sync is not None  # inotify: the case under test
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return first, triggered

    assert asyncio.run(scenario()) == ([KEY], [])


def test_a_job_whose_folder_cannot_be_watched_is_told_of_its_progress_once_per_change(tmp_path: Path) -> None:
    # Its marker in a folder not made yet: looked at by hand at every tick (0.2 s). Its job
    # not running, the controller reads no document (no saw_progress): one trigger per change
    # of the document, not one per tick (a helper's hostile read of 49f8d52).
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / PROGRESS).write_text('{"epoch": 1}')

    async def scenario() -> tuple[bool, list[Key], list[Key]]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(
            SharedStorage(tmp_path), triggered.append, lambda key, _: triggered.append(key)
        )
        watcher.track(KEY, "ns/job/not-yet/done.txt", ProgressWatch(PROGRESS))
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(1.5)  # seven ticks and more
        inotify = watcher._sync is not None
        first = list(triggered)
        triggered.clear()
        partial = tmp_path / "ns" / "job" / ".progress.json.partial"
        partial.write_text('{"epoch": 2, "totalEpochs": 4}')
        partial.replace(tmp_path / PROGRESS)  # whole, as the trainer writes it
        await asyncio.sleep(1.0)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return inotify, first, triggered

    inotify, first, then = asyncio.run(scenario())
    assert inotify  # the case under test: the other folders watched, this one not
    assert first == [KEY]  # once, not at each of the seven ticks
    assert then in (
        [KEY],
        [KEY, KEY],
    )  # the change: by its event where the folder is watched, and by the look


def test_a_namespace_whose_storage_hangs_holds_up_only_its_own_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Markers are looked for one namespace at a time: a namespace whose look never answers
    (its calls are written off after the deadline) delays no other namespace's job."""
    import threading

    from tfmw_operator.storage.pool import FairThreads

    release = threading.Event()
    marker_exists = storage.marker_exists

    def hangs_in_slow(root: Path, relpath: str) -> bool:
        if relpath.startswith("slow/"):
            release.wait()
        return marker_exists(root, relpath)

    monkeypatch.setattr(job_files, "marker_exists", hangs_in_slow)
    monkeypatch.setattr(job_files, "SWEEP_SECONDS", 0.2)
    for folder in ("slow/job", "ns/job"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "multiworker-complete.txt").write_text("done\n")

    async def scenario() -> list[Key]:
        triggered: list[Key] = []
        threads = FairThreads(threads=4, per_lane=2, timeout=0.5)
        watcher = JobFileWatcher(SharedStorage(tmp_path, threads), triggered.append, lambda k, _: None)
        watcher.track(("slow", "job"), "slow/job/multiworker-complete.txt", None)
        watcher.track(KEY, MARKER, None)
        detection = asyncio.create_task(watcher.run())
        for _ in range(40):
            if KEY in triggered:
                break
            await asyncio.sleep(0.05)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        release.set()
        return triggered

    try:
        assert asyncio.run(scenario()) == [KEY]
    finally:
        release.set()


def test_a_document_a_look_found_is_unread_until_a_reconcile_reads_it(tmp_path: Path) -> None:
    # A job turning Running is decided again at once only when a document waits to be read
    # (core/reconcile.py `_set_progress_phase`): a look found it while the job was Pending,
    # whose reconciles read none. Otherwise the look that finds one triggers the job.
    (tmp_path / "ns" / "job").mkdir(parents=True)

    async def scenario() -> tuple[bool, bool, bool, bool]:
        watcher = JobFileWatcher(SharedStorage(tmp_path), lambda key: None, lambda key, _: None)
        watcher.track(KEY, MARKER, ProgressWatch(PROGRESS))
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.5)  # looked at: no document yet
        nothing = watcher.progress_unread(KEY)
        partial = tmp_path / "ns" / "job" / ".progress.json.partial"
        partial.write_text('{"epoch": 1}')
        partial.replace(tmp_path / PROGRESS)
        for _ in range(40):
            if watcher.progress_unread(KEY):
                break
            await asyncio.sleep(0.05)
        found = watcher.progress_unread(KEY)
        watcher.saw_progress(KEY, storage.file_signature(tmp_path, PROGRESS))
        read = watcher.progress_unread(KEY)
        watcher.track(KEY, MARKER, None)  # no longer followed: not known
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return nothing, found, read, watcher.progress_unread(KEY)

    assert asyncio.run(scenario()) == (False, True, False, True)


def test_a_document_no_look_has_found_yet_counts_as_unread(tmp_path: Path) -> None:
    # A job whose first look is held back by the throttle (an operator restarted within a
    # progress interval of the job's last update, its document written before the watch
    # began: no event comes) may have one waiting: said unread, so it is read when the job
    # turns Running (a helper's hostile read).
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / PROGRESS).write_text('{"epoch": 3}')
    later = datetime.now(UTC) + timedelta(minutes=5)

    async def scenario() -> tuple[bool, bool]:
        watcher = JobFileWatcher(SharedStorage(tmp_path), lambda key: None, lambda key, _: None)
        untracked = watcher.progress_unread(KEY)
        watcher.track(KEY, MARKER, ProgressWatch(PROGRESS, not_before=later))
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.6)  # the first tick's sweep: the throttle holds the look back
        held = watcher.progress_unread(KEY)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return untracked, held

    assert asyncio.run(scenario()) == (True, True)
