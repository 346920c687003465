import json
from pathlib import Path

from tfmw_operator.storage import ensure_job_directory, read_marker, remove_marker


def test_marker_names_its_job_when_the_trainer_wrote_it(tmp_path: Path) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / "ns/job/done.txt").write_text(json.dumps({"job_uid": "u1", "attempt": 2}))
    marker = read_marker(tmp_path, "ns/job/done.txt")
    assert marker.exists and marker.job_uid == "u1" and marker.modified is not None


def test_any_content_counts_as_a_marker(tmp_path: Path) -> None:
    (tmp_path / "done.txt").write_text("chief finished\n")
    marker = read_marker(tmp_path, "done.txt")
    assert marker.exists and marker.job_uid is None


def test_missing_marker_and_removal(tmp_path: Path) -> None:
    assert not read_marker(tmp_path, "ns/job/done.txt").exists
    (tmp_path / "done.txt").write_text("x")
    remove_marker(tmp_path, "done.txt")
    remove_marker(tmp_path, "done.txt")  # twice is harmless
    assert not (tmp_path / "done.txt").exists()


def test_job_directory_is_writable_by_any_worker_user(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/job")
    assert (tmp_path / "ns/job").stat().st_mode & 0o777 == 0o777
