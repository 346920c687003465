"""Properties of the reconcile core over arbitrary observed states (hypothesis)."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import AttemptRecord, Phase
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.decision import DeletePods
from tfmw_operator.core.observed import MarkerState, Observed
from tfmw_operator.core.reconcile import reconcile
from wrappers import at, job, observe, pod

# Mutation testing runs these once per mutant; it sets a smaller number.
EXAMPLES = int(os.environ.get("TFMW_HYPOTHESIS_EXAMPLES", "1000"))

PHASES = ["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed", None]


@st.composite
def observed_states(draw: st.DrawFn) -> Observed:
    workers = draw(st.integers(1, 4))
    attempt = draw(st.integers(0, 3))
    builder = (
        job()
        .workers(workers)
        .run_policy(
            restartPolicy=draw(st.sampled_from(["Never", "OnFailure", "ExitCode"])),
            backoffLimit=draw(st.integers(0, 4)),
            suspend=draw(st.booleans()),
            pendingTimeoutSeconds=draw(st.sampled_from([None, 30])),
        )
    )
    phase = draw(st.sampled_from(PHASES))
    if phase is not None:
        builder.status(
            phase=phase,
            attempt=attempt,
            restarts=draw(st.integers(0, attempt)),
            startTime="2026-01-01T12:00:00Z",
        )
        launched = draw(st.sampled_from([None, attempt, max(0, attempt - 1)]))
        if launched is not None:
            builder.status(launchedAttempt=launched)
    j = builder.obj()
    pods: list[dict[str, Any]] = []
    for index in range(workers):
        for pod_attempt in draw(st.sets(st.integers(0, 3), max_size=1)):
            wrapper = pod(j, index, pod_attempt)
            state = draw(st.sampled_from(["pending", "running", "ok", "fail1", "fail137", "unsched"]))
            if state == "running":
                wrapper.running()
            elif state == "ok":
                wrapper.exited(0)
            elif state == "fail1":
                wrapper.exited(1)
            elif state == "fail137":
                wrapper.exited(137)
            elif state == "unsched":
                wrapper.unschedulable()
            if draw(st.booleans()):
                wrapper.deleting()
            pods.append(wrapper.obj())
    marker = draw(
        st.sampled_from([MarkerState(), MarkerState(True, "uid-mnist", at(1)), MarkerState(True, None)])
    )
    return observe(j, pods, marker, at(draw(st.integers(0, 200))), service=build_service(parse_job(j)))


@settings(max_examples=3 * EXAMPLES, deadline=None)
@given(observed_states())
def test_never_two_pods_with_one_index_nor_a_new_attempt_beside_an_old_pod(obs: Observed) -> None:
    decision = reconcile(obs)
    new_pods = decision.pods_to_create
    if not new_pods:
        return
    labels = [p["metadata"]["labels"] for p in new_pods]
    attempts = {int(label["tfmw.dev/attempt"]) for label in labels}
    assert len(attempts) == 1, "one decision creates pods of one attempt only"
    attempt = attempts.pop()
    indices = [int(label["tfmw.dev/replica-index"]) for label in labels]
    assert len(indices) == len(set(indices)), "an index created twice"
    existing = {p.index for p in obs.pods if p.attempt == attempt}
    assert not existing & set(indices), "an index created beside its existing pod"
    assert all(p.attempt == attempt for p in obs.pods), "new attempt while an older pod exists"


@settings(max_examples=EXAMPLES, deadline=None)
@given(observed_states())
def test_decisions_are_deterministic_and_status_is_complete(obs: Observed) -> None:
    first, second = reconcile(obs), reconcile(obs)
    assert first == second
    if first.status.phase is Phase.FAILED and obs.status.phase is not Phase.FAILED:
        assert first.status.reason and first.status.message


# The general strategy above reaches a gang restart in progress or a Failed ending only
# now and then; these two build those states on purpose, so every example exercises them.


@st.composite
def restarts_in_progress(draw: st.DrawFn) -> Observed:
    """Attempt `a` is recorded but its pods not launched; pods of earlier attempts remain,
    some on nodes reported lost; the attempt before may be in the history, a peer's exit."""
    workers = draw(st.integers(1, 4))
    attempt = draw(st.integers(1, 3))
    builder = (
        job()
        .workers(workers)
        .launched(attempt=attempt - 1, phase=draw(st.sampled_from(["Restarting", "Pending", "Running"])))
        .status(attempt=attempt, restarts=attempt)
    )
    cause = draw(st.sampled_from([None, "Error", "OOMKilled"]))
    if cause is not None:
        worker = draw(st.integers(0, workers - 1))
        record = AttemptRecord(attempt - 1, "Restarted", cause, at(5), worker=worker, exit_code=170)
        builder.status(history=[record.to_json()])
    j = builder.obj()
    pods = []
    for index in draw(st.sets(st.integers(0, workers - 1), min_size=1)):
        wrapper = pod(j, index, draw(st.integers(0, attempt - 1)))
        state = draw(st.sampled_from(["pending", "running", "failed", "lost"]))
        if state == "running":
            wrapper.running()
        elif state == "failed":
            wrapper.exited(137)
        elif state == "lost":
            wrapper.node_not_ready(at_seconds=draw(st.integers(-10, 300)))
        if draw(st.booleans()):
            wrapper.deleting()
        pods.append(wrapper.obj())
    old = {int(p["metadata"]["labels"]["tfmw.dev/replica-index"]) for p in pods}
    for index in draw(st.sets(st.integers(0, workers - 1), max_size=workers)) - old:
        pods.append(pod(j, index, attempt).obj())  # names are unique: only where no old pod is
    return observe(j, pods, MarkerState(), at(draw(st.integers(0, 200))), service=build_service(parse_job(j)))


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(restarts_in_progress())
def test_no_new_pod_while_an_old_one_remains_and_each_old_one_is_deleted_once(obs: Observed) -> None:
    decision = reconcile(obs)
    assert decision.pods_to_create == ()
    old = {p.name for p in obs.pods if p.attempt != obs.status.attempt and not p.deleting}
    assert set(decision.pods_to_delete) >= old
    assert len(decision.pods_to_delete) == len(set(decision.pods_to_delete))
    forced = {n for a in decision.actions if isinstance(a, DeletePods) and a.force for n in a.names}
    gentle = set(decision.pods_to_delete) - forced
    assert not any(p.deleting and p.name in gentle for p in obs.pods), "a pod already going deleted again"
    for p in obs.pods:
        overdue = p.deleting_since is not None and obs.now >= p.deleting_since + timedelta(
            seconds=p.grace_seconds + 60
        )
        assert (p.name in forced) == (p.deleting and (overdue or p.node_lost)), (
            f"{p.name}: forced deletion is for stuck pods and those on lost nodes only"
        )


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(restarts_in_progress())
def test_a_second_look_amends_only_a_peers_exit_only_to_a_lost_node_and_only_once(obs: Observed) -> None:
    first = reconcile(obs)
    before, after = obs.status.history, first.status.history
    if before != after:
        assert (before[0].cause, after[0].cause, after[1:]) == ("Error", "NodeLost", before[1:])
        assert (after[0].attempt, after[0].end_time) == (before[0].attempt, before[0].end_time)
        lost = {p.index for p in obs.pods if p.node_lost and p.attempt == before[0].attempt}
        assert after[0].worker in lost - {before[0].worker}
    # Decided again from what it wrote (the operator restarted, the pods as they were).
    again = reconcile(dataclasses.replace(obs, status=first.status))
    assert again.status == first.status
    assert not any(e.reason == "RootCauseFound" for e in again.events)


@st.composite
def launched_with_a_failure(draw: st.DrawFn) -> Observed:
    workers = draw(st.integers(1, 4))
    restarts = draw(st.integers(0, 3))
    j = (
        job()
        .workers(workers)
        .run_policy(
            restartPolicy=draw(st.sampled_from(["Never", "OnFailure", "ExitCode"])),
            backoffLimit=draw(st.integers(0, 4)),
        )
        .launched(attempt=restarts, phase="Running", restarts=restarts)
        .obj()
    )
    failed = draw(st.integers(0, workers - 1))
    pods = []
    for index in range(workers):
        wrapper = pod(j, index, restarts)
        if index == failed:
            code = draw(st.sampled_from([1, 2, 127, 128, 137, 143]))
            wrapper.exited(code, at_seconds=draw(st.integers(0, 10)), message="Traceback\nValueError: x")
        elif draw(st.booleans()):
            wrapper.exited(draw(st.sampled_from([0, 1, 137])), at_seconds=draw(st.integers(0, 10)))
        else:
            wrapper.running()
        pods.append(wrapper.obj())
    return observe(j, pods, MarkerState(), at(20), service=build_service(parse_job(j)))


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(launched_with_a_failure())
def test_a_failed_worker_ends_in_a_gang_restart_or_a_failure_that_names_it(obs: Observed) -> None:
    decision = reconcile(obs)
    status = decision.status
    assert decision.pods_to_create == ()
    assert status.phase in (Phase.RESTARTING, Phase.FAILED)
    assert status.message and "worker " in status.message and "exited with code" in status.message
    if status.phase is Phase.RESTARTING:
        assert status.attempt == obs.status.attempt + 1 and status.restarts == obs.status.restarts + 1
        assert status.restarts <= int(obs.job["spec"]["runPolicy"]["backoffLimit"])
        assert [type(a).__name__ for a in decision.actions] in (
            ["PatchStatus", "DeletePods"],
            ["PatchStatus"],
        )
    else:
        assert status.reason in ("WorkerFailed", "BackoffLimitExceeded")
        assert status.completion_time == obs.now
