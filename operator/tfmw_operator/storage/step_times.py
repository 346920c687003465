"""Reading the training pods' step-times documents (`<job>/steps/<pod stem>.json`).

As every read of the shared storage (files.py): the folder is reached from the root one
component at a time without following a link, each document is opened non-blocking and
without following a link, must be a regular file and is read up to a bound. Only the names
of the job's own training pods are opened, so a folder full of files costs nothing more than
the job's size (at most 1,025 documents); anything else in the folder is never looked at.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from tfmw_operator.contract import STEP_TIMES_FOLDER
from tfmw_operator.core.progress import ProgressError, ProgressProblem
from tfmw_operator.core.step_times import (
    MAX_STEP_TIMES_BYTES,
    StepTimesReading,
    StepTimesSnapshot,
    parse_step_times,
)
from tfmw_operator.storage.files import modified_time, open_directory

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def steps_relpath(job_relpath: str) -> str:
    return f"{job_relpath}/{STEP_TIMES_FOLDER}"


def read_step_times(shared_root: Path, job_relpath: str, stems: Sequence[str]) -> StepTimesSnapshot:
    """The documents of the pods `stems` (`worker-0`, `chief-0` ...) that exist; one that cannot
    be used is a ProgressProblem naming why. No folder yet: no documents (and `no_folder`)."""
    folder = steps_relpath(job_relpath)
    try:
        with open_directory(shared_root, folder) as dir_fd:
            found = [(stem, reading) for stem in stems if (reading := _read(dir_fd, stem)) is not None]
    except FileNotFoundError:
        return StepTimesSnapshot(no_folder=True)
    except NotADirectoryError:
        return StepTimesSnapshot()
    return StepTimesSnapshot(tuple(found))


def _read(dir_fd: int, stem: str) -> StepTimesReading | None:
    """One pod's document; what is wrong with it says nothing of the path (its reader does)."""
    try:
        fd = os.open(f"{stem}.json", _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        return ProgressProblem(_described(error))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ProgressProblem("not a regular file (a directory, FIFO, socket or device)")
        content = os.read(fd, MAX_STEP_TIMES_BYTES + 1)
    except OSError as error:
        return ProgressProblem(_described(error))
    finally:
        os.close(fd)
    try:
        return parse_step_times(content, modified_time(info))
    except ProgressError as error:
        return ProgressProblem(str(error))
    except (ValueError, OverflowError, RecursionError) as error:
        return ProgressProblem(f"not a step-times document ({type(error).__name__})")


def _described(error: OSError) -> str:
    code = errno.errorcode.get(error.errno or 0, str(error.errno))
    link = " (a symlink; the operator never follows them)" if error.errno == errno.ELOOP else ""
    return f"{code}: {error.strerror or error}{link}"
