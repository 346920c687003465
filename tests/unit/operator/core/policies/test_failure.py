"""The cause of an attempt's end, in Kubernetes' words, and status.history as reconcile keeps it."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.spec import Member, ReplicaType, parse_job
from tfmw_operator.api.status import (
    MAX_HISTORY,
    MAX_HISTORY_MESSAGE,
    AttemptRecord,
    Checkpoint,
    ConditionType,
    JobStatus,
)
from tfmw_operator.core.decision import DeletePods, PatchStatus
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.policies.failure import (
    PEER_LOST_HOLD_SECONDS,
    PEER_LOST_SLACK_SECONDS,
    awaits_exit_code,
    cause_of,
    judge_failures,
    lost_node_behind,
    restart_or_give_up,
)
from tfmw_operator.core.policies.verdicts import Cause, Fail, Restart, WakeAt
from tfmw_operator.core.progress import ProgressReport
from wrappers import PodWrapper, at, decide, job, pod, progress_report

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
    progress = progress_report(15, 5, checkpoint=Checkpoint(epoch=3, path="checkpoints/ckpt-3"))
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


def test_a_worker_deleted_before_its_peer_failed_is_the_first_failure() -> None:
    j = job().launched(phase="Running").obj()
    deleted = pod(j, 1).running().obj()
    deleted["metadata"].update(deletionTimestamp="2026-01-01T12:00:35Z", deletionGracePeriodSeconds=30)
    peer = pod(j, 0).exited(170, at_seconds=8, message="a peer was lost").obj()  # after the delete at 5 s
    record = decide(j, [peer, deleted]).status.history[0]
    assert (record.worker, record.cause) == (1, "PodDeleted")
    earlier = pod(j, 0).exited(170, at_seconds=2).obj()  # before it: the peer's failure came first
    assert decide(j, [earlier, deleted]).status.history[0].worker == 0


# ---- a second look: the lost node behind a peer's exit, found while the old pods go ----

PEER_LOST = "UnavailableError: Connection reset by peer"


def peer(j: Json) -> PodWrapper:
    """Worker 0, on node-a: TensorFlow lost a peer at T0 and the trainer exited 170 (judged at
    5 s, once its hold for the peer to be reported is over: PEER_LOST_HOLD_SECONDS)."""
    return pod(j, 0).on_node("node-a").exited(170, at_seconds=0, message=PEER_LOST)


def restarted_by_a_peer(workers: int = 2) -> Json:
    """The gang restarted at 5 s on worker 0's exit; the others, on node-b and node-c, were
    still reported running and ready then."""
    j = job().workers(workers).launched(phase="Running").condition("Running", True, "AllWorkersRunning").obj()
    others = [pod(j, i).on_node(f"node-{'abc'[i % 3]}").running().obj() for i in range(1, workers)]
    restart = decide(j, [peer(j).obj(), *others], now=at(5))
    assert restart.status.history[0].cause == "PeerLost"  # the trainer's exit 170
    j["status"] = restart.status.to_json()
    return j


def teardown(j: Json, *others: PodWrapper) -> list[Json]:
    """The ended attempt's pods being deleted (asked at 5 s, 5 s of grace): worker 0, `others`."""
    return [p.deleting(10).obj() for p in (peer(j), *others)]


def test_a_peers_exit_is_amended_to_the_node_lost_found_while_the_old_pods_go() -> None:
    j = restarted_by_a_peer()
    before = JobStatus.from_json(j["status"]).history[0]
    decision = decide(j, teardown(j, pod(j, 1).node_not_ready(at_seconds=50)), now=at(52))
    record = decision.status.history[0]
    assert (record.cause, record.worker, record.pod, record.node, record.container, record.exit_code) == (
        "NodeLost",
        1,
        "mnist-worker-1",
        "node-b",
        "tensorflow",
        None,
    )
    told = (
        "node node-b stopped reporting (seen at 2026-01-01T12:00:50Z) with worker 1 (pod mnist-worker-1) "
        f"on it; worker 0 (pod mnist-worker-0) noticed first: exited with code 170: {PEER_LOST}"
    )
    assert record.message == told
    # The rest of the record is kept: when, how it ended, where the logs are (the lost
    # worker's could not be read: its peers' are in the attempt's folder).
    assert (record.attempt, record.outcome, record.start_time, record.end_time) == (
        before.attempt,
        before.outcome,
        before.start_time,
        before.end_time,
    )
    assert record.logs == "default/mnist/logs/attempt-0/"
    found = [e for e in decision.events if e.reason == "RootCauseFound"]
    assert [e.type for e in found] == ["Warning"]
    assert (
        found[0].message
        == f"attempt 0 ended because {told}; status.history records it as NodeLost, no longer PeerLost"
    )
    # The restart under way tells it too.
    restarting = decision.status.condition(ConditionType.RESTARTING)
    running = decision.status.condition(ConditionType.RUNNING)
    assert restarting is not None and restarting.true and restarting.message == f"gang restart 1/3: {told}"
    assert restarting.reason == "WorkerFailed" and restarting.last_transition_time == "2026-01-01T12:00:05Z"
    assert running is not None and not running.true and running.message == restarting.message
    assert decision.status.message == restarting.message
    assert decision.status.phase == "Restarting" and decision.pods_to_create == ()


def test_before_the_node_is_reported_the_record_names_the_peer_that_exited() -> None:
    j = restarted_by_a_peer()
    decision = decide(j, teardown(j, pod(j, 1).on_node("node-b").running()), now=at(30))
    assert decision.status.history == JobStatus.from_json(j["status"]).history
    assert not any(e.reason == "RootCauseFound" for e in decision.events)


def test_amending_is_idempotent_and_the_same_state_gives_the_same_decision() -> None:
    j = restarted_by_a_peer()
    pods = teardown(j, pod(j, 1).node_not_ready())
    first = decide(j, pods, now=at(52))
    assert first == decide(j, pods, now=at(52))
    j["status"] = first.status.to_json()
    again = decide(j, pods, now=at(53))  # the operator restarted, or the force-delete not seen yet
    assert again.status == first.status
    assert not [a for a in again.actions if isinstance(a, PatchStatus)]
    assert not any(e.reason == "RootCauseFound" for e in again.events)


@pytest.mark.parametrize(
    "cause",
    [
        "OOMKilled",
        "Evicted",
        "Preempted",
        "NodeLost",
        "Stalled",
        "Suspended",
        "DeadlineExceeded",
        "PodDeleted",
    ],
)
def test_a_cause_with_a_reason_of_its_own_is_never_amended(cause: str) -> None:
    record = AttemptRecord(
        0, "Restarted", cause, at(5), at(0), 0, "mnist-worker-0", "node-a", "tensorflow", 137
    )
    j = job().launched(phase="Restarting").status(attempt=1, restarts=1, history=[record.to_json()]).obj()
    decision = decide(j, teardown(j, pod(j, 1).node_not_ready()), now=at(52))
    assert decision.status.history == (record,)


def test_an_oom_killed_worker_is_kept_as_the_cause_when_another_node_is_lost_afterwards() -> None:
    j = job().launched(phase="Running").obj()
    oom = pod(j, 0).on_node("node-a").exited(137, at_seconds=3, reason="OOMKilled").obj()
    j["status"] = decide(j, [oom, pod(j, 1).on_node("node-b").running().obj()], now=at(5)).status.to_json()
    going = [pod(j, 0).on_node("node-a").exited(137, 3, reason="OOMKilled").deleting(10).obj()]
    decision = decide(j, [*going, pod(j, 1).node_not_ready().deleting(10).obj()], now=at(52))
    (record,) = decision.status.history
    assert (record.cause, record.worker, record.exit_code) == ("OOMKilled", 0, 137)
    assert "mnist-worker-1" in decision.pods_to_delete  # still forced: its node cannot confirm


def test_a_stopped_kubelet_under_a_running_gang_restarts_nothing_and_records_nothing() -> None:
    # The node NotReady, its containers running on: no worker failed, so nothing to explain.
    j = job().launched(phase="Running").condition("Running", True, "AllWorkersRunning").obj()
    pods = [pod(j, 0).on_node("node-a").running().obj(), pod(j, 1).node_not_ready().obj()]
    decision = decide(j, pods, now=at(52))
    assert decision.status.phase == "Running" and decision.status.restarts == 0
    assert decision.status.history == () and decision.pods_to_delete == ()


def test_a_lost_pod_of_another_attempt_than_the_records_changes_nothing() -> None:
    record = AttemptRecord(
        1, "Restarted", "Error", at(5), at(0), 0, "mnist-worker-0", "node-a", "tensorflow", 170
    )
    j = (
        job()
        .launched(attempt=1, phase="Restarting")
        .status(attempt=2, restarts=2, history=[record.to_json()])
        .obj()
    )
    decision = decide(j, [pod(j, 1, attempt=0).node_not_ready().deleting(10).obj()], now=at(52))
    assert decision.status.history == (record,)


def test_the_recorded_worker_on_a_lost_node_is_not_its_own_root_cause() -> None:
    j = restarted_by_a_peer()
    lost_itself = pod(j, 0).node_not_ready(node="node-a").deleting(10).obj()
    decision = decide(j, [lost_itself, pod(j, 1).on_node("node-b").running().deleting(10).obj()], now=at(52))
    assert decision.status.history == JobStatus.from_json(j["status"]).history


def test_the_first_node_reported_lost_is_the_cause_and_a_nodes_workers_go_by_index() -> None:
    j = restarted_by_a_peer(workers=5)
    later_node = pod(j, 1).node_not_ready(at_seconds=58, node="node-b")
    # One node's pods marked one by one, across a second's turn: its lowest index still.
    first_node = [pod(j, 4).node_not_ready(at_seconds=50, node="node-c")]
    first_node += [pod(j, i).node_not_ready(at_seconds=51, node="node-c") for i in (3, 2)]
    record = decide(j, teardown(j, later_node, *first_node), now=at(60)).status.history[0]
    assert (record.worker, record.node) == (2, "node-c")


@pytest.mark.parametrize(
    ("seen", "created"),
    [
        ("9999-12-31T23:59:59Z", 0),
        ("2026-01-01T12:06:01Z", 0),
        ("2026-01-01T11:00:00Z", 0),
        ("2026-01-01T12:00:01Z", 2),
    ],
)
def test_a_report_time_that_cannot_be_true_is_not_told_and_orders_last(seen: str, created: float) -> None:
    # Year 9999, more than the clock skew allowed ahead, before the pod existed.
    j = restarted_by_a_peer(workers=3)
    absurd = pod(j, 1).created(created).node_not_ready().deleting(10).obj()
    absurd["status"]["conditions"][0]["lastTransitionTime"] = seen
    pods = [*teardown(j), absurd]
    record = decide(j, pods, now=at(60)).status.history[0]
    assert record.worker == 1 and (record.message or "").startswith(
        "node node-b stopped reporting with worker 1"
    )
    plausible = pod(j, 2).node_not_ready(at_seconds=55, node="node-c").deleting(10).obj()
    assert decide(j, [*pods, plausible], now=at(60)).status.history[0].worker == 2


def test_a_long_log_keeps_the_start_of_the_message_and_the_end_of_the_log() -> None:
    j = restarted_by_a_peer()
    record = JobStatus.from_json(j["status"]).history[0]
    long_tail = "x" * (MAX_HISTORY_MESSAGE - 5) + "\nlast"
    j["status"]["history"][0]["message"] = long_tail
    amended = decide(j, teardown(j, pod(j, 1).node_not_ready()), now=at(52)).status.history[0]
    assert amended.message is not None and len(amended.message) == MAX_HISTORY_MESSAGE
    assert amended.message.startswith("node node-b stopped reporting") and amended.message.endswith("x\nlast")
    assert record.message == PEER_LOST


def test_a_lost_nodes_lowest_worker_is_named_before_its_pod_is_reported() -> None:
    # node-b holds workers 1 and 2; the node controller has marked worker 2's pod so far.
    j = restarted_by_a_peer(workers=3)
    not_yet = pod(j, 1).on_node("node-b").running()
    record = decide(
        j, teardown(j, not_yet, pod(j, 2).node_not_ready(node="node-b")), now=at(52)
    ).status.history[0]
    assert (record.cause, record.worker, record.node) == ("NodeLost", 1, "node-b")
    assert "with worker 1 (pod mnist-worker-1) on it" in (record.message or "")


def test_a_node_reported_lost_long_before_the_crash_is_not_its_root_cause() -> None:
    # node-b's kubelet stopped at 20 s, its worker running on; worker 0 crashed at 100 s on
    # its own (exit 139): the silent node did not end the attempt, so nothing is amended.
    j = job().launched(phase="Running").condition("Running", True, "AllWorkersRunning").obj()
    crashed = pod(j, 0).on_node("node-a").exited(139, at_seconds=100)
    silent = pod(j, 1).node_not_ready(at_seconds=20)
    restart = decide(j, [crashed.obj(), silent.obj()], now=at(101))
    j["status"] = restart.status.to_json()
    assert restart.status.history[0].cause == "Error"
    going = [pod(j, 0).on_node("node-a").exited(139, at_seconds=100).deleting(101).obj()]
    decision = decide(j, [*going, pod(j, 1).node_not_ready(at_seconds=20).deleting(101).obj()], now=at(102))
    assert decision.status.history == restart.status.history
    assert not any(e.reason == "RootCauseFound" for e in decision.events)


def test_a_node_reported_lost_just_before_the_peers_exit_is_still_its_root_cause() -> None:
    j = restarted_by_a_peer()  # worker 0 exited at 3 s, the restart recorded at 5 s
    decision = decide(j, teardown(j, pod(j, 1).node_not_ready(at_seconds=-5)), now=at(52))
    assert decision.status.history[0].cause == "NodeLost"


def test_survivors_keep_their_grace_when_a_programs_own_error_may_be_a_lost_peer() -> None:
    # Under OnFailure a program that exits 1 on a broken collective is retried; its peer's
    # node may be gone unreported, and the grace keeps the next attempt off that node.
    j = job().launched(phase="Running").run_policy(restartPolicy="OnFailure").obj()
    pods = [pod(j, 0).on_node("node-a").exited(1).obj(), pod(j, 1).on_node("node-b").running().obj()]
    deletions = [a for a in decide(j, pods, now=at(11)).actions if isinstance(a, DeletePods)]
    assert [a.grace_seconds for a in deletions] == [5]


def test_survivors_of_a_death_by_signal_are_stopped_at_once() -> None:
    j = job().launched(phase="Running").obj()
    pods = [pod(j, 0).on_node("node-a").exited(139).obj(), pod(j, 1).on_node("node-b").running().obj()]
    deletions = [a for a in decide(j, pods, now=at(11)).actions if isinstance(a, DeletePods)]
    assert [a.grace_seconds for a in deletions] == [0]


# ---- the verdict on a failed pod, judged from the pods as observed ----


def observed(index: int, phase: str = "Running", **fields: Any) -> ObservedPod:
    """Worker `index` of attempt 0 as the core sees it."""
    fields.setdefault("containers", ("tensorflow",))
    return ObservedPod(f"mnist-worker-{index}", index, 0, phase, **fields)


def judged(j: Json, *pods: ObservedPod, now: float = 20, replacing: tuple[Member, ...] = ()) -> Any:
    spec = parse_job(j)
    return judge_failures(spec, pods, JobStatus.from_json(j.get("status") or {}), at(now), replacing)


@pytest.mark.parametrize("reason", ["Evicted", "NodeLost", "Shutdown", "Terminated", "DeadlineExceeded"])
def test_the_pods_own_reason_says_more_than_its_disruption_condition(reason: str) -> None:
    # A node shut down gracefully: the pod Failed with reason Shutdown/Terminated, and the
    # DisruptionTarget condition the kubelet set before names something else.
    going = observed(1, "Failed", exit_code=143, reason=reason, disruption="PreemptionByScheduler")
    assert cause_of(going) == reason


@pytest.mark.parametrize("reason", ["", "Error"])
def test_exit_170_is_a_lost_peer_when_kubernetes_gives_no_other_reason(reason: str) -> None:
    assert cause_of(observed(0, "Failed", exit_code=170, reason=reason)) == "PeerLost"
    assert cause_of(observed(0, "Failed", exit_code=170, reason="OOMKilled")) == "OOMKilled"


@pytest.mark.parametrize("code", [None, 0])
def test_a_failed_pod_with_no_reason_and_no_exit_code_is_unknown(code: int | None) -> None:
    assert cause_of(observed(1, "Failed", exit_code=code)) == "Unknown"


def test_a_failed_pod_kueue_preempted_restarts_uncounted() -> None:
    j = job().launched(phase="Running").obj()
    going = observed(1, "Failed", exit_code=143, reason="Error", preempted=True)
    verdict = judged(j, observed(0), going)
    assert isinstance(verdict, Restart) and verdict.kueue and verdict.counted is False
    assert verdict.reason == "Preempted" and verdict.cause is not None and verdict.cause.reason == "Preempted"
    assert verdict.message == (
        "preempted by Kueue, not counted against backoffLimit: "
        "worker 1 (pod mnist-worker-1) exited with code 143 (Error)"
    )


def test_the_cause_names_the_main_container_or_none() -> None:
    j = job().launched(phase="Running").obj()
    sidecar = observed(1, "Failed", exit_code=137, reason="OOMKilled", containers=("tensorflow", "proxy"))
    verdict = judged(j, observed(0), sidecar)
    assert isinstance(verdict, Restart) and verdict.cause is not None
    assert verdict.cause.container == "tensorflow"
    bare = judged(j, observed(0), observed(1, "Failed", exit_code=137, reason="OOMKilled", containers=()))
    assert isinstance(bare, Restart) and bare.cause is not None and bare.cause.container is None


def test_a_missing_worker_is_a_disruption_of_its_role_for_the_rules() -> None:
    j = job().rules({"action": "Fail", "onRoles": ["worker"], "onDisruption": True}).launched(phase="Running")
    verdict = judged(j.obj(), observed(0))
    assert isinstance(verdict, Fail) and verdict.reason == "WorkerFailed"
    assert verdict.message == (
        "worker 1 (pod mnist-worker-1): pod disappeared while the job was active (failureRules[0]: Fail)"
    )
    assert verdict.cause is not None and verdict.cause.reason == "PodDeleted"


def test_a_deleted_worker_is_the_cause_on_its_node() -> None:
    j = job().launched(phase="Running").obj()
    going = observed(1, deleting=True, deleting_since=at(35), grace_seconds=30, node="node-b")
    verdict = judged(j, observed(0), going)
    assert isinstance(verdict, Restart) and verdict.cause is not None
    assert (verdict.cause.reason, verdict.cause.worker, verdict.cause.node) == ("PodDeleted", 1, "node-b")
    assert verdict.survivors_can_save


def test_a_pod_deleted_without_a_deletion_time_is_still_a_failure() -> None:
    j = job().launched(phase="Running").obj()
    verdict = judged(j, observed(0), observed(1, deleting=True, node="node-b"))
    assert isinstance(verdict, Restart) and verdict.cause is not None
    assert (verdict.cause.reason, verdict.cause.worker) == ("PodDeleted", 1)


def test_pods_being_replaced_are_skipped_and_the_next_failure_found() -> None:
    j = job().workers(3).launched(phase="Running").obj()
    failed = observed(2, "Failed", exit_code=137, reason="OOMKilled")
    verdict = judged(j, observed(1), failed, replacing=(Member(ReplicaType.WORKER, 0),))
    assert isinstance(verdict, Restart) and verdict.cause is not None and verdict.cause.worker == 2
    assert judged(j, observed(1), observed(2), replacing=(Member(ReplicaType.WORKER, 0),)) is None


def test_a_succeeded_pod_being_deleted_is_no_failure() -> None:
    j = job().launched(phase="Running").obj()
    assert (
        judged(j, observed(0, "Succeeded", exit_code=0, deleting=True, deleting_since=at(15)), observed(1))
        is None
    )


def test_a_pod_awaiting_its_exit_code_does_not_hide_another_failure() -> None:
    j = job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).launched(phase="Running").obj()
    awaiting = observed(0, deleting=True, deleting_since=at(15))
    assert awaits_exit_code(parse_job(j), awaiting)
    verdict = judged(j, awaiting, observed(1, "Failed", exit_code=137, reason="OOMKilled"))
    assert isinstance(verdict, Restart) and verdict.cause is not None and verdict.cause.worker == 1
    assert judged(j, awaiting, observed(1)) is None


def test_a_peers_error_after_a_pod_was_taken_away_waits_for_that_pods_exit_code() -> None:
    # Worker 0 evicted at 0 s (grace 30); worker 1's collective breaks on it, exit 1 at 2 s.
    # Judged at once, the ExitCode preset would fail the job for worker 1's "own error".
    j = job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).launched(phase="Running").obj()
    peer = observed(1, "Failed", exit_code=1, reason="Error", finished_at=at(2))
    evicted = observed(0, deleting=True, deleting_since=at(30), disruption="EvictionByEvictionAPI")
    assert judged(j, evicted, peer, now=3) == WakeAt(at(60))
    # It saved and exited 42 at 20 s: it went first, and its rule decides.
    saved = observed(
        0, "Failed", exit_code=42, finished_at=at(20), deleting=True, deleting_since=at(30), disrupted=True
    )
    verdict = judged(j, saved, peer, now=21)
    assert isinstance(verdict, Restart) and not verdict.counted
    assert verdict.cause is not None and verdict.cause.worker == 0
    # Its kubelet never said: past its grace and the slack, it is judged as taken away.
    late = judged(j, evicted, peer, now=60)
    assert isinstance(late, Restart) and late.counted and late.cause is not None
    assert (late.cause.worker, late.cause.reason) == (0, "Evicted")


def test_a_pod_whose_exit_code_was_awaited_and_is_gone_went_before_a_peers_error() -> None:
    # Its last status and its deletion came milliseconds apart: the operator sees it gone.
    j = job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).launched(phase="Running").obj()
    peer = observed(1, "Failed", exit_code=1, reason="Error", finished_at=at(2))
    verdict = judged(j, peer, now=5)
    assert isinstance(verdict, Restart) and verdict.cause is not None
    assert (verdict.cause.worker, verdict.cause.reason) == (0, "PodDeleted")
    # Without a rule on exit codes, the error decides as before (the pod was judged when it went).
    plain = judged(job().launched(phase="Running").obj(), peer, now=5)
    assert isinstance(plain, Fail)


def test_the_wait_for_an_awaited_exit_code_is_bounded_whatever_the_grace() -> None:
    j = job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).launched(phase="Running").obj()
    peer = observed(1, "Failed", exit_code=1, reason="Error", finished_at=at(2))
    day = observed(0, deleting=True, deleting_since=at(86_400), grace_seconds=86_400)
    assert judged(j, day, peer, now=3) == WakeAt(at(330))  # 300 s of grace at most, and 30 s


def test_an_evaluator_taken_away_holds_no_training_pods_error() -> None:
    j = (
        job()
        .evaluator()
        .rules({"action": "RestartNotCounted", "onExitCodes": [42]})
        .launched(phase="Running")
        .obj()
    )
    evaluator = ObservedPod(
        "mnist-evaluator-0",
        0,
        0,
        "Running",
        replica_type=ReplicaType.EVALUATOR,
        containers=("tensorflow",),
        deleting=True,
        deleting_since=at(600),
        grace_seconds=600,
    )
    verdict = judged(
        j, observed(0), observed(1, "Failed", exit_code=1, reason="Error", finished_at=at(2)), evaluator
    )
    assert isinstance(verdict, Fail)


def test_a_pod_deleted_before_its_program_ended_was_taken_away() -> None:
    # `kubectl delete`: no DisruptionTarget condition, the program ends on the SIGTERM.
    j = job().rules({"action": "Fail", "onDisruption": False}).launched(phase="Running").obj()
    deleted = observed(0, "Failed", exit_code=143, finished_at=at(5), deleting=True, deleting_since=at(31))
    verdict = judged(j, deleted, observed(1), now=6)
    assert isinstance(verdict, Restart), verdict  # not the rule on the program's own end
    ended_first = observed(0, "Failed", exit_code=1, finished_at=at(5), deleting=True, deleting_since=at(40))
    assert isinstance(judged(j, ended_first, observed(1), now=6), Fail)


def test_only_a_pod_being_deleted_and_not_yet_ended_awaits_its_exit_code() -> None:
    spec = parse_job(job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).obj())
    assert not awaits_exit_code(spec, observed(1))
    assert not awaits_exit_code(spec, observed(1, "Failed", exit_code=42, deleting=True))
    assert not awaits_exit_code(spec, observed(1, deleting=True, node_lost=True))
    assert not awaits_exit_code(parse_job(job().obj()), observed(1, deleting=True))


def test_a_pod_kueue_preempted_is_judged_at_once_under_exit_code_rules() -> None:
    j = job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).launched(phase="Running").obj()
    going = observed(1, deleting=True, deleting_since=at(15), preempted=True)
    assert not awaits_exit_code(parse_job(j), going)
    verdict = judged(j, observed(0), going)
    assert isinstance(verdict, Restart) and verdict.kueue and verdict.reason == "Preempted"


@pytest.mark.parametrize("silent", [60, 61])
def test_a_worker_unknown_for_node_lost_seconds_is_a_disruption_of_its_role(silent: float) -> None:
    j = job().rules({"action": "Fail", "onRoles": ["worker"], "onDisruption": True}).launched(phase="Running")
    unknown = observed(1, "Unknown", changed_at=at(0), node="node-b")
    verdict = judged(j.obj(), observed(0), unknown, now=silent)
    assert isinstance(verdict, Fail) and verdict.cause is not None
    assert (verdict.cause.reason, verdict.cause.node) == ("NodeLost", "node-b")
    assert verdict.message == (
        "worker 1 (pod mnist-worker-1): its node has not reported for 60s (phase Unknown) (failureRules[0]: Fail)"
    )
    assert judged(j.obj(), observed(0), unknown, now=59) is None


def test_a_folder_mismatch_fails_naming_the_pod() -> None:
    j = job().launched(phase="Running").obj()
    refused = observed(1, "Failed", exit_code=1, reason="Error", folder_mismatch=True, node="node-b")
    verdict = judged(j, observed(0), refused)
    assert isinstance(verdict, Fail) and verdict.reason == "SharedVolumeMismatch"
    assert verdict.cause is not None
    assert (verdict.cause.reason, verdict.cause.worker, verdict.cause.pod, verdict.cause.node) == (
        "Error",
        1,
        "mnist-worker-1",
        "node-b",
    )


@pytest.mark.parametrize(
    ("code", "can_save"), [(1, True), (127, True), (128, False), (137, False), (143, True)]
)
def test_survivors_save_after_a_programs_own_error_or_sigterm_not_a_signal(code: int, can_save: bool) -> None:
    j = job().run_policy(restartPolicy="OnFailure").launched(phase="Running").obj()
    verdict = judged(j, observed(0), observed(1, "Failed", exit_code=code, reason="Error"))
    assert isinstance(verdict, Restart) and verdict.survivors_can_save is can_save


def test_a_rule_that_restarts_is_named_in_the_restart_message() -> None:
    j = job().run_policy(restartPolicy="Never").rules({"action": "Restart", "onExitCodes": [1]})
    verdict = judged(j.launched(phase="Running").obj(), observed(0), observed(1, "Failed", exit_code=1))
    assert isinstance(verdict, Restart) and verdict.counted and verdict.rule == "failureRules[0]"
    assert verdict.message == (
        "gang restart 1/3: worker 1 (pod mnist-worker-1) exited with code 1 (failureRules[0]: Restart)"
    )


def test_a_parameter_server_worker_is_replaced_alone_counted_or_not() -> None:
    j = job().parameter_servers().rules({"action": "RestartNotCounted", "onExitCodes": [42]})
    obj = j.launched(phase="Running", restarts=1).obj()
    oom = judged(obj, observed(0), observed(1, "Failed", exit_code=137, reason="OOMKilled"))
    assert isinstance(oom, Restart) and oom.replace == (Member(ReplicaType.WORKER, 1),)
    assert oom.message == (
        "worker 1 replaced alone (restart 2/3): worker 1 (pod mnist-worker-1) exited with code 137 (OOMKilled)"
    )
    ps = ObservedPod("mnist-ps-0", 0, 0, "Running", replica_type=ReplicaType.PS, containers=("tensorflow",))
    saved = judged(obj, observed(0), observed(1, "Failed", exit_code=42), ps)
    assert isinstance(saved, Restart) and not saved.counted
    assert saved.message == (
        "worker 1 replaced alone (not counted against backoffLimit) (failureRules[0]: RestartNotCounted): "
        "worker 1 (pod mnist-worker-1) exited with code 42"
    )


def test_a_restart_by_default_is_a_counted_gang_restart_that_blames_no_node() -> None:
    spec = parse_job(job().obj())
    cause = Cause("ProgressStalled")
    assert restart_or_give_up(spec, JobStatus(restarts=1), "no progress", cause) == Restart(
        "gang restart 2/3: no progress", counted=True, cause=cause, survivors_can_save=True
    )
    both = (Member(ReplicaType.WORKER, 1), Member(ReplicaType.WORKER, 2))
    alone = restart_or_give_up(spec, JobStatus(), "why", cause, replace=both)
    assert (
        isinstance(alone, Restart) and alone.message == "worker 1, worker 2 replaced alone (restart 1/3): why"
    )


# ---- lost_node_behind, judged from the pods as observed ----


def peer_record(end: float = 52, **fields: Any) -> AttemptRecord:
    """Attempt 0 ended when worker 0 exited 170 on node-a."""
    values: dict[str, Any] = {
        "pod": "mnist-worker-0",
        "node": "node-a",
        "container": "tensorflow",
        "exit_code": 170,
        "message": "reset by peer",
        **fields,
    }
    return AttemptRecord(0, "Restarted", "PeerLost", at(end), at(0), 0, **values)


def lost_on(index: int, node: str, seen: float | None = 50, **fields: Any) -> ObservedPod:
    return observed(
        index, node=node, node_lost=True, node_lost_at=None if seen is None else at(seen), **fields
    )


def test_the_lost_node_behind_a_peers_exit_is_the_cause() -> None:
    cause = lost_node_behind(peer_record(), [observed(0, node="node-a"), lost_on(1, "node-b")], at(52))
    assert cause == Cause(
        "NodeLost",
        1,
        "mnist-worker-1",
        "node-b",
        "tensorflow",
        message=(
            "node node-b stopped reporting (seen at 2026-01-01T12:00:50Z) with worker 1 (pod mnist-worker-1) "
            "on it; worker 0 (pod mnist-worker-0) noticed first: exited with code 170: reset by peer"
        ),
        replica_type="worker",
    )


def test_a_node_goes_by_the_earliest_report_of_its_pods() -> None:
    # node-b's worker 1 was reported at 50 s, its worker 2 at 56 s; node-c's at 53 s.
    pods = [
        observed(0, node="node-a"),
        lost_on(1, "node-b", 50),
        lost_on(2, "node-b", 56),
        lost_on(3, "node-c", 53),
    ]
    cause = lost_node_behind(peer_record(60), pods, at(60))
    assert cause is not None and (cause.worker, cause.node) == (1, "node-b")
    assert "(seen at 2026-01-01T12:00:50Z)" in cause.message


def test_a_healthy_worker_on_another_node_is_not_behind_the_end() -> None:
    pods = [observed(0, node="node-a"), observed(1, node="node-x"), lost_on(2, "node-c")]
    cause = lost_node_behind(peer_record(), pods, at(52))
    assert cause is not None and (cause.worker, cause.node) == (2, "node-c")


def test_a_lost_pod_with_no_node_and_a_record_with_no_pod_nor_exit_code() -> None:
    record = peer_record(pod=None, exit_code=None, message=None)
    cause = lost_node_behind(record, [observed(0), lost_on(1, "", containers=())], at(52))
    assert cause == Cause(
        "NodeLost",
        1,
        "mnist-worker-1",
        None,
        None,
        message="its node stopped reporting (seen at 2026-01-01T12:00:50Z) with worker 1 (pod mnist-worker-1) "
        "on it; worker 0 noticed first: failed",
        replica_type="worker",
    )


@pytest.mark.parametrize("room", [0, 1, 2])
def test_the_noticers_log_is_told_only_where_there_is_room_for_it(room: int) -> None:
    record = peer_record(message="abcdef")
    bare = lost_node_behind(peer_record(message=None), [observed(0), lost_on(1, "n")], at(52))
    assert bare is not None
    # The node's name makes the message exactly as long as leaves `room` for the log.
    node = "n" * (MAX_HISTORY_MESSAGE - 2 - room - len(bare.message) + 1)
    cause = lost_node_behind(record, [observed(0), lost_on(1, node)], at(52))
    assert cause is not None
    told = bare.message.replace("node n ", f"node {node} ")
    assert cause.message == told + (f": {'abcdef'[-room:]}" if room else "")


@pytest.mark.parametrize(("seen", "amended"), [(50, True), (49, False)])
def test_a_node_reported_lost_15s_before_the_end_is_behind_it_and_earlier_is_not(
    seen: float, amended: bool
) -> None:
    cause = lost_node_behind(peer_record(65), [observed(0), lost_on(1, "node-b", seen)], at(70))
    assert (cause is not None) is amended


def test_a_report_time_at_the_limits_of_belief_is_told() -> None:
    # As far ahead of the operator's clock as it allows, and the very instant the pod was made.
    ahead = lost_node_behind(peer_record(), [observed(0), lost_on(1, "node-b", 352)], at(52))
    assert ahead is not None and "(seen at 2026-01-01T12:05:52Z)" in ahead.message
    made = lost_node_behind(peer_record(), [observed(0), lost_on(1, "node-b", 50, created=at(50))], at(52))
    assert made is not None and "(seen at 2026-01-01T12:00:50Z)" in made.message
    before = lost_node_behind(peer_record(), [observed(0), lost_on(1, "node-b", 50, created=at(51))], at(52))
    assert before is not None and "seen at" not in before.message


# ---- a PeerLost exit names no cause of its own: it yields to the peer it lost ----


def parameter_server_job() -> Json:
    return job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()


def test_a_parameter_server_killed_in_the_second_its_chief_lost_it_is_the_cause() -> None:
    # finishedAt has whole seconds: both read 10 s. Member order alone put the chief first.
    j = parameter_server_job()
    pods = [
        pod(j, 0, 0, "chief").exited(170, at_seconds=10, message="UnavailableError: ps-0 lost").obj(),
        pod(j, 0).running().obj(),
        pod(j, 1).running().obj(),
        pod(j, 0, 0, "ps").exited(137, at_seconds=10).obj(),
    ]
    record = decide(j, pods, now=at(11)).status.history[0]
    assert (record.replica_type, record.worker, record.cause, record.exit_code) == ("ps", 0, "Error", 137)


def test_a_peer_lost_exit_yields_to_a_failure_reported_up_to_the_slack_after_it() -> None:
    j = parameter_server_job()
    chief = pod(j, 0, 0, "chief").exited(170, at_seconds=10).obj()
    others = [pod(j, 0).running().obj(), pod(j, 1).running().obj()]
    ps = pod(j, 0, 0, "ps").exited(137, at_seconds=10 + PEER_LOST_SLACK_SECONDS).obj()
    assert decide(j, [chief, *others, ps], now=at(20)).status.history[0].replica_type == "ps"
    # Later than that, the chief's exit came first: another failure of its own kind.
    ps = pod(j, 0, 0, "ps").exited(137, at_seconds=11 + PEER_LOST_SLACK_SECONDS).obj()
    assert decide(j, [chief, *others, ps], now=at(20)).status.history[0].replica_type == "chief"


def test_a_peer_lost_exit_waits_for_the_peer_still_reported_running_then_is_the_cause() -> None:
    j = parameter_server_job()
    chief = pod(j, 0, 0, "chief").exited(170, at_seconds=10).obj()
    live = [pod(j, 0).running().obj(), pod(j, 1).running().obj(), pod(j, 0, 0, "ps").running().obj()]
    held = decide(j, [chief, *live], now=at(12))
    assert held.status.history == () and held.status.attempt == 0 and held.pods_to_delete == ()
    assert held.requeue_after == pytest.approx(10 + PEER_LOST_HOLD_SECONDS - 12)
    # The parameter server's end comes in, stamped before the chief's: it is the cause.
    ps = pod(j, 0, 0, "ps").exited(137, at_seconds=9).obj()
    record = decide(j, [chief, *live[:2], ps], now=at(13)).status.history[0]
    assert (record.replica_type, record.exit_code) == ("ps", 137)
    # Nothing came (the peer's node lost, say): once the hold is over the chief is named.
    record = decide(j, [chief, *live], now=at(10 + PEER_LOST_HOLD_SECONDS)).status.history[0]
    assert (record.replica_type, record.cause) == ("chief", "PeerLost")


def test_a_parameter_server_worker_that_lost_its_server_is_not_replaced_alone_before_the_server_is_seen() -> (
    None
):
    j = parameter_server_job()
    chief, ps = pod(j, 0, 0, "chief").running().obj(), pod(j, 0, 0, "ps").running().obj()
    worker = pod(j, 1).exited(170, at_seconds=10).obj()
    held = decide(j, [chief, pod(j, 0).running().obj(), worker, ps], now=at(11))
    assert held.status.replacing == () and held.status.history == ()
    ps = pod(j, 0, 0, "ps").exited(137, at_seconds=10).obj()
    restart = decide(j, [chief, pod(j, 0).running().obj(), worker, ps], now=at(11))
    assert (restart.status.attempt, restart.status.replacing) == (1, ())
    assert restart.status.history[0].replica_type == "ps"


@pytest.mark.parametrize(
    "others",
    [
        pytest.param(lambda j: [pod(j, 1).exited(143, at_seconds=13).obj()], id="the peer ended after it"),
        pytest.param(lambda j: [pod(j, 1).running().deleting(45).obj()], id="the peer going since 15 s"),
    ],
)
def test_a_peer_lost_exit_waits_for_no_one_when_no_peer_reads_live(others: Any) -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).exited(170, at_seconds=10).obj(), *others(j)], now=at(11))
    assert decision.status.history[0].worker == 0 and decision.status.attempt == 1


def test_an_evaluator_is_no_peer_a_peer_lost_exit_waits_for() -> None:
    j = job().evaluator().launched(phase="Running").obj()
    pods = [
        pod(j, 0).exited(170, at_seconds=10).obj(),
        pod(j, 1).exited(143, at_seconds=13).obj(),
        pod(j, 0, 0, "evaluator").running().obj(),
    ]
    assert decide(j, pods, now=at(11)).status.history[0].worker == 0


@pytest.mark.parametrize(
    "stamped",
    ["9999-12-31T23:59:59Z", "2026-01-01T12:03:31Z", None],
    ids=["year 9999", "200 s ahead", "no finishedAt"],
)
def test_a_peer_lost_end_stamped_ahead_of_the_operators_clock_holds_nothing(stamped: str | None) -> None:
    # A supervisor's report is a file on the tenant's volume, and a node's clock may run
    # minutes fast: no hold may last longer than PEER_LOST_HOLD_SECONDS from now. An end with
    # no time is not waited on either.
    j = job().launched(phase="Running").obj()
    ahead = pod(j, 0).exited(170).obj()
    terminated = ahead["status"]["containerStatuses"][0]["state"]["terminated"]
    if stamped is None:
        del terminated["finishedAt"]
    else:
        terminated["finishedAt"] = stamped
    decision = decide(j, [ahead, pod(j, 1).running().obj()], now=at(11))
    assert decision.status.history[0].cause == "PeerLost" and decision.status.attempt == 1


def test_a_peer_lost_exit_yields_to_a_programs_own_error_only_within_its_second() -> None:
    # Under ExitCode an exit 1 fails the job: one stamped a second after the 170 ended after
    # it (the same broken collective, taken uncaught), and the 170's restart stands.
    j = job().workers(3).run_policy(restartPolicy="ExitCode").launched(phase="Running").obj()
    noticer, live = pod(j, 0).exited(170, at_seconds=10).obj(), pod(j, 2).running().obj()
    after = decide(j, [noticer, pod(j, 1).exited(1, at_seconds=11).obj(), live], now=at(16))
    assert (after.status.phase, after.status.history[0].worker) == ("Restarting", 0)
    # The same second: which came first is not known, and the 170 says it is not the cause.
    tie = decide(j, [noticer, pod(j, 1).exited(1, at_seconds=10).obj(), live], now=at(16))
    assert (tie.status.phase, tie.status.history[0].worker) == ("Failed", 1)


def test_a_peer_being_taken_away_whose_exit_is_awaited_is_waited_for() -> None:
    # Its program got SIGTERM and may save and exit 42: a rule of the job's own rules on it.
    j = job().rules({"action": "RestartNotCounted", "onExitCodes": [42]}).launched(phase="Running").obj()
    noticer, going = pod(j, 0).exited(170, at_seconds=10).obj(), pod(j, 1).running().deleting(45).obj()
    held = decide(j, [noticer, going], now=at(11))
    assert held.status.history == () and held.requeue_after == pytest.approx(4)
    saved = pod(j, 1).exited(42, at_seconds=10).deleting(45).obj()
    restart = decide(j, [noticer, saved], now=at(12))
    record = restart.status.history[0]
    assert (record.worker, record.exit_code, restart.status.restarts) == (1, 42, 0)


def test_a_peer_on_a_node_reported_lost_is_not_waited_for() -> None:
    # Its kubelet will report nothing more: the 170 is judged at once (the lost node is found
    # behind it while the old pods go: lost_node_behind).
    j = job().launched(phase="Running").obj()
    pods = [pod(j, 0).on_node("node-a").exited(170, at_seconds=10).obj(), pod(j, 1).node_not_ready(5).obj()]
    decision = decide(j, pods, now=at(11))
    assert decision.status.history[0].cause in ("PeerLost", "NodeLost") and decision.status.attempt == 1
