"""`python3 -m tfmw_operator.folder_check --claim=<name>`: a worker's first step.

The operator makes each job's folder and writes the job's UID into it (`.tfmw-job-uid`)
before it creates any worker. Run as the first init container of every worker (in the
operator's image, whatever image the workers use), this checks that the folder the job's
claim gives at `TFMW_SHARED_DIR` is that one. If not (the claim reaches other storage, or
another folder of it), it writes why to the termination log and exits with
FOLDER_CHECK_MISMATCH_EXIT_CODE: the operator fails the job, reason SharedVolumeMismatch,
before anything trains into a folder the operator never sees. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from pathlib import Path

from tfmw_operator.contract import (
    FOLDER_CHECK_MISMATCH_EXIT_CODE,
    JOB_UID_ENV,
    MAX_OWNER_BYTES,
    OWNER_FILE,
    SHARED_DIR_ENV,
)

TERMINATION_LOG = Path("/dev/termination-log")


def check(folder: Path, job_uid: str) -> str | None:
    """None when `folder` holds the operator's record of job `job_uid`; else what is wrong."""
    path = folder / OWNER_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return f"{path} does not exist: this is not the folder the operator made for the job"
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"{path} is not a regular file"
        found = os.read(fd, MAX_OWNER_BYTES).decode("ascii", "replace").strip()
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    finally:
        os.close(fd)
    if found != job_uid:
        return f"{path} names job {found[:64]!r}, not this job ({job_uid})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tfmw-folder-check", description=__doc__)
    parser.add_argument("--claim", default="", help="the job's claim, named in the message")
    args = parser.parse_args(argv)
    folder = Path(os.environ.get(SHARED_DIR_ENV, "/shared"))
    problem = check(folder, os.environ.get(JOB_UID_ENV, ""))
    if problem is None:
        return 0
    message = f"claim {args.claim or '?'} does not reach the job's folder: {problem}"
    print(message, file=sys.stderr)
    with contextlib.suppress(OSError):  # outside Kubernetes: stderr says it
        TERMINATION_LOG.write_text(message)
    return FOLDER_CHECK_MISMATCH_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
