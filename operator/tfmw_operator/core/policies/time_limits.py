"""Limits on time: `activeDeadlineSeconds` for the whole job, `pendingTimeoutSeconds` and
the `Stalled` condition for workers that do not start."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.times import later
from tfmw_operator.core.pods import PERMANENT_STALL_REASONS, ObservedPod
from tfmw_operator.core.policies.verdicts import Fail, Pending, WakeAt


def active_deadline(job: JobSpec, start_time: datetime | None, now: datetime) -> Fail | WakeAt | None:
    """Fail once the deadline passed (every pod goes), else wake then; None without a deadline."""
    limit = job.run_policy.active_deadline_seconds
    if limit is None or start_time is None:
        return None
    deadline = later(start_time, limit)
    if now < deadline:
        return WakeAt(deadline)
    return Fail("DeadlineExceeded", f"the job ran longer than activeDeadlineSeconds={limit}", stop_all=True)


def judge_pending(
    job: JobSpec, current: Sequence[ObservedPod], now: datetime, since: datetime | None = None
) -> Pending:
    """`since`: no worker counts as Pending before it (a queued gang's admission)."""
    stalled = min((p for p in current if p.phase == "Pending" and p.stall_reason), default=None, key=_index)
    if stalled is not None and stalled.stall_reason in PERMANENT_STALL_REASONS:
        verdict = Pending(stalled)
        return Pending(stalled, Fail(stalled.stall_reason, verdict.stall_message))
    timeout = job.run_policy.pending_timeout_seconds
    if timeout is None:
        return Pending(stalled)
    wake_at: datetime | None = None
    for pod in sorted(current, key=_index):
        if pod.phase != "Pending" or pod.created is None:
            continue
        limit = later(max(pod.created, since or pod.created), timeout)
        if now >= limit:
            reason = pod.stall_reason or "NotStarted"
            message = (
                f"worker {pod.index} (pod {pod.name}) was Pending longer than "
                f"pendingTimeoutSeconds={timeout}: {reason}: {pod.stall_message}"
            )
            return Pending(stalled, Fail("PendingTimeout", message))
        wake_at = limit if wake_at is None else min(wake_at, limit)
    return Pending(stalled, None, wake_at)


def _index(pod: ObservedPod) -> int:
    return pod.index
