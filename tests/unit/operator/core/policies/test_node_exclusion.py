"""Keeping a bad node out (runPolicy.nodeExclusion, policies/node_exclusion.py): which ends
blame a node, what status.excludedNodes and the next pods say, how long, how many."""

from __future__ import annotations

from typing import Any

from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import ConditionType, ExcludedNode, JobStatus
from tfmw_operator.api.times import format_time
from tfmw_operator.core.decision import CreatePods, Decision
from tfmw_operator.core.policies.node_exclusion import blamed_node, exclude, excluded_message, still_excluded
from tfmw_operator.core.policies.verdicts import Cause
from wrappers import at, decide, job, pod

Json = dict[str, Any]
KEEP_OFF = {"key": "metadata.name", "operator": "NotIn"}


def excluding(**policy: Any) -> Json:
    return (
        job()
        .run_policy(nodeExclusion=policy, restartPolicy="OnFailure")
        .launched(phase="Running")
        .condition("Running", True, "AllWorkersRunning")
        .obj()
    )


def lost(j: Json, index: int, node: str) -> Json:
    """Its node silent since 0 s: phase Unknown, as older clusters leave such a pod."""
    found = pod(j, index).on_node(node).obj()
    found["status"] = {
        "phase": "Unknown",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": format_time(at(0))}],
    }
    return found


def carried(j: Json, decision: Decision) -> Json:
    j["status"] = decision.status.to_json()
    return j


def launched_pods(decision: Decision) -> list[Json]:
    return [p for a in decision.actions if isinstance(a, CreatePods) for p in a.pods]


def keeps_off(pod_obj: Json) -> list[list[str]]:
    terms = pod_obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return [f["values"] for t in terms for f in t.get("matchFields", []) if f["key"] == "metadata.name"]


def test_a_lost_node_is_kept_out_of_the_next_attempts() -> None:
    j = excluding(durationSeconds=600)
    restart = decide(j, [pod(j, 0).on_node("node-a").running().obj(), lost(j, 1, "node-b")], now=at(70))
    assert restart.status.attempt == 1
    (entry,) = restart.status.excluded_nodes
    assert (entry.node, entry.cause, entry.attempt, entry.pod) == ("node-b", "NodeLost", 0, "mnist-worker-1")
    assert (entry.since, entry.until) == (at(70), at(670))
    condition = restart.status.condition(ConditionType.NODES_EXCLUDED)
    assert condition is not None and condition.true and condition.reason == "NodeFault"
    assert "node-b (NodeLost in attempt 0) until 2026-01-01T12:11:10Z" in condition.message
    (event,) = [e for e in restart.events if e.reason == "NodeExcluded"]
    assert event.type == "Warning"
    assert event.message == (
        "node node-b is kept out of this job's next attempts until 2026-01-01T12:11:10Z: NodeLost in attempt 0"
    )
    launch = decide(carried(j, restart), now=at(80))
    pods = launched_pods(launch)
    assert len(pods) == 2 and all(keeps_off(p) == [["node-b"]] for p in pods)
    assert launch.status.excluded_nodes == restart.status.excluded_nodes


def test_without_node_exclusion_nothing_is_kept_out() -> None:
    j = job().run_policy(restartPolicy="OnFailure").launched(phase="Running").obj()
    restart = decide(j, [pod(j, 0).running().obj(), lost(j, 1, "node-b")], now=at(70))
    assert restart.status.attempt == 1 and restart.status.excluded_nodes == ()
    launch = decide(carried(j, restart), now=at(80))
    assert all("affinity" not in p["spec"] for p in launched_pods(launch))


def test_a_failure_a_rule_blames_on_its_node_keeps_that_node_out() -> None:
    j = excluding()
    j["spec"]["runPolicy"]["failureRules"] = [
        {"name": "xid", "onExitCodes": [79], "action": "Restart", "nodeFault": True}
    ]
    restart = decide(j, [pod(j, 0).running().obj(), pod(j, 1).on_node("gpu-7").exited(79).obj()])
    (entry,) = restart.status.excluded_nodes
    assert (entry.node, entry.cause, entry.rule) == ("gpu-7", "Error", "failureRules[0] (xid)")
    (event,) = [e for e in restart.events if e.reason == "NodeExcluded"]
    assert "Error in attempt 0 (failureRules[0] (xid): nodeFault)" in event.message


def test_a_programs_own_failure_blames_no_node() -> None:
    j = excluding()
    restart = decide(j, [pod(j, 0).running().obj(), pod(j, 1).on_node("node-b").exited(137).obj()])
    assert restart.status.attempt == 1 and restart.status.excluded_nodes == ()


def test_a_lost_node_found_behind_a_peers_exit_is_kept_out_too() -> None:
    """A peer exits 170 first (the gang restarts on its Error); the control plane reports
    worker 1's node lost while the old pods go: the record is amended, the node kept out."""
    j = excluding()
    peer = pod(j, 0).on_node("node-a").exited(170, at_seconds=0, message="Connection reset by peer")
    restart = decide(j, [peer.obj(), pod(j, 1).on_node("node-b").running().obj()], now=at(5))
    assert restart.status.excluded_nodes == ()
    going = [peer.deleting(10).obj(), pod(j, 1).node_not_ready(at_seconds=50).deleting(10).obj()]
    found = decide(carried(j, restart), going, now=at(52))
    assert found.status.history[0].cause == "NodeLost"
    (entry,) = found.status.excluded_nodes
    assert (entry.node, entry.cause, entry.attempt) == ("node-b", "NodeLost", 0)
    launch = decide(carried(j, found), now=at(60))
    assert all(keeps_off(p) == [["node-b"]] for p in launched_pods(launch))


def test_at_most_max_nodes_the_oldest_go_first() -> None:
    spec = parse_job(excluding(maxNodes=2))
    listed: tuple[ExcludedNode, ...] = ()
    pushed = []
    for n, node in enumerate(("n1", "n2", "n3")):
        found = exclude(spec, listed, Cause("NodeLost", node=node), n, at(n))
        assert found is not None
        listed = found.excluded
        pushed += [e.node for e in found.pushed_out]
    assert [e.node for e in listed] == ["n2", "n3"] and pushed == ["n1"]
    again = exclude(spec, listed, Cause("NodeLost", node="n2"), 9, at(9))  # blamed again: from now
    assert again is not None and [(e.node, e.attempt) for e in again.excluded] == [("n3", 2), ("n2", 9)]


def test_which_ends_point_at_a_node() -> None:
    assert blamed_node(Cause("NodeLost", node="n"), node_fault=False) == "n"
    assert blamed_node(Cause("Error", node="n"), node_fault=True) == "n"
    assert blamed_node(Cause("Error", node="n"), node_fault=False) is None
    assert blamed_node(Cause("NodeLost"), node_fault=False) is None  # no node to blame
    assert blamed_node(None, node_fault=True) is None


def test_a_node_whose_time_is_up_leaves_at_the_next_launch() -> None:
    j = excluding(durationSeconds=30)
    restart = decide(j, [pod(j, 0).running().obj(), lost(j, 1, "node-b")], now=at(70))
    assert still_excluded(restart.status.excluded_nodes, at(99)) and not still_excluded(
        restart.status.excluded_nodes, at(100)
    )
    launch = decide(carried(j, restart), now=at(101))
    assert all("affinity" not in p["spec"] for p in launched_pods(launch))
    assert launch.status.excluded_nodes == ()
    condition = launch.status.condition(ConditionType.NODES_EXCLUDED)
    assert condition is not None and not condition.true and condition.reason == "ExclusionEnded"


def test_a_pod_restarted_alone_avoids_the_node_too() -> None:
    j = (
        job()
        .parameter_servers()
        .chief()
        .run_policy(nodeExclusion={})
        .launched(phase="Running")
        .condition("Running", True, "AllWorkersRunning")
        .obj()
    )
    others = [pod(j, 0, replica_type="chief").running().obj(), pod(j, 0, replica_type="ps").running().obj()]
    replace = decide(j, [*others, pod(j, 0).running().obj(), lost(j, 1, "node-b")], now=at(70))
    assert [e.node for e in replace.status.excluded_nodes] == ["node-b"]
    again = decide(carried(j, replace), [*others, pod(j, 0).running().obj()], now=at(75))
    (worker,) = launched_pods(again)
    assert keeps_off(worker) == [["node-b"]]


def test_the_status_reads_back_what_it_wrote() -> None:
    entry = ExcludedNode("n", "NodeLost", 2, "p", "r", at(1), at(2))
    status = JobStatus(excluded_nodes=(entry,))
    assert JobStatus.from_json(status.to_json()).excluded_nodes == (entry,)


def test_the_condition_lists_every_node_kept_out() -> None:
    lost = ExcludedNode("node-a", "NodeLost", 0, "mnist-worker-1", None, at(0), at(600))
    blamed = ExcludedNode("node-b", "Error", 1, "mnist-worker-0", "failureRules[0]", at(60), at(660))
    assert excluded_message((lost, blamed)) == (
        "the pods of this job's attempts keep off node-a (NodeLost in attempt 0) until 2026-01-01T12:10:00Z; "
        "node-b (Error in attempt 1, failureRules[0]) until 2026-01-01T12:11:00Z"
    )
