"""Reading the step-times documents off the shared storage (storage/step_times.py): only the
job's own pods' names, regular files, no link followed, never blocking, bounded."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from tfmw_operator.core.progress import ProgressProblem
from tfmw_operator.core.step_times import MAX_STEP_TIMES_BYTES, StepTimesReport
from tfmw_operator.storage.files import StorageError
from tfmw_operator.storage.step_times import read_step_times

JOB = "ns/job"
STEMS = ["worker-0", "worker-1", "worker-2"]


@pytest.fixture
def steps(tmp_path: Path) -> Path:
    folder = tmp_path / JOB / "steps"
    folder.mkdir(parents=True)
    return folder


def write(steps: Path, stem: str, figures: list[float]) -> None:
    (steps / f"{stem}.json").write_text(json.dumps({"jobUid": "u", "attempt": 0, "computeSeconds": figures}))


def test_the_documents_of_the_pods_named_are_read_and_nothing_else(steps: Path) -> None:
    write(steps, "worker-0", [0.1])
    write(steps, "worker-2", [0.3])
    write(steps, "worker-9", [9.0])  # not a pod of this job's: never opened
    (steps / "notes.txt").write_text("x")
    snapshot = read_step_times(steps.parents[2], JOB, STEMS)
    assert [stem for stem, _ in snapshot.documents] == ["worker-0", "worker-2"]
    second = snapshot.of("worker-2")
    assert isinstance(second, StepTimesReport) and second.compute_seconds == (0.3,)
    assert snapshot.error is None


def test_no_folder_yet_is_no_documents(tmp_path: Path) -> None:
    (tmp_path / JOB).mkdir(parents=True)
    snapshot = read_step_times(tmp_path, JOB, STEMS)
    assert snapshot.documents == () and snapshot.no_folder and snapshot.error is None


def test_an_empty_folder_is_no_documents_but_a_folder(steps: Path) -> None:
    # The controller waits on no timer only while the folder is missing (inotify tells when
    # it is made); once it is there, documents may come without a word.
    snapshot = read_step_times(steps.parents[2], JOB, STEMS)
    assert snapshot.documents == () and not snapshot.no_folder


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory", "socket", "huge", "garbage"])
def test_a_hostile_document_is_a_problem_of_its_pod_never_an_exception(steps: Path, kind: str) -> None:
    path = steps / "worker-1.json"
    target = steps.parents[2] / "secret.json"
    target.write_text(json.dumps({"computeSeconds": [1.0]}))
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)  # a writer-less FIFO would block an ordinary open for ever
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(path))
    elif kind == "huge":
        path.write_bytes(b" " * (MAX_STEP_TIMES_BYTES + 10) + b"{}")
    else:
        path.write_bytes(b"\x00\xff garbage")
    write(steps, "worker-0", [0.1])
    snapshot = read_step_times(steps.parents[2], JOB, STEMS)
    problem = snapshot.of("worker-1")
    assert isinstance(problem, ProgressProblem), problem
    assert "worker-1" not in problem.message  # the policy names the document; here only what is wrong
    assert isinstance(snapshot.of("worker-0"), StepTimesReport)  # the others are still read


def test_a_steps_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / JOB).mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(elsewhere, "worker-0", [0.1])
    (tmp_path / JOB / "steps").symlink_to(elsewhere)
    with pytest.raises(StorageError, match="ns/job/steps: ENOTDIR"):  # O_NOFOLLOW | O_DIRECTORY
        read_step_times(tmp_path, JOB, STEMS)


def test_a_steps_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / JOB).mkdir(parents=True)
    (tmp_path / JOB / "steps").write_text("not a folder")
    with pytest.raises(StorageError, match="ns/job/steps"):
        read_step_times(tmp_path, JOB, STEMS)
