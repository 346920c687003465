"""What the run-policy rules conclude. Each rule lives in a module of its own and returns
one of these; reconcile.py applies them, so a job is failed, restarted or woken in one
place."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from tfmw_operator.api.spec import Member
from tfmw_operator.core.pods import ObservedPod


@dataclass(frozen=True)
class Cause:
    """Why an attempt ended, for `status.history`: in Kubernetes' words (OOMKilled, Evicted,
    Preempted, NodeLost, Stalled ...) and, when a worker was the cause, which one."""

    reason: str
    worker: int | None = None  # its index in its replica set
    pod: str | None = None
    node: str | None = None
    container: str | None = None
    exit_code: int | None = None
    message: str = ""  # the end of its log or termination message
    replica_type: str | None = None  # the set of `worker`: chief, worker, ps, evaluator
    stacks: str | None = None  # where the chief's stacks were taken (a stalled gang)


@dataclass(frozen=True)
class Fail:
    """The job ends Failed: `reason` for machines, `message` for the person who reads it."""

    reason: str
    message: str
    # Every pod of the job goes, whatever cleanPodPolicy says: the job can never run (its
    # spec or template is refused) or its time is up. Otherwise the policy decides.
    stop_all: bool = False
    cause: Cause | None = None  # None: `reason` is the cause


@dataclass(frozen=True)
class Restart:
    """The attempt restarts (or only the pods in `replace`); `message` says why and how many
    restarts are left."""

    message: str
    counted: bool = True  # against backoffLimit; not a preemption by Kueue, nor RestartNotCounted
    kueue: bool = False  # Kueue took the quota back
    cause: Cause | None = None
    reason: str = "WorkerFailed"  # of the Restarting condition
    # The workers left can still save a checkpoint together (each is told by SIGTERM, as the
    # worker taken away was): they get restartGracePeriodSeconds. Not when a worker's process
    # ended on its own, its node was lost or the gang hung: a collective save cannot finish
    # without it, so they are stopped at once and the next attempt starts sooner.
    survivors_can_save: bool = True
    # The pods restarted alone, the rest of the attempt running on; (): the whole attempt.
    replace: tuple[Member, ...] = ()
    node_fault: bool = False  # a failure rule blamed the failed pod's node
    rule: str = ""  # the job's own failure rule that decided, if one did
    # Every pod made again, none restarted in place: the spec they were made from changed
    # (policies/spec_change.py).
    remake: bool = False
    # The Event the restart posts: (type, reason).
    event: tuple[str, str] = ("Warning", "GangRestart")


@dataclass(frozen=True)
class WakeAt:
    """Nothing to do yet; the rule may fire at `at`, so the job is looked at again then."""

    at: datetime


class MarkerVerdict(Enum):
    ABSENT = "absent"
    OURS = "ours"  # names this job, or names no job at all
    FOREIGN = "foreign"  # written for another job of the same name: remove it, never count it


@dataclass(frozen=True)
class Queued:
    """The gang waits for Kueue to admit it whole."""

    reason: str
    message: str


@dataclass(frozen=True)
class Pending:
    """What the attempt's Pending workers mean right now."""

    stalled: ObservedPod | None = None  # the first worker stuck with a reason
    fail: Fail | None = None
    wake_at: datetime | None = None  # the next pending timeout

    @property
    def stall_message(self) -> str:
        pod = self.stalled
        if pod is None:
            return ""
        return (
            f"worker {pod.index} (pod {pod.name}) is stuck Pending: {pod.stall_reason}: {pod.stall_message}"
        )


@dataclass(frozen=True)
class Cleanup:
    """A finished job's pods to delete now, whether the job itself goes, and when to look again."""

    delete: list[ObservedPod]
    delete_job: bool = False
    wake_at: datetime | None = None
