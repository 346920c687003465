"""A worker failed: which one is the cause, and whether a gang restart can cure it.

`runPolicy.restartPolicy` decides: `Never` fails the job, `OnFailure` restarts on any
failure, `ExitCode` restarts only failures that are not the program's own fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tfmw_operator.api import JobSpec, RestartPolicy, later
from tfmw_operator.builders import pod_name
from tfmw_operator.observed import ObservedPod
from tfmw_operator.verdicts import Cause, Fail, Restart

# Exit codes from 128 up are deaths by signal (137 = SIGKILL, the OOM killer's too):
# something happened to the worker, not a bug in the program.
FIRST_SIGNAL_EXIT_CODE = 128
MESSAGE_TAIL_LINES = 5
# A worker whose kubelet has not reported for this long (phase Unknown) is taken as lost.
NODE_LOST_SECONDS = 60
# What a DisruptionTarget condition's reason means, in the words status.history uses.
DISRUPTION_CAUSES = {
    "PreemptionByScheduler": "Preempted",
    "DeletionByTaintManager": "NodeLost",
    "EvictionByEvictionAPI": "Evicted",
    "TerminationByKubelet": "Evicted",
    "DeletionByPodGC": "NodeLost",
}


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
    if pod.reason in ("Evicted", "NodeLost", "Shutdown", "Terminated", "DeadlineExceeded"):
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
            failures.append((never, vanished(index, pod.name, pod.preempted, pod.node, pod.disruption)))
        elif pod.phase == "Unknown" and now >= later(pod.changed_at or now, NODE_LOST_SECONDS):
            lost = f"its node has not reported for {NODE_LOST_SECONDS}s (phase Unknown)"
            failure = WorkerFailure(
                index, pod.name, None, lost, disrupted=True, cause="NodeLost", node=pod.node
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
    if not is_retryable(failure, policy.restart_policy):
        return Fail("WorkerFailed", failure.describe(), cause=failure.to_cause())
    return restart_or_give_up(job, restarts, failure.describe(), failure.to_cause())


def restart_or_give_up(
    job: JobSpec, restarts: int, why: str, cause: Cause, reason: str = "WorkerFailed"
) -> Fail | Restart:
    """A gang restart counted against backoffLimit, or Failed once it is used up."""
    limit = job.run_policy.backoff_limit
    if restarts >= limit:
        return Fail("BackoffLimitExceeded", f"{why}; backoffLimit {limit} reached", cause=cause)
    return Restart(f"gang restart {restarts + 1}/{limit}: {why}", cause=cause, reason=reason)
