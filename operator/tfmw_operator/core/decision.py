"""What the reconcile core decides, for the I/O shell to carry out.

The shell gathers an `Observed` (observed.py: the job with its spec parsed once, its
pods, its marker, the clock), the core returns a `Decision`, and the shell carries out
the decision's actions in the order given here and posts its events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import JobSpec, Member
from tfmw_operator.api.status import JobStatus
from tfmw_operator.contract import (
    CONTROL_ATTEMPT,
    CONTROL_EXIT,
    CONTROL_HOSTS,
    CONTROL_JOB_UID,
    CONTROL_STACKS,
    CONTROL_START,
    CONTROL_STOP_SECONDS,
)
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
class WriteControl:
    """The job's control file (`.tfmw/control.json`), the operator's word to the supervisors
    of its gang (docs/supervisor.md). Decided whole every time from what is observed; the
    shell writes it only when it differs from what it last wrote.

    Written after the status when it `raises` the attempt or says `exit` (the job finished):
    the control file never runs ahead of the status, and a job's last word to its supervisors
    does not hold up its `Succeeded` or `Failed` (docs/benchmarks.md, runs scale-14 to -17).
    Otherwise before any pod is created, so a new pod finds the control file as the status
    has it."""

    relpath: str  # the job's folder, relative to the shared root
    job_uid: str
    attempt: int
    start: bool
    stop_seconds: int | None = None
    stacks: str | None = None
    exit: bool = False
    raises: bool = False
    # The gang's hostnames that are not their pods' own names, by stem (builders.renamed_hosts):
    # each supervisor puts them into its TF_CONFIG before it starts an attempt's command.
    hosts: Mapping[str, str] | None = None

    @property
    def follows_status(self) -> bool:
        return self.raises or self.exit

    def document(self) -> Json:
        doc: Json = {CONTROL_JOB_UID: self.job_uid, CONTROL_ATTEMPT: self.attempt, CONTROL_START: self.start}
        if self.stop_seconds is not None:
            doc[CONTROL_STOP_SECONDS] = self.stop_seconds
        if self.stacks is not None:
            doc[CONTROL_STACKS] = self.stacks
        if self.exit:
            doc[CONTROL_EXIT] = True
        if self.hosts:
            doc[CONTROL_HOSTS] = dict(sorted(self.hosts.items()))
        return doc


@dataclass(frozen=True)
class EnsureService:
    service: Json
    # False: a running gang's Service went missing. Then a refusal is reported and the rest
    # of the decision (the marker, the workers' failures) still carried out.
    launch: bool = True
    # Sent beside the first pod, the rest of the pods once it is the job's: a job's first
    # launch that nothing was refused to yet (core/reconcile.py `_withdraw_unserved`).
    beside_first_pod: bool = False


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
    # The Kueue pod group they join: a gang restarted in place keeps its group (and so its
    # admission); None: the attempt's own.
    pod_group: str | None = None
    # Each member's hostname (builders.cluster_hosts): the pods that run on keep theirs.
    hosts: Mapping[Member, str] | None = None

    def build(self, member: Member) -> Json:
        return build_pod(self.job, member, self.attempt, self.pod_group, self.hosts)

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
    # Pods of a launch that did not happen (core/reconcile.py `_withdraw_unserved`): deleted
    # before the status is written, so no failing status write holds them up.
    withdrawn: bool = False


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
    | WriteControl
    | EnsureService
    | CreatePods
    | PatchStatus
    | DeletePods
    | DeleteWorkloads
    | DeleteJob
)

# The one order of actions. A stale marker goes before any pod can see it; the control file
# is as the status says before a pod is created (but one that raises the attempt or ends the
# job goes right after the status records it: see WriteControl); pods exist before the status
# records their launch (a crash in between re-creates only what is missing); the status
# records a restart or an ending before pods go (a crash in between does not lose the
# decision); the job itself goes last.
ACTION_ORDER: tuple[type, ...] = (
    RemoveMarker,
    EnsureJobDirectory,
    WriteControl,
    EnsureService,
    CreatePods,
    PatchStatus,
    DeletePods,
    DeleteWorkloads,
    DeleteJob,
)


def _place(action: Action) -> float:
    """An action's place in ACTION_ORDER; a control file that follows the status right
    after it, pods withdrawn right before it."""
    if isinstance(action, WriteControl) and action.follows_status:
        return ACTION_ORDER.index(PatchStatus) + 0.5
    if isinstance(action, DeletePods) and action.withdrawn:
        return ACTION_ORDER.index(PatchStatus) - 0.5
    return ACTION_ORDER.index(type(action))


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
    # The folder of the supervisors' reports (relative to the root): a change there is news.
    watch_reports: str | None = None

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
        watch_reports: str | None = None,
    ) -> Decision:
        chosen = list(actions)
        if new != old:
            chosen.append(PatchStatus(new))
        ordered = sorted(chosen, key=_place)
        return cls(
            new,
            tuple(ordered),
            tuple(events),
            requeue_after,
            watch_marker,
            frozenset(milestones),
            watch_progress,
            watch_reports,
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
