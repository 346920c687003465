"""`runPolicy.progressDeadlineSeconds`: a Running job whose training stopped moving. Pure.

A collective that hangs (a frozen worker, a wedged NIC) leaves every pod `Running`; only
the progress document shows that nothing happens. The clock runs from the moment the
operator recorded the current epoch/step of the current attempt. An attempt that has not
reported yet is timed from when all its workers ran, but only for a program known to
report progress (it did in an earlier attempt): a program that never writes the document
is never judged stalled, and the condition says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.status import ConditionType, JobStatus, Phase
from tfmw_operator.api.times import format_time, later, parse_time
from tfmw_operator.contract import PROGRESS_PATH_ENV
from tfmw_operator.core.progress import format_duration

PROGRESS_STALLED = "ProgressStalled"  # the condition's reason, distinct from a stuck Pending worker's
PROGRESS_ADVANCING = "ProgressAdvancing"
AWAITING_PROGRESS = "AwaitingProgress"
NO_PROGRESS_REPORTED = "NoProgressReported"


@dataclass(frozen=True)
class ProgressVerdict:
    """What the Stalled condition says of a Running job's progress."""

    stalled: bool
    reason: str  # ProgressStalled | ProgressAdvancing | AwaitingProgress | NoProgressReported
    message: str
    wake_at: datetime | None = None  # when it becomes stalled, if nothing is reported before


def judge_progress(job: JobSpec, status: JobStatus, now: datetime) -> ProgressVerdict | None:
    """None when the rule does not apply: no deadline set, or the gang is not Running."""
    limit = job.run_policy.progress_deadline_seconds
    running = status.condition(ConditionType.RUNNING)
    if limit is None or status.phase is not Phase.RUNNING or running is None or not running.true:
        return None
    running_since = parse_time(running.last_transition_time) or now
    progress = status.progress
    current = progress is not None and progress.attempt == status.attempt
    if progress is not None and progress.advanced_at is not None and current:
        since = max(progress.advanced_at, running_since)
        last = f"the last progress was {progress.describe()}"
    elif progress is not None and progress.advanced_at is not None:
        since = running_since
        last = (
            f"attempt {status.attempt} has reported none since all its workers ran; "
            f"the last before it was {progress.describe()}"
        )
    else:
        return ProgressVerdict(
            False,
            NO_PROGRESS_REPORTED,
            f"progressDeadlineSeconds={limit} is not enforced yet: the chief has written no progress "
            f"document ({PROGRESS_PATH_ENV}) in this job; the deadline applies from its first report",
        )
    deadline = later(since, limit)
    if now >= deadline:
        # Nothing in it moves with the clock: a stalled job's status is not written again and again.
        message = (
            f"no progress since {format_time(since)}, for longer than progressDeadlineSeconds={limit} "
            f"({format_duration(limit)}): {last}"
        )
        return ProgressVerdict(True, PROGRESS_STALLED, message)
    message = f"{last}; stalled if nothing moves by {format_time(deadline)}"
    return ProgressVerdict(False, PROGRESS_ADVANCING if current else AWAITING_PROGRESS, message, deadline)


def stalled_by_progress(status: JobStatus) -> bool | None:
    """For the tfmw_job_stalled gauge: True while the job is stalled for want of progress,
    False while the rule watches it, None when it does not (no deadline, or not yet Running)."""
    stalled = status.condition(ConditionType.STALLED)
    if stalled is None or stalled.reason not in (
        PROGRESS_STALLED,
        PROGRESS_ADVANCING,
        AWAITING_PROGRESS,
        NO_PROGRESS_REPORTED,
    ):
        return None
    return stalled.true and stalled.reason == PROGRESS_STALLED
