"""Noticing what a running job's pods write: the chief's marker, a changed progress
document, the in-pod supervisors' reports, and (with inotify) the training pods' steps
folder when it is first made.

The controller tracks each launched job here with the marker that may appear, the progress
document to follow and the folder of its supervisors' reports; when any changes, the job is
triggered.

Where the shared storage is local (inotify), the kernel names the folder that changed:
nothing runs while nothing changes. A job whose folders to watch changed has its watches set
up a tick later (its files looked at once, as they may have come before the watch), a folder
not there yet is looked at every tick until it can be watched, and a full look at every
job's files every SWEEP_SECONDS catches anything missed. Elsewhere (NFS, ...) the markers
are polled, less often the more jobs there are (at most about MAX_POLL_STATS_PER_SECOND),
and progress documents once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tfmw_operator.api.objects import Key
from tfmw_operator.contract import PROGRESS_FILE, STEP_TIMES_FOLDER
from tfmw_operator.core.decision import ProgressWatch
from tfmw_operator.storage.control import reports_signature
from tfmw_operator.storage.files import (
    SharedStorage,
    StorageError,
    file_signature,
    marker_exists,
    namespace_of,
)
from tfmw_operator.storage.watch import FolderEvents, FolderStamp, WatchSync

logger = logging.getLogger(__name__)

MARKER_POLL_SECONDS = 0.2
MAX_POLL_SECONDS = 2.0
MAX_POLL_STATS_PER_SECOND = 500
PROGRESS_POLL_SECONDS = 1.0
# With inotify, what the kernel's events leave out is a bug's or an overflow's (which is
# told): the sweep is a safety net, and costs a stat of every job's files (docs/benchmarks.md).
SWEEP_SECONDS = 300.0
# A steps folder just made: its job is triggered this much later, once a document is in it.
STEPS_FOLDER_SETTLE_SECONDS = 1.0
RELOOK_SECONDS = 10.0  # markers a look failed to see (storage trouble) are looked at again after this

Signature = tuple[int, int]  # (mtime in ns, size) of a file
ProgressCheck = tuple[Key, str, Signature | None]
ReportsCheck = tuple[Key, str, Signature | None]
# A report's file name in the reports' folder (`worker-3.json`): a change of one is news.
REPORT_NAME = re.compile(r"(chief|worker|ps|evaluator)-[0-9]+\.json\Z")


@dataclass
class _Watched:
    """One job's files."""

    marker: str | None = None  # relative to the root: the marker that may appear any moment
    progress: ProgressWatch | None = None
    progress_seen: Signature | None = None  # the progress document's, when it was last read or looked at
    progress_read: Signature | None = None  # its signature when a reconcile last read it
    progress_told: bool = False  # inotify told of a change to it since a reconcile last read it
    progress_looked: bool = False  # a look or a read has found it as it is (or that it is not there)
    reports: str | None = None  # the supervisors' reports' folder, relative to the root
    reports_seen: Signature | None = None  # that folder's, when last looked at by a poll

    @property
    def folders(self) -> set[str]:
        folders = set()
        if self.marker is not None:
            folders.add(self.marker.rsplit("/", 1)[0])
        if self.progress is not None:
            folders.add(self.progress.relpath.rsplit("/", 1)[0])
        if self.reports is not None:
            folders.add(self.reports)
        return folders


class JobFileWatcher:
    def __init__(
        self,
        storage: SharedStorage,
        trigger: Callable[[Key], None],
        trigger_later: Callable[[Key, float], None],
    ) -> None:
        self.storage = storage
        self._trigger = trigger
        self._trigger_later = trigger_later
        self._jobs: dict[Key, _Watched] = {}
        self._sync: WatchSync | None = None  # while inotify watches the job folders
        self._relook: set[Key] = set()  # jobs whose markers a look failed to see: looked at again
        self._relook_at = 0.0  # loop time

    def track(
        self, key: Key, marker: str | None, progress: ProgressWatch | None, reports: str | None = None
    ) -> None:
        """What to watch of a job now; nothing (all None) forgets it."""
        watched = self._jobs.get(key)
        before = watched.folders if watched is not None else set()
        if marker is None and progress is None and reports is None:
            self._jobs.pop(key, None)
        else:
            if watched is None:
                watched = self._jobs[key] = _Watched()
            watched.marker = marker
            watched.progress = progress
            if progress is None:
                watched.progress_seen = watched.progress_read = None
                watched.progress_told = watched.progress_looked = False
            if reports != watched.reports:
                watched.reports_seen = None
            watched.reports = reports
        if self._sync is not None and self._folders_of(key) != before:
            self._sync.changed(key)

    def saw_progress(self, key: Key, signature: Signature | None) -> None:
        """The job's progress document was read, as it was when it had this signature."""
        watched = self._jobs.setdefault(key, _Watched())
        watched.progress_seen = watched.progress_read = signature
        watched.progress_told, watched.progress_looked = False, True

    def progress_unread(self, key: Key) -> bool:
        """Whether a look found the job's progress document other than a reconcile last read it,
        or inotify told of a change since: it triggered the job, which read nothing while it was
        not Running. A change neither has found yet triggers the job when one does. True until a
        look or a read has found it (untracked, or its first look held back by the throttle)."""
        watched = self._jobs.get(key)
        if watched is None or not watched.progress_looked:  # not known: a look may be held back
            return True
        return watched.progress_told or watched.progress_seen not in (None, watched.progress_read)

    def forget(self, key: Key) -> None:
        if self._jobs.pop(key, None) is not None and self._sync is not None:
            self._sync.changed(key)

    def folder_stamp(self, key: Key, folder: str) -> FolderStamp | None:
        """None unless inotify watches `folder` (relative to the root) for the job now: then a
        file or folder made in it from now on triggers the job (the training pods' steps folder
        too), and the stamp stays the same until something is (FolderEvents.stamp)."""
        return None if self._sync is None else self._sync.events.stamp(key, folder)

    def awaiting_marker(self, key: Key) -> str | None:
        watched = self._jobs.get(key)
        return None if watched is None else watched.marker

    async def run(self) -> None:
        """Until cancelled: trigger the jobs whose marker appeared or whose progress changed."""
        try:
            events = await asyncio.to_thread(FolderEvents.open, self.storage.root)
        except Exception:  # polling still notices every marker
            logger.exception("cannot watch %s for markers; polling it instead", self.storage.root)
            events = None
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        if events is not None:
            self._sync = WatchSync(events, changed.set)
            loop.add_reader(events.fd, self._on_folder_events, events)
        last_progress = loop.time()
        last_sweep = last_progress - SWEEP_SECONDS  # the first tick: jobs tracked until now
        try:
            while True:
                interval = MARKER_POLL_SECONDS
                if events is None:
                    awaiting = sum(1 for w in self._jobs.values() if w.marker is not None)
                    interval = min(
                        MAX_POLL_SECONDS, max(MARKER_POLL_SECONDS, awaiting / MAX_POLL_STATS_PER_SECOND)
                    )
                elif self._sync is not None and self._sync.idle:
                    # Nothing to look at until a job's folders change, the sweep, or a look that
                    # failed is due again; then one tick later, so a burst of launches is
                    # synced together.
                    wake_at = last_sweep + SWEEP_SECONDS
                    if self._relook:
                        wake_at = min(wake_at, self._relook_at)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout_at(wake_at):
                            await changed.wait()
                changed.clear()
                await asyncio.sleep(interval)
                now = loop.time()
                sweep = events is None or now - last_sweep >= SWEEP_SECONDS
                progress_due = now - last_progress >= PROGRESS_POLL_SECONDS and (events is None or sweep)
                if sweep:
                    last_sweep = now
                if progress_due:
                    last_progress = now
                try:
                    await self._tick(sweep, progress_due)
                except Exception:  # nothing else notices a marker: this task must outlive any tick
                    logger.exception("marker detection: a look at the shared storage failed; looking again")
                    last_sweep = now - SWEEP_SECONDS  # the next tick looks at everything
        finally:
            if events is not None:
                self._sync = None
                loop.remove_reader(events.fd)
                events.close()

    async def _tick(self, sweep: bool, progress_due: bool) -> None:
        unwatched = set()
        if self._sync is not None:
            unwatched = self._sync.sync(self._folders_of, self._jobs.keys() if sweep else None)
        relook: set[Key] = set()
        if sweep or (self._relook and asyncio.get_running_loop().time() >= self._relook_at):
            relook, self._relook = self._relook, set()
        keys = self._jobs.keys() if sweep else unwatched | relook
        markers = [(k, marker) for k in keys if (marker := self.awaiting_marker(k)) is not None]
        # With inotify, the progress documents of the jobs looked at by hand too: one renamed
        # in before its folder's watch began (a job that turns Running within the tick that
        # adds it, its chief reporting at once) sends no event, and would wait for the sweep.
        # Without it, every document is polled at PROGRESS_POLL_SECONDS, no oftener.
        if progress_due:
            progress = self._progress_to_check()
        else:
            progress = self._progress_to_check(keys) if self._sync is not None else []
        # Without inotify (or a folder it cannot watch yet) the reports are polled as markers
        # are: one stat of the folder per job, which every report renamed into it changes.
        polled = self._jobs.keys() if self._sync is None else unwatched
        reports = [(k, w.reports, w.reports_seen) for k in polled if (w := self._jobs[k]).reports is not None]
        await self._look(markers, progress, reports)

    async def _look(
        self,
        markers: list[tuple[Key, str]],
        progress: list[ProgressCheck],
        reports: list[ReportsCheck] | None = None,
    ) -> None:
        """Stat the markers, progress documents and reports' folders given; trigger the jobs
        whose changed. One call per namespace: a namespace whose storage is slow or backed off
        (pool.py) holds up only its own jobs' files."""
        if not markers and not progress and not reports:
            return
        by_namespace: dict[str, tuple[list[tuple[Key, str]], list[ProgressCheck], list[ReportsCheck]]] = {}
        for key, relpath in markers:
            by_namespace.setdefault(namespace_of(relpath), ([], [], []))[0].append((key, relpath))
        for check in progress:
            by_namespace.setdefault(namespace_of(check[1]), ([], [], []))[1].append(check)
        for check in reports or []:
            by_namespace.setdefault(namespace_of(check[1]), ([], [], []))[2].append(check)
        looks = (self._look_in(namespace, *checks) for namespace, checks in by_namespace.items())
        results = await asyncio.gather(*looks, return_exceptions=True)
        for namespace, found in zip(by_namespace, results, strict=True):
            if isinstance(found, BaseException):
                if not isinstance(found, (OSError, StorageError)):
                    raise found
                # Storage trouble must not end marker detection for good: looked at again soon.
                logger.warning("cannot look for markers of namespace %s: %s", namespace, found)
                self._relook_later(key for key, _ in by_namespace[namespace][0])
                continue
            for key in found:
                self._trigger(key)

    def _relook_later(self, keys: Iterable[Key]) -> None:
        if not self._relook:
            self._relook_at = asyncio.get_running_loop().time() + RELOOK_SECONDS
        self._relook.update(keys)

    async def _look_in(
        self,
        namespace: str,
        markers: list[tuple[Key, str]],
        progress: list[ProgressCheck],
        reports: list[ReportsCheck],
    ) -> list[Key]:
        found: list[Key] = []
        if markers or progress:
            present, changed = await self.storage.call(namespace, _changed, markers, progress)
            found += present
            for key, _, _ in progress:
                if (watched := self._jobs.get(key)) is not None:
                    watched.progress_looked = True
            for key, signature in changed:
                # Told once per change: a job not running reads no document, and would
                # otherwise be triggered at every look while it differs.
                if (watched := self._jobs.get(key)) is not None:
                    watched.progress_seen = signature
            found += [key for key, _ in changed]
        if reports:
            changed = await self.storage.call(namespace, _reports_changed, reports)
            for key, signature in changed:
                if (watched := self._jobs.get(key)) is not None:
                    watched.reports_seen = signature
            found += [key for key, _ in changed]
        return found

    def _progress_to_check(self, keys: Iterable[Key] | None = None) -> list[ProgressCheck]:
        """Jobs (of `keys`, or all) whose progress document may be recorded now (the throttle
        allows it)."""
        now = datetime.now(UTC)
        watched = ((key, self._jobs.get(key)) for key in (self._jobs if keys is None else keys))
        return [
            (key, w.progress.relpath, w.progress_seen)
            for key, w in watched
            if w is not None
            and w.progress is not None
            and (w.progress.not_before is None or w.progress.not_before <= now)
        ]

    def _folders_of(self, key: Key) -> set[str]:
        watched = self._jobs.get(key)
        return set() if watched is None else watched.folders

    def _on_folder_events(self, events: FolderEvents) -> None:
        changed = events.changed()
        if changed is None:  # the kernel dropped events: look at everything
            for key, watched in self._jobs.items():
                watched.progress_told = watched.progress is not None
                self._trigger(key)
            return
        now = datetime.now(UTC)
        for key, names in changed.items():
            watched = self._jobs.get(key) or _Watched()
            marker, progress = watched.marker, watched.progress
            if progress is not None and PROGRESS_FILE in names:
                watched.progress_told = True
            urgent = {""}
            if marker is not None:
                inside = marker.split("/", 2)[2] if marker.count("/") >= 2 else marker
                urgent |= {inside.split("/", 1)[0], marker.rsplit("/", 1)[-1]}
            if names & urgent:
                if self._sync is not None:  # a folder may have come or gone: watch again
                    self._sync.changed(key)
                self._trigger(key)
            elif STEP_TIMES_FOLDER in names:
                # The training pods' first step times, read from then on (shell/controller.py
                # sets no timer for them before); the folder is made right before the document.
                self._trigger_later(key, STEPS_FOLDER_SETTLE_SECONDS)
            elif watched.reports is not None and any(REPORT_NAME.match(n) for n in names):
                self._trigger(key)  # a supervisor's report: a command ended, or waits
            elif progress is not None and PROGRESS_FILE in names:
                wait = (progress.not_before - now).total_seconds() if progress.not_before else 0.0
                self._trigger_later(key, max(0.0, wait))


def _changed(
    shared_root: Path, markers: list[tuple[Key, str]], progress: list[ProgressCheck]
) -> tuple[list[Key], list[tuple[Key, Signature | None]]]:
    return _markers_present(shared_root, markers), _progress_changed(shared_root, progress)


def _markers_present(shared_root: Path, watched: list[tuple[Key, str]]) -> list[Key]:
    return [key for key, relpath in watched if marker_exists(shared_root, relpath)]


def _progress_changed(shared_root: Path, watched: list[ProgressCheck]) -> list[tuple[Key, Signature | None]]:
    changed = []
    for key, relpath, seen in watched:
        signature = file_signature(shared_root, relpath)
        if signature != seen:
            changed.append((key, signature))
    return changed


def _reports_changed(shared_root: Path, watched: list[ReportsCheck]) -> list[tuple[Key, Signature | None]]:
    changed = []
    for key, relpath, seen in watched:
        job_relpath = relpath.rsplit("/", 2)[0]
        signature = reports_signature(shared_root, job_relpath)
        if signature != seen:
            changed.append((key, signature))
    return changed
