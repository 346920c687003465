"""A gang that cannot be placed (policies/placement.py): going on with fewer workers
(spec.minWorkers), or taking back a node kept out (runPolicy.nodeExclusion)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tfmw_operator.api.spec import SpecError, parse_job, parse_spec
from tfmw_operator.api.status import ConditionType, JobStatus
from tfmw_operator.core.decision import CreatePods, Decision, DeletePods, PatchStatus
from tfmw_operator.core.observed import CreateError, CreateErrorKind, MarkerState
from tfmw_operator.core.pods import observe_pod
from tfmw_operator.core.policies.placement import (
    PLACEMENT_SECONDS,
    UNPLACEABLE,
    Readmit,
    Shrink,
    judge_placement,
)
from tfmw_operator.core.policies.verdicts import Cause, WakeAt
from wrappers import at, decide, env_of, job, pod

Json = dict[str, Any]
NO_ROOM = "0/3 nodes are available: 1 node(s) had untolerated taint, 2 Insufficient cpu."
NOT_THERE = (
    "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu."
)


def restarted(workers: int = 4, min_workers: int | None = 2, attempt: int = 1, **more: Any) -> Json:
    """A job whose attempt `attempt` (after a gang restart) was launched at 0 s."""
    wrapper = job().workers(workers)
    if min_workers is not None:
        wrapper.spec(minWorkers=min_workers)
    return (
        wrapper.launched(attempt=attempt, phase="Restarting", restarts=attempt, **more)
        .condition("Restarting")
        .obj()
    )


def half_placed(j: Json, attempt: int = 1, placed: int = 2, message: str = NO_ROOM) -> list[Json]:
    workers = parse_job(j).workers
    return [
        pod(j, i, attempt).on_node("node-a").running().obj()
        if i < placed
        else pod(j, i, attempt).unschedulable(message).obj()
        for i in range(workers)
    ]


def carried(j: Json, decision: Decision) -> Json:
    j["status"] = decision.status.to_json()
    return j


def created(decision: Decision) -> list[Json]:
    return [p for a in decision.actions if isinstance(a, CreatePods) for p in a.pods]


def test_a_restarted_gang_that_cannot_be_placed_goes_on_with_the_workers_placed() -> None:
    j = restarted()
    waiting = decide(j, half_placed(j), now=at(PLACEMENT_SECONDS - 1))
    assert waiting.status.attempt == 1 and waiting.requeue_after == 1.0
    resized = decide(j, half_placed(j), now=at(PLACEMENT_SECONDS))
    status = resized.status
    assert (status.attempt, status.attempt_workers, status.restarts, status.phase) == (2, 2, 1, "Restarting")
    record = status.history[0]
    assert (record.attempt, record.cause, record.workers, record.outcome) == (1, UNPLACEABLE, 4, "Restarted")
    assert (record.worker, record.pod) == (2, "mnist-worker-2")
    assert status.message == (
        f"worker 2 (pod mnist-worker-2) and 1 more could not be placed for {PLACEMENT_SECONDS}s: Unschedulable: "
        f"{NO_ROOM}; attempt 2 goes on with 2 of 4 workers (spec.minWorkers 2), not counted against backoffLimit"
    )
    restarting = status.condition(ConditionType.RESTARTING)
    assert restarting is not None and restarting.true and restarting.reason == UNPLACEABLE
    (event,) = [e for e in resized.events if e.reason == "GangResized"]
    assert event.type == "Warning" and event.message == status.message
    (deleted,) = [a for a in resized.actions if isinstance(a, DeletePods)]
    assert deleted.grace_seconds == 0 and len(deleted.names) == 4


def test_the_smaller_attempt_has_a_tf_config_and_tfmw_num_workers_of_its_size() -> None:
    j = restarted()
    resized = decide(j, half_placed(j), now=at(PLACEMENT_SECONDS))
    launch = decide(carried(j, resized), now=at(PLACEMENT_SECONDS + 5))
    pods = created(launch)
    assert [p["metadata"]["name"] for p in pods] == ["mnist-worker-0", "mnist-worker-1"]
    env = env_of(pods[1])
    assert env["TFMW_NUM_WORKERS"] == "2" and env["TFMW_ATTEMPT"] == "2"
    assert json.loads(env["TF_CONFIG"])["cluster"]["worker"] == [
        "worker-0-a2.mnist.default.svc:2222",
        "worker-1-a2.mnist.default.svc:2222",
    ]
    assert launch.status.ready_workers == "0/2"
    running = decide(carried(j, launch), [pod(j, i, 2).running().obj() for i in range(2)], now=at(70))
    assert running.status.phase == "Running" and running.status.attempt_workers == 2
    running_condition = running.status.condition(ConditionType.RUNNING)
    assert running_condition is not None and running_condition.message == "2 workers running"


def test_a_failure_in_the_smaller_attempt_restarts_the_whole_gang_again() -> None:
    j = restarted()
    resized = decide(j, half_placed(j), now=at(PLACEMENT_SECONDS))
    launch = decide(carried(j, resized), now=at(65))
    j = carried(j, launch)
    j["status"]["phase"] = "Running"
    failed = [pod(j, 0, 2).running().obj(), pod(j, 1, 2).exited(137).obj()]
    restart = decide(j, failed, now=at(90))
    assert restart.status.attempt == 3 and restart.status.attempt_workers is None
    assert restart.status.history[0].workers == 2
    assert len(created(decide(carried(j, restart), now=at(95)))) == 4


def test_never_fewer_than_min_workers() -> None:
    j = restarted(min_workers=3)
    resized = decide(j, half_placed(j, placed=1), now=at(PLACEMENT_SECONDS))
    assert resized.status.attempt_workers == 3
    j = restarted(min_workers=2)
    nothing_placed = decide(j, half_placed(j, placed=0), now=at(PLACEMENT_SECONDS))
    assert nothing_placed.status.attempt_workers == 2


@pytest.mark.parametrize(
    "case",
    ["the first attempt", "no minWorkers", "at minWorkers already", "the chief waits", "placeable, but slow"],
)
def test_when_a_gang_does_not_go_on_smaller(case: str) -> None:
    if case == "the first attempt":
        j = restarted(attempt=0)
        pods = half_placed(j, attempt=0)
    elif case == "no minWorkers":
        j = restarted(min_workers=None)
        pods = half_placed(j)
    elif case == "at minWorkers already":
        j = restarted(min_workers=4)
        pods = half_placed(j)
    elif case == "the chief waits":
        j = job().workers(4).chief().spec(minWorkers=2).launched(attempt=1, phase="Restarting").obj()
        pods = [pod(j, 0, 1, "chief").unschedulable().obj()] + [
            pod(j, i, 1).on_node("n").running().obj() for i in range(4)
        ]
    else:
        j = restarted()
        pods = [pod(j, i, 1).waiting("ContainerCreating").obj() for i in range(4)]  # pulling, not unplaceable
    decision = decide(j, pods, now=at(PLACEMENT_SECONDS * 3))
    assert decision.status.attempt == j["status"]["attempt"]
    assert decision.status.attempt_workers is None


def test_going_on_smaller_comes_before_a_shorter_pending_timeout() -> None:
    j = restarted(pendingTimeoutSeconds=None)
    j["spec"]["runPolicy"]["pendingTimeoutSeconds"] = 20
    resized = decide(j, half_placed(j), now=at(19))
    assert resized.status.phase == "Restarting" and resized.status.attempt_workers == 2
    assert "could not be placed for 19s" in (resized.status.message or "")


def test_pod_creation_refused_by_a_quota_goes_on_with_the_pods_it_made() -> None:
    j = (
        job()
        .workers(4)
        .spec(minWorkers=2)
        .status(attempt=1, launchedAttempt=0, phase="Restarting", restarts=1)
        .obj()
    )
    j["status"]["history"] = [
        {"attempt": 0, "outcome": "Restarted", "cause": "NodeLost", "endTime": "2026-01-01T12:00:00Z"}
    ]
    made = [pod(j, i, 1).on_node("node-a").running().obj() for i in range(2)]
    refused = CreateError(CreateErrorKind.FORBIDDEN, "exceeded quota: cpu", 3, at(50), since=at(1))
    waiting = decide(j, made, create_error=refused, now=at(30))
    assert waiting.status.attempt == 1
    resized = decide(j, made, create_error=refused, now=at(PLACEMENT_SECONDS + 1))
    assert (resized.status.attempt, resized.status.attempt_workers) == (2, 2)
    assert resized.status.history[0].workers == 4
    assert f"creating the pods was refused for {PLACEMENT_SECONDS}s: exceeded quota: cpu" in (
        resized.status.message or ""
    )
    # The refusal the shell still remembers is of the attempt that ended: not held against the next.
    after = decide(carried(j, resized), create_error=refused, now=at(PLACEMENT_SECONDS + 70))
    assert after.status.attempt == 2


def test_under_kueue_the_smaller_attempt_is_a_pod_group_of_its_size() -> None:
    j = restarted()
    j["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    resized = decide(j, half_placed(j), now=at(PLACEMENT_SECONDS))
    pods = created(decide(carried(j, resized), now=at(65)))
    assert {p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] for p in pods} == {"2"}


def test_a_marker_of_the_smaller_attempt_ends_the_job() -> None:
    j = restarted()
    resized = decide(j, half_placed(j), now=at(PLACEMENT_SECONDS))
    launched = carried(j, decide(carried(j, resized), now=at(65)))
    done = decide(
        launched,
        [pod(j, i, 2).running().obj() for i in range(2)],
        marker=MarkerState(True, "uid-mnist", at(90), attempt=2),
        now=at(91),
    )
    assert done.status.phase == "Succeeded" and PatchStatus in [type(a) for a in done.actions]


def test_a_node_kept_out_comes_back_when_the_gang_cannot_be_placed_without_it() -> None:
    j = restarted(
        min_workers=None,
        excludedNodes=[
            {
                "node": "old",
                "cause": "NodeLost",
                "attempt": 0,
                "since": "2026-01-01T11:00:00Z",
                "until": "2026-01-01T14:00:00Z",
            },
            {
                "node": "newer",
                "cause": "NodeLost",
                "attempt": 0,
                "since": "2026-01-01T11:30:00Z",
                "until": "2026-01-01T14:00:00Z",
            },
        ],
    )
    j["spec"]["runPolicy"]["nodeExclusion"] = {"maxNodes": 3}
    waiting = decide(j, half_placed(j, message=NOT_THERE), now=at(30))
    assert waiting.status.attempt == 1
    readmitted = decide(j, half_placed(j, message=NOT_THERE), now=at(PLACEMENT_SECONDS))
    status = readmitted.status
    assert status.attempt == 2 and [e.node for e in status.excluded_nodes] == ["newer"]
    assert status.restarts == 1 and status.history[0].cause == UNPLACEABLE
    assert "node old is allowed again (runPolicy.nodeExclusion: the gang cannot be placed without it)" in (
        status.message or ""
    )
    assert [e.reason for e in readmitted.events if e.type == "Warning"] == ["NodeReadmitted"]
    launch = decide(carried(j, readmitted), now=at(70))
    terms = created(launch)[0]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["newer"]


def test_the_last_node_back_says_so() -> None:
    j = restarted(
        min_workers=None,
        excludedNodes=[{"node": "old", "cause": "NodeLost", "since": "2026-01-01T11:00:00Z"}],
    )
    readmitted = decide(j, half_placed(j, message=NOT_THERE), now=at(PLACEMENT_SECONDS))
    condition = readmitted.status.condition(ConditionType.NODES_EXCLUDED)
    assert condition is not None and not condition.true and condition.reason == "GangUnplaceable"


def test_a_pod_unplaceable_for_other_reasons_takes_no_node_back() -> None:
    j = restarted(min_workers=None, excludedNodes=[{"node": "old", "cause": "NodeLost"}])
    decision = decide(j, half_placed(j, message=NO_ROOM), now=at(PLACEMENT_SECONDS * 2))
    assert decision.status.attempt == 1 and [e.node for e in decision.status.excluded_nodes] == ["old"]


def test_fewer_workers_come_before_a_node_back() -> None:
    j = restarted(excludedNodes=[{"node": "old", "cause": "NodeLost"}])
    decision = decide(j, half_placed(j, message=NOT_THERE), now=at(PLACEMENT_SECONDS))
    assert decision.status.attempt_workers == 2 and [e.node for e in decision.status.excluded_nodes] == [
        "old"
    ]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"workers": 2, "minWorkers": 3}, "spec.minWorkers must be an integer in 1..spec.workers (2)"),
        ({"workers": 2, "minWorkers": 0}, "spec.minWorkers must be an integer in 1..spec.workers"),
        (
            {
                "workers": 2,
                "minWorkers": 1,
                "parameterServers": {"template": {"spec": {"containers": [{"name": "t"}]}}},
            },
            "MultiWorkerMirroredStrategy",
        ),
    ],
)
def test_min_workers_the_operator_cannot_act_on_is_an_invalid_spec(spec: Json, says: str) -> None:
    j = job().spec(**spec).obj()
    found = parse_spec(j)
    assert isinstance(found, SpecError) and says in str(found)


def test_the_size_of_each_attempt_is_in_the_history_only_for_jobs_that_can_change_it() -> None:
    j = job().run_policy(restartPolicy="OnFailure").launched(phase="Running").obj()
    restart = decide(j, [pod(j, 0).running().obj(), pod(j, 1).exited(137).obj()])
    assert restart.status.history[0].workers is None


# The rule read directly: judge_placement on the pods as observed.
def judged(
    j: Json, pods: list[Json], now: float, refused: CreateError | None = None
) -> Shrink | Readmit | WakeAt | None:
    observed = [p for p in (observe_pod(raw) for raw in pods) if p is not None]
    return judge_placement(parse_job(j), JobStatus.from_json(j["status"]), observed, at(now), refused)


def test_one_worker_unplaced_is_named_alone_with_its_set_as_the_cause() -> None:
    j = restarted()
    verdict = judged(j, half_placed(j, placed=3), PLACEMENT_SECONDS)
    why = f"worker 3 (pod mnist-worker-3) could not be placed for {PLACEMENT_SECONDS}s: Unschedulable: {NO_ROOM}"
    assert verdict == Shrink(
        3,
        f"{why}; attempt 2 goes on with 3 of 4 workers (spec.minWorkers 2), not counted against backoffLimit",
        Cause(UNPLACEABLE, 3, "mnist-worker-3", message=why, replica_type="worker"),
    )


def test_only_workers_placed_and_alive_count_for_the_next_attempts_size() -> None:
    j = restarted(workers=6)
    pods = [pod(j, i, 1).on_node("node-a").running().obj() for i in range(3)] + [
        pod(j, 3, 1).on_node("node-a").exited(1).obj(),  # failed: its place is not kept
        pod(j, 4, 1).on_node("node-a").running().deleting(40).obj(),  # going
        pod(j, 5, 1).unschedulable(NO_ROOM).obj(),
    ]
    verdict = judged(j, pods, PLACEMENT_SECONDS)
    assert isinstance(verdict, Shrink) and verdict.workers == 3


def test_a_refusal_with_every_worker_placed_shrinks_nothing() -> None:
    j = restarted()
    placed = [pod(j, i, 1).on_node("node-a").running().obj() for i in range(4)]
    refused = CreateError(CreateErrorKind.FORBIDDEN, "exceeded quota: cpu", 3, at(50), since=at(0))
    assert judged(j, placed, PLACEMENT_SECONDS * 2, refused) is None


def test_the_wait_counts_from_the_first_of_the_pods_and_the_refusal() -> None:
    j = restarted()
    later_refusal = CreateError(CreateErrorKind.FORBIDDEN, "exceeded quota: cpu", 3, at(40), since=at(20))
    assert judged(j, half_placed(j), 30, later_refusal) == WakeAt(at(PLACEMENT_SECONDS))
    earlier_refusal = CreateError(CreateErrorKind.FORBIDDEN, "exceeded quota: cpu", 3, at(40), since=at(-20))
    assert judged(j, half_placed(j), 30, earlier_refusal) == WakeAt(at(PLACEMENT_SECONDS - 20))


def test_a_refusal_that_is_no_quotas_does_not_start_the_wait() -> None:
    j = restarted()
    throttled = CreateError(CreateErrorKind.UNAVAILABLE, "too many requests", 3, at(40), since=at(-100))
    assert judged(j, half_placed(j), 30, throttled) == WakeAt(at(PLACEMENT_SECONDS))
    assert judged(j, [pod(j, i, 1).on_node("n").running().obj() for i in range(2)], 300, throttled) is None


def test_a_pending_timeout_of_two_seconds_goes_on_after_one() -> None:
    j = restarted()
    j["spec"]["runPolicy"]["pendingTimeoutSeconds"] = 2
    assert judged(j, half_placed(j), 0) == WakeAt(at(1))


def test_a_node_back_says_which_attempt_starts_and_why() -> None:
    j = restarted(min_workers=None, excludedNodes=[{"node": "old", "cause": "NodeLost"}], attempt=3)
    verdict = judged(j, half_placed(j, attempt=3, placed=3, message=NOT_THERE), PLACEMENT_SECONDS)
    why = f"worker 3 (pod mnist-worker-3) could not be placed for {PLACEMENT_SECONDS}s: Unschedulable: {NOT_THERE}"
    assert isinstance(verdict, Readmit) and verdict.node.node == "old"
    assert verdict.message == (
        f"{why}; node old is allowed again (runPolicy.nodeExclusion: the gang cannot be placed without it), "
        "and attempt 4 starts, not counted against backoffLimit"
    )
    assert verdict.cause == Cause(UNPLACEABLE, message=why)


def test_of_the_nodes_kept_out_one_with_a_time_is_older_than_one_without() -> None:
    j = restarted(
        min_workers=None,
        excludedNodes=[
            {"node": "unknown", "cause": "NodeLost"},
            {"node": "dated", "cause": "NodeLost", "since": "2026-01-01T11:00:00Z"},
        ],
    )
    verdict = judged(j, half_placed(j, message=NOT_THERE), PLACEMENT_SECONDS)
    assert isinstance(verdict, Readmit) and verdict.node.node == "dated"
