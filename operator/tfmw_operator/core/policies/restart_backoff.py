"""Gang restarts back off: the first starts at once, later ones wait longer and longer, so
a job that keeps crashing, or that Kueue keeps evicting, does not churn the cluster. Pure."""

from __future__ import annotations

from datetime import datetime

from tfmw_operator.api.status import ConditionType, JobStatus
from tfmw_operator.api.times import later, parse_time
from tfmw_operator.core.policies.verdicts import WakeAt

RESTART_BACKOFF_SECONDS = 10.0
MAX_RESTART_BACKOFF = 300.0


def judge_restart_backoff(status: JobStatus, now: datetime) -> WakeAt | None:
    """When the next attempt may launch, if not yet; None: now."""
    restarts = status.restarts + status.evictions
    restarting = status.condition(ConditionType.RESTARTING)
    if restarts < 2 or restarting is None or not restarting.true:
        return None
    since = parse_time(restarting.last_transition_time)
    if since is None:
        return None
    # The exponent is held too: restarts comes from the job's status, which may say anything.
    ready_at = later(since, min(RESTART_BACKOFF_SECONDS * 2 ** min(restarts - 2, 16), MAX_RESTART_BACKOFF))
    return WakeAt(ready_at) if now < ready_at else None
