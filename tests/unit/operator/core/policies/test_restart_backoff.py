"""Gang restarts back off (policies/restart_backoff.py) when they come in a row of attempts
that did not train: the first starts at once, then 10 s, 20 s, 40 s ... up to 5 minutes
after the Restarting condition turned true. An attempt that trained starts the count again."""

from __future__ import annotations

import pytest
from tfmw_operator.api.status import AttemptRecord, Checkpoint, Condition, JobStatus
from tfmw_operator.api.times import format_time
from tfmw_operator.core.policies.restart_backoff import judge_restart_backoff, untrained_restarts
from tfmw_operator.core.policies.verdicts import WakeAt
from wrappers import at


def ended(
    attempt: int,
    outcome: str = "Restarted",
    step: int | None = None,
    ran: float = 30.0,
    cause: str = "Error",
    **checkpoint: object,
) -> AttemptRecord:
    """Attempt `attempt`, ended at T0 after `ran` seconds; its checkpoint at `step`, if any."""
    saved = Checkpoint(step=step, **checkpoint) if step is not None or checkpoint else None  # type: ignore[arg-type]
    return AttemptRecord(
        attempt=attempt, outcome=outcome, cause=cause, end_time=at(0), start_time=at(-ran), checkpoint=saved
    )


def restarting(*history: AttemptRecord, true: bool = True) -> JobStatus:
    """Restarting since T0, after the attempts of `history` (the latest first)."""
    condition = Condition("Restarting", true, "WorkerFailed", "", format_time(at(0)))
    return JobStatus(restarts=len(history), conditions=(condition,), history=history)


def crash_loop(restarts: int) -> tuple[AttemptRecord, ...]:
    """`restarts` attempts, none of which trained to a checkpoint."""
    return tuple(ended(a) for a in reversed(range(restarts)))


@pytest.mark.parametrize(
    ("restarts", "wait"), [(2, 10), (3, 20), (4, 40), (5, 80), (6, 160), (7, 300), (10, 300)]
)
def test_each_restart_in_a_crash_loop_waits_twice_as_long_up_to_five_minutes(
    restarts: int, wait: float
) -> None:
    status = restarting(*crash_loop(restarts))
    assert judge_restart_backoff(status, at(0)) == WakeAt(at(wait))
    assert judge_restart_backoff(status, at(wait - 1)) == WakeAt(at(wait))
    assert judge_restart_backoff(status, at(wait)) is None


def test_the_first_restart_starts_at_once_and_evictions_count_too() -> None:
    assert judge_restart_backoff(restarting(ended(0)), at(0)) is None
    evicted = restarting(ended(1, cause="Preempted"), ended(0))
    assert judge_restart_backoff(evicted, at(0)) == WakeAt(at(10))
    assert judge_restart_backoff(restarting(*crash_loop(5), true=False), at(0)) is None


def test_an_attempt_whose_checkpoint_moved_on_starts_the_count_again() -> None:
    # The goodput bench's second fault: attempt 1 trained from step 600 to 1193, then lost a pod.
    trained = restarting(ended(1, step=1193), ended(0, step=600))
    assert untrained_restarts(trained.history) == 0
    assert judge_restart_backoff(trained, at(0)) is None
    # Behind it, a crash loop counts only the attempts after the one that trained on.
    again = restarting(ended(3, step=1193), ended(2, step=1193), ended(1, step=1193), ended(0, step=600))
    assert untrained_restarts(again.history) == 2
    assert judge_restart_backoff(again, at(0)) == WakeAt(at(10))
    # The first attempt's first checkpoint is training too; none at all is not.
    assert untrained_restarts((ended(0, step=1),)) == 0
    assert untrained_restarts((ended(1), ended(0))) == 2


def test_a_checkpoint_by_epoch_or_by_path_alone_moves_on_too() -> None:
    assert untrained_restarts((ended(1, epoch=3), ended(0, epoch=2))) == 0
    assert untrained_restarts((ended(1, epoch=2), ended(0, epoch=2))) == 1
    assert untrained_restarts((ended(1, path="ckpt-2"), ended(0, path="ckpt-1"))) == 0
    assert untrained_restarts((ended(1, path="ckpt-1"), ended(0, path="ckpt-1"))) == 1
    assert untrained_restarts((ended(1, step=50), ended(0, step=100))) == 1  # behind: not training


def test_an_attempt_that_ran_ten_minutes_starts_the_count_again() -> None:
    assert untrained_restarts((ended(1, ran=600), ended(0, ran=600))) == 0
    assert untrained_restarts((ended(2, ran=599), ended(1, ran=599), ended(0, ran=600))) == 2
    no_start = AttemptRecord(attempt=1, outcome="Restarted", cause="Error", end_time=at(0))
    assert untrained_restarts((no_start, ended(0))) == 2


def test_a_pod_restarted_alone_is_skipped_and_a_failed_or_suspended_attempt_ends_the_row() -> None:
    replaced = ended(2, outcome="Replaced", step=900)  # its checkpoint is not the gang's resume point
    assert untrained_restarts((ended(3, step=100), replaced, ended(1, step=100), ended(0, step=100))) == 2
    assert untrained_restarts((ended(2), ended(1, outcome="Suspended"), ended(0))) == 1
    assert untrained_restarts((ended(2), ended(1, outcome="Failed"), ended(0))) == 1


def test_a_checkpoint_moved_on_within_ten_seconds_is_no_proof_of_training() -> None:
    # The checkpoint is the chief's word: a program that claims one on every start of a crash
    # loop restarts at most once per 10 s of running.
    assert untrained_restarts((ended(2, step=300, ran=9), ended(1, step=200, ran=9), ended(0, ran=9))) == 3
    assert untrained_restarts((ended(2, step=300, ran=10), ended(1, step=200, ran=9), ended(0, ran=9))) == 0


def test_the_oldest_entry_left_counts_as_trained_only_by_its_run_time() -> None:
    # Attempt 7's predecessor fell out of the bounded history: its checkpoint proves nothing.
    assert untrained_restarts((ended(8), ended(7, step=900))) == 2
    assert untrained_restarts((ended(8), ended(7, step=900, ran=600))) == 1
    assert untrained_restarts((ended(1), ended(0, step=900))) == 1  # attempt 0 resumed from nothing
