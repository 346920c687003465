"""The cause of an attempt's end, in Kubernetes' words, and status.history as reconcile keeps it."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.failure_policy import cause_of
from tfmw_operator.observed import observe_pod
from tfmw_operator.progress import ProgressReport
from tfmw_operator.status import MAX_HISTORY, AttemptRecord, Checkpoint, JobStatus
from wrappers import at, decide, job, pod

Json = dict[str, Any]


def running(j: Json, attempt: int = 0) -> Json:
    return pod(j, 0, attempt).running().obj()


def with_node(p: Json, node: str) -> Json:
    p["spec"]["nodeName"] = node
    return p


def disrupted(j: Json, reason: str) -> Json:
    """Failed with exit 137 after the DisruptionTarget condition Kubernetes sets before a kill."""
    p = pod(j, 1).exited(137, reason="Error").obj()
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": reason}]
    return p


@pytest.mark.parametrize(
    ("build", "cause"),
    [
        (lambda j: pod(j, 1).exited(137, reason="OOMKilled", message="killed").obj(), "OOMKilled"),
        (lambda j: pod(j, 1).exited(1, reason="Error").obj(), "Error"),
        (lambda j: pod(j, 1).exited(139).obj(), "Error"),
        (lambda j: pod(j, 1).evicted().obj(), "Evicted"),
        (lambda j: disrupted(j, "PreemptionByScheduler"), "Preempted"),
        (lambda j: disrupted(j, "DeletionByTaintManager"), "NodeLost"),
        (lambda j: disrupted(j, "EvictionByEvictionAPI"), "Evicted"),
        (lambda j: disrupted(j, "TerminationByKubelet"), "Evicted"),
        (lambda j: pod(j, 1).running().preempted().obj(), "Preempted"),
    ],
)
def test_a_failed_worker_is_named_by_kubernetes_own_reason(build: Any, cause: str) -> None:
    observed = observe_pod(build(job().obj()))
    assert observed is not None and cause_of(observed) == cause


def test_the_failing_worker_its_pod_node_container_and_exit_code_go_into_the_history() -> None:
    j = job().launched(phase="Running").obj()
    oom = with_node(pod(j, 1).exited(137, reason="OOMKilled", message="a\nb\nc\nd\ne\nf\ng").obj(), "n-7")
    decision = decide(j, [running(j), oom])
    (record,) = decision.status.history
    assert (record.attempt, record.outcome, record.cause) == (0, "Restarted", "OOMKilled")
    assert (record.worker, record.pod, record.node, record.container) == (
        1,
        "mnist-worker-1",
        "n-7",
        "tensorflow",
    )
    assert record.exit_code == 137 and record.message == "c\nd\ne\nf\ng"  # the last 5 lines
    assert record.logs == "default/mnist/logs/attempt-0/worker-1.log"
    assert record.start_time == at(0) and record.end_time == at(20)


def test_a_lost_node_is_node_lost() -> None:
    j = job().launched(phase="Running").obj()
    lost = pod(j, 1).container_statuses("Unknown").obj()
    lost["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T12:00:00Z"}
    ]
    decision = decide(j, [running(j), with_node(lost, "gone")], now=at(120))
    record = decision.status.history[0]
    assert (record.cause, record.node, record.worker) == ("NodeLost", "gone", 1)


def test_a_failure_ends_the_history_with_outcome_failed() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [running(j), pod(j, 1).exited(2, reason="Error", message="bad flag").obj()])
    record = decision.status.history[0]
    assert decision.status.phase == "Failed" and record.outcome == "Failed" and record.cause == "Error"


def test_the_history_keeps_the_newest_attempts_first_and_at_most_max_history() -> None:
    old = [AttemptRecord(a, "Restarted", "Evicted", at(a)).to_json() for a in range(MAX_HISTORY, 0, -1)]
    j = job().run_policy(backoffLimit=99).launched(attempt=11, phase="Running", history=old).obj()
    decision = decide(j, [running(j, 11), pod(j, 1, 11).exited(137, reason="OOMKilled").obj()])
    history = decision.status.history
    assert len(history) == MAX_HISTORY
    assert [r.attempt for r in history[:3]] == [11, 10, 9] and history[-1].attempt == 2


def test_the_restart_says_which_checkpoint_the_next_attempt_resumes_from_and_the_work_lost() -> None:
    j = job().launched(phase="Running").obj()
    progress = ProgressReport(
        updated_at=at(15),
        epoch=5,
        total_epochs=10,
        job_uid="uid-mnist",
        attempt=0,
        checkpoint=Checkpoint(epoch=3, path="checkpoints/ckpt-3"),
    )
    first = decide(j, [running(j), pod(j, 1).running().obj()], progress=progress, now=at(16))
    j["status"] = first.status.to_json()
    assert first.status.progress is not None and first.status.progress.checkpoint == Checkpoint(
        3, None, "checkpoints/ckpt-3"
    )
    decision = decide(j, [running(j), pod(j, 1).exited(137, reason="OOMKilled").obj()], now=at(20))
    record = decision.status.history[0]
    assert (record.epoch, record.checkpoint, record.epochs_lost) == (
        5,
        Checkpoint(3, None, "checkpoints/ckpt-3"),
        2,
    )
    assert (decision.status.message or "").endswith(
        "; attempt 1 resumes from the checkpoint of epoch 3 at checkpoints/ckpt-3: 2 epochs to redo"
    )
    gang_restart = next(e for e in decision.events if e.reason == "GangRestart")
    assert gang_restart.message == decision.status.message


def test_history_reads_back_as_written_and_ignores_garbage() -> None:
    record = AttemptRecord(
        2,
        "Restarted",
        "OOMKilled",
        at(9),
        at(1),
        1,
        "p",
        "n",
        "tensorflow",
        137,
        "m",
        "l",
        4,
        Checkpoint(3),
        1,
    )
    status = JobStatus(history=(record,))
    assert JobStatus.from_json(status.to_json()).history == (record,)
    junk = {"history": [{"attempt": "x"}, 7, {"attempt": 1}, record.to_json()]}
    assert JobStatus.from_json(junk).history == (record,)
    assert JobStatus.from_json({"history": "no"}).history == ()


def test_a_pod_being_evicted_through_the_api_is_evicted_not_deleted() -> None:
    j = job().launched(phase="Running").obj()
    going = pod(j, 1).running().deleting().obj()
    going["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    )
    decision = decide(j, [running(j), going])
    assert decision.status.history[0].cause == "Evicted"
    plain = decide(j, [running(j), pod(j, 1).running().deleting().obj()])
    assert plain.status.history[0].cause == "PodDeleted"


def test_the_history_tells_the_newest_progress_even_when_the_status_has_not_recorded_it_yet() -> None:
    j = job().launched(phase="Running").obj()
    first = decide(j, [running(j), pod(j, 1).running().obj()], progress=_report(15, 2, 2), now=at(16))
    j["status"] = first.status.to_json()
    # Within the interval the status keeps epoch 2; the document says epoch 3, checkpointed.
    decision = decide(j, [running(j), pod(j, 1).exited(137).obj()], progress=_report(19, 3, 3), now=at(20))
    record = decision.status.history[0]
    assert (record.epoch, record.checkpoint, record.epochs_lost) == (3, Checkpoint(3, None, "ckpt-3"), 0)


def _report(written: float, epoch: int, saved: int) -> ProgressReport:
    return ProgressReport(
        updated_at=at(written),
        epoch=epoch,
        total_epochs=10,
        job_uid="uid-mnist",
        attempt=0,
        checkpoint=Checkpoint(epoch=saved, path=f"ckpt-{saved}"),
    )
