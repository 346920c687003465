"""Job folders of deleted jobs: kept for the retention period, then removed.

Every `SWEEP_SECONDS` the operator lists the job folders it made (`<namespace>/<folder>`
holding its `.tfmw-job-uid`), then the jobs that exist. A folder whose recorded job no
longer exists, and whose own entries have not changed for `--folder-retention` seconds,
is removed. A folder the operator did not make (no `.tfmw-job-uid`) is never touched, nor
are namespaces the operator does not watch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tfmw_operator.contract import MAX_OWNER_BYTES, OWNER_FILE
from tfmw_operator.storage.files import SharedStorage, StorageError, modified_time, open_directory

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 600.0
# One sweep removes at most this many folders, and tries at most MAX_TRIES_PER_SWEEP (a
# folder it cannot remove, say a worker's read-only subfolder, never blocks the others
# for ever: failures are tried again last, next sweep); the next sweep goes on.
MAX_REMOVALS_PER_SWEEP = 100
MAX_TRIES_PER_SWEEP = 4 * MAX_REMOVALS_PER_SWEEP


@dataclass(frozen=True)
class JobFolder:
    relpath: str  # <namespace>/<folder>
    owner_uid: str  # the job it was made for
    modified: datetime  # the folder's own mtime: its entries last changed


def stale_folders(
    folders: Iterable[JobFolder], live_uids: set[str], now: datetime, retention: timedelta
) -> list[str]:
    """The folders to remove: their job is gone and they have not changed for `retention`."""
    # now - modified, not modified + retention: a folder dated in the year 9999 must not overflow.
    return [f.relpath for f in folders if f.owner_uid not in live_uids and now - f.modified >= retention]


def list_job_folders(shared_root: Path, namespaces: Iterable[str]) -> list[JobFolder]:
    """The job folders the operator made in these namespaces' folders, without following links."""
    found = []
    for namespace in namespaces:
        try:
            with open_directory(shared_root, namespace) as ns_fd:
                names = os.listdir(ns_fd)
                for name in names:
                    folder = _job_folder(ns_fd, namespace, name)
                    if folder is not None:
                        found.append(folder)
        except (OSError, StorageError) as error:
            logger.warning("folder retention: cannot list %s: %s", namespace, error)
    return found


def _job_folder(ns_fd: int, namespace: str, name: str) -> JobFolder | None:
    try:
        info = os.stat(name, dir_fd=ns_fd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            return None
        job_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ns_fd)
    except OSError:
        return None
    try:
        fd = os.open(OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=job_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            owner = os.read(fd, MAX_OWNER_BYTES).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
    except OSError:
        return None  # not made by the operator: never removed
    finally:
        os.close(job_fd)
    if not owner:
        return None
    return JobFolder(f"{namespace}/{name}", owner, modified_time(info))


def namespaces_present(shared_root: Path) -> list[str]:
    """The namespace folders at the root (directories only, links not followed)."""
    with open_directory(shared_root, "") as root_fd:
        return [
            name
            for name in os.listdir(root_fd)
            if stat.S_ISDIR(os.stat(name, dir_fd=root_fd, follow_symlinks=False).st_mode)
        ]


def remove_job_folder(shared_root: Path, relpath: str) -> None:
    """Remove `<namespace>/<folder>` and everything in it; links inside are removed, never followed."""
    namespace, name = relpath.split("/", 1)
    try:
        with open_directory(shared_root, namespace) as ns_fd:
            shutil.rmtree(name, dir_fd=ns_fd)
    except FileNotFoundError:
        return
    except OSError as error:
        raise StorageError(relpath, error) from error


class FolderRetention:
    """The sweep, as a background task of the operator."""

    def __init__(
        self,
        storage: SharedStorage,
        retention_seconds: float,
        live_uids: Callable[[], Awaitable[set[str]]],
        namespaces: tuple[str, ...] = (),
    ) -> None:
        self.storage = storage
        self.retention = timedelta(seconds=retention_seconds)
        self._live_uids = live_uids
        self._namespaces = namespaces  # (): every namespace folder at the root
        self._failed: set[str] = set()  # folders a sweep could not remove

    async def sweep(self, now: datetime) -> list[str]:
        """One look: the folders removed."""
        namespaces: Iterable[str] = self._namespaces or await self.storage.call("", namespaces_present)
        folders = await self.storage.call("", list_job_folders, namespaces)
        if not folders:
            return []
        # Listed after the folders: a job made meanwhile is in it, so its folder is kept.
        live = await self._live_uids()
        removed: list[str] = []
        stale = stale_folders(folders, live, now, self.retention)
        # Those that failed before go last: the others are not held up behind them.
        stale.sort(key=lambda relpath: relpath in self._failed)
        for relpath in stale[:MAX_TRIES_PER_SWEEP]:
            if len(removed) >= MAX_REMOVALS_PER_SWEEP:
                break
            try:
                await self.storage.call(relpath, remove_job_folder, relpath)
            except StorageError as error:
                logger.warning("folder retention: cannot remove %s: %s", relpath, error)
                self._failed.add(relpath)
                continue
            self._failed.discard(relpath)
            logger.info("removed %s: its job is gone and it was kept %s", relpath, self.retention)
            removed.append(relpath)
        return removed

    async def run(self) -> None:
        """Until cancelled: a sweep now and every SWEEP_SECONDS."""
        while True:
            try:
                await self.sweep(datetime.now(UTC))
            except Exception:  # storage or API trouble: the next sweep tries again
                logger.exception("folder retention: a sweep failed; trying again in %.0fs", SWEEP_SECONDS)
            await asyncio.sleep(SWEEP_SECONDS)
