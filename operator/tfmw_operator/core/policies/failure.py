"""A worker failed: which one is the cause, and whether a gang restart can cure it.

`runPolicy.restartPolicy` decides: `Never` fails the job, `OnFailure` restarts on any
failure, `ExitCode` restarts only failures that are not the program's own fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tfmw_operator.api.spec import JobSpec, RestartPolicy
from tfmw_operator.api.status import MAX_HISTORY_MESSAGE, AttemptRecord
from tfmw_operator.api.times import NEVER, format_time, later
from tfmw_operator.core.builders import pod_name
from tfmw_operator.core.pods import DISRUPTION_CAUSES, NODE_LOST, ObservedPod
from tfmw_operator.core.policies.verdicts import Cause, Fail, Restart
from tfmw_operator.core.progress import MAX_CLOCK_AHEAD_SECONDS

# Exit codes from 128 up are deaths by signal (137 = SIGKILL, the OOM killer's too):
# something happened to the worker, not a bug in the program.
FIRST_SIGNAL_EXIT_CODE = 128
SIGTERM_EXIT_CODE = FIRST_SIGNAL_EXIT_CODE + 15
# The trainer's exit when TensorFlow lost a peer (docs/training-program.md): not a cause itself.
PEER_LOST_EXIT_CODE = 170
MESSAGE_TAIL_LINES = 5
# A worker whose kubelet has not reported for this long (phase Unknown) is taken as lost.
NODE_LOST_SECONDS = 60
# The cause of a worker's own exit that Kubernetes gave no reason of its own (not OOMKilled,
# Evicted ...): what a peer lost with its node explains. TensorFlow fails the all-reduce as
# soon as a peer's connection breaks (the trainer then exits 170), while the control plane
# reports the node not ready only after its grace period (50 s by default).
EXPLAINED_BY_A_LOST_PEER = "Error"
# A node reported lost this long before the attempt ended did not end it (reported_before).
LOST_BEFORE_END_SECONDS = 15


@dataclass(frozen=True)
class WorkerFailure:
    index: int
    pod_name: str
    exit_code: int | None
    reason: str
    termination_message: str = ""
    disrupted: bool = False  # taken away (eviction, preemption, node loss), not the program's fault
    preempted: bool = False  # by Kueue: the queue gave the quota to another workload
    cause: str = ""  # in Kubernetes' words: OOMKilled, Evicted, Preempted, NodeLost, Error ...
    node: str = ""
    container: str = ""
    folder_mismatch: bool = False  # the operator's folder check refused the claim's folder

    def describe(self) -> str:
        what = f"worker {self.index} (pod {self.pod_name})"
        if self.exit_code is not None:
            what += f" exited with code {self.exit_code}"
        if self.reason:
            what += f" ({self.reason})" if self.exit_code is not None else f": {self.reason}"
        tail = self.tail
        return f"{what}: {tail}" if tail else what

    @property
    def tail(self) -> str:
        return "\n".join(self.termination_message.strip().splitlines()[-MESSAGE_TAIL_LINES:])

    def to_cause(self) -> Cause:
        return Cause(
            self.cause,
            self.index,
            self.pod_name,
            self.node or None,
            self.container or None,
            self.exit_code,
            self.tail,
        )


def cause_of(pod: ObservedPod) -> str:
    """Why the pod failed, in Kubernetes' own words where it has them."""
    if pod.preempted:
        return "Preempted"
    if pod.reason in ("Evicted", NODE_LOST, "Shutdown", "Terminated", "DeadlineExceeded"):
        return pod.reason
    if pod.disruption in DISRUPTION_CAUSES:
        return DISRUPTION_CAUSES[pod.disruption]
    if pod.reason:  # the container's: OOMKilled, Error, ContainerCannotRun, StartError ...
        return pod.reason
    return "Error" if pod.exit_code else "Unknown"


def failure_of(pod: ObservedPod) -> WorkerFailure:
    return WorkerFailure(
        pod.index,
        pod.name,
        pod.exit_code,
        pod.reason,
        pod.message,
        pod.disrupted,
        pod.preempted,
        cause_of(pod),
        pod.node,
        pod.containers[0] if pod.containers else "",
        folder_mismatch=pod.folder_mismatch,
    )


def vanished(
    index: int, name: str, preempted: bool = False, node: str = "", disruption: str = ""
) -> WorkerFailure:
    """A worker gone or going while the job is active; `disruption` is the reason of its
    DisruptionTarget condition, when Kubernetes said why it takes the pod away."""
    reason = (
        "pod deleted by Kueue, which evicted its Workload"
        if preempted
        else "pod disappeared while the job was active"
    )
    cause = "Preempted" if preempted else DISRUPTION_CAUSES.get(disruption, "PodDeleted")
    return WorkerFailure(
        index, name, None, reason, disrupted=True, preempted=preempted, cause=cause, node=node
    )


def is_retryable(failure: WorkerFailure, policy: RestartPolicy) -> bool:
    if policy is RestartPolicy.NEVER:
        return False
    if policy is RestartPolicy.ON_FAILURE or failure.disrupted:
        return True
    # ExitCode: a program error (1..127) will fail again the same way; a trainer that
    # exited 1 on the SIGTERM of an eviction was disrupted, not wrong (checked above).
    code = failure.exit_code
    return code is None or code == 0 or code >= FIRST_SIGNAL_EXIT_CODE


def first_failure(job: JobSpec, current: Sequence[ObservedPod], now: datetime) -> WorkerFailure | None:
    """The worker that died first is the cause; the others usually fail because of it."""
    by_index = {p.index: p for p in current}
    failures: list[tuple[datetime, WorkerFailure]] = []
    never = datetime.max.replace(tzinfo=UTC)
    for index in range(job.workers):
        pod = by_index.get(index)
        if pod is None:
            failures.append((never, vanished(index, pod_name(job.name, index))))
        elif pod.phase == "Failed":
            failures.append((pod.finished_at or never, failure_of(pod)))
        elif pod.deleting and pod.phase != "Succeeded":
            # deletionTimestamp is the request's time plus the grace period: a worker someone
            # deleted is the cause of the peer that failed for want of it afterwards.
            asked = never if pod.deleting_since is None else later(pod.deleting_since, -pod.grace_seconds)
            failures.append((asked, vanished(index, pod.name, pod.preempted, pod.node, pod.disruption)))
        elif pod.phase == "Unknown" and now >= later(pod.changed_at or now, NODE_LOST_SECONDS):
            lost = f"its node has not reported for {NODE_LOST_SECONDS}s (phase Unknown)"
            failure = WorkerFailure(
                index, pod.name, None, lost, disrupted=True, cause=NODE_LOST, node=pod.node
            )
            failures.append((never, failure))
    if not failures:
        return None
    return min(failures, key=lambda item: (item[0], item[1].index))[1]


def judge_failures(
    job: JobSpec, current: Sequence[ObservedPod], restarts: int, now: datetime
) -> Fail | Restart | None:
    """For a launched attempt: None while no worker failed, else restart or fail."""
    failure = first_failure(job, current, now)
    if failure is None:
        return None
    policy = job.run_policy
    if failure.preempted:
        # Kueue took the quota back; it admits the gang again when quota frees. No fault of
        # the job's, so it costs no restart of the backoffLimit (and Never does not apply).
        message = f"preempted by Kueue, not counted against backoffLimit: {failure.describe()}"
        return Restart(message, counted=False, cause=failure.to_cause(), reason="Preempted")
    if failure.folder_mismatch:
        # Every attempt would mount the same wrong folder: fail before anything trains.
        return Fail(
            "SharedVolumeMismatch",
            f"spec.sharedVolume.claimName {job.claim_name} (namespace {job.namespace}) does not reach the "
            f"folder the operator made for this job ({job.directory} under its shared root): "
            f"{failure.describe()}. Fix: give the namespace its storage as docs/storage.md says (the "
            f"claim must expose <shared root>/{job.namespace}), then create the job again",
            cause=failure.to_cause(),
        )
    if not is_retryable(failure, policy.restart_policy):
        return Fail("WorkerFailed", failure.describe(), cause=failure.to_cause())
    return restart_or_give_up(
        job, restarts, failure.describe(), failure.to_cause(), survivors_can_save=survivors_can_save(failure)
    )


def survivors_can_save(failure: WorkerFailure) -> bool:
    """Whether the other workers get the restart grace period: when the failed worker was
    told to stop as they will be (its pod deleted, evicted or preempted, or it exited on
    SIGTERM), they can still save a checkpoint together. A worker whose process ended on
    its own (an error, the OOM killer) or whose node was lost cannot take part in a save,
    and a collective save waits for every worker: they are stopped at once.

    But a worker that exited because it lost a peer (PEER_LOST_EXIT_CODE) names no cause of
    its own: the peer's node may be gone, unreported for the next 40 s or so. The grace keeps
    that peer's pod terminating, unconfirmed, so the next attempt waits for the control plane
    to report the node instead of being scheduled onto it (and the lost node is found behind
    the exit, failure_policy.lost_node_behind)."""
    if failure.cause == NODE_LOST:
        return False
    if failure.exit_code is None:  # taken away while it ran: told by SIGTERM
        return True
    if failure.cause == EXPLAINED_BY_A_LOST_PEER and failure.exit_code < FIRST_SIGNAL_EXIT_CODE:
        # A program's own error exit (retried under OnFailure) may be how it took a lost
        # peer: most programs have no PEER_LOST_EXIT_CODE of their own.
        return True
    return failure.disrupted or failure.exit_code in (SIGTERM_EXIT_CODE, PEER_LOST_EXIT_CODE)


def restart_or_give_up(
    job: JobSpec,
    restarts: int,
    why: str,
    cause: Cause,
    reason: str = "WorkerFailed",
    survivors_can_save: bool = True,
) -> Fail | Restart:
    """A gang restart counted against backoffLimit, or Failed once it is used up."""
    limit = job.run_policy.backoff_limit
    if restarts >= limit:
        return Fail("BackoffLimitExceeded", f"{why}; backoffLimit {limit} reached", cause=cause)
    return Restart(
        restart_message(restarts + 1, limit, why),
        cause=cause,
        reason=reason,
        survivors_can_save=survivors_can_save,
    )


def restart_message(restart: int, limit: int, why: str) -> str:
    """What the Restarting condition says of gang restart number `restart`."""
    return f"gang restart {restart}/{limit}: {why}"


def lost_node_behind(record: AttemptRecord, pods: Sequence[ObservedPod], now: datetime) -> Cause | None:
    """The root cause of the attempt's end that `record` tells, found by a second look at its
    pods while they are being deleted: another worker of that attempt whose node was lost.
    The record's own worker merely noticed it first. None when the record's cause has a
    reason of its own (OOMKilled, Evicted, NodeLost already ...) or names no worker, or when
    no other worker's node was reported lost."""
    if record.cause != EXPLAINED_BY_A_LOST_PEER or record.worker is None:
        return None
    others = [p for p in pods if p.attempt == record.attempt and p.index != record.worker]
    lost = [p for p in others if p.node_lost and not reported_before(p, record.end_time, now)]
    if not lost:
        return None
    # The node reported first went first; its workers go by index. Its pods are reported
    # one by one, not always within one second: a worker on a node already reported lost is
    # lost with it, reported yet or not (the record, once NodeLost, is final).
    first_seen: dict[str, datetime] = {}
    for candidate in lost:
        seen = node_lost_at(candidate, now) or NEVER
        first_seen[candidate.node] = min(seen, first_seen.get(candidate.node, NEVER))
    on_lost_nodes = [p for p in others if p.node_lost or (p.node and p.node in first_seen)]
    pod = min(on_lost_nodes, key=lambda p: (first_seen[p.node], p.index))
    node = f"node {pod.node}" if pod.node else "its node"
    when = f" (seen at {format_time(first_seen[pod.node])})" if first_seen[pod.node] < NEVER else ""
    noticer = f"worker {record.worker}" + (f" (pod {record.pod})" if record.pod else "")
    how = "failed" if record.exit_code is None else f"exited with code {record.exit_code}"
    told = f"{node} stopped reporting{when} with worker {pod.index} (pod {pod.name}) on it; "
    told += f"{noticer} noticed first: {how}"
    # The noticer's log ends the message, cut from its start to fit: its last line says most.
    room = MAX_HISTORY_MESSAGE - len(told) - 2
    if record.message and room > 0:
        told += f": {record.message[-room:]}"
    return Cause(
        NODE_LOST,
        pod.index,
        pod.name,
        pod.node or None,
        pod.containers[0] if pod.containers else None,
        message=told[:MAX_HISTORY_MESSAGE],
    )


def reported_before(pod: ObservedPod, end: datetime, now: datetime) -> bool:
    """Whether the pod's node was reported lost well before the attempt ended: a node that
    had been silent that long while its containers ran on (a stopped kubelet) did not end it;
    a node truly gone breaks the collective within seconds, before it is reported."""
    seen = node_lost_at(pod, now)
    return seen is not None and seen < later(end, -LOST_BEFORE_END_SECONDS)


def node_lost_at(pod: ObservedPod, now: datetime) -> datetime | None:
    """When the pod's node was reported lost, if it can have been then: not before the pod
    existed nor ahead of the operator's clock (a condition may say year 9999)."""
    seen = pod.node_lost_at
    if seen is None or seen > later(now, MAX_CLOCK_AHEAD_SECONDS):
        return None
    return None if pod.created is not None and seen < pod.created else seen
