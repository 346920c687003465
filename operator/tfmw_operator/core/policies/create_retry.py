"""Creating a job's Service or pods was refused: fail on what the API server will never
take, back off on what it may take once quota, policy or the server itself change. Pure.

The job's clock runs meanwhile: activeDeadlineSeconds, and pendingTimeoutSeconds as for
workers that never start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.times import later
from tfmw_operator.core.observed import CreatedObject, CreateError, CreateErrorKind
from tfmw_operator.core.policies.verdicts import Fail

MAX_CREATE_BACKOFF_SECONDS = 300.0


@dataclass(frozen=True)
class Refused:
    """The job waits to try creating again: `reason` and `message` for its Stalled condition."""

    reason: str  # PodCreationRefused | ServiceCreationRefused
    message: str
    retry_at: datetime  # not before: 2, 4, 8 ... seconds after the last refusal
    give_up_at: datetime | None  # pendingTimeoutSeconds after the first refusal in a row


def judge_refusal(job: JobSpec, error: CreateError, now: datetime) -> Fail | Refused:
    pods = error.refused is CreatedObject.PODS
    what = "worker pods" if pods else f"Service {job.name}"
    if error.kind is CreateErrorKind.INVALID:
        fix = "fix spec.template" if pods else "fix spec.port"
        message = f"the API server refused the {what}: {error.message}; {fix}"
        return Fail("InvalidTemplate" if pods else "InvalidService", message, stop_all=True)
    message = f"creating {what} was refused ({error.failures} times): {error.message}"
    timeout = job.run_policy.pending_timeout_seconds
    give_up = None if timeout is None else later(error.since or error.at, timeout)
    if give_up is not None and now >= give_up:
        return Fail("PendingTimeout", f"{message}; for longer than pendingTimeoutSeconds={timeout}")
    # The exponent is held: failures come from the shell's count, which keeps growing.
    retry_at = later(error.at, min(2.0 ** min(error.failures, 16), MAX_CREATE_BACKOFF_SECONDS))
    reason = "PodCreationRefused" if pods else "ServiceCreationRefused"
    return Refused(reason, message, retry_at, give_up)
