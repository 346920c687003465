"""The contract between the reconcile core and the I/O shell.

The shell gathers an `Observed` (the job with its spec parsed once, its pods, its
marker, the clock), the core returns a `Decision`, and the shell carries out the
decision's actions in the order given here and posts its events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from tfmw_operator.api import JobSpec, Json, SpecError, parse_job
from tfmw_operator.observed import MarkerState, ObservedPod, Owned, WorkloadState
from tfmw_operator.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS, ProgressReading
from tfmw_operator.status import JobStatus

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


@dataclass(frozen=True)
class CreatePods:
    pods: tuple[Json, ...]


@dataclass(frozen=True)
class PatchStatus:
    status: JobStatus


@dataclass(frozen=True)
class DeletePods:
    names: tuple[str, ...]
    grace_seconds: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    force: bool = False  # grace 0 for pods whose kubelet will never confirm (node gone)


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
    RESTARTED = "Restarted"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# ---- what the core decides from ----


class CreateErrorKind(StrEnum):
    INVALID = "Invalid"  # the API server refused the pod as written (400/422): it never will take it
    FORBIDDEN = "Forbidden"  # quota, Pod Security, a webhook (403): may pass once someone acts


@dataclass(frozen=True)
class CreateError:
    """What the last pod creations of this job ran into, remembered by the shell."""

    kind: CreateErrorKind
    message: str
    failures: int  # in a row
    at: datetime


def parse_spec(job: Json) -> JobSpec | SpecError:
    try:
        return parse_job(job)
    except SpecError as error:
        return error


@dataclass(frozen=True)
class Observed:
    job: Json
    spec: JobSpec | SpecError
    status: JobStatus
    pods: tuple[ObservedPod, ...]
    marker: MarkerState
    now: datetime
    # Objects with this job's names that belong to something else (an earlier job of the
    # same name being garbage-collected, or someone's own): "pod x-worker-0", "Service x".
    namesakes: tuple[str, ...] = ()
    service_missing: bool = False
    storage_error: str | None = None  # reading the marker failed: path, errno
    create_error: CreateError | None = None
    progress: ProgressReading | None = None  # the chief's progress document; None: there is none
    # At most one progress write per job per this many seconds.
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL_SECONDS
    workload: WorkloadState | None = None  # None: the job names no queue, or Kueue made none yet

    @classmethod
    def of(
        cls,
        job: Json,
        raw_pods: Iterable[Json],
        marker: MarkerState,
        now: datetime,
        service: Json | None = None,
        **observed: Any,
    ) -> Observed:
        """The job as found, from the pods and Service as the API server returns them."""
        pods = [Owned.pod_of(p) for p in raw_pods]
        return cls.of_owned(
            job, pods, marker, now, service=None if service is None else Owned.service_of(service), **observed
        )

    @classmethod
    def of_owned(
        cls,
        job: Json,
        pods: Iterable[Owned],
        marker: MarkerState,
        now: datetime,
        spec: JobSpec | SpecError | None = None,
        status: JobStatus | None = None,
        service: Owned | None = None,
        storage_error: str | None = None,
        create_error: CreateError | None = None,
        progress: ProgressReading | None = None,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL_SECONDS,
        workload: WorkloadState | None = None,
    ) -> Observed:
        """The job as found; only pods it owns count (a namesake's pods are not its workers).

        `service` is the Service named like the job, None when there is none.
        """
        uid = (job.get("metadata") or {}).get("uid")
        found = sorted(pods, key=lambda p: p.name)  # as a LIST returns them
        namesakes = [f"pod {p.name}" for p in found if uid not in p.owners]
        if service is not None and uid not in service.owners:
            namesakes.append(f"Service {service.name}")
        return cls(
            job=job,
            spec=parse_spec(job) if spec is None else spec,
            status=JobStatus.from_json(job.get("status")) if status is None else status,
            pods=tuple(p.pod for p in found if p.pod is not None and uid in p.owners),
            marker=marker,
            now=now,
            namesakes=tuple(namesakes),
            service_missing=service is None,
            storage_error=storage_error,
            create_error=create_error,
            progress=progress,
            progress_interval=progress_interval,
            workload=workload,
        )

    @property
    def generation(self) -> int:
        generation = (self.job.get("metadata") or {}).get("generation")
        return generation if isinstance(generation, int) else 1


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
