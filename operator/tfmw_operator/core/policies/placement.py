"""A gang that cannot be placed: going on with fewer workers (`spec.minWorkers`), or taking
back a node kept out (`runPolicy.nodeExclusion`). Pure.

An attempt's pods are Unschedulable (a node gone, the room taken), or creating them is
refused as forbidden (a ResourceQuota), for PLACEMENT_SECONDS (or pendingTimeoutSeconds,
if shorter, so going on comes before failing). Then, in this order:

1. Fewer workers: in an attempt after the first (a restart, a resume), of a
   MultiWorkerMirroredStrategy job with `spec.minWorkers` below the attempt's size, where
   only workers wait to be placed: the next attempt has as many workers as are placed now
   (bound to a node), and never fewer than minWorkers. A whole gang restarts, with a
   TF_CONFIG of that size. Later restarts start with `spec.workers` again: the gang grows
   back when the room has returned, and goes on smaller again if it has not.
2. A node back: while the attempt avoids nodes and the scheduler says a pod does not match
   its node affinity, the oldest node kept out is allowed again and the gang restarts.

Neither is counted against backoffLimit: the job did nothing wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.spec import JobSpec, ReplicaType
from tfmw_operator.api.status import ExcludedNode, JobStatus
from tfmw_operator.api.times import later
from tfmw_operator.core.observed import CreateError, CreateErrorKind
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.verdicts import Cause, WakeAt

PLACEMENT_SECONDS = 60
UNSCHEDULABLE = "Unschedulable"
UNPLACEABLE = "Unplaceable"  # the cause an attempt ended with, in status.history
# How the scheduler says a node was left out for the pod's node affinity or selector.
AFFINITY_WORDS = ("affinity", "selector")


@dataclass(frozen=True)
class Shrink:
    """The next attempt with `workers` workers."""

    workers: int
    message: str
    cause: Cause


@dataclass(frozen=True)
class Readmit:
    """The oldest node kept out is allowed again; the gang restarts."""

    node: ExcludedNode
    message: str
    cause: Cause


def _unplaced(current: Sequence[ObservedPod]) -> list[ObservedPod]:
    return [
        p
        for p in current
        if p.phase == "Pending" and not p.deleting and not p.gated and p.stall_reason == UNSCHEDULABLE
    ]


def judge_placement(
    job: JobSpec,
    status: JobStatus,
    current: Sequence[ObservedPod],
    now: datetime,
    refused: CreateError | None = None,
) -> Shrink | Readmit | WakeAt | None:
    """For an attempt whose pods wait for room (or whose creation is refused as forbidden):
    what to do once it has waited long enough; when to look again before that; None when
    nothing would help."""
    unplaced = _unplaced(current)
    forbidden = refused is not None and refused.kind is CreateErrorKind.FORBIDDEN
    if not unplaced and not forbidden:
        return None
    waited_since = min((p.created for p in unplaced if p.created is not None), default=None)
    if forbidden and refused is not None:
        since = refused.since or refused.at
        waited_since = since if waited_since is None else min(waited_since, since)
    shrink = _fewer(job, status, current, unplaced)
    readmit = _readmit(status, unplaced)
    if (shrink is None and readmit is None) or waited_since is None:
        return None
    limit = PLACEMENT_SECONDS
    if job.run_policy.pending_timeout_seconds is not None:
        limit = min(limit, max(1, job.run_policy.pending_timeout_seconds - 1))
    due = later(waited_since, limit)
    if now < due:
        return WakeAt(due)
    why = _why(unplaced, refused if forbidden else None, limit)
    if shrink is not None:
        first = min(unplaced, key=lambda p: p.member.order) if unplaced else None
        cause = Cause(
            UNPLACEABLE,
            first.index if first else None,
            first.name if first else None,
            message=why,
            replica_type=str(first.replica_type) if first else None,
        )
        message = (
            f"{why}; attempt {status.attempt + 1} goes on with {shrink} of {job.requested_workers} workers "
            f"(spec.minWorkers {job.min_workers}), not counted against backoffLimit"
        )
        return Shrink(shrink, message, cause)
    assert readmit is not None
    message = (
        f"{why}; node {readmit.node} is allowed again (runPolicy.nodeExclusion: the gang cannot be placed "
        f"without it), and attempt {status.attempt + 1} starts, not counted against backoffLimit"
    )
    return Readmit(readmit, message, Cause(UNPLACEABLE, message=why))


def _fewer(
    job: JobSpec,
    status: JobStatus,
    current: Sequence[ObservedPod],
    unplaced: Sequence[ObservedPod],
) -> int | None:
    """The next attempt's size, if it may be smaller than this one's."""
    floor = job.min_workers
    if floor is None or job.parameter_server_training or status.attempt == 0 or job.workers <= floor:
        return None
    if any(p.replica_type is not ReplicaType.WORKER for p in unplaced):
        return None  # the chief (or the evaluator) waits: fewer workers would not place it
    placed = sum(
        1
        for p in current
        if p.replica_type is ReplicaType.WORKER and p.node and not p.deleting and p.phase != "Failed"
    )
    size = max(floor, placed)
    return size if size < job.workers else None


def _readmit(status: JobStatus, unplaced: Sequence[ObservedPod]) -> ExcludedNode | None:
    """The oldest node kept out, when the scheduler says a pod's node affinity left nodes out."""
    if not status.excluded_nodes:
        return None
    if not any(any(w in p.stall_message for w in AFFINITY_WORDS) for p in unplaced):
        return None
    return min(status.excluded_nodes, key=lambda e: (e.since is None, e.since))


def _why(unplaced: Sequence[ObservedPod], refused: CreateError | None, limit: int) -> str:
    if unplaced:
        first = min(unplaced, key=lambda p: p.member.order)
        more = f" and {len(unplaced) - 1} more" if len(unplaced) > 1 else ""
        return (
            f"{first.replica_type} {first.index} (pod {first.name}){more} could not be placed for {limit}s: "
            f"{first.stall_reason}: {first.stall_message}"
        )
    assert refused is not None
    return f"creating the pods was refused for {limit}s: {refused.message}"
