"""runPolicy.progressDeadlineSeconds: the rule (judge_progress) and what reconcile does with it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import Condition, ConditionType, JobStatus
from tfmw_operator.core.decision import Decision, DeletePods
from tfmw_operator.core.policies.progress_deadline import (
    AWAITING_PROGRESS,
    NO_PROGRESS_REPORTED,
    PROGRESS_ADVANCING,
    PROGRESS_STALLED,
    judge_progress,
    stalled_by_progress,
)
from tfmw_operator.core.progress import ProgressReport
from wrappers import at, decide, job, pod

Json = dict[str, Any]
DEADLINE = 60


def running_job(attempt: int = 0, **policy: Any) -> Json:
    """A job whose gang of `attempt` has run since T0, watched with a 60 s deadline."""
    return (
        job()
        .run_policy(progressDeadlineSeconds=DEADLINE, **policy)
        .launched(attempt=attempt, phase="Running")
        .condition("Running", True, "AllWorkersRunning")
        .obj()
    )


def pods(j: Json, attempt: int = 0) -> list[Json]:
    return [pod(j, i, attempt).running().obj() for i in range(2)]


def report(written: float, epoch: int, attempt: int = 0, **fields: Any) -> ProgressReport:
    return ProgressReport(
        updated_at=at(written), epoch=epoch, total_epochs=10, job_uid="uid-mnist", attempt=attempt, **fields
    )


def step(j: Json, now: float, progress: ProgressReport | None, attempt: int = 0) -> Decision:
    """Decide at `now`, and carry the decided status into `j` as the API server would."""
    decision = decide(j, pods(j, attempt), progress=progress, now=at(now))
    j["status"] = decision.status.to_json()
    return decision


def stalled(decision: Decision) -> tuple[bool, str, str]:
    found = decision.status.condition(ConditionType.STALLED)
    assert found is not None, decision.status.conditions
    return found.true, found.reason, found.message


def reasons(decision: Decision) -> list[str]:
    return [e.reason for e in decision.events]


# ---- the rule alone ----


def judged(j: Json, now: datetime) -> Any:
    return judge_progress(parse_job(j), JobStatus.from_json(j.get("status")), now)


def test_without_a_deadline_or_a_running_gang_the_rule_does_not_apply() -> None:
    plain = job().launched(phase="Running").condition("Running", True).obj()
    assert judged(plain, at(1000)) is None
    restarting = job().run_policy(progressDeadlineSeconds=10).launched(phase="Restarting").obj()
    assert judged(restarting, at(1000)) is None


def test_a_job_that_never_reported_progress_is_never_stalled_and_the_condition_says_why() -> None:
    j = running_job()
    verdict = judged(j, at(100_000))
    assert not verdict.stalled and verdict.reason == NO_PROGRESS_REPORTED and verdict.wake_at is None
    assert "progressDeadlineSeconds=60 is not enforced" in verdict.message
    assert "TFMW_PROGRESS_PATH" in verdict.message
    decision = step(j, 100_000, None)
    assert stalled(decision)[:2] == (False, NO_PROGRESS_REPORTED)  # listed though never True
    assert decision.status.phase == "Running" and decision.status.restarts == 0


# ---- through reconcile ----


def test_advancing_progress_keeps_the_job_running_and_wakes_it_at_the_deadline() -> None:
    j = running_job()
    first = step(j, 20, report(19, 3))
    assert stalled(first)[:2] == (False, PROGRESS_ADVANCING)
    assert "epoch 3/10" in stalled(first)[2] and "2026-01-01T12:01:20Z" in stalled(first)[2]
    assert first.requeue_after == pytest.approx(60)
    later = step(j, 70, report(69, 4))  # a new epoch: the clock starts again
    assert stalled(later)[:2] == (False, PROGRESS_ADVANCING)
    assert later.status.progress is not None and later.status.progress.advanced_at == at(70)
    assert later.requeue_after == pytest.approx(60)


def test_the_same_figures_written_again_do_not_reset_the_clock() -> None:
    j = running_job(progressDeadlinePolicy="Report")
    step(j, 20, report(19, 3))
    again = step(j, 50, report(49, 3))  # a heartbeat with the same epoch
    assert again.status.progress is not None and again.status.progress.advanced_at == at(20)
    assert again.requeue_after == pytest.approx(30)


def test_report_sets_stalled_with_since_when_and_the_last_progress_and_nothing_else() -> None:
    j = running_job(progressDeadlinePolicy="Report")
    step(j, 20, report(19, 3, metrics=(("loss", 0.25),)))
    decision = step(j, 80, None)
    true, reason, message = stalled(decision)
    assert true and reason == PROGRESS_STALLED
    assert (
        "no progress since 2026-01-01T12:00:20Z, for longer than progressDeadlineSeconds=60 (1m)" in message
    )
    assert "epoch 3/10 (loss=0.25), written at 2026-01-01T12:00:19Z in attempt 0" in message
    assert reasons(decision) == ["ProgressStalled"]
    assert decision.status.phase == "Running" and decision.status.restarts == 0
    assert not any(isinstance(a, DeletePods) for a in decision.actions)
    assert stalled_by_progress(decision.status) is True
    # Said once; the condition's time stays when nothing changes.
    again = step(j, 90, None)
    assert reasons(again) == [] and again.status.conditions == decision.status.conditions
    # Progress moves again: no longer stalled.
    moved = step(j, 95, report(94, 4))
    assert stalled(moved)[:2] == (False, PROGRESS_ADVANCING)
    assert stalled_by_progress(moved.status) is False


def test_restart_is_a_gang_restart_counted_against_backoff_limit_and_recorded() -> None:
    j = running_job()
    step(j, 20, report(19, 3))
    decision = step(j, 80, None)
    status = decision.status
    assert status.phase == "Restarting" and status.attempt == 1 and status.restarts == 1
    restarting = status.condition(ConditionType.RESTARTING)
    assert restarting is not None and restarting.true and restarting.reason == PROGRESS_STALLED
    assert status.message is not None and status.message.startswith("gang restart 1/3: no progress since")
    assert reasons(decision) == ["ProgressStalled", "GangRestart"]
    assert sorted(decision.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]
    (record,) = status.history
    assert (record.attempt, record.outcome, record.cause, record.epoch) == (
        0,
        "Restarted",
        "ProgressStalled",
        3,
    )
    assert record.worker is None and record.logs == "default/mnist/logs/attempt-0/"


def test_restart_past_backoff_limit_fails_the_job() -> None:
    j = running_job(backoffLimit=1)
    j["status"]["restarts"] = 1
    step(j, 20, report(19, 3))
    decision = step(j, 80, None)
    assert decision.status.phase == "Failed" and decision.status.reason == "BackoffLimitExceeded"
    assert decision.status.message is not None and "backoffLimit 1 reached" in decision.status.message
    assert decision.status.history[0].cause == "ProgressStalled"


def test_fail_ends_the_job_with_reason_progress_stalled() -> None:
    j = running_job(progressDeadlinePolicy="Fail")
    step(j, 20, report(19, 3))
    decision = step(j, 80, None)
    assert decision.status.phase == "Failed" and decision.status.reason == PROGRESS_STALLED
    assert decision.status.history[0].outcome == "Failed"
    assert "ProgressStalled" in reasons(decision)


def test_the_next_attempt_is_timed_from_when_its_workers_all_ran() -> None:
    j = running_job()
    step(j, 20, report(19, 3))
    restarted = step(j, 80, None)
    assert restarted.status.attempt == 1
    # The new gang starts (the old pods are gone) and runs at 100.
    launched = decide(j, [], now=at(90))
    j["status"] = launched.status.to_json()
    new_pods = [pod(j, i, 1).created(90).running().obj() for i in range(2)]
    running = decide(j, new_pods, now=at(100))
    j["status"] = running.status.to_json()
    true, reason, message = stalled(running)
    assert (true, reason) == (False, AWAITING_PROGRESS)
    assert "the last before it was epoch 3/10" in message and "2026-01-01T12:02:40Z" in message
    # No report by 160: stalled again, though attempt 1 never wrote one.
    again = decide(j, new_pods, now=at(160))
    assert again.status.attempt == 2 and again.status.restarts == 2
    assert "attempt 1 has reported none since all its workers ran" in (again.status.message or "")
    # Its first report in time starts its own clock.
    reported = decide(j, new_pods, progress=report(120, 4, attempt=1), now=at(121))
    assert stalled(reported)[:2] == (False, PROGRESS_ADVANCING)


def test_a_suspended_job_is_not_judged_and_a_resumed_one_is_timed_afresh() -> None:
    j = running_job()
    step(j, 20, report(19, 3))
    j["spec"]["runPolicy"]["suspend"] = True
    suspended = decide(j, pods(j), now=at(500))
    assert suspended.status.phase == "Suspended" and suspended.status.restarts == 0
    assert suspended.status.history[0].cause == "Suspended"
    j["status"] = suspended.status.to_json()
    j["spec"]["runPolicy"]["suspend"] = False
    resumed = decide(j, [], now=at(1000))
    assert resumed.status.attempt == 1 and resumed.status.restarts == 0
    j["status"] = resumed.status.to_json()
    running = decide(j, [pod(j, i, 1).running().obj() for i in range(2)], now=at(1010))
    assert running.status.phase == "Running" and stalled(running)[:2] == (False, AWAITING_PROGRESS)
    assert running.requeue_after == 0  # decided again at once, to read what was written while Pending
    j["status"] = running.status.to_json()
    again = decide(j, [pod(j, i, 1).running().obj() for i in range(2)], now=at(1010))
    assert again.requeue_after == pytest.approx(60)


def test_a_stuck_pending_worker_keeps_its_own_reason() -> None:
    """The pending rule and the progress rule share the Stalled type, never a reason."""
    j = job().run_policy(progressDeadlineSeconds=DEADLINE).launched().obj()
    stuck = [pod(j, 0).running().obj(), pod(j, 1).waiting("ImagePullBackOff", "no such image").obj()]
    decision = decide(j, stuck, now=at(500))
    assert stalled(decision)[:2] == (True, "ImagePullBackOff")
    assert stalled_by_progress(decision.status) is None


@pytest.mark.parametrize(
    ("true", "reason", "gauge"),
    [(True, PROGRESS_STALLED, True), (False, PROGRESS_STALLED, False), (True, PROGRESS_ADVANCING, False)],
)
def test_the_stalled_gauge_needs_the_condition_true_for_want_of_progress(
    true: bool, reason: str, gauge: bool
) -> None:
    # The status is read back from the job, where anyone may have written a condition.
    status = JobStatus(conditions=(Condition("Stalled", true, reason, "", "2026-01-01T12:00:00Z"),))
    assert stalled_by_progress(status) is gauge
