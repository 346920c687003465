"""What the reconcile core decides, for the I/O shell to carry out.

The shell gathers an `Observed` (observed.py: the job with its spec parsed once, its
pods, its marker, the clock), the core returns a `Decision`, and the shell carries out
the decision's actions in the order given here and posts its events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import JobSpec, Member
from tfmw_operator.api.status import JobStatus
from tfmw_operator.core.builders import build_pod

# ---- actions; the shell stops at the first that fails ----


@dataclass(frozen=True)
class RemoveMarker:
    relpath: str


@dataclass(frozen=True)
class EnsureJobDirectory:
    relpath: str
    job_uid: str


@dataclass(frozen=True)
class EnsureService:
    service: Json
    # False: a running gang's Service went missing. Then a refusal is reported and the rest
    # of the decision (the marker, the workers' failures) still carried out.
    launch: bool = True


@dataclass(frozen=True)
class CreatePods:
    """The pods of `members` in `attempt`, each built as it is sent: a 1,024-worker job's
    pods, each with its TF_CONFIG, would hold over a hundred megabytes at once."""

    job: JobSpec
    attempt: int
    members: tuple[Member, ...]
    # The API server took this template's pods before (an earlier attempt): sent in full
    # batches, with no slow start to find out whether it refuses them.
    proven: bool = False

    def build(self, member: Member) -> Json:
        return build_pod(self.job, member, self.attempt)

    @property
    def pods(self) -> tuple[Json, ...]:
        return tuple(self.build(m) for m in self.members)


@dataclass(frozen=True)
class PatchStatus:
    status: JobStatus


@dataclass(frozen=True)
class DeletePods:
    names: tuple[str, ...]
    grace_seconds: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    force: bool = False  # grace 0 for pods whose kubelet will never confirm (node gone)
    keep_logs: bool = True  # saved to the job's folder first; False: the job has no shared volume


@dataclass(frozen=True)
class DeleteWorkloads:
    """Kueue Workloads of attempts that are over: Kueue then lets their pods go."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class DeleteJob:
    pass


Action = (
    RemoveMarker
    | EnsureJobDirectory
    | EnsureService
    | CreatePods
    | PatchStatus
    | DeletePods
    | DeleteWorkloads
    | DeleteJob
)

# The one order of actions. A stale marker goes before any pod can see it; pods exist
# before the status records their launch (a crash in between re-creates only what is
# missing); the status records a restart or an ending before pods go (a crash in
# between does not lose the decision); the job itself goes last.
ACTION_ORDER: tuple[type, ...] = (
    RemoveMarker,
    EnsureJobDirectory,
    EnsureService,
    CreatePods,
    PatchStatus,
    DeletePods,
    DeleteWorkloads,
    DeleteJob,
)


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


class Milestone(StrEnum):
    """What happened to the job in this decision, for the operator's counters."""

    LAUNCHED = "Launched"  # the first attempt's pods were created
    # A gang restart is over: the next attempt's pods were created (or the job finished
    # first). Its status.history record is final only then: a lost node found while the old
    # pods go changes its cause.
    RESTARTED = "Restarted"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# ---- what the core decides ----


@dataclass(frozen=True)
class ProgressWatch:
    """The progress document to watch; a change before `not_before` waits for the throttle anyway."""

    relpath: str
    not_before: datetime | None = None


@dataclass(frozen=True)
class Decision:
    status: JobStatus  # the job's status after this decision (unchanged: no PatchStatus)
    actions: tuple[Action, ...] = ()  # in ACTION_ORDER
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None  # seconds until a time-based rule may fire
    watch_marker: str | None = None  # the marker that may appear any moment, relative to the root
    milestones: frozenset[Milestone] = frozenset()
    watch_progress: ProgressWatch | None = None

    @classmethod
    def of(
        cls,
        old: JobStatus,
        new: JobStatus,
        actions: Iterable[Action],
        events: Iterable[Event] = (),
        requeue_after: float | None = None,
        watch_marker: str | None = None,
        milestones: Iterable[Milestone] = (),
        watch_progress: ProgressWatch | None = None,
    ) -> Decision:
        chosen = list(actions)
        if new != old:
            chosen.append(PatchStatus(new))
        ordered = sorted(chosen, key=lambda action: ACTION_ORDER.index(type(action)))
        return cls(
            new,
            tuple(ordered),
            tuple(events),
            requeue_after,
            watch_marker,
            frozenset(milestones),
            watch_progress,
        )

    @property
    def finished(self) -> bool:
        return self.status.finished

    @property
    def pods_to_create(self) -> tuple[Json, ...]:
        return tuple(p for a in self.actions if isinstance(a, CreatePods) for p in a.pods)

    @property
    def pods_to_delete(self) -> tuple[str, ...]:
        return tuple(n for a in self.actions if isinstance(a, DeletePods) for n in a.names)
