"""The reconcile core's accounts of a job of several roles: `status.replicas` per set, a pod
restarted alone (`status.replacing`) and what is said when it is created again, the nodes kept
out, a namesake in the way, forced deletions and the grace a restart gives."""

from __future__ import annotations

from typing import Any

from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import Checkpoint, ConditionType
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.decision import CreatePods, Decision, DeletePods
from tfmw_operator.core.observed import MarkerState
from tfmw_operator.core.policies.placement import UNPLACEABLE
from tfmw_operator.core.workloads import WorkloadState
from wrappers import Json, at, decide, job, pod, progress_report, report

Counts = dict[str, dict[str, int]]


def counts(decision: Decision) -> Counts:
    return {
        r.type: {
            "pending": r.pending,
            "running": r.running,
            "succeeded": r.succeeded,
            "failed": r.failed,
            "ready": r.ready,
            "restarts": r.restarts,
        }
        for r in decision.status.replicas
    }


def of(
    pending: int = 0, running: int = 0, succeeded: int = 0, failed: int = 0, ready: int = 0
) -> dict[str, int]:
    return {
        "pending": pending,
        "running": running,
        "succeeded": succeeded,
        "failed": failed,
        "ready": ready,
        "restarts": 0,
    }


def events(decision: Decision) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in decision.events]


def test_each_set_counts_its_own_pods_by_phase_and_readiness() -> None:
    obj = job("ps").workers(3).chief().parameter_servers(2).evaluator().launched(phase="Running").obj()
    pods = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0).running().obj(),
        pod(obj, 1).running(ready=False).obj(),
        pod(obj, 2).obj(),  # Pending
        pod(obj, 0, 0, "ps").running().obj(),
        pod(obj, 1, 0, "ps").running().obj(),
        pod(obj, 0, 0, "evaluator").exited(0).obj(),
    ]
    assert counts(decide(obj, pods)) == {
        "chief": of(running=1, ready=1),
        "worker": of(pending=1, running=2, ready=1),
        "ps": of(running=2, ready=2),
        "evaluator": of(succeeded=1),
    }


def test_a_failed_pod_counts_as_failed_in_its_set_alone() -> None:
    rules = {"action": "Restart", "onRoles": ["evaluator"]}
    obj = job("ev").workers(2).chief().evaluator().rules(rules).launched(phase="Running").obj()
    pods = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0).running().obj(),
        pod(obj, 1).running().obj(),
        pod(obj, 0, 0, "evaluator").exited(1, reason="Error").obj(),
    ]
    decision = decide(obj, pods)
    assert counts(decision) == {
        "chief": of(running=1, ready=1),
        "worker": of(running=2, ready=2),
        "evaluator": {**of(failed=1), "restarts": 1},
    }


def test_a_ready_condition_on_a_pod_not_running_is_not_ready() -> None:
    obj = job("ev").workers(1).chief().launched(phase="Running").obj()
    chief = pod(obj, 0, 0, "chief").running().obj()
    chief["status"]["phase"] = "Pending"  # a Ready condition left from before, phase moved on
    decision = decide(obj, [chief, pod(obj, 0).running().obj()])
    assert counts(decision)["chief"] == of(pending=1)


def test_a_workers_restart_counts_in_the_worker_set_alone() -> None:
    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()
    pods = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0).exited(137, reason="OOMKilled").obj(),
        pod(obj, 1).running().obj(),
        pod(obj, 0, 0, "ps").running().obj(),
    ]
    decision = decide(obj, pods)
    assert {r.type: r.restarts for r in decision.status.replicas} == {"chief": 0, "worker": 1, "ps": 0}
    assert decision.status.replicas[1].failed == 1


def replacing_all(obj: Json) -> tuple[Json, list[Json]]:
    """A parameter-server job whose workers are all being restarted alone, their old pods
    gone: `status.replacing` lists them out of order."""
    obj["status"]["replacing"] = ["worker-3", "worker-1", "worker-4", "worker-0", "worker-2"]
    attempt = obj["status"]["attempt"]
    pods = [pod(obj, 0, attempt, "chief").running().obj(), pod(obj, 0, attempt, "ps").running().obj()]
    return obj, pods


def test_pods_restarted_alone_are_created_again_in_order_as_proven_and_said() -> None:
    obj, pods = replacing_all(
        job("ps").workers(5).chief().parameter_servers().launched(phase="Running", attempt=3).obj()
    )
    decision = decide(obj, pods)
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert [m.stem for m in create.members] == [f"worker-{i}" for i in range(5)]
    assert create.attempt == 3 and create.proven is True
    names = ", ".join(f"pod ps-worker-{i}" for i in range(5))
    assert ("Normal", "PodsCreated", f"created {names} again for attempt 3") in events(decision)
    assert decision.status.replacing == ()


def test_a_pod_restarted_alone_whose_old_pod_remains_waits_and_stays_listed_in_order() -> None:
    obj = job("ps").workers(6).chief().parameter_servers().launched(phase="Running").obj()
    obj["status"]["replacing"] = ["worker-4", "worker-2", "worker-0", "worker-5", "worker-1", "worker-3"]
    pods = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0, 0, "ps").running().obj(),
        *(pod(obj, i).exited(137).deleting(15).obj() for i in (0, 2, 3, 4, 5)),
    ]
    decision = decide(obj, pods)
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert [m.stem for m in create.members] == ["worker-1"]
    assert decision.status.replacing == ("worker-0", "worker-2", "worker-3", "worker-4", "worker-5")


def test_a_pod_restarted_alone_whose_old_pod_never_goes_is_forced_then_made_again() -> None:
    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()
    obj["status"]["replacing"] = ["worker-1"]
    survivors = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0, 0, "ps").running().obj(),
        pod(obj, 0).running().obj(),
    ]
    stuck = pod(obj, 1).running().deleting().obj()  # asked to go at T0, grace 30; its node silent
    early = decide(obj, [*survivors, stuck], now=at(60))
    assert not [a for a in early.actions if isinstance(a, (DeletePods, CreatePods))]
    assert early.requeue_after == 30  # its grace and a minute: then forced
    late = decide(obj, [*survivors, stuck], now=at(91))
    assert [a for a in late.actions if isinstance(a, DeletePods)] == [
        DeletePods(("ps-worker-1",), 0, force=True)
    ]
    assert late.status.replacing == ("worker-1",)
    lost = pod(obj, 1).node_not_ready(at_seconds=10).deleting().obj()  # its node reported lost
    forced = decide(obj, [*survivors, lost], now=at(11))
    assert [a for a in forced.actions if isinstance(a, DeletePods)] == [
        DeletePods(("ps-worker-1",), 0, force=True)
    ]
    (create,) = [a for a in decide(obj, survivors, now=at(92)).actions if isinstance(a, CreatePods)]
    assert [m.stem for m in create.members] == ["worker-1"]


def test_a_pod_restarted_alone_is_created_off_the_nodes_kept_out() -> None:
    wrapper = job("ps").workers(5).chief().parameter_servers()
    obj, pods = replacing_all(wrapper.launched(phase="Running").obj())
    obj["status"]["excludedNodes"] = [{"node": "node-b", "until": "2026-01-01T13:00:00Z", "cause": "Error"}]
    decision = decide(obj, pods)
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert create.job.avoid_nodes == ("node-b",)


def namesakes(count: int) -> list[Json]:
    """`count` objects with the job's names that belong to an earlier job of the same name:
    its pods, then its Service."""
    earlier = job("mnist").workers(4).obj()
    earlier["metadata"]["uid"] = "uid-earlier"
    pods = [pod(earlier, i).running().deleting().obj() for i in range(min(count, 4))]
    return pods


def test_namesakes_in_the_way_are_named_four_at_most() -> None:
    obj = job("mnist").obj()
    few = decide(obj, namesakes(2), service=None)
    stalled = few.status.condition(ConditionType.STALLED)
    assert stalled is not None and stalled.true and stalled.reason == "NameInUse"
    assert stalled.message.startswith("waiting for pod mnist-worker-0, pod mnist-worker-1 to go: ")
    assert ("Warning", "NameInUse", stalled.message) in events(few)

    four = ", ".join(f"pod mnist-worker-{i}" for i in range(4))
    said = decide(obj, namesakes(4), service=None).status.condition(ConditionType.STALLED)
    assert said is not None and said.message.startswith(f"waiting for {four} to go: ")

    earlier = job("mnist").workers(4).obj()
    earlier["metadata"]["uid"] = "uid-earlier"
    service = build_service(parse_job(earlier))
    said = decide(obj, namesakes(4), service=service).status.condition(ConditionType.STALLED)
    assert said is not None and said.message.startswith(f"waiting for {four} ... to go: ")


def test_a_namesake_still_in_the_way_is_not_said_again() -> None:
    obj = job("mnist").condition("Stalled", True, "NameInUse").obj()
    decision = decide(obj, namesakes(1), service=None)
    assert decision.status.condition_is_true(ConditionType.STALLED)
    assert not [e for e in decision.events if e.reason == "NameInUse"]


def test_pods_stuck_terminating_or_on_lost_nodes_are_forced_and_said_by_name() -> None:
    obj = job("mnist").workers(4).launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    pods = [
        pod(obj, 0).running().deleting().obj(),  # deleting since T0, grace 30: stuck at 90 s
        pod(obj, 1).running().deleting().obj(),
        pod(obj, 2).node_not_ready(at_seconds=50).deleting(80).obj(),
        pod(obj, 3).node_not_ready(at_seconds=50).deleting(80).obj(),
    ]
    decision = decide(obj, pods, now=at(91))
    forced = [a for a in decision.actions if isinstance(a, DeletePods) and a.force]
    assert forced == [
        DeletePods(("mnist-worker-2", "mnist-worker-3", "mnist-worker-0", "mnist-worker-1"), 0, force=True)
    ]
    assert [e for e in events(decision) if e[1] == "ForcedDeletion"] == [
        (
            "Warning",
            "ForcedDeletion",
            "pods whose node was reported lost, forced: mnist-worker-2, mnist-worker-3",
        ),
        ("Warning", "ForcedDeletion", "pods stuck terminating (node gone?): mnist-worker-0, mnist-worker-1"),
    ]


def restart_grace(template_grace: Any) -> int | None:
    """The grace an earlier attempt's pods still there are deleted with: the restart grace
    (5 s unless runPolicy says), shortened by the template's own where it is shorter."""
    wrapper = job("mw").launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1)
    if template_grace is not None:
        wrapper = wrapper.pod_spec(terminationGracePeriodSeconds=template_grace)
    obj = wrapper.obj()
    decision = decide(obj, [pod(obj, 0).running().obj(), pod(obj, 1).running().obj()])
    (delete,) = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert set(delete.names) == {"mw-worker-0", "mw-worker-1"}
    return delete.grace_seconds


def test_an_earlier_attempts_pods_get_the_restart_grace_or_the_templates_if_shorter() -> None:
    assert restart_grace(None) == 5
    assert restart_grace(30) == 5
    assert restart_grace(2) == 2
    assert restart_grace(1) == 1
    assert restart_grace(0) == 0
    assert restart_grace(-1) == 5  # not a grace the API server would take: the setting's
    assert restart_grace("3") == 5


def test_a_pod_restarted_alone_is_said_and_counted() -> None:
    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running", attempt=2).obj()
    obj["status"]["restartsNotCounted"] = 3
    pods = [
        pod(obj, 0, 2, "chief").running().obj(),
        pod(obj, 0, 2).exited(137, reason="OOMKilled").obj(),
        pod(obj, 1, 2).obj(),  # not started yet: the job is not Running, its message stays
        pod(obj, 0, 2, "ps").running().obj(),
    ]
    decision = decide(obj, pods)
    status = decision.status
    assert (status.restarts, status.restarts_not_counted) == (3, 3)
    assert status.message == (
        "worker 0 replaced alone (restart 3/3): worker 0 (pod ps-worker-0) exited with code 137 (OOMKilled)"
    )
    assert ("Warning", "PodRestarted", status.message) in events(decision)
    record = status.history[0]
    assert (record.outcome, record.attempt, record.cause) == ("Replaced", 2, "OOMKilled")


def test_a_pod_restarted_alone_by_a_rule_not_counted_is_counted_apart() -> None:
    rule = {"action": "RestartNotCounted", "onExitCodes": [42]}
    obj = job("ps").workers(2).chief().parameter_servers().rules(rule).launched(phase="Running").obj()
    obj["status"]["restartsNotCounted"] = 3
    pods = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0).exited(42).obj(),
        pod(obj, 1).running().obj(),
        pod(obj, 0, 0, "ps").running().obj(),
    ]
    status = decide(obj, pods).status
    assert status.replacing == ("worker-0",) and status.attempt == 0
    assert (status.restarts, status.restarts_not_counted) == (0, 4)


def test_a_pod_restarted_alone_on_a_node_a_rule_blames_keeps_that_node_out() -> None:
    rule = {"name": "xid", "onExitCodes": [79], "action": "Restart", "nodeFault": True}
    obj = (
        job("ps")
        .workers(2)
        .chief()
        .parameter_servers()
        .rules(rule)
        .run_policy(nodeExclusion={})
        .launched(phase="Running", attempt=1)
        .obj()
    )
    obj["spec"]["runPolicy"]["failureRules"] = [rule]
    pods = [
        pod(obj, 0, 1, "chief").running().obj(),
        pod(obj, 0, 1).on_node("gpu-7").exited(79).obj(),
        pod(obj, 1, 1).running().obj(),
        pod(obj, 0, 1, "ps").running().obj(),
    ]
    decision = decide(obj, pods)
    (entry,) = decision.status.excluded_nodes
    assert (entry.node, entry.attempt, entry.rule) == ("gpu-7", 1, "failureRules[0] (xid)")
    excluded = decision.status.condition(ConditionType.NODES_EXCLUDED)
    assert excluded is not None and excluded.true and excluded.reason == "NodeFault"
    (said,) = [e for e in decision.events if e.reason == "NodeExcluded"]
    assert said.message.endswith(": Error in attempt 1 (failureRules[0] (xid): nodeFault)")


NO_ROOM = "0/3 nodes are available: 1 node(s) had untolerated taint, 2 Insufficient cpu."
NOT_THERE = (
    "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu."
)


def kept_out(node: str, until: str = "2026-01-01T14:00:00Z") -> Json:
    return {"node": node, "cause": "NodeLost", "attempt": 0, "since": "2026-01-01T11:00:00Z", "until": until}


def restarted_unplaced(min_workers: int | None, message: str, **status: Any) -> tuple[Json, list[Json]]:
    """Attempt 1 of 4 workers, launched at 0 s: two placed on node-a, two unschedulable."""
    wrapper = job().workers(4)
    if min_workers is not None:
        wrapper.spec(minWorkers=min_workers)
    obj = (
        wrapper.launched(attempt=1, phase="Restarting", restarts=1, **status)
        .condition("Restarting")
        .condition("Running", True, "AllWorkersRunning")
        .obj()
    )
    pods = [
        pod(obj, i, 1).on_node("node-a").running().obj()
        if i < 2
        else pod(obj, i, 1).unschedulable(message).obj()
        for i in range(4)
    ]
    return obj, pods


def test_a_gang_resized_for_want_of_room_says_so_in_both_conditions() -> None:
    obj, pods = restarted_unplaced(2, NO_ROOM, replacing=["worker-3"])
    decision = decide(obj, pods, now=at(60))
    status = decision.status
    assert (status.attempt, status.attempt_workers, status.phase, status.replacing) == (
        2,
        2,
        "Restarting",
        (),
    )
    for kind, true in ((ConditionType.RESTARTING, True), (ConditionType.RUNNING, False)):
        said = status.condition(kind)
        assert said is not None and said.true is true
        assert (said.reason, said.message) == (UNPLACEABLE, status.message)


def test_a_node_taken_back_leaves_the_others_kept_out_and_said() -> None:
    obj, pods = restarted_unplaced(None, NOT_THERE, excludedNodes=[kept_out("old"), kept_out("newer")])
    obj["status"]["excludedNodes"][1]["since"] = "2026-01-01T11:30:00Z"
    obj["spec"]["runPolicy"]["nodeExclusion"] = {"maxNodes": 3}
    decision = decide(obj, pods, now=at(60))
    assert [e.node for e in decision.status.excluded_nodes] == ["newer"]
    kept_off = (
        "the pods of this job's attempts keep off newer (NodeLost in attempt 0) until 2026-01-01T14:00:00Z"
    )
    assert said(decision, "NodesExcluded") == (True, "NodeFault", kept_off)


def test_the_last_node_taken_back_ends_the_exclusion_in_the_condition() -> None:
    obj, pods = restarted_unplaced(None, NOT_THERE, excludedNodes=[kept_out("old")], attemptWorkers=3)
    obj["spec"]["runPolicy"]["nodeExclusion"] = {}
    status = decide(obj, pods, now=at(60)).status
    assert status.excluded_nodes == () and (status.attempt, status.attempt_workers) == (2, 3)
    said = status.condition(ConditionType.NODES_EXCLUDED)
    assert said is not None and said.true is False
    assert (said.reason, said.message) == ("GangUnplaceable", status.message)


def test_nodes_whose_time_is_up_leave_the_condition_one_by_one() -> None:
    over = "2026-01-01T12:00:10Z"
    obj = (
        job()
        .run_policy(nodeExclusion={})
        .status(attempt=1, restarts=1, phase="Restarting", excludedNodes=[kept_out("a", over), kept_out("b")])
        .condition("NodesExcluded", True, "NodeFault")
        .obj()
    )
    decision = decide(obj, now=at(20))
    assert [e.node for e in decision.status.excluded_nodes] == ["b"]
    kept_off = "the pods of this job's attempts keep off b (NodeLost in attempt 0) until 2026-01-01T14:00:00Z"
    assert said(decision, "NodesExcluded") == (True, "NodeFault", kept_off)

    obj["status"]["excludedNodes"] = [kept_out("a", over)]
    ended = "the time of every node kept out is up: attempts may run anywhere again"
    assert said(decide(obj, now=at(20)), "NodesExcluded") == (False, "ExclusionEnded", ended)


# ---- what each condition says, word for word ----


def said(decision: Decision, kind: str) -> tuple[bool, str, str]:
    found = decision.status.condition(ConditionType(kind))
    assert found is not None, f"no {kind} condition in {decision.status.conditions}"
    return found.true, found.reason, found.message


def test_a_suspended_job_says_so_and_when_resumed_starts_afresh() -> None:
    obj = (
        job()
        .run_policy(suspend=True)
        .launched(phase="Running")
        .condition("Running", True, "AllWorkersRunning")
    )
    running = obj.obj()
    suspended = decide(running, [pod(running, i).running().obj() for i in range(2)])
    assert said(suspended, "Running") == (False, "Suspended", "runPolicy.suspend is true")
    assert said(suspended, "Suspended") == (True, "Suspended", "runPolicy.suspend is true")

    running["status"] = suspended.status.to_json()
    running["status"]["attemptWorkers"] = 1
    running["spec"]["runPolicy"]["suspend"] = False
    going = [pod(running, i).running().deleting(19).obj() for i in range(2)]  # not gone yet
    resumed = decide(running, going)
    assert said(resumed, "Suspended") == (False, "Resumed", "runPolicy.suspend is false: a fresh attempt")
    assert (resumed.status.attempt, resumed.status.attempt_workers, resumed.status.phase) == (
        1,
        None,
        "Pending",
    )
    assert ("Normal", "Resumed", "starting attempt 1") in events(resumed)


def test_a_suspension_says_the_checkpoint_training_will_resume_from() -> None:
    obj = job().run_policy(suspend=True).launched(phase="Running").obj()
    progress = progress_report(15, 3, checkpoint=Checkpoint(epoch=2))
    suspended = decide(obj, [pod(obj, i).running().obj() for i in range(2)], progress=progress)
    (event,) = [e for e in suspended.events if e.reason == "Suspended"]
    assert event.message == (
        "runPolicy.suspend is true: worker pods deleted; attempt 1 will resume from the checkpoint of epoch 2: 1 epoch to redo"
    )


def test_a_queued_gang_is_not_stalled_and_once_admitted_says_by_which_queue() -> None:
    pending_workload = WorkloadState("w", False, "Pending", "insufficient quota for cpu")
    obj = job().queue("team-a").launched(phase="Restarting").condition("Stalled", True, "Unschedulable").obj()
    gated = [pod(obj, i).gated().obj() for i in range(2)]
    queued = decide(obj, gated, workload=pending_workload)
    assert said(queued, "Stalled") == (False, "Queued", "the workers wait for Kueue, not for a node")
    assert queued.status.phase == "Restarting"  # a restart queued again stays a restart

    obj["status"] = queued.status.to_json()
    again = decide(obj, gated, workload=pending_workload)
    assert not [e for e in again.events if e.reason == "Queued"]  # said once

    admitted = decide(obj, [pod(obj, i).obj() for i in range(2)], workload=WorkloadState("w", True))
    assert said(admitted, "Queued") == (False, "Admitted", "admitted by queue team-a")


def test_a_job_admitted_before_it_was_seen_queued_starts_its_clock_at_once() -> None:
    obj = job().queue("team-a").launched(phase="Pending").obj()
    del obj["status"]["startTime"]
    admitted = decide(obj, [pod(obj, i).obj() for i in range(2)], workload=WorkloadState("w", True))
    assert admitted.status.start_time == at(20)


def test_a_stall_that_ended_says_no_worker_is_stuck() -> None:
    obj = job().launched(phase="Pending").condition("Stalled", True, "Unschedulable").obj()
    decision = decide(obj, [pod(obj, i).running().obj() for i in range(2)])
    assert said(decision, "Stalled") == (False, "WorkersStarted", "no worker is stuck")


def test_a_failure_says_its_reason_in_every_condition_it_ends() -> None:
    obj = (
        job()
        .run_policy(activeDeadlineSeconds=10)
        .launched(phase="Running")
        .condition("Running", True, "AllWorkersRunning")
        .condition("Restarting", False, "AllWorkersRunning")
        .obj()
    )
    decision = decide(obj, [pod(obj, i).running().obj() for i in range(2)])
    failed = said(decision, "Failed")
    assert failed[0] is True and failed[1] == "DeadlineExceeded"
    assert said(decision, "Running") == (False, failed[1], failed[2])
    assert said(decision, "Restarting") == (False, failed[1], failed[2])


def test_a_marker_of_an_attempt_given_up_ends_the_job_without_the_restart() -> None:
    """The chief of attempt 1 wrote its marker as its gang was being stopped: attempt 2
    never ran, and is not counted."""
    obj = (
        job().launched(attempt=1, phase="Running").status(attempt=2, restarts=2, replacing=["worker-1"]).obj()
    )
    marker = MarkerState(True, "uid-mnist", at(15), attempt=1)
    decision = decide(obj, marker=marker)
    status = decision.status
    assert (status.phase, status.attempt, status.launched_attempt, status.restarts) == ("Succeeded", 1, 1, 1)
    assert status.replacing == () and status.message is None
    succeeded = said(decision, "Succeeded")
    assert succeeded[0] is True and succeeded[2].endswith(
        " in attempt 1, before that gang was stopped; the restart did not run"
    )


# ---- what a launch says and joins ----


def test_a_pod_made_again_at_an_in_place_restart_joins_the_survivors_kueue_group() -> None:
    obj = job().commanded().queue("team-a").launched(phase="Running").obj()
    survivor = pod(obj, 0).running().obj()
    admitted = WorkloadState("w", True)
    raised = decide(obj, [survivor], reports=(report(survivor, "running", 0),), workload=admitted)
    assert raised.status.attempt == 1 and raised.status.history[0].restart == "InPlace"
    obj["status"] = raised.status.to_json()
    launch = decide(obj, [survivor], reports=(report(survivor, "waiting", 1),), workload=admitted)
    (create,) = [a for a in launch.actions if isinstance(a, CreatePods)]
    assert [m.stem for m in create.members] == ["worker-1"]
    assert create.pod_group == survivor["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    created = said(launch, "Created")
    assert created == (True, "PodsCreated", "attempt 1 restarted in place: 1 pods run on, 1 created again")
    assert ("Normal", "PodsCreated", "created 1 worker pods for attempt 1") in events(launch)


def test_a_launch_of_several_roles_counts_pods_not_worker_pods() -> None:
    decision = decide(job("ps").workers(2).chief().parameter_servers().obj(), service=None)
    assert ("Normal", "PodsCreated", "created 4 pods for attempt 0") in events(decision)


def test_a_launch_without_a_shared_volume_says_what_it_lacks_after_what_it_made() -> None:
    decision = decide(job().without_shared_volume().obj(), service=None)
    created = said(decision, "Created")
    assert created[2].startswith("created 2 worker pods for attempt 0; no shared volume: ")


def test_an_in_place_restart_that_kept_every_pod_creates_none_and_says_no_creation() -> None:
    obj = job().commanded().launched(phase="Running").obj()
    pods = [pod(obj, i).running().obj() for i in range(2)]
    raised = decide(obj, pods, reports=(report(pods[0], "running", 0), report(pods[1], "exited", 0, 137)))
    assert raised.status.attempt == 1
    obj["status"] = raised.status.to_json()
    launch = decide(obj, pods, reports=(report(pods[0], "waiting", 1), report(pods[1], "waiting", 1)))
    assert not [a for a in launch.actions if isinstance(a, CreatePods)]
    assert said(launch, "Created") == (
        True,
        "PodsCreated",
        "attempt 1 restarted in place: 2 pods run on, 0 created again",
    )
    assert not [e for e in launch.events if e.reason == "PodsCreated"]


def test_a_launch_finished_after_an_operator_restart_is_no_restart_in_place() -> None:
    obj = job().status(phase="Pending", attempt=0).obj()  # its launch never recorded
    decision = decide(obj, [pod(obj, 0).obj()])
    assert [m.stem for a in decision.actions if isinstance(a, CreatePods) for m in a.members] == ["worker-1"]
    assert said(decision, "Created") == (True, "PodsCreated", "created 2 worker pods for attempt 0")


def test_storage_readable_again_is_said_and_an_error_still_there_is_not_said_again() -> None:
    obj = job().launched(phase="Running").condition("StorageError").obj()
    running = [pod(obj, i).running().obj() for i in range(2)]
    assert said(decide(obj, running), "StorageError") == (
        False,
        "StorageReadable",
        "the shared storage is readable",
    )
    still = decide(obj, running, storage_error="default/mnist/m: ELOOP")
    assert said(still, "StorageError")[0] is True
    assert not [e for e in still.events if e.reason == "StorageError"]


def stalled_progress(rule: Json) -> Decision:
    """A running job whose progress last advanced at 0 s, its deadline 30 s, at 100 s."""
    from tfmw_operator.api.times import format_precise_time

    obj = (
        job()
        .run_policy(progressDeadlineSeconds=30, progressDeadlinePolicy="Restart")
        .rules(rule)
        .launched(phase="Running")
        .condition("Running", True, "AllWorkersRunning")
        .status(progress={"attempt": 0, "epoch": 1, "advancedAt": format_precise_time(at(0))})
        .obj()
    )
    return decide(obj, [pod(obj, 0).running().obj(), pod(obj, 1).running().obj()], now=at(100))


def test_a_rule_that_fails_a_stalled_job_is_named_in_its_message() -> None:
    decision = stalled_progress({"name": "hung", "action": "Fail", "onCauses": ["ProgressStalled"]})
    status = decision.status
    assert (status.phase, status.reason) == ("Failed", "ProgressStalled")
    assert status.message is not None and status.message.endswith(" (failureRules[0] (hung): Fail)")
    record = status.history[0]
    assert (record.cause, record.outcome) == ("ProgressStalled", "Failed")


def test_a_rule_that_restarts_a_stalled_job_uncounted_is_counted_apart_and_named() -> None:
    decision = stalled_progress(
        {"name": "hung", "action": "RestartNotCounted", "onCauses": ["ProgressStalled"]}
    )
    status = decision.status
    assert (status.phase, status.attempt, status.restarts, status.restarts_not_counted) == (
        "Restarting",
        1,
        0,
        1,
    )
    assert "failureRules[0] (hung): RestartNotCounted" in (status.message or "")
    counted = stalled_progress({"name": "hung", "action": "Restart", "onCauses": ["ProgressStalled"]}).status
    assert (counted.restarts, counted.restarts_not_counted) == (1, 0)


def test_a_stall_is_left_to_progress_deadline_policy_by_rules_that_do_not_name_it() -> None:
    # A rule on roles alone, or a catch-all, matches the chief's failures, not a stall.
    for rule in ({"action": "Fail", "onRoles": ["chief"]}, {"action": "RestartNotCounted"}):
        status = stalled_progress(rule).status
        assert (status.phase, status.attempt, status.restarts, status.restarts_not_counted) == (
            "Restarting",
            1,
            1,
            0,
        ), rule
        assert "failureRules" not in (status.message or "")


def replaced_before(obj: Json, *seconds: float, evicted_between: bool = True) -> None:
    """`status.history`: worker 1 of the job restarted alone at each of `seconds` (newest
    first) for an error of its own, with the chief evicted and restarted alone between them."""
    from tfmw_operator.api.times import format_time

    history: list[Json] = [
        {"attempt": 0, "outcome": "Replaced", "cause": "Error", "worker": 1, "endTime": format_time(at(t))}
        for t in seconds
    ]
    if evicted_between:
        history.insert(
            1,
            {
                "attempt": 0,
                "outcome": "Replaced",
                "cause": "Evicted",
                "worker": 0,
                "replicaType": "chief",
                "endTime": format_time(at(seconds[0] - 1)),
            },
        )
    obj["status"]["history"] = history
    obj["status"]["replacing"] = ["worker-1"]


def test_a_pod_restarted_alone_again_and_again_waits_out_a_growing_back_off() -> None:
    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()
    survivors = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0, 0, "ps").running().obj(),
        pod(obj, 0).running().obj(),
    ]

    def created(now: float) -> tuple[bool, float | None]:
        decision = decide(obj, survivors, now=at(now))
        return bool([a for a in decision.actions if isinstance(a, CreatePods)]), decision.requeue_after

    replaced_before(obj, 100)  # the first: at once
    assert created(100)[0]
    replaced_before(obj, 100, 90)  # the second in a row (the eviction between not counted): 10 s
    assert created(105) == (False, 5)
    assert created(110)[0]
    replaced_before(obj, 400, 300, 290, 200)  # the fourth: 40 s
    assert created(439)[1] == 1
    assert created(440)[0]
    replaced_before(obj, 2000, 1000, 990)  # 1,000 s apart: the row starts again
    assert created(2000)[0]
    replaced_before(obj, *range(5400, 4799, -60), evicted_between=False)  # ten a minute apart: 5 min
    late = decide(obj, survivors, now=at(5430))
    assert not [a for a in late.actions if isinstance(a, CreatePods)] and late.requeue_after == 270
    # A record dated ahead of the operator's clock holds nothing.
    replaced_before(obj, 10**8, 10**8 - 10)
    assert created(100)[0]


def test_pods_restarted_alone_in_turn_back_off_as_one_crash_loop() -> None:
    # The history keeps 10 entries for the whole job: ten workers failing in turn would each
    # keep a count of one of their own.
    from tfmw_operator.api.times import format_time

    obj = job("ps").workers(10).chief().parameter_servers().launched(phase="Running").obj()
    obj["status"]["history"] = [
        {
            "attempt": 0,
            "outcome": "Replaced",
            "cause": "Error",
            "worker": 9 - i,
            "endTime": format_time(at(100 - 2 * i)),
        }
        for i in range(10)
    ]
    obj["status"]["replacing"] = ["worker-9"]
    pods = [pod(obj, 0, 0, "chief").running().obj(), pod(obj, 0, 0, "ps").running().obj()]
    pods += [pod(obj, i).running().obj() for i in range(9)]
    decision = decide(obj, pods, now=at(101))
    assert not [a for a in decision.actions if isinstance(a, CreatePods)]
    assert decision.requeue_after == 299


def test_a_pod_restarted_alone_in_a_row_says_its_back_off_where_the_restart_is_said() -> None:
    rule = {"action": "RestartNotCounted", "onRoles": ["worker"]}
    obj = job("ps").workers(2).chief().parameter_servers().rules(rule).launched(phase="Running").obj()
    replaced_before(obj, 50, 40)
    obj["status"]["replacing"] = []
    pods = [
        pod(obj, 0, 0, "chief").running().obj(),
        pod(obj, 0, 0, "ps").running().obj(),
        pod(obj, 0).running().obj(),
        pod(obj, 1).exited(1).obj(),
    ]
    decision = decide(obj, pods, now=at(60))
    assert decision.status.replacing == ("worker-1",)
    (said,) = [m for _, reason, m in events(decision) if reason == "PodRestarted"]
    assert said.endswith("; made again in 20 s (restart back-off: 3 pods restarted alone in a row)")


def test_a_refused_evaluation_document_is_a_warning_event_with_its_reason() -> None:
    from tfmw_operator.core.progress import ProgressProblem

    obj = job("ev").evaluator().launched(phase="Running").obj()
    pods = [
        pod(obj, 0).running().obj(),
        pod(obj, 1).running().obj(),
        pod(obj, 0, 0, "evaluator").running().obj(),
    ]
    decision = decide(obj, pods, evaluation=ProgressProblem("evaluation.json: not JSON"), now=at(11))
    evaluation = decision.status.evaluation
    assert evaluation is not None and evaluation.error
    refused = [e for e in events(decision) if e[1] == "EvaluationRefused"]
    assert refused == [("Warning", "EvaluationRefused", f"evaluation document refused: {evaluation.error}")]
