"""A finished job: which pods `cleanPodPolicy` removes, and when `ttlSecondsAfterFinished`
removes the job itself."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tfmw_operator.api.spec import CleanPodPolicy, JobSpec, ReplicaType
from tfmw_operator.api.times import NEVER, later
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.verdicts import Cleanup

# Beyond a pod's grace period: how long a kubelet may take to confirm a deletion.
STUCK_TERMINATING_SECONDS = 60
# A Succeeded job's workers still running get this long to exit on their own. The chief
# writes the marker last, so nothing of the job is left to do: a worker still running is
# tearing down, or hung.
WORKER_EXIT_SECONDS = 5


def overdue_deletions(
    pods: Sequence[ObservedPod], now: datetime
) -> tuple[list[str], list[str], datetime | None]:
    """Pods being deleted that no kubelet will confirm gone: those on a node reported lost,
    at once, and those past their grace with no confirmation (their node is gone unreported);
    and when to look again at the others. They would block the next attempt for ever, so
    they are deleted with no grace."""
    on_lost_nodes, overdue, next_check = [], [], None
    for pod in pods:
        if not pod.deleting:
            continue
        if pod.node_lost:
            on_lost_nodes.append(pod.name)
            continue
        if pod.deleting_since is None:
            continue
        limit = later(pod.deleting_since, pod.grace_seconds + STUCK_TERMINATING_SECONDS)
        if now >= limit:
            overdue.append(pod.name)
        else:
            next_check = limit if next_check is None else min(next_check, limit)
    return on_lost_nodes, overdue, next_check


def doomed_by_policy(job: JobSpec, pods: Sequence[ObservedPod]) -> list[ObservedPod]:
    """Pods that `cleanPodPolicy` removes once the job has finished."""
    policy = job.run_policy.clean_pod_policy
    if policy is CleanPodPolicy.ALL:
        return list(pods)
    if policy is CleanPodPolicy.RUNNING:
        return [p for p in pods if not p.terminated]
    return []


def restarted_after(pods: Sequence[ObservedPod], completed: datetime) -> list[ObservedPod]:
    """Pods the kubelet restarts (a TFJob gang under OnFailure) whose container ended since the
    job finished: whatever cleanPodPolicy keeps, nothing counts their restarts any more, and
    the kubelet would restart them for ever. A pod that runs on is left to end."""
    return [
        p
        for p in pods
        if p.kubelet_restarts
        and not p.terminated
        and p.last_end is not None
        and (p.last_end.finished_at or NEVER) >= completed
    ]


def after_finish(
    job: JobSpec,
    succeeded: bool,
    completed: datetime,
    current: Sequence[ObservedPod],
    stale: Sequence[ObservedPod],
    now: datetime,
) -> Cleanup:
    """Pods of earlier attempts always go; the last attempt's go per `cleanPodPolicy`."""
    by_policy = doomed_by_policy(job, current)
    doomed = [*stale, *by_policy, *(p for p in restarted_after(current, completed) if p not in by_policy)]
    wakes: list[datetime] = []
    if succeeded and job.run_policy.clean_pod_policy is CleanPodPolicy.RUNNING:
        # Workers exit on their own right after the marker, and a pod that exited keeps its
        # log for `kubectl logs`: running pods get a few seconds (chiefExitGraceSeconds if
        # shorter) before they are deleted, their logs saved on the shared storage.
        grace_end = later(completed, min(job.chief_exit_grace_seconds, WORKER_EXIT_SECONDS))
        if now < grace_end:
            doomed = list(stale)
            if any(p.active for p in current):
                wakes.append(grace_end)
    if succeeded:
        # The side-car evaluator has its own work left: the final checkpoint, saved just
        # before the marker. Still running, it gets its pod's grace period
        # (terminationGracePeriodSeconds, 30 s unless its template says otherwise) from the
        # success to evaluate it and exit on its own; then cleanPodPolicy stops it.
        ends = {
            p.name: later(completed, p.grace_seconds)
            for p in current
            if p.replica_type is ReplicaType.EVALUATOR and p.active
        }
        evaluating = {name: end for name, end in ends.items() if now < end}
        if evaluating:
            doomed = [p for p in doomed if p.name not in evaluating]
            wakes.append(min(evaluating.values()))
    expiry = ttl_expiry(job, completed)
    expired = expiry is not None and now >= expiry
    if expiry is not None and not expired:
        wakes.append(expiry)
    if expired:
        # The operator deletes the pods itself (saving their logs) before the job, whose
        # garbage collection would take them without.
        doomed = [*stale, *current]
    return Cleanup(doomed, expired, min(wakes, default=None))


def ttl_expiry(job: JobSpec, completed: datetime) -> datetime | None:
    ttl = job.run_policy.ttl_seconds_after_finished
    return None if ttl is None else later(completed, ttl)
