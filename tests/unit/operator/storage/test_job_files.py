"""Marker detection, on a real folder with real inotify; no API server is asked anything
(the reconcile a marker triggers is only recorded)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from tfmw_operator.api.objects import Key
from tfmw_operator.core.decision import ProgressWatch
from tfmw_operator.storage import files as storage
from tfmw_operator.storage import job_files
from tfmw_operator.storage.files import SharedStorage
from tfmw_operator.storage.job_files import JobFileWatcher

KEY: Key = ("ns", "job")
MARKER = "ns/job/multiworker-complete.txt"
PROGRESS = "ns/job/progress.json"


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
