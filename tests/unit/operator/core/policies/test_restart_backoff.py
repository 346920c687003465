"""Gang restarts back off (policies/restart_backoff.py): the first starts at once, then
10 s, 20 s, 40 s ... up to 5 minutes after the Restarting condition turned true."""

from __future__ import annotations

import pytest
from tfmw_operator.api.status import Condition, JobStatus
from tfmw_operator.api.times import format_time
from tfmw_operator.core.policies.restart_backoff import judge_restart_backoff
from tfmw_operator.core.policies.verdicts import WakeAt
from wrappers import at


def restarting(restarts: int, evictions: int = 0, true: bool = True) -> JobStatus:
    """Restarting since T0 after `restarts` counted restarts."""
    condition = Condition("Restarting", true, "WorkerFailed", "", format_time(at(0)))
    return JobStatus(restarts=restarts, evictions=evictions, conditions=(condition,))


@pytest.mark.parametrize(
    ("restarts", "wait"), [(2, 10), (3, 20), (4, 40), (5, 80), (6, 160), (7, 300), (40, 300)]
)
def test_each_restart_waits_twice_as_long_up_to_five_minutes(restarts: int, wait: float) -> None:
    assert judge_restart_backoff(restarting(restarts), at(0)) == WakeAt(at(wait))
    assert judge_restart_backoff(restarting(restarts), at(wait - 1)) == WakeAt(at(wait))
    assert judge_restart_backoff(restarting(restarts), at(wait)) is None


def test_the_first_restart_starts_at_once_and_evictions_count_too() -> None:
    assert judge_restart_backoff(restarting(1), at(0)) is None
    assert judge_restart_backoff(restarting(1, evictions=1), at(0)) == WakeAt(at(10))
    assert judge_restart_backoff(restarting(5, true=False), at(0)) is None
