import os
from pathlib import Path

import pytest
from tfmw_operator import folder_check
from tfmw_operator.contract import FOLDER_CHECK_MISMATCH_EXIT_CODE, OWNER_FILE
from tfmw_operator.folder_check import check, main
from tfmw_operator.storage.files import ensure_job_directory


def test_the_folder_the_operator_made_passes(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "team-a/mnist", "uid-1")
    assert check(tmp_path / "team-a" / "mnist", "uid-1") is None


def test_an_empty_folder_another_jobs_folder_and_planted_files_fail(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    missing = check(tmp_path / "empty", "uid-1")
    assert missing is not None and OWNER_FILE in missing and "does not exist" in missing
    ensure_job_directory(tmp_path, "ns/other", "uid-2")
    other = check(tmp_path / "ns" / "other", "uid-1")
    assert other is not None and "uid-2" in other and "uid-1" in other
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / OWNER_FILE).symlink_to(tmp_path / "ns" / "other" / OWNER_FILE)
    assert check(tmp_path / "linked", "uid-2") is not None  # a link is never followed
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / OWNER_FILE)
    fifo = check(tmp_path / "fifo", "uid-1")  # returns at once: opened non-blocking
    assert fifo is not None and "not a regular file" in fifo


def test_main_writes_the_termination_message_naming_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "termination-log"
    monkeypatch.setattr(folder_check, "TERMINATION_LOG", log)
    monkeypatch.setenv("TFMW_SHARED_DIR", str(tmp_path))
    monkeypatch.setenv("TFMW_JOB_UID", "uid-1")
    assert main(["--claim=team-data"]) == FOLDER_CHECK_MISMATCH_EXIT_CODE
    assert log.read_text().startswith("claim team-data does not reach the job's folder: ")
    (tmp_path / OWNER_FILE).write_text("uid-1\n")
    assert main(["--claim=team-data"]) == 0
