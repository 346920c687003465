"""What the core decides when creating fails, and when reconciling itself keeps failing:
every class of error ends in a condition, a Warning and, in time, a phase; never a loop."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import ConditionType, Phase
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.decision import CreatePods, DeletePods, EnsureService, PatchStatus
from tfmw_operator.core.observed import CreatedObject, CreateError, CreateErrorKind, Observed
from tfmw_operator.core.reconcile import reconcile_failed
from tfmw_operator.kube.client import ApiError
from tfmw_operator.shell.creation import CreateRefused
from wrappers import at, decide, job, observe, pod

Json = dict[str, Any]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, CreateErrorKind.INVALID),
        (413, CreateErrorKind.INVALID),  # request entity too large: as written, never
        (422, CreateErrorKind.INVALID),
        (403, CreateErrorKind.FORBIDDEN),  # quota, Pod Security
        (429, CreateErrorKind.UNAVAILABLE),
        (500, CreateErrorKind.UNAVAILABLE),  # a fail-closed webhook that is down
        (503, CreateErrorKind.UNAVAILABLE),
    ],
)
def test_every_refusal_is_classed(status: int, kind: CreateErrorKind) -> None:
    refused = CreateRefused.of(ApiError(status, "x", b'{"message": "why"}'))
    assert refused is not None and refused.kind is kind and refused.message == "why"


def test_a_conflict_or_a_missing_namespace_is_not_a_refusal() -> None:
    assert CreateRefused.of(ApiError(409, "Conflict")) is None
    assert CreateRefused.of(ApiError(404, "Not Found")) is None


def refused(kind: CreateErrorKind, what: CreatedObject, failures: int = 1, since: float = 10) -> CreateError:
    return CreateError(kind, "exceeded quota: services=0", failures, at(since), what, at(since))


def test_a_refused_service_stalls_the_job_with_its_reason_and_creates_no_pods() -> None:
    error = refused(CreateErrorKind.FORBIDDEN, CreatedObject.SERVICE, since=19)  # backing off until 21 s
    decision = decide(job().obj(), create_error=error, service=None)
    stalled = decision.status.condition(ConditionType.STALLED)
    assert stalled is not None and stalled.reason == "ServiceCreationRefused"
    assert "Service mnist" in stalled.message and "services=0" in stalled.message
    assert decision.status.phase is Phase.PENDING and decision.status.start_time == at(20)
    assert not any(isinstance(a, CreatePods | EnsureService) for a in decision.actions)
    assert [e.reason for e in decision.events] == ["ServiceCreationRefused", "Pending"]


def test_a_first_launch_sends_its_service_beside_its_first_pod_until_something_is_refused() -> None:
    def beside(decision_of: Any) -> list[bool]:
        return [a.beside_first_pod for a in decision_of.actions if isinstance(a, EnsureService)]

    assert beside(decide(job().obj(), service=None)) == [True]
    error = refused(CreateErrorKind.FORBIDDEN, CreatedObject.PODS, since=0)  # retried from 1 s
    assert beside(decide(job().obj(), create_error=error, service=None)) == [False]
    # A restart's Service, gone meanwhile: its pods are the template's second, sent after it.
    restarting = job().launched(phase="Restarting").status(attempt=1).obj()
    assert beside(decide(restarting, service=None)) == [False]


def test_the_pod_sent_beside_a_refused_service_is_deleted_at_once_and_nothing_launched() -> None:
    j = job().obj()
    error = refused(CreateErrorKind.FORBIDDEN, CreatedObject.SERVICE, since=19)
    decision = decide(j, [pod(j, 0).obj()], create_error=error, service=None)
    deletions = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert [(d.names, d.grace_seconds, d.keep_logs) for d in deletions] == [(("mnist-worker-0",), 0, False)]
    assert not any(isinstance(a, CreatePods | EnsureService) for a in decision.actions)
    assert decision.status.launched_attempt is None and decision.status.phase is Phase.PENDING
    stalled = decision.status.condition(ConditionType.STALLED)
    assert stalled is not None and stalled.reason == "ServiceCreationRefused"


def test_a_retry_waits_for_the_withdrawn_pod_to_be_gone() -> None:
    j = job().obj()
    error = refused(CreateErrorKind.FORBIDDEN, CreatedObject.SERVICE, since=0)  # retry due at 2 s
    decision = decide(j, [pod(j, 0).deleting().obj()], create_error=error, service=None)
    assert not any(isinstance(a, CreatePods | EnsureService | DeletePods) for a in decision.actions)
    assert decision.status.launched_attempt is None


def test_the_pod_sent_beside_someone_elses_service_is_deleted_at_once() -> None:
    j = job().obj()
    theirs = job().obj()
    theirs["metadata"]["uid"] = "uid-someone-else"
    decision = decide(j, [pod(j, 0).obj()], service=build_service(parse_job(theirs)))
    deletions = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert [(d.names, d.grace_seconds) for d in deletions] == [(("mnist-worker-0",), 0)]
    assert not any(isinstance(a, CreatePods | EnsureService) for a in decision.actions)
    stalled = decision.status.condition(ConditionType.STALLED)
    assert stalled is not None and stalled.reason == "NameInUse"


def test_the_withdrawal_goes_before_the_status_write() -> None:
    # A status write that keeps failing (a conflict, a webhook that is down) must not keep a
    # pod running without its Service.
    j = job().obj()
    error = refused(CreateErrorKind.FORBIDDEN, CreatedObject.SERVICE, since=19)
    decision = decide(j, [pod(j, 0).obj()], create_error=error, service=None)
    kinds = [type(a) for a in decision.actions]
    assert kinds.index(DeletePods) < kinds.index(PatchStatus)


def test_a_first_launch_waits_for_any_pod_of_its_attempt_still_going() -> None:
    # Whatever deleted it (a withdrawal whose reason an operator restart forgot), a pod that is
    # going would be counted present and then lost: a failure of the attempt just launched.
    j = job(workers=2).obj()
    decision = decide(j, [pod(j, 0).deleting().obj()], service=None)
    assert not any(isinstance(a, CreatePods | EnsureService) for a in decision.actions)
    assert decision.status.launched_attempt is None


def test_a_refusal_already_overcome_withdraws_nothing() -> None:
    # Refused once (or a 504 whose create was made after all), and the job's Service is there.
    j = job(workers=2).obj()
    error = refused(CreateErrorKind.UNAVAILABLE, CreatedObject.SERVICE, since=0)
    decision = decide(j, [pod(j, 0).obj()], create_error=error)
    assert not any(isinstance(a, DeletePods) for a in decision.actions)
    created = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert [m.stem for a in created for m in a.members] == ["worker-1"]


def test_no_pod_goes_beside_the_service_of_a_queued_job_or_where_one_is_there() -> None:
    def beside(decision_of: Any) -> list[bool]:
        return [a.beside_first_pod for a in decision_of.actions if isinstance(a, EnsureService)]

    queued = job().queue("team-a").obj()
    assert beside(decide(queued, service=None)) == [False]
    j = job(workers=2).obj()
    assert beside(decide(j, [pod(j, 0).obj()], service=None)) == [False]


def test_a_pod_is_deleted_once_in_a_decision() -> None:
    j = job().obj()
    error = refused(CreateErrorKind.INVALID, CreatedObject.SERVICE)  # fails the job, and withdraws
    decision = decide(j, [pod(j, 0).running().obj()], create_error=error, service=None)
    assert decision.status.phase is Phase.FAILED
    names = [n for a in decision.actions if isinstance(a, DeletePods) for n in a.names]
    assert names == ["mnist-worker-0"]


def test_a_launched_jobs_pods_are_never_withdrawn_for_its_service() -> None:
    j = job().launched(phase="Running").obj()
    error = refused(CreateErrorKind.FORBIDDEN, CreatedObject.SERVICE, since=19)
    decision = decide(
        j, [pod(j, 0).running().obj(), pod(j, 1).running().obj()], create_error=error, service=None
    )
    assert not any(isinstance(a, DeletePods) for a in decision.actions)


def test_an_invalid_service_fails_the_job() -> None:
    decision = decide(
        job().obj(), create_error=refused(CreateErrorKind.INVALID, CreatedObject.SERVICE), service=None
    )
    assert decision.status.phase is Phase.FAILED and decision.status.reason == "InvalidService"


def test_an_unavailable_server_is_waited_for_with_backoff() -> None:
    error = refused(CreateErrorKind.UNAVAILABLE, CreatedObject.PODS, failures=4)
    decision = decide(job().obj(), create_error=error)
    assert decision.requeue_after == pytest.approx(6.0)  # 2**4 s after the last refusal at 10 s
    assert decision.status.phase is Phase.PENDING


def test_refusals_that_last_longer_than_the_pending_timeout_fail_the_job() -> None:
    j = job().run_policy(pendingTimeoutSeconds=60).obj()
    waiting = decide(
        j, create_error=refused(CreateErrorKind.FORBIDDEN, CreatedObject.PODS, since=0), now=at(59)
    )
    assert waiting.status.phase is Phase.PENDING
    done = decide(j, create_error=refused(CreateErrorKind.FORBIDDEN, CreatedObject.PODS, since=0), now=at(60))
    assert done.status.phase is Phase.FAILED and done.status.reason == "PendingTimeout"
    assert "exceeded quota" in (done.status.message or "")


def test_the_active_deadline_runs_while_creation_is_refused() -> None:
    j = (
        job()
        .run_policy(activeDeadlineSeconds=30)
        .status(phase="Pending", startTime="2026-01-01T12:00:00Z")
        .obj()
    )
    decision = decide(j, create_error=refused(CreateErrorKind.UNAVAILABLE, CreatedObject.SERVICE), now=at(31))
    assert decision.status.phase is Phase.FAILED and decision.status.reason == "DeadlineExceeded"


def observed(j: Json, pods: list[Json], now: float) -> Observed:
    from tfmw_operator.core.observed import MarkerState

    return observe(j, pods, MarkerState(), at(now))


def test_a_failing_reconcile_is_told_once_in_a_condition_and_a_warning() -> None:
    j = job().launched(phase="Running").obj()
    pods = [pod(j, i).running().obj() for i in range(2)]
    first = reconcile_failed(observed(j, pods, 20), "OverflowError: date value out of range")
    condition = first.status.condition(ConditionType.RECONCILE_ERROR)
    assert condition is not None and condition.true and "OverflowError" in condition.message
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "ReconcileError")]
    assert first.status.phase is Phase.RUNNING and not first.pods_to_delete
    again = reconcile_failed(observe(job().launched(phase="Running").status(
        conditions=[first.status.to_json()["conditions"][-1]]).obj(), pods, observed(j, pods, 30).marker, at(30)),
        "OverflowError: date value out of range")  # fmt: skip
    assert again.events == ()


def test_a_failing_reconcile_still_meets_its_deadlines() -> None:
    j = job().run_policy(activeDeadlineSeconds=60).launched(phase="Running").obj()
    pods = [pod(j, i).running().obj() for i in range(2)]
    waiting = reconcile_failed(observed(j, pods, 30), "RuntimeError: boom")
    assert waiting.requeue_after == pytest.approx(30.0)
    over = reconcile_failed(observed(j, pods, 61), "RuntimeError: boom")
    assert over.status.phase is Phase.FAILED and over.status.reason == "DeadlineExceeded"
    assert any(isinstance(a, DeletePods) for a in over.actions)


def test_a_failing_reconcile_still_meets_the_pending_timeout() -> None:
    j = job().run_policy(pendingTimeoutSeconds=30).launched(phase="Pending").obj()
    pods = [pod(j, i).created(0).obj() for i in range(2)]
    over = reconcile_failed(observed(j, pods, 31), "RuntimeError: boom")
    assert over.status.phase is Phase.FAILED and over.status.reason == "PendingTimeout"


def test_a_reconcile_that_goes_through_again_turns_the_condition_false() -> None:
    j = job().launched(phase="Running").condition("ReconcileError", True).obj()
    decision = decide(j, [pod(j, i).running().obj() for i in range(2)])
    condition = decision.status.condition(ConditionType.RECONCILE_ERROR)
    assert condition is not None and not condition.true and condition.reason == "Reconciled"


def test_a_job_that_never_failed_to_reconcile_has_no_such_condition() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, i).running().obj() for i in range(2)])
    assert decision.status.condition(ConditionType.RECONCILE_ERROR) is None
