"""`status.history`: one record per attempt's end, what it says of the cause, the progress and
the checkpoint the next attempt resumes from, and the root cause told again."""

from __future__ import annotations

import pytest
from tfmw_operator.api.spec import JobSpec, parse_job
from tfmw_operator.api.status import REPLACED, AttemptRecord, Checkpoint, JobStatus, Phase, ProgressStatus
from tfmw_operator.core.history import attempt_record, logs_path, resumes_from, with_root_cause
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.policies.verdicts import Cause
from tfmw_operator.core.progress import ProgressReport
from wrappers import at, job, pod

FAILED = Cause("Error", worker=1, pod="mnist-worker-1", node="node-a", container="tensorflow", exit_code=1)


def spec() -> JobSpec:
    return parse_job(job().obj())


def pods_of(attempt: int, created: float) -> list[ObservedPod]:
    found = observe_pod(pod(job().obj(), 0, attempt).created(created).running().obj())
    assert found is not None
    return [found]


def ended(attempt: int = 1, outcome: str = "Restarted") -> AttemptRecord:
    return AttemptRecord(attempt=attempt, outcome=outcome, cause="Error", end_time=at(40))


def running(attempt: int = 1, *history: AttemptRecord, progress: ProgressStatus | None = None) -> JobStatus:
    return JobStatus(
        phase=Phase.RUNNING, attempt=attempt, launched_attempt=attempt, history=history, progress=progress
    )


def test_the_logs_of_a_chief_that_failed_are_its_own() -> None:
    chief = Cause("Error", worker=0, replica_type="chief")
    assert logs_path(spec(), 2, chief) == "default/mnist/logs/attempt-2/chief-0.log"
    assert logs_path(spec(), 2, FAILED) == "default/mnist/logs/attempt-2/worker-1.log"
    assert logs_path(spec(), 2) == "default/mnist/logs/attempt-2/"


def test_an_attempt_s_end_is_recorded_once() -> None:
    status = running(1, ended(1, "Restarted"))
    assert attempt_record(status, spec(), pods_of(1, 5), None, "Restarted", FAILED, at(60)) is None
    assert attempt_record(status, spec(), pods_of(1, 5), None, "Failed", FAILED, at(60)) is None


def test_a_pod_replaced_alone_does_not_count_as_the_attempt_s_end() -> None:
    status = running(1, ended(1, REPLACED))
    said = attempt_record(status, spec(), pods_of(1, 5), None, "Restarted", FAILED, at(60))
    assert said is not None and (said.attempt, said.outcome, said.end_time) == (1, "Restarted", at(60))


def test_an_attempt_began_when_its_first_pod_was_made_unless_told() -> None:
    status = running(1, ended(0))
    pods = [*pods_of(0, 1), *pods_of(1, 5)]
    said = attempt_record(status, spec(), pods, None, "Restarted", FAILED, at(60))
    assert said is not None and said.start_time == at(5)
    told = attempt_record(status, spec(), pods, None, "Restarted", FAILED, at(60), started=at(3))
    assert told is not None and told.start_time == at(3)


def test_a_document_older_than_the_recorded_progress_does_not_tell_the_epoch() -> None:
    recorded = ProgressStatus(attempt=1, epoch=5, updated_at=at(40), checkpoint=Checkpoint(4, None, None))
    stale = ProgressReport(updated_at=at(30), epoch=3, job_uid="uid-mnist", attempt=1)
    said = attempt_record(
        running(1, progress=recorded), spec(), pods_of(1, 5), stale, "Restarted", FAILED, at(60)
    )
    assert said is not None and (said.epoch, said.epochs_lost) == (5, 1)


def test_an_anonymous_document_written_in_the_attempt_tells_the_epoch() -> None:
    recorded = ProgressStatus(attempt=1, epoch=5, updated_at=at(40), checkpoint=Checkpoint(4, None, None))
    anonymous = ProgressReport(updated_at=at(50), epoch=7)
    said = attempt_record(
        running(1, progress=recorded), spec(), pods_of(1, 5), anonymous, "Restarted", FAILED, at(60)
    )
    assert said is not None and (said.epoch, said.epochs_lost) == (7, 3)


def test_the_root_cause_replaces_the_first_noticed_one() -> None:
    first = AttemptRecord(
        attempt=2,
        outcome="Restarted",
        cause="Error",
        end_time=at(40),
        worker=1,
        container="sidecar",
        exit_code=1,
        logs="default/mnist/logs/attempt-2/worker-1.log",
    )
    lost = Cause(
        "NodeLost", worker=0, node="node-b", container="tensorflow", replica_type="chief", message="gone"
    )
    said = with_root_cause(first, lost, spec())
    assert (said.cause, said.worker, said.replica_type, said.node, said.container) == (
        "NodeLost",
        0,
        "chief",
        "node-b",
        "tensorflow",
    )
    assert said.exit_code is None and said.message == "gone" and said.logs == "default/mnist/logs/attempt-2/"
    worker = with_root_cause(said, Cause("NodeLost", worker=1, replica_type="worker"), spec())
    assert worker.replica_type is None and worker.container is None


@pytest.mark.parametrize(("lost", "said"), [(1, ": 1 epoch to redo"), (2, ": 2 epochs to redo"), (0, "")])
def test_the_epochs_to_redo_are_counted_in_words(lost: int, said: str) -> None:
    record = AttemptRecord(
        attempt=2,
        outcome="Restarted",
        cause="Error",
        end_time=at(40),
        checkpoint=Checkpoint(4, None, None),
        epochs_lost=lost,
    )
    assert resumes_from(record) == f"; attempt 3 resumes from the checkpoint of epoch 4{said}"
