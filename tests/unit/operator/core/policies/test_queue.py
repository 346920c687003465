"""Kueue: pod groups per attempt, Queued while gated, clocks from admission, preemption free."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.spec import Member, parse_job
from tfmw_operator.api.status import ConditionType
from tfmw_operator.core.builders import build_pod, pod_group_name
from tfmw_operator.core.decision import Decision, DeletePods, DeleteWorkloads
from tfmw_operator.core.observed import MarkerState
from tfmw_operator.core.workloads import WorkloadState
from wrappers import at, decide, job, pod

Json = dict[str, Any]


def queued_job() -> Any:
    return job().queue("team-a")


PENDING = WorkloadState(
    "w", False, "Pending", "couldn't assign flavors to pod set main: insufficient quota for cpu"
)


def gated(j: Json, attempt: int = 0) -> list[Json]:
    return [pod(j, i, attempt).gated().obj() for i in range(2)]


def queued_condition(decision: Decision) -> Any:
    return decision.status.condition(ConditionType.QUEUED)


def test_every_pod_of_an_attempt_is_one_kueue_group_with_the_jobs_queue() -> None:
    spec = parse_job(queued_job().obj())
    pods = [build_pod(spec, Member.worker(i), 3) for i in range(2)]
    for created in pods:
        labels, annotations = created["metadata"]["labels"], created["metadata"]["annotations"]
        assert labels["kueue.x-k8s.io/queue-name"] == "team-a"
        assert labels["kueue.x-k8s.io/pod-group-name"] == pod_group_name(spec, 3)
        assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "2"
    assert pod_group_name(spec, 3) != pod_group_name(spec, 4)


def test_a_group_name_fits_a_label_and_differs_between_namesakes() -> None:
    long = job("a" * 54).queue("q").obj()
    assert len(pod_group_name(parse_job(long), 9999)) <= 63
    namesake = job("a" * 54).queue("q").obj()
    namesake["metadata"]["uid"] = "0f3e-another-job"
    assert pod_group_name(parse_job(namesake), 0) != pod_group_name(parse_job(long), 0)


def test_a_job_without_a_queue_gets_no_kueue_labels() -> None:
    created = build_pod(parse_job(job().obj()), Member.worker(0), 0)
    assert not any(k.startswith("kueue.x-k8s.io/") for k in created["metadata"]["labels"])
    assert not created["metadata"]["annotations"]


def test_a_gated_gang_is_queued_not_stalled_with_kueues_reason() -> None:
    j = queued_job().launched().obj()
    decision = decide(j, gated(j), workload=PENDING)
    condition = queued_condition(decision)
    assert condition is not None and condition.true and condition.reason == "Pending"
    assert "queue team-a" in condition.message and "insufficient quota for cpu" in condition.message
    assert decision.status.phase == "Pending"
    assert not decision.status.condition_is_true(ConditionType.STALLED)
    assert [e.reason for e in decision.events] == ["Queued"]


def test_queued_before_kueue_made_the_workload() -> None:
    j = queued_job().launched().obj()
    condition = queued_condition(decide(j, gated(j)))
    assert condition.true and condition.reason == "WaitingForWorkload"


def test_no_pending_timeout_and_no_deadline_while_queued() -> None:
    j = (
        queued_job()
        .run_policy(pendingTimeoutSeconds=5, activeDeadlineSeconds=10)
        .status(phase="Pending", attempt=0, launchedAttempt=0)
        .obj()
    )
    decision = decide(j, gated(j), workload=PENDING, now=at(3600))
    assert decision.status.phase == "Pending" and not decision.finished
    assert decision.status.start_time is None


def test_a_queued_jobs_clock_starts_at_admission() -> None:
    j = (
        queued_job()
        .run_policy(pendingTimeoutSeconds=30)
        .status(phase="Pending", attempt=0, launchedAttempt=0)
    )
    j = j.condition("Queued", True, "Pending").obj()
    admitted = [pod(j, i).created(0).obj() for i in range(2)]  # created long ago, gates now gone
    decision = decide(j, admitted, workload=WorkloadState("w", True), now=at(600))
    assert decision.status.start_time == at(600) and not decision.finished
    assert not decision.status.condition_is_true(ConditionType.QUEUED)
    j["status"] = decision.status.to_json()
    assert decide(j, admitted, now=at(620)).status.phase == "Pending"  # 20 s since admission
    assert decide(j, admitted, now=at(631)).status.reason == "PendingTimeout"


def test_a_new_queued_job_starts_no_clock_at_launch() -> None:
    assert decide(queued_job().obj()).status.start_time is None
    assert decide(job().obj()).status.start_time is not None


def test_a_gang_restart_deletes_the_attempts_workload() -> None:
    j = queued_job().launched(phase="Running").obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).exited(137).obj()]
    decision = decide(j, pods)
    group = pod_group_name(parse_job(j), 0)
    assert DeleteWorkloads((group,)) in decision.actions
    assert decision.status.attempt == 1 and decision.status.restarts == 1


def test_old_pods_held_by_kueue_keep_their_workload_deleted_until_they_go() -> None:
    j = queued_job().status(phase="Restarting", attempt=1, restarts=1, launchedAttempt=0).obj()
    old = [pod(j, 0, 0).running().deleting().obj()]
    decision = decide(j, old)
    assert DeleteWorkloads((pod_group_name(parse_job(j), 0),)) in decision.actions
    assert not decision.pods_to_create


def test_a_preemption_by_kueue_restarts_the_gang_without_counting_it() -> None:
    j = queued_job().run_policy(backoffLimit=0, restartPolicy="Never").launched(phase="Running").obj()
    pods = [pod(j, i).running().preempted().obj() for i in range(2)]
    decision = decide(j, pods)
    assert decision.status.phase == "Restarting" and decision.status.attempt == 1
    assert decision.status.restarts == 0
    restarting = decision.status.condition(ConditionType.RESTARTING)
    assert restarting is not None and restarting.reason == "Preempted"
    assert "not counted against backoffLimit" in (decision.status.message or "")
    assert any(isinstance(a, DeleteWorkloads) for a in decision.actions)
    assert not any(isinstance(a, DeletePods) and a.force for a in decision.actions)


def test_a_finished_job_gives_its_quota_back_at_once() -> None:
    j = queued_job().launched(phase="Running").obj()
    pods = [pod(j, 0).exited(0).obj(), pod(j, 1).running().obj()]
    decision = decide(j, pods, marker=MarkerState(True, "uid-mnist", at(19), attempt=0))
    assert decision.status.phase == "Succeeded"
    assert DeleteWorkloads((pod_group_name(parse_job(j), 0),)) in decision.actions


def deleted_workloads(decision: Decision) -> list[str]:
    return [n for a in decision.actions if isinstance(a, DeleteWorkloads) for n in a.names]


def test_a_suspended_job_gives_its_quota_back() -> None:
    j = queued_job().launched(phase="Running").run_policy(suspend=True).obj()
    decision = decide(j, [pod(j, i).running().obj() for i in range(2)])
    assert decision.status.phase == "Suspended"
    assert deleted_workloads(decision) == [pod_group_name(parse_job(j), 0)]


def test_a_restart_after_the_queue_label_was_removed_still_ends_the_admitted_workload() -> None:
    admitted = queued_job().launched(phase="Running").obj()
    pods = [pod(admitted, 0).running().obj(), pod(admitted, 1).exited(137).obj()]
    unlabelled = job().launched(phase="Running").obj()  # the same job, its queue label removed
    decision = decide(unlabelled, pods)
    assert decision.status.phase == "Restarting"
    assert deleted_workloads(decision) == [pod_group_name(parse_job(admitted), 0)]


def test_evictions_are_counted_and_backed_off_like_restarts() -> None:
    j = queued_job().launched(phase="Running", restarts=0).status(evictions=2).obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).preempted().obj()]
    evicted = decide(j, pods)
    assert evicted.status.restarts == 0 and evicted.status.evictions == 3
    assert "preempted by Kueue" in (evicted.status.message or "")
    preempted = [
        {"attempt": a, "outcome": "Restarted", "cause": "Preempted", "endTime": "2026-01-01T12:00:00Z"}
        for a in (2, 1, 0)
    ]
    restarting = job().queue("team-a").status(
        phase="Restarting", attempt=3, launchedAttempt=2, restarts=0, evictions=3,
        startTime="2026-01-01T12:00:00Z", history=preempted,
    ).condition("Restarting").obj()  # fmt: skip
    # 3 evictions in a row, none after training: 10 * 2**(3-2) s after T0
    waiting = decide(restarting, [], now=at(10))
    assert waiting.pods_to_create == () and waiting.requeue_after == pytest.approx(10)


def test_the_queued_condition_word_for_word() -> None:
    j = queued_job().launched().obj()
    waiting = queued_condition(decide(j, gated(j)))
    assert waiting.message == "waiting in queue team-a: Kueue has not made the Workload of the pod group yet"
    admitted = queued_condition(decide(j, gated(j), workload=WorkloadState("w", True)))
    assert (admitted.reason, admitted.message) == (
        "Admitted",
        "admitted by queue team-a (Workload w); the gates are being removed",
    )
    bare = queued_condition(decide(j, gated(j), workload=WorkloadState("w")))
    assert (bare.reason, bare.message) == (
        "Pending",
        "waiting in queue team-a for all 2 workers to be admitted together (Workload w, Pending)",
    )
