"""Job folders of deleted jobs: kept for the retention period, then removed.

Every `SWEEP_SECONDS` the operator lists the job folders it made (`<namespace>/<folder>`
holding its `.tfmw-job-uid`), then the jobs that exist. A folder whose recorded job no
longer exists in that namespace, and whose own entries have not changed for
`--folder-retention` seconds, is removed. A folder the operator did not make (no
`.tfmw-job-uid`) is never touched, nor are namespaces the operator does not watch.

A folder names its job in a file its workers can write, so a tenant can make a folder name
any UID: only a job of the folder's own namespace keeps it (a UID of another namespace's
live job would otherwise pin it for ever).

Everything here is bounded and walks by descriptor (walk.py): a namespace folder is read
MAX_LISTED_PER_NAMESPACE entries at a time, going on where the last sweep stopped; a sweep
removes at most MAX_ENTRIES_PER_SWEEP entries, ENTRIES_PER_CALL per storage call, taking
turns between namespaces, so one tenant's millions of files or thousands of levels cost
that tenant's folders more sweeps, never another's removal. Whatever one folder raises is
that folder's failure: it is tried again last, next sweep, and the others go on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import stat
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tfmw_operator.contract import MAX_OWNER_BYTES, OWNER_FILE
from tfmw_operator.storage.files import SharedStorage, StorageError, modified_time, open_directory
from tfmw_operator.storage.walk import Budget, FolderChanged, entries, open_folder, remove_tree

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 600.0
# One sweep tries at most this many folders (a folder it cannot remove, say a worker's
# read-only subfolder, never blocks the others for ever: failures are tried again last,
# next sweep); the next sweep goes on.
MAX_TRIES_PER_SWEEP = 400
# Entries one sweep removes (or looks at) in all, and one storage call at most: a call
# stays far within the storage deadline even on a slow network filesystem, so no thread
# is given up on a big folder (docs/benchmarks.md, "The measurements behind the code").
MAX_ENTRIES_PER_SWEEP = 200_000
ENTRIES_PER_CALL = 2_000
# Entries of one namespace folder looked at per sweep; the next sweep goes on from there.
MAX_LISTED_PER_NAMESPACE = 5_000
# Namespace folders at the root looked at (when the operator serves every namespace).
MAX_NAMESPACES = 10_000
# Folders being removed over several sweeps, remembered: their own time changes as they go.
MAX_CONTINUING = 10_000

LiveUids = Callable[[], Awaitable[Mapping[str, set[str]]]]  # namespace -> UIDs of its jobs


@dataclass(frozen=True)
class JobFolder:
    relpath: str  # <namespace>/<folder>
    owner_uid: str  # the job it was made for
    modified: datetime  # the folder's own mtime: its entries last changed

    @property
    def namespace(self) -> str:
        return self.relpath.split("/", 1)[0]


def stale_folders(
    folders: Iterable[JobFolder],
    live_uids: Mapping[str, set[str]],
    now: datetime,
    retention: timedelta,
    removing: Iterable[str] = (),
) -> list[str]:
    """The folders to remove: no job of their namespace has their UID, and they have not
    changed for `retention` (or their removal has begun: `removing`)."""
    begun = set(removing)
    # now - modified, not modified + retention: a folder dated in the year 9999 must not overflow.
    return [
        f.relpath
        for f in folders
        if f.owner_uid not in live_uids.get(f.namespace, set())
        and (f.relpath in begun or now - f.modified >= retention)
    ]


def list_job_folders(
    shared_root: Path, namespace: str, start: int = 0, limit: int = MAX_LISTED_PER_NAMESPACE
) -> tuple[list[JobFolder], int]:
    """The job folders the operator made among entries [start, start + limit) of the
    namespace's folder, and where the next look starts (0: from the beginning again).
    Nothing is followed, and nothing but the owner file is opened as a file."""
    found = []
    with open_directory(shared_root, namespace) as ns_fd:
        listed = entries(ns_fd, start + limit)[start:]
        for name, is_folder in listed:
            folder = _job_folder(ns_fd, namespace, name) if is_folder else None
            if folder is not None:
                found.append(folder)
    return found, (start + len(listed) if len(listed) == limit else 0)


def _job_folder(ns_fd: int, namespace: str, name: str) -> JobFolder | None:
    try:
        job_fd = open_folder(ns_fd, name)
    except OSError:
        return None  # gone, or something else took its name: not a folder of ours now
    try:
        owner = read_owner(job_fd)
        info = os.fstat(job_fd)
    except OSError:
        return None  # not made by the operator: never removed
    finally:
        os.close(job_fd)
    if not owner:
        return None
    return JobFolder(f"{namespace}/{name}", owner, modified_time(info))


def read_owner(job_fd: int) -> str:
    """The UID in a job folder's owner file ("" when it is not a regular file); OSError when
    there is none. Opened non-blocking, never through a link, read up to a bound."""
    fd = os.open(OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=job_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, MAX_OWNER_BYTES).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def namespaces_present(shared_root: Path, limit: int = MAX_NAMESPACES) -> list[str]:
    """The namespace folders at the root (folders only, links not followed), at most `limit`."""
    with open_directory(shared_root, "") as root_fd:
        return [name for name, is_folder in entries(root_fd, limit) if is_folder]


@dataclass(frozen=True)
class Removed:
    done: bool  # gone, or no longer the folder listed (left alone)
    spent: int  # entries looked at


def remove_job_folder(shared_root: Path, relpath: str, owner_uid: str, budget: int) -> Removed:
    """Remove `<namespace>/<folder>` and everything in it, at most `budget` entries this
    call, if it still names `owner_uid`; links inside are removed, never followed. Its
    owner file goes last, so a folder half removed is still known as the operator's."""
    namespace, name = relpath.split("/", 1)
    allowance = Budget(budget)

    def still_the_folder_listed(job_fd: int) -> bool:
        try:
            return read_owner(job_fd) == owner_uid
        except OSError:
            return False

    try:
        with open_directory(shared_root, namespace) as ns_fd:
            done = remove_tree(ns_fd, name, allowance, OWNER_FILE, still_the_folder_listed)
    except FileNotFoundError:
        return Removed(True, budget - allowance.entries)
    except FolderChanged:
        logger.info("folder retention: %s changed since it was listed; left alone", relpath)
        return Removed(True, budget - allowance.entries)
    except OSError as error:
        raise StorageError(relpath, error) from error
    return Removed(done, budget - allowance.entries)


class FolderRetention:
    """The sweep, as a background task of the operator."""

    def __init__(
        self,
        storage: SharedStorage,
        retention_seconds: float,
        live_uids: LiveUids,
        namespaces: tuple[str, ...] = (),
    ) -> None:
        self.storage = storage
        self.retention = timedelta(seconds=retention_seconds)
        self._live_uids = live_uids
        self._namespaces = namespaces  # (): every namespace folder at the root
        self._failed: set[str] = set()  # folders a sweep could not remove
        self._removing: OrderedDict[str, None] = OrderedDict()  # begun, not yet done
        self._cursors: dict[str, int] = {}  # where each namespace's next listing starts

    async def sweep(self, now: datetime) -> list[str]:
        """One look: the folders removed."""
        namespaces = list(self._namespaces) or await self.storage.call("", namespaces_present)
        folders: list[JobFolder] = []
        for namespace in namespaces:
            try:
                found, self._cursors[namespace] = await self.storage.call(
                    namespace, list_job_folders, namespace, self._cursors.get(namespace, 0)
                )
            except Exception as error:  # one namespace's folder never stops the others'
                logger.warning("folder retention: cannot list %s: %s", namespace, error)
                continue
            folders += found
        self._cursors = {n: c for n, c in self._cursors.items() if n in namespaces}
        if not folders:
            return []
        # Listed after the folders: a job made meanwhile is in it, so its folder is kept.
        live = await self._live_uids()
        stale = stale_folders(folders, live, now, self.retention, self._removing)
        # Those that failed before go last: the others are not held up behind them.
        stale.sort(key=lambda relpath: (relpath in self._failed, relpath not in self._removing))
        owners = {f.relpath: f.owner_uid for f in folders}
        return await self._remove(stale[:MAX_TRIES_PER_SWEEP], owners)

    async def _remove(self, stale: list[str], owners: Mapping[str, str]) -> list[str]:
        """Remove the folders, a call's worth at a time, each namespace in turn."""
        queues: dict[str, deque[str]] = {}
        for relpath in stale:
            queues.setdefault(relpath.split("/", 1)[0], deque()).append(relpath)
        budget, removed = MAX_ENTRIES_PER_SWEEP, []
        for namespace in itertools.cycle(list(queues)):
            if budget <= 0 or not any(queues.values()):
                break
            queue = queues[namespace]
            if not queue:
                continue
            relpath = queue[0]
            allowance = min(ENTRIES_PER_CALL, budget)
            try:
                outcome = await self.storage.call(
                    relpath, remove_job_folder, relpath, owners[relpath], allowance
                )
            except Exception as error:  # whatever one folder raises, the others go on
                logger.warning("folder retention: cannot remove %s: %s", relpath, error)
                self._failed.add(relpath)
                self._removing.pop(relpath, None)
                queue.popleft()
                budget -= allowance
                continue
            budget -= max(1, outcome.spent)
            if not outcome.done:
                self._begun(relpath)
                continue
            queue.popleft()
            self._failed.discard(relpath)
            self._removing.pop(relpath, None)
            logger.info("removed %s: its job is gone and it was kept %s", relpath, self.retention)
            removed.append(relpath)
        return removed

    def _begun(self, relpath: str) -> None:
        self._removing[relpath] = None
        self._removing.move_to_end(relpath)
        while len(self._removing) > MAX_CONTINUING:
            self._removing.popitem(last=False)

    async def run(self) -> None:
        """Until cancelled: a sweep now and every SWEEP_SECONDS."""
        while True:
            try:
                await self.sweep(datetime.now(UTC))
            except Exception:  # storage or API trouble: the next sweep tries again
                logger.exception("folder retention: a sweep failed; trying again in %.0fs", SWEEP_SECONDS)
            await asyncio.sleep(SWEEP_SECONDS)


__all__ = ["FolderRetention", "JobFolder", "list_job_folders", "remove_job_folder", "stale_folders"]
