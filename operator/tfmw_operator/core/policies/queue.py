"""Kueue: whether a job's gang waits in its queue, and which Workloads are over. Pure.

A job that names a LocalQueue runs each attempt as one Kueue pod group. Kueue holds every
pod behind its admission gate until the whole group fits the queue's quota, so a job never
holds part of the cluster while waiting for the rest. While gated the job is `Queued`: not
Stalled, no pendingTimeoutSeconds, and (Kueue's own convention) no activeDeadlineSeconds,
which starts at admission. Kueue never recreates pods; an attempt that is over has its
Workload deleted, which makes Kueue release the attempt's pods.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.verdicts import Queued
from tfmw_operator.core.workloads import WorkloadState


def judge_queue(
    job: JobSpec, current: Sequence[ObservedPod], workload: WorkloadState | None
) -> Queued | None:
    """Queued while any worker of the attempt waits behind Kueue's gate; None once admitted."""
    gated = [p for p in current if p.gated and p.active]
    if not job.queue_name or not gated:
        return None
    where = f"queue {job.queue_name}"
    if workload is None:
        return Queued(
            "WaitingForWorkload", f"waiting in {where}: Kueue has not made the Workload of the pod group yet"
        )
    if workload.admitted:
        return Queued(
            "Admitted", f"admitted by {where} (Workload {workload.name}); the gates are being removed"
        )
    reason = workload.reason or "Pending"
    detail = f": {workload.message}" if workload.message else ""
    together = f"for all {job.workers} workers to be admitted together"
    return Queued(reason, f"waiting in {where} {together} (Workload {workload.name}, {reason}{detail})")


def workloads_of(pods: Sequence[ObservedPod]) -> tuple[str, ...]:
    """The Workloads these pods were admitted under, from their own labels: the job's queue
    label may have been removed since, and Kueue still holds them."""
    return tuple(sorted({p.pod_group for p in pods if p.pod_group}))


def workloads_over(pods: Sequence[ObservedPod], attempt: int) -> tuple[str, ...]:
    """The Workloads of attempts other than `attempt` that still have pods: delete them."""
    return workloads_of([p for p in pods if p.attempt != attempt])
