"""The supervisors' files on a real folder: the control file written atomically, reports read
back only as regular files within bounds, an ended command's log end, the stacks files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tfmw_operator import supervisor
from tfmw_operator.contract import sealed_supervisor
from tfmw_operator.storage.control import (
    ReportCache,
    place_supervisor,
    read_reports,
    read_stacks,
    reports_signature,
    supervisor_source,
    write_control,
)
from tfmw_operator.storage.files import StorageError

JOB = "default/mnist"
JOB_UID = "job-uid-1"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / JOB).mkdir(parents=True)
    return tmp_path


def report(root: Path, stem: str, **fields: object) -> Path:
    doc = {"jobUid": JOB_UID, "podUid": f"uid-{stem}", "attempt": 0, "state": "running"} | fields
    path = root / JOB / ".tfmw" / "pods" / f"{stem}.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_control_file_is_written_with_its_folders(root: Path) -> None:
    write_control(root, JOB, {"jobUid": JOB_UID, "attempt": 1, "start": False})
    control = root / JOB / ".tfmw" / "control.json"
    assert json.loads(control.read_text()) == {"attempt": 1, "jobUid": JOB_UID, "start": False}
    pods = root / JOB / ".tfmw" / "pods"
    assert pods.is_dir() and pods.stat().st_mode & 0o1777 == 0o1777  # every pod's, sticky
    write_control(root, JOB, {"jobUid": JOB_UID, "attempt": 2, "start": True})
    assert json.loads(control.read_text())["attempt"] == 2


def test_a_planted_link_is_replaced_not_followed(root: Path, tmp_path: Path) -> None:
    (root / JOB / ".tfmw").mkdir()
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    os.symlink(target, root / JOB / ".tfmw" / "control.json")
    write_control(root, JOB, {"attempt": 0})
    assert target.read_text() == "keep"
    assert not (root / JOB / ".tfmw" / "control.json").is_symlink()


def test_the_supervisor_is_placed_sealed_and_put_back_when_changed(root: Path, tmp_path: Path) -> None:
    placed = root / JOB / ".tfmw" / "supervisor.py"
    sealed = sealed_supervisor(Path(supervisor.__file__).read_bytes())
    old_umask = os.umask(0o077)  # the operator's umask does not decide who may read it
    try:
        place_supervisor(root, JOB)
    finally:
        os.umask(old_umask)
    assert placed.read_bytes() == sealed == supervisor_source()
    assert placed.stat().st_mode & 0o777 == 0o644  # every pod reads it
    written = placed.stat().st_ino
    place_supervisor(root, JOB)
    write_control(root, JOB, {"attempt": 1})
    assert placed.stat().st_ino == written  # the same: not written again
    # Anything else at its name (changed, a link, a FIFO) is replaced, never followed or opened.
    target = tmp_path / "elsewhere.py"
    target.write_text("keep")
    for plant in (
        lambda: placed.write_text("print('mine')"),
        lambda: placed.symlink_to(target),
        lambda: os.mkfifo(placed),
    ):
        placed.unlink()
        plant()
        place_supervisor(root, JOB)
        assert not placed.is_symlink() and placed.read_bytes() == sealed
    assert target.read_text() == "keep"


def test_a_control_file_unchanged_is_not_written_again(root: Path) -> None:
    write_control(root, JOB, {"attempt": 0})
    control = root / JOB / ".tfmw" / "control.json"
    written = control.stat().st_ino
    write_control(root, JOB, {"attempt": 0})
    assert control.stat().st_ino == written  # the supervisors' poll sees no change


def test_a_directory_at_the_supervisors_name_stops_new_pods_not_the_control_file(root: Path) -> None:
    """A raise or an exit must reach the running supervisors even when the file the next pods
    would run cannot be put back; those pods are not made (the error stops the decision)."""
    place_supervisor(root, JOB)
    placed = root / JOB / ".tfmw" / "supervisor.py"
    placed.unlink()
    (placed / "x").mkdir(parents=True)
    write_control(root, JOB, {"attempt": 1, "exit": True})
    control = json.loads((root / JOB / ".tfmw" / "control.json").read_text())
    assert control == {"attempt": 1, "exit": True}
    with pytest.raises(StorageError):
        place_supervisor(root, JOB)


def test_a_linked_control_folder_is_refused(root: Path, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "other", root / JOB / ".tfmw")
    with pytest.raises(StorageError):
        write_control(root, JOB, {"attempt": 0})
    assert not (tmp_path / "other" / "control.json").exists()


def test_reports_are_read_for_the_stems_asked_and_this_job_only(root: Path) -> None:
    write_control(root, JOB, {"attempt": 0})
    report(root, "worker-0")
    report(root, "worker-1", jobUid="another-job")
    report(root, "worker-2")
    found = read_reports(root, JOB, JOB_UID, ["worker-0", "worker-1"], ReportCache.empty())
    assert [(r.stem, r.pod_uid) for r in found] == [("worker-0", "uid-worker-0")]


def test_no_reports_folder_is_no_report(root: Path) -> None:
    assert read_reports(root, JOB, JOB_UID, ["worker-0"], ReportCache.empty()) == ()
    assert reports_signature(root, JOB) is None


def test_a_link_or_fifo_in_place_of_a_report_is_no_report(root: Path, tmp_path: Path) -> None:
    write_control(root, JOB, {"attempt": 0})
    elsewhere = tmp_path / "forged.json"
    elsewhere.write_text(json.dumps({"jobUid": JOB_UID, "podUid": "u", "attempt": 0, "state": "running"}))
    os.symlink(elsewhere, root / JOB / ".tfmw" / "pods" / "worker-0.json")
    os.mkfifo(root / JOB / ".tfmw" / "pods" / "worker-1.json")
    assert read_reports(root, JOB, JOB_UID, ["worker-0", "worker-1"], ReportCache.empty()) == ()


def test_an_ended_command_s_report_comes_with_its_log_s_end(root: Path) -> None:
    write_control(root, JOB, {"attempt": 0})
    report(root, "worker-1", state="exited", exitCode=1, attempt=3)
    logs = root / JOB / "logs" / "attempt-3"
    logs.mkdir(parents=True)
    (logs / "worker-1.log").write_text("".join(f"line {i}\n" for i in range(100)) + "Traceback: boom\n")
    (found,) = read_reports(root, JOB, JOB_UID, ["worker-1"], ReportCache.empty())
    assert found.log_tail.endswith("Traceback: boom") and "line 0\n" not in found.log_tail


def test_an_unchanged_report_is_taken_from_the_cache(root: Path) -> None:
    write_control(root, JOB, {"attempt": 0})
    path = report(root, "worker-0")
    cache = ReportCache.empty()
    (first,) = read_reports(root, JOB, JOB_UID, ["worker-0"], cache)
    assert "worker-0" in cache.seen
    before = reports_signature(root, JOB)
    path.unlink()
    assert read_reports(root, JOB, JOB_UID, ["worker-0"], cache) == ()
    assert "worker-0" not in cache.seen
    report(root, "worker-0", attempt=1)
    (again,) = read_reports(root, JOB, JOB_UID, ["worker-0"], cache)
    assert (first.attempt, again.attempt) == (0, 1)
    assert before is not None


def test_stacks_files_the_chief_s_with_its_end(root: Path) -> None:
    logs = root / JOB / "logs" / "attempt-0"
    logs.mkdir(parents=True)
    (logs / "worker-0.stacks").write_text("Thread 0x1 (most recent call first):\n")
    (logs / "worker-1.stacks").write_text("x" * 10)
    os.symlink(logs / "worker-1.stacks", logs / "worker-2.stacks")
    found = {r.stem: r for r in read_stacks(root, JOB, 0, ["worker-0", "worker-1", "worker-2"], "worker-0")}
    assert set(found) == {"worker-0", "worker-1"}
    assert found["worker-0"].tail.startswith("Thread 0x1") and found["worker-0"].whole
    assert found["worker-1"].size == 10 and found["worker-1"].tail == ""
    assert read_stacks(root, JOB, 1, ["worker-0"], "worker-0") == ()
