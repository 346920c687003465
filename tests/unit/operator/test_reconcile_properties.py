"""Properties of the reconcile core over arbitrary observed states (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tfmw_operator.observed import MarkerState, observe_pod
from tfmw_operator.reconcile import Observed, reconcile
from wrappers import at, job, pod

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
    observed = [p for p in map(observe_pod, pods) if p is not None]
    return Observed(j, observed, marker, at(draw(st.integers(0, 200))))


@settings(max_examples=3000, deadline=None)
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


@settings(max_examples=1000, deadline=None)
@given(observed_states())
def test_decisions_are_deterministic_and_status_is_complete(obs: Observed) -> None:
    first, second = reconcile(obs), reconcile(obs)
    assert first == second
    old_phase = (obs.job.get("status") or {}).get("phase")
    if first.status is not None:
        phase = first.status["phase"]
        assert phase in {"Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"}
        if phase == "Failed" and old_phase != "Failed":
            assert first.status["reason"] and first.status["message"]
