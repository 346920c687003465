"""The in-pod supervisors' files in a job's folder: the control file the operator writes, and
what it reads back (each supervisor's report, the end of an ended command's log, the stacks
a stalled gang was asked for). docs/supervisor.md is the protocol.

Everything here is in `<shared-root>/<namespace>/<job>/`, which the job's own pods can write:
as everywhere in storage/, every path is walked from the root without following a link,
files are opened non-blocking and must be regular, and every read is bounded. A report is
parsed by the core (core/reports.py), which takes only one that names this job and the pod
that holds its stem now.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tfmw_operator.api.objects import Json
from tfmw_operator.contract import (
    CONTROL_FILE,
    CONTROL_FOLDER,
    REPORTS_FOLDER,
    STACKS_FILE_SUFFIX,
    SUPERVISOR_FILE,
    attempt_logs_folder,
    reports_folder,
    sealed_supervisor,
)
from tfmw_operator.core.policies.failure import MESSAGE_TAIL_LINES
from tfmw_operator.core.reports import (
    MAX_LOG_TAIL_BYTES,
    MAX_REPORT_BYTES,
    MAX_STACKS_TAIL_BYTES,
    PodReport,
    StacksReading,
    log_tail_text,
    parse_report,
)
from tfmw_operator.storage.files import StorageError, _directory, _write_atomically, modified_time

# The operator's own folder: only it writes the control file (pods of another user cannot
# replace it); the reports' folder is every pod's, each writing its own file (sticky: a pod
# cannot replace another user's report).
CONTROL_FOLDER_MODE = 0o755
REPORTS_FOLDER_MODE = 0o1777
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _subfolder(parent_fd: int, name: str, mode: int, relpath: str) -> int:
    """`name` in `parent_fd`, made with `mode` when missing; never a link."""
    try:
        os.mkdir(name, mode, dir_fd=parent_fd)
    except FileExistsError:
        pass
    except OSError as error:
        raise StorageError(relpath, error) from error
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        raise StorageError(relpath, error) from error
    with contextlib.suppress(OSError):  # made by someone else: theirs to keep as it is
        if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
            os.fchmod(fd, mode)
    return fd


def write_control(shared_root: Path, job_relpath: str, document: Json) -> None:
    """`<job>/.tfmw/control.json`, atomically (a new file renamed over it, so a planted link
    is replaced, never followed); `.tfmw/` and `.tfmw/pods/` made first when missing, so no
    pod makes them as its own; rewritten only when it differs (the supervisors' poll sees no
    change). The supervisor beside it is place_supervisor's."""
    content = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
    control_relpath = f"{job_relpath}/{CONTROL_FOLDER}"
    with _directory(shared_root, job_relpath) as job_fd:
        control_fd = _subfolder(job_fd, CONTROL_FOLDER, CONTROL_FOLDER_MODE, control_relpath)
        try:
            reports = _subfolder(
                control_fd, REPORTS_FOLDER, REPORTS_FOLDER_MODE, f"{job_relpath}/{reports_folder()}"
            )
            os.close(reports)
            said = _read(control_fd, CONTROL_FILE, len(content))
            if said is None or said[0] != content:
                _write_atomically(control_fd, CONTROL_FILE, content, f"{control_relpath}/{CONTROL_FILE}")
        finally:
            os.close(control_fd)


def place_supervisor(shared_root: Path, job_relpath: str) -> None:
    """`<job>/.tfmw/supervisor.py`, the supervisor the pods run, sealed
    (contract.sealed_supervisor): written when it is not the operator's own, whatever is at
    its name (a link or FIFO is replaced, never followed or opened). The controller calls this
    before every creation of a supervised job's pods, so none starts without it; apart from the
    control file, whose writes a directory planted here cannot stop."""
    control_relpath = f"{job_relpath}/{CONTROL_FOLDER}"
    source = supervisor_source()
    with _directory(shared_root, job_relpath) as job_fd:
        control_fd = _subfolder(job_fd, CONTROL_FOLDER, CONTROL_FOLDER_MODE, control_relpath)
        try:
            found = _read(control_fd, SUPERVISOR_FILE, len(source))
            if found is None or found[0] != source:
                _write_atomically(control_fd, SUPERVISOR_FILE, source, f"{control_relpath}/{SUPERVISOR_FILE}")
        finally:
            os.close(control_fd)


@functools.cache
def supervisor_source() -> bytes:
    """The supervisor the pods run: this operator's own (one file of the standard library),
    sealed once, not at every launch."""
    spec = importlib.util.find_spec("tfmw_operator.supervisor")
    if spec is None or spec.origin is None:
        raise RuntimeError("the operator's package has no supervisor.py")
    return sealed_supervisor(Path(spec.origin).read_bytes())


def _read(dir_fd: int, name: str, limit: int, tail: bool = False) -> tuple[bytes, os.stat_result] | None:
    """A regular file's content (its last `limit` bytes when `tail`, else None when it is
    bigger); None for anything else: absent, a link, a FIFO, a device, too big."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > limit and not tail:
            return None
        start = max(0, info.st_size - limit) if tail else 0
        chunks, size = [], 0
        while size < limit:
            chunk = os.pread(fd, limit - size, start + size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), info
    except OSError:
        return None
    finally:
        os.close(fd)


@dataclass
class ReportCache:
    """The reports last parsed for one job, by stem, with the file's identity then: a
    report (and its log's end) is read again only when its file changed."""

    seen: dict[str, tuple[tuple[int, int, int], PodReport | None]]

    @classmethod
    def empty(cls) -> ReportCache:
        return cls({})


def read_reports(
    shared_root: Path, job_relpath: str, job_uid: str, stems: Sequence[str], cache: ReportCache
) -> tuple[PodReport, ...]:
    """The supervisors' reports of these pods (by stem) that name this job; those absent or
    unusable are left out. For a command that ended with an error, the end of its log of
    that attempt comes with it (`log_tail`), as a container's termination message would."""
    found: list[PodReport] = []
    try:
        with _directory(shared_root, f"{job_relpath}/{reports_folder()}") as reports_fd:
            for stem in stems:
                name = f"{stem}.json"
                try:
                    info = os.stat(name, dir_fd=reports_fd, follow_symlinks=False)
                except OSError:
                    cache.seen.pop(stem, None)
                    continue
                if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPORT_BYTES:
                    continue
                identity = (info.st_ino, info.st_size, info.st_mtime_ns)
                held = cache.seen.get(stem)
                if held is not None and held[0] == identity:
                    report = held[1]
                else:
                    read = _read(reports_fd, name, MAX_REPORT_BYTES)
                    report = parse_report(read[0], job_uid, stem) if read is not None else None
                    if report is not None and report.end is not None and report.end.exit_code != 0:
                        report = _with_log_tail(shared_root, job_relpath, report)
                    cache.seen[stem] = (identity, report)
                if report is not None:
                    found.append(report)
    except (FileNotFoundError, NotADirectoryError):
        return ()
    except OSError as error:
        raise StorageError(f"{job_relpath}/{reports_folder()}", error) from error
    return tuple(found)


def _with_log_tail(shared_root: Path, job_relpath: str, report: PodReport) -> PodReport:
    folder = f"{job_relpath}/{attempt_logs_folder(report.attempt)}"
    try:
        with _directory(shared_root, folder) as logs_fd:
            read = _read(logs_fd, f"{report.stem}.log", MAX_LOG_TAIL_BYTES, tail=True)
    except (OSError, StorageError):
        return report
    if read is None:
        return report
    raw, info = read
    return replace(report, log_tail=log_tail_text(raw, MESSAGE_TAIL_LINES, whole=info.st_size <= len(raw)))


def read_stacks(
    shared_root: Path, job_relpath: str, attempt: int, stems: Sequence[str], chief: str
) -> tuple[StacksReading, ...]:
    """The stacks files of these pods in `attempt`: size and time each, and the end of the
    chief's (its last dump)."""
    found: list[StacksReading] = []
    try:
        with _directory(shared_root, f"{job_relpath}/{attempt_logs_folder(attempt)}") as logs_fd:
            for stem in stems:
                name = f"{stem}{STACKS_FILE_SUFFIX}"
                if stem == chief:
                    read = _read(logs_fd, name, MAX_STACKS_TAIL_BYTES, tail=True)
                    if read is None:
                        continue
                    raw, info = read
                    text = raw.decode("utf-8", "replace").replace("\0", "")
                    found.append(
                        StacksReading(stem, info.st_size, modified_time(info), text, info.st_size <= len(raw))
                    )
                    continue
                try:
                    info = os.stat(name, dir_fd=logs_fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    found.append(StacksReading(stem, info.st_size, modified_time(info)))
    except (FileNotFoundError, NotADirectoryError):
        return ()
    except OSError as error:
        raise StorageError(f"{job_relpath}/{attempt_logs_folder(attempt)}", error) from error
    return tuple(found)


def reports_signature(shared_root: Path, job_relpath: str) -> tuple[int, int] | None:
    """(mtime in ns, inode) of the reports' folder: every report is renamed into it, so it
    changes with each (the poll where inotify is not to be had)."""
    try:
        with _directory(shared_root, f"{job_relpath}/{reports_folder()}") as fd:
            info = os.fstat(fd)
    except (OSError, StorageError):
        return None
    return info.st_mtime_ns, info.st_ino
