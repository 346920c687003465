"""A TFJob gang whose containers the kubelet restarts in their pods: counting the restarts.
Pure.

Under Kubeflow's controller a TFJob replica with restartPolicy OnFailure gets that pod
restartPolicy, and the kubelet restarts a failed container in its pod: a MultiWorkerMirrored
gang comes back without new pods (its peers exit on the lost collective and are restarted
the same way), and backoffLimit is checked against the pods' restart counts
(training-operator v1.9 `pkg/controller.v1/common/job.go`, pastBackoffLimit). tfmw serves
such a TFJob the same way where its in-pod supervisor cannot (core/supervision.py): here each
end of a gang pod's main container that the kubelet restarted becomes one restart, judged by
the job's rules (its restartPolicy's, as converted), recorded in `status.history` and
counted in `status.restarts`, once: `status.containerRestarts` holds how many of each pod's
(by UID) are counted already. Past backoffLimit the job fails and its pods go, or the
kubelet would restart them for ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tfmw_operator.api.spec import JobSpec, RuleAction
from tfmw_operator.api.status import ContainerRestarts, JobStatus
from tfmw_operator.api.times import NEVER
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.failure import failure_of
from tfmw_operator.core.policies.failure_rules import rule_on
from tfmw_operator.core.policies.verdicts import Cause, Fail


@dataclass(frozen=True)
class ContainerRestart:
    """One pod's main container ended `ends` times since last counted, and was restarted."""

    pod: str
    uid: str
    replica_type: str
    ends: int
    counted: bool
    cause: Cause
    message: str


@dataclass(frozen=True)
class Counted:
    """The restarts to record (oldest first), the counters as they leave them, and the
    failure when one of them was past backoffLimit (or a rule said Fail)."""

    restarts: tuple[ContainerRestart, ...]
    total: int  # status.restarts
    not_counted: int  # status.restartsNotCounted
    recorded: tuple[ContainerRestarts, ...]  # status.containerRestarts
    fail: Fail | None = None


def judge_container_restarts(
    job: JobSpec, status: JobStatus, current: Sequence[ObservedPod]
) -> Counted | None:
    """The kubelet's restarts of the pods' containers not counted yet; None when there are none.
    Any pod the kubelet restarts counts (its own restartPolicy says so), whatever the job says
    now: a TFJob edited to `Never` mid-run is failed by its next restart."""
    restarting = [p for p in current if p.kubelet_restarts]
    if any(p.node_lost for p in restarting):
        # Its peers end on the broken collective and are restarted, again and again, while
        # the lost pod cannot be: a gang restart (failure.first_failure) is the fix, and its
        # new pods count afresh.
        return None
    recorded = {(r.pod, r.uid): r.restarts for r in status.container_restarts}
    pods = [
        p
        for p in restarting
        # A pod ended, going or taken away is failure.judge_failures' (once, as any pod's).
        if p.phase in ("Pending", "Running")
        and not (p.deleting or p.disrupted or p.preempted)
        and p.container_restarts > recorded.get((p.name, p.uid), 0)
    ]
    if not pods:
        return None
    pods.sort(
        key=lambda p: (
            p.last_end.finished_at if p.last_end and p.last_end.finished_at else NEVER,
            p.member.order,
        )
    )
    limit = job.run_policy.backoff_limit
    total, not_counted = status.restarts, status.restarts_not_counted
    found: list[ContainerRestart] = []
    fail: Fail | None = None
    for pod in pods:
        end = pod.last_end
        ended = replace(
            pod,
            phase="Failed",
            containers=(end.container, *pod.containers[1:]) if end and end.container else pod.containers,
            exit_code=end.exit_code if end else None,
            reason=(end.reason if end else "") or "Error",
            message=end.message if end else "",
            finished_at=end.finished_at if end else None,
        )
        failure = failure_of(job, ended)
        ruling = rule_on(job, failure.seen_by_rules())
        why = failure.describe()
        if ruling.action is RuleAction.FAIL:
            said = f" ({ruling.told}: Fail)" if ruling.told else ""  # a preset's rule is not named
            fail = Fail("WorkerFailed", f"{why}{said}", stop_all=True, cause=failure.to_cause())
            break
        counted = ruling.action is RuleAction.RESTART
        ends = pod.container_restarts - recorded.get((pod.name, pod.uid), 0)
        if counted and total + ends > limit:
            fail = Fail(
                "BackoffLimitExceeded",
                f"{why}; backoffLimit {limit} reached (the kubelet restarted it in its pod)",
                stop_all=True,
                cause=failure.to_cause(),
            )
            break
        total += ends if counted else 0
        not_counted += 0 if counted else ends
        recorded[(pod.name, pod.uid)] = pod.container_restarts
        counting = f"restart {total}/{limit}" if counted else "not counted against backoffLimit"
        said = f" ({ruling.told})" if ruling.own else ""
        found.append(
            ContainerRestart(
                pod.name,
                pod.uid,
                str(pod.member.type),
                ends,
                counted,
                failure.to_cause(),
                f"the kubelet restarted {pod.name}'s container in its pod ({counting}){said}: {why}",
            )
        )
    alive = {(p.name, p.uid) for p in current}
    kept = tuple(
        ContainerRestarts(pod=name, uid=uid, restarts=count)
        for (name, uid), count in sorted(recorded.items())
        if (name, uid) in alive and count > 0
    )
    return Counted(tuple(found), total, not_counted, kept, fail)
