"""The shared storage as the operator sees it under --shared-root: job folders, markers, logs.

Workers write whatever they like in their job's folder, so every path is walked one
component at a time from the shared root with O_NOFOLLOW: a symlink anywhere is refused,
never followed, and nothing outside `<shared-root>/<namespace>/<job>/` is ever read,
written or removed. Files are opened non-blocking and must be regular files (a FIFO
cannot hang the operator) and are read up to a bound. Every failure is a StorageError
that names the path and the errno.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import re
import stat
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from tfmw_operator.api.times import DAWN, NEVER
from tfmw_operator.contract import MARKER_ATTEMPT, attempt_logs_folder, marker_job_uid
from tfmw_operator.contract import OWNER_FILE as OWNER_FILE  # which job a folder is; workers check it
from tfmw_operator.core.evaluation import EvaluationReading, parse_evaluation
from tfmw_operator.core.observed import MarkerState
from tfmw_operator.core.progress import (
    MAX_PROGRESS_BYTES,
    ProgressError,
    ProgressProblem,
    ProgressReading,
    parse_progress,
)
from tfmw_operator.storage import pool

logger = logging.getLogger(__name__)

NOT_IN_A_UID = re.compile(r"[^0-9A-Za-z-]")
T = TypeVar("T")
D = TypeVar("D")

MAX_MARKER_BYTES = 64 * 1024
# A hung network filesystem must not hang reconciles: storage calls get their own threads
# and a deadline (a thread stuck in the kernel stays stuck, but the job goes on), shared
# fairly between namespaces (pool.py).
STORAGE_TIMEOUT_SECONDS = pool.TIMEOUT_SECONDS
# Workers may run as any user; the folder is the job's scratch space, writable by all of them.
JOB_DIRECTORY_MODE = 0o777
# A namespace's folder holds its jobs' folders, made by the operator alone: no worker writes
# there (each mounts its job's folder as a subPath), and TensorBoard reads it.
NAMESPACE_DIRECTORY_MODE = 0o755

# Non-blocking too: whatever takes a folder's name (a FIFO, a device) fails the open at once.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class StorageError(Exception):
    """Shared storage refused something; the message names the path, errno and a fix."""

    def __init__(self, relpath: str, error: OSError | str) -> None:
        if isinstance(error, OSError):
            code = errno.errorcode.get(error.errno or 0, str(error.errno))
            detail = f"{code}: {error.strerror or error}"
            if error.errno == errno.ELOOP:
                detail += " (a symlink; the operator never follows them)"
        else:
            detail = error
        super().__init__(f"{relpath}: {detail}")
        self.relpath = relpath


def _parts(relpath: str) -> list[str]:
    parts = relpath.split("/")
    if not relpath or any(p in ("", ".", "..") for p in parts):
        raise StorageError(relpath, "not a plain relative path (empty, '.' or '..' segments)")
    return parts


@contextlib.contextmanager
def _directory(shared_root: Path, relpath: str, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder `relpath` under the root ("" for the root itself),
    reached without following links."""
    parts = _parts(relpath) if relpath else []
    try:
        fd = os.open(shared_root, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise StorageError(str(shared_root), error) from error
    try:
        for depth, part in enumerate(parts):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                child = _make_directory(
                    fd, part, NAMESPACE_DIRECTORY_MODE if depth == 0 else JOB_DIRECTORY_MODE
                )
            except OSError as error:
                raise StorageError("/".join(parts[: depth + 1]), error) from error
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _make_directory(dir_fd: int, name: str, mode: int) -> int:
    """Make the folder `name` (unless it appeared meanwhile) and open it. A namespace's folder
    the operator makes gets exactly NAMESPACE_DIRECTORY_MODE, whatever the umask."""
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
        made = True
    except FileExistsError:
        made = False
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    if made and mode == NAMESPACE_DIRECTORY_MODE:
        with contextlib.suppress(OSError):
            os.fchmod(fd, mode)
    return fd


def open_directory(shared_root: Path, relpath: str) -> contextlib.AbstractContextManager[int]:
    """A descriptor of the folder `relpath` under the root, reached without following links."""
    return _directory(shared_root, relpath)


def _split(relpath: str) -> tuple[str, str]:
    parts = _parts(relpath)
    return "/".join(parts[:-1]), parts[-1]


def _read_regular(dir_fd: int, name: str, relpath: str, limit: int) -> tuple[bytes, os.stat_result]:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise
        raise StorageError(relpath, error) from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(relpath, "not a regular file (a directory, FIFO, socket or device)")
        return os.read(fd, limit), info
    except OSError as error:
        raise StorageError(relpath, error) from error
    finally:
        os.close(fd)


def modified_time(info: os.stat_result) -> datetime:
    """A file's mtime, whatever number the filesystem holds, kept within the calendar."""
    try:
        return datetime.fromtimestamp(info.st_mtime, UTC)
    except (OverflowError, OSError, ValueError):
        return NEVER if info.st_mtime > 0 else DAWN


def read_marker(shared_root: Path, relpath: str) -> MarkerState:
    """The marker at `relpath`; absent when it or a folder on its way does not exist."""
    folder, name = _split(relpath)
    try:
        with _directory(shared_root, folder) as dir_fd:
            content, info = _read_regular(dir_fd, name, relpath, MAX_MARKER_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return MarkerState()
    job_uid = attempt = None
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None  # any content counts as a marker; only the trainer's JSON names its job
    if isinstance(parsed, dict):
        named = marker_job_uid(parsed)
        job_uid = named if isinstance(named, str) else None
        written_by = parsed.get(MARKER_ATTEMPT)
        attempt = written_by if type(written_by) is int else None
    return MarkerState(True, job_uid, modified_time(info), attempt)


def read_progress(shared_root: Path, relpath: str) -> ProgressReading | None:
    """The progress document at `relpath`: None when there is none, a ProgressProblem when it
    cannot be used (a link, a FIFO, too big, garbage); never an exception for its content."""
    return _read_document(shared_root, relpath, parse_progress, "a progress document")


def read_evaluation(shared_root: Path, relpath: str) -> EvaluationReading | None:
    """The evaluator's document at `relpath`, as read_progress reads the chief's."""
    return _read_document(shared_root, relpath, parse_evaluation, "an evaluation document")


def _read_document(
    shared_root: Path, relpath: str, parse: Callable[[bytes, datetime], D], what: str
) -> D | ProgressProblem | None:
    folder, name = _split(relpath)
    try:
        with _directory(shared_root, folder) as dir_fd:
            content, info = _read_regular(dir_fd, name, relpath, MAX_PROGRESS_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except StorageError as error:
        return ProgressProblem(str(error))
    try:
        return parse(content, modified_time(info))
    except ProgressError as error:
        return ProgressProblem(f"{relpath}: {error}")
    except (ValueError, OverflowError, RecursionError) as error:  # what a parser may still raise
        return ProgressProblem(f"{relpath}: not {what} ({type(error).__name__})")


def file_signature(shared_root: Path, relpath: str) -> tuple[int, int] | None:
    """(mtime in ns, size) of whatever is at `relpath`, without following links; None if nothing."""
    folder, name = _split(relpath)
    try:
        with _directory(shared_root, folder) as dir_fd:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, StorageError):
        return None
    return info.st_mtime_ns, info.st_size


def marker_exists(shared_root: Path, relpath: str) -> bool:
    """A cheap look for the marker poll: anything at that name, without following links."""
    folder, name = _split(relpath)
    try:
        with _directory(shared_root, folder) as dir_fd:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, StorageError):
        return False
    return True


def remove_marker(shared_root: Path, relpath: str) -> None:
    folder, name = _split(relpath)
    try:
        with _directory(shared_root, folder) as dir_fd:
            os.unlink(name, dir_fd=dir_fd)  # removes a symlink itself, never its target
    except FileNotFoundError:
        return
    except OSError as error:
        raise StorageError(relpath, error) from error


def ensure_job_directory(shared_root: Path, relpath: str, job_uid: str) -> None:
    """Create the job's folder before its pods, so the kubelet does not make it root-owned.

    A folder left by an earlier job of the same name is moved aside to `<job>.<its uid>.<n>`
    (no job can have a dot in its name), so the new job starts clean and nothing is lost.
    """
    parent, name = _split(relpath)
    with _directory(shared_root, parent, create=True) as parent_fd:
        owner = _folder_owner(parent_fd, name, relpath)
        # Anything but a folder under the job's name (a FIFO, a link, a file: the namespace's
        # pods may put one there) is moved aside the same way, never opened or followed.
        if owner not in (None, job_uid):
            # The owner file is the workers' to write: only a UID's characters reach the new
            # name (a '/' or '..' there would move the folder anywhere, another namespace's too).
            aside = f"{name}.{NOT_IN_A_UID.sub('', owner)[:36] or 'unknown'}.{uuid.uuid4().hex[:6]}"
            try:
                os.rename(name, aside, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            except OSError as error:
                raise StorageError(relpath, error) from error
            logger.info("moved %s of an earlier job aside to %s/%s", relpath, parent, aside)
    with _directory(shared_root, relpath, create=True) as job_fd:
        try:
            os.fchmod(job_fd, JOB_DIRECTORY_MODE)
        except PermissionError:
            # Made earlier by someone else (a kubelet, an admin): theirs to keep as it is.
            logger.warning("cannot make %s writable by every worker; leaving its mode as it is", relpath)
        _write_atomically(job_fd, OWNER_FILE, job_uid.encode(), f"{relpath}/{OWNER_FILE}")


def _folder_owner(parent_fd: int, name: str, relpath: str) -> str | None:
    """The uid recorded in an existing job folder; "" for a folder of unknown origin."""
    try:
        job_fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in (errno.ENOTDIR, errno.ELOOP):
            return "unknown"  # not a folder: moved aside like one of unknown origin
        raise StorageError(relpath, error) from error
    try:
        content, _ = _read_regular(job_fd, OWNER_FILE, f"{relpath}/{OWNER_FILE}", 256)
    except FileNotFoundError:
        return None  # made by a kubelet or an older operator: adopt it
    except StorageError:
        return "unknown"
    finally:
        os.close(job_fd)
    return content.decode("ascii", "replace").strip() or "unknown"


def _write_atomically(dir_fd: int, name: str, content: bytes, relpath: str) -> None:
    """Write a new file and rename it over `name`: a planted link at `name` is replaced, not followed."""
    temporary = f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(temporary, _CREATE_FLAGS, 0o644, dir_fd=dir_fd)
        try:
            with contextlib.suppress(OSError):  # a volume that keeps its own modes
                os.fchmod(fd, 0o644)  # whatever the operator's umask: pods of any user read it
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise StorageError(relpath, error) from error


def archive_log(
    shared_root: Path, job_relpath: str, attempt: int, name: str, log: bytes, incarnation: str = ""
) -> str:
    """Keep a pod's log, byte for byte, at `<job>/logs/attempt-<a>/<name>.log` (`<name>` is the
    pod's stem, `worker-3`, and `.<container>` for a side container's); the path written. A
    pod restarted alone within the attempt keeps its predecessor's log: then it goes to
    `<name>.<incarnation>.log`."""
    folder = f"{job_relpath}/{attempt_logs_folder(attempt)}"
    with _directory(shared_root, folder, create=True) as dir_fd:
        file = f"{name}.log"
        if incarnation and _is_regular_file(dir_fd, file):
            file = f"{name}.{incarnation}.log"
        _write_atomically(dir_fd, file, log, f"{folder}/{file}")
    return f"{folder}/{file}"


def _is_regular_file(dir_fd: int, name: str) -> bool:
    """A predecessor's log, kept: a regular file. Anything else there (a link, a FIFO a worker
    planted) is replaced by the log, never written through nor left in its place."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def namespace_of(relpath: str) -> str:
    """The namespace a path under the root is in ("" for the root itself): its storage lane."""
    first = relpath.split("/", 1)[0]
    return "" if first in ("", ".") else first


class SharedStorage:
    """The functions of this module, run off the event loop under the shared root, in
    threads shared fairly between namespaces (pool.py)."""

    def __init__(self, root: Path, threads: pool.FairThreads | None = None) -> None:
        self.root = root
        self.threads = threads or pool.FairThreads()

    async def call(self, relpath: str, function: Callable[..., T], *args: object) -> T:
        """`function(root, *args)` in the storage threads, counted against the namespace of
        `relpath`, within STORAGE_TIMEOUT_SECONDS; StorageError naming `relpath` when it takes
        longer, or when that namespace's storage is backed off (pool.py)."""
        try:
            # Not wait_for: on Python 3.11 it wraps the future in a task of its own, a cost
            # on a launch's path (docs/benchmarks.md, "The measurements behind the code").
            return await self.threads.run(
                namespace_of(relpath), functools.partial(function, self.root, *args)
            )
        except pool.Refused as refused:
            raise StorageError(relpath, str(refused)) from None


async def reported(warnings: list[tuple[str, str]], call: Awaitable[object]) -> None:
    """Storage trouble while acting is reported (a Warning) and the job goes on being reconciled."""
    try:
        await call
    except StorageError as error:
        logger.warning("shared storage: %s", error)
        warnings.append(("StorageError", f"shared storage: {error}"))
