"""The shared storage layer against what a hostile or broken worker leaves in its folder."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from tfmw_operator.api.times import DAWN, NEVER
from tfmw_operator.contract import OWNER_FILE
from tfmw_operator.core.progress import ProgressProblem, ProgressReport
from tfmw_operator.storage.files import (
    JOB_DIRECTORY_MODE,
    MAX_MARKER_BYTES,
    NAMESPACE_DIRECTORY_MODE,
    StorageError,
    archive_log,
    ensure_job_directory,
    file_signature,
    marker_exists,
    modified_time,
    read_marker,
    read_progress,
    remove_marker,
)

MARKER = "ns/job/multiworker-complete.txt"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / "ns" / "other").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize("uid_key", ["jobUid", "job_uid"])  # job_uid: markers written before 0.2.0
def test_marker_names_its_job_and_attempt_when_the_trainer_wrote_it(root: Path, uid_key: str) -> None:
    (root / MARKER).write_text(json.dumps({uid_key: "u1", "attempt": 2}))
    marker = read_marker(root, MARKER)
    assert marker.exists and marker.job_uid == "u1" and marker.attempt == 2 and marker.modified is not None


def test_the_current_spelling_wins_over_the_old_one(root: Path) -> None:
    (root / MARKER).write_text(json.dumps({"jobUid": "u1", "job_uid": "u0"}))
    assert read_marker(root, MARKER).job_uid == "u1"


@pytest.mark.parametrize(
    "content",
    [b"chief finished\n", b"", b"\xff\xfe\x00garbage", b'{"job_uid": 7}', b'{"jobUid": null}', b"[1, 2]"],
)
def test_any_content_counts_as_a_marker_naming_no_job(root: Path, content: bytes) -> None:
    (root / MARKER).write_bytes(content)
    marker = read_marker(root, MARKER)
    assert marker.exists and marker.job_uid is None and marker.attempt is None


def test_a_huge_marker_is_read_only_up_to_the_bound(root: Path) -> None:
    with (root / MARKER).open("wb") as handle:
        handle.truncate(MAX_MARKER_BYTES * 1000)  # sparse: 64 MB that costs no disk
    assert read_marker(root, MARKER).exists


def test_missing_marker_and_removal(root: Path) -> None:
    assert not read_marker(root, MARKER).exists
    assert not read_marker(root, "ns/nojob/multiworker-complete.txt").exists
    (root / MARKER).write_text("x")
    assert marker_exists(root, MARKER)
    remove_marker(root, MARKER)
    remove_marker(root, MARKER)  # twice is harmless
    assert not (root / MARKER).exists() and not marker_exists(root, MARKER)


def test_a_symlinked_marker_is_refused_and_its_target_untouched(root: Path) -> None:
    target = root / "ns" / "other" / "multiworker-complete.txt"
    target.write_text(json.dumps({"job_uid": "other"}))
    (root / MARKER).symlink_to("../other/multiworker-complete.txt")
    with pytest.raises(StorageError, match="ELOOP"):
        read_marker(root, MARKER)
    remove_marker(root, MARKER)  # removes the link, never what it points at
    assert target.exists() and not (root / MARKER).is_symlink()


def test_a_symlinked_folder_on_the_way_is_refused(root: Path) -> None:
    (root / "ns" / "other" / "done").write_text("x")
    (root / "ns" / "job" / "sub").symlink_to("../other")
    with pytest.raises(StorageError, match="ns/job/sub"):
        read_marker(root, "ns/job/sub/done")
    with pytest.raises(StorageError):
        remove_marker(root, "ns/job/sub/done")
    assert (root / "ns" / "other" / "done").exists()


def test_a_symlink_loop_is_refused(root: Path) -> None:
    (root / MARKER).symlink_to("multiworker-complete.txt")
    with pytest.raises(StorageError):
        read_marker(root, MARKER)


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_marker_that_is_not_a_regular_file_is_refused_without_blocking(root: Path, kind: str) -> None:
    if kind == "directory":
        (root / MARKER).mkdir()
    else:
        os.mkfifo(root / MARKER)
    result: list[BaseException | None] = []

    def read() -> None:
        try:
            read_marker(root, MARKER)
            result.append(None)
        except BaseException as error:
            result.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert result, "reading the marker blocked"
    assert isinstance(result[0], StorageError) and "not a regular file" in str(result[0])


@pytest.mark.parametrize("path", ["", ".", "ns/./job", "ns/../etc/passwd", "ns//job", "/etc/passwd"])
def test_paths_that_are_not_plain_are_refused(root: Path, path: str) -> None:
    with pytest.raises(StorageError):
        read_marker(root, path)


def test_job_directory_is_writable_by_any_worker_user_and_names_its_job(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/job", "uid-1")
    assert (tmp_path / "ns/job").stat().st_mode & 0o777 == 0o777
    assert (tmp_path / "ns/job" / OWNER_FILE).read_text() == "uid-1"
    ensure_job_directory(tmp_path, "ns/job", "uid-1")  # again: harmless
    assert [p.name for p in (tmp_path / "ns").iterdir()] == ["job"]


def test_the_folder_of_an_earlier_namesake_is_moved_aside_not_inherited(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/job", "uid-old")
    (tmp_path / "ns/job/checkpoint").write_text("old")
    ensure_job_directory(tmp_path, "ns/job", "uid-new")
    assert not (tmp_path / "ns/job/checkpoint").exists()
    (aside,) = [p for p in (tmp_path / "ns").iterdir() if p.name != "job"]
    assert aside.name.startswith("job.uid-old.") and (aside / "checkpoint").read_text() == "old"


@pytest.mark.parametrize("forged", ["/../../other/planted", "../..", "a/b", "x\x00/y", "..."])
def test_a_forged_owner_never_steers_where_the_old_folder_goes(tmp_path: Path, forged: str) -> None:
    ensure_job_directory(tmp_path, "ns/job", "uid-old")
    (tmp_path / "ns/job" / OWNER_FILE).write_text(forged)
    (tmp_path / "ns/job.").mkdir()  # what the forged name would have climbed out of
    (tmp_path / "other").mkdir()
    ensure_job_directory(tmp_path, "ns/job", "uid-new")
    assert list((tmp_path / "other").iterdir()) == []
    (aside,) = [p.name for p in (tmp_path / "ns").iterdir() if p.name not in ("job", "job.")]
    assert "/" not in aside and aside.startswith("job.") and ".." not in aside


@pytest.mark.parametrize("planted", ["symlink", "fifo", "file"])
def test_a_job_folder_that_is_not_a_folder_is_moved_aside_never_followed_or_opened(
    tmp_path: Path, planted: str
) -> None:
    (tmp_path / "ns").mkdir()
    (tmp_path / "elsewhere").mkdir()
    job = tmp_path / "ns" / "job"
    if planted == "symlink":
        job.symlink_to(tmp_path / "elsewhere")
    elif planted == "fifo":
        os.mkfifo(job)  # opened blocking, this would hang the storage thread for good
    else:
        job.write_text("x")
    ensure_job_directory(tmp_path, "ns/job", "uid-1")
    assert not (tmp_path / "elsewhere" / OWNER_FILE).exists()
    assert job.is_dir() and not job.is_symlink() and (job / OWNER_FILE).read_text() == "uid-1"
    aside = [p for p in (tmp_path / "ns").iterdir() if p.name.startswith("job.unknown.")]
    assert len(aside) == 1 and (aside[0].is_symlink() or not aside[0].is_dir())


def test_a_namespace_folder_the_operator_makes_is_writable_by_it_alone(tmp_path: Path) -> None:
    old = os.umask(0o077)  # whatever the process's umask
    try:
        ensure_job_directory(tmp_path, "ns/job", "uid-1")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ns").stat().st_mode) == NAMESPACE_DIRECTORY_MODE == 0o755
    assert stat.S_IMODE((tmp_path / "ns" / "job").stat().st_mode) == JOB_DIRECTORY_MODE == 0o777
    (tmp_path / "ns2").mkdir(mode=0o711)
    ensure_job_directory(tmp_path, "ns2/job", "uid-2")  # made by someone else: left as it is
    assert stat.S_IMODE((tmp_path / "ns2").stat().st_mode) == 0o711


def test_log_archive_replaces_a_planted_symlink_instead_of_writing_through_it(root: Path) -> None:
    victim = root / "ns" / "other" / "multiworker-complete.txt"
    logs = root / "ns" / "job" / "logs" / "attempt-0"
    logs.mkdir(parents=True)
    (logs / "worker-0.log").symlink_to(victim)
    written = archive_log(root, "ns/job", 0, "worker-0", b"epoch=1 loss=0.5\n")
    assert written == "ns/job/logs/attempt-0/worker-0.log"
    assert not victim.exists(), "the operator wrote another job's marker through a planted link"
    assert (logs / "worker-0.log").read_text() == "epoch=1 loss=0.5\n"


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_planted_link_or_fifo_is_no_predecessors_log_the_log_replaces_it(root: Path, planted: str) -> None:
    """A pod restarted alone keeps its predecessor's log (a regular file) beside its own; what
    a worker planted at the log's name is replaced, with the pod's incarnation given too."""
    logs = root / "ns" / "job" / "logs" / "attempt-0"
    logs.mkdir(parents=True)
    if planted == "link":
        (logs / "worker-1.log").symlink_to(root / "ns" / "other" / "multiworker-complete.txt")
    else:
        os.mkfifo(logs / "worker-1.log")
    written = archive_log(root, "ns/job", 0, "worker-1", b"epoch=2\n", incarnation="abc")
    assert written == "ns/job/logs/attempt-0/worker-1.log"
    assert (logs / "worker-1.log").is_file() and (logs / "worker-1.log").read_text() == "epoch=2\n"
    # A predecessor's log is kept, the next one beside it.
    again = archive_log(root, "ns/job", 0, "worker-1", b"epoch=3\n", incarnation="def")
    assert again == "ns/job/logs/attempt-0/worker-1.def.log"
    assert (logs / "worker-1.log").read_text() == "epoch=2\n"


def test_log_archive_refuses_a_logs_folder_that_is_a_file_or_link(root: Path) -> None:
    (root / "ns" / "job" / "logs").write_text("not a folder")
    with pytest.raises(StorageError):
        archive_log(root, "ns/job", 0, "worker-0", b"x")
    (root / "ns" / "job" / "logs").unlink()
    (root / "ns" / "job" / "logs").symlink_to(root / "ns" / "other")
    with pytest.raises(StorageError):
        archive_log(root, "ns/job", 0, "worker-0", b"x")
    assert list((root / "ns" / "other").iterdir()) == []


PROGRESS = "ns/job/progress.json"


def test_a_progress_document_is_read_and_checked(root: Path) -> None:
    (root / PROGRESS).write_text('{"epoch": 2, "totalEpochs": 4}')
    got = read_progress(root, PROGRESS)
    assert isinstance(got, ProgressReport) and got.percent == 50.0


def test_no_progress_document_is_no_reading(root: Path) -> None:
    assert read_progress(root, PROGRESS) is None
    assert read_progress(root, "ns/missing/progress.json") is None


@pytest.mark.parametrize(
    "kind", ["symlink", "fifo", "directory", "huge", "garbage", "linked folder", "overflowing number", "deep"]
)
def test_a_hostile_progress_document_is_a_problem_never_an_exception(root: Path, kind: str) -> None:
    target = root / "ns" / "other" / "progress.json"
    target.write_text('{"epoch": 1}')
    path = root / PROGRESS
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        with path.open("wb") as sparse:
            sparse.truncate(64 * 1024 * 1024)
    elif kind == "garbage":
        path.write_bytes(b"\x00\xff" * 100)
    elif kind == "overflowing number":  # an integer no float can hold, where numbers go
        huge = "1" + "0" * 400
        path.write_text(f'{{"epoch": 1, "examplesPerSecond": {huge}, "updatedAt": {huge}}}')
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        (root / "ns" / "linked").symlink_to(root / "ns" / "other")
        path = root / "ns" / "linked" / "progress.json"
    got = read_progress(root, str(path.relative_to(root)))
    assert isinstance(got, ProgressProblem), got
    assert "progress.json" in got.message or "linked" in got.message
    assert target.read_text() == '{"epoch": 1}'


def test_a_file_signature_changes_with_each_write_and_follows_no_link(root: Path) -> None:
    assert file_signature(root, PROGRESS) is None
    (root / PROGRESS).write_text("{}")
    first = file_signature(root, PROGRESS)
    os.utime(root / PROGRESS, ns=(1, 2))
    assert first is not None and file_signature(root, PROGRESS) != first
    (root / "ns" / "job" / "link.json").symlink_to(root / PROGRESS)
    assert file_signature(root, "ns/job/link.json") != file_signature(root, PROGRESS)


def test_a_modification_time_past_the_calendar_is_never() -> None:
    # ext4 keeps mtimes until 2446; other filesystems (and a malicious NFS server) go further.
    beyond = os.stat_result((0o100644, 0, 0, 1, 0, 0, 1, 0, 2**62, 0))
    before = os.stat_result((0o100644, 0, 0, 1, 0, 0, 1, 0, -(2**62), 0))
    assert modified_time(beyond) == NEVER and modified_time(before) == DAWN
