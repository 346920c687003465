"""The shared storage as the operator sees it under --shared-root: job folders, markers, logs."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from tfmw_operator.observed import MarkerState

logger = logging.getLogger(__name__)

MAX_MARKER_BYTES = 64 * 1024


# Workers may run as any user; the folder is the job's scratch space, writable by all of them.
JOB_DIRECTORY_MODE = 0o777


def ensure_job_directory(shared_root: Path, relpath: str) -> None:
    """Create the job's folder before its pods, so the kubelet does not make it root-owned."""
    path = shared_root / relpath
    path.mkdir(parents=True, exist_ok=True)
    try:
        path.chmod(JOB_DIRECTORY_MODE)
    except PermissionError:
        # Made earlier by someone else (a kubelet, an admin): theirs to keep as it is.
        logger.warning("cannot make %s writable by every worker; leaving its mode as it is", path)


def archive_log(shared_root: Path, job_relpath: str, attempt: int, index: int, text: str) -> Path:
    """Keep a worker's log at `<job>/logs/attempt-<a>/worker-<i>.log`; the path written."""
    path = shared_root / job_relpath / "logs" / f"attempt-{attempt}" / f"worker-{index}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def marker_path(shared_root: Path, relpath: str) -> Path:
    return shared_root / relpath


def read_marker(shared_root: Path, relpath: str) -> MarkerState:
    path = marker_path(shared_root, relpath)
    try:
        stat = path.stat()
        with path.open("rb") as handle:
            content = handle.read(MAX_MARKER_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return MarkerState()
    job_uid = None
    try:
        parsed = json.loads(content)
        if isinstance(parsed, dict) and isinstance(parsed.get("job_uid"), str):
            job_uid = parsed["job_uid"]
    except ValueError:
        pass  # any content counts as a marker; only the trainer's JSON names its job
    return MarkerState(True, job_uid, datetime.fromtimestamp(stat.st_mtime, UTC))


def marker_exists(shared_root: Path, relpath: str) -> bool:
    return marker_path(shared_root, relpath).exists()


def remove_marker(shared_root: Path, relpath: str) -> None:
    marker_path(shared_root, relpath).unlink(missing_ok=True)
