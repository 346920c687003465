"""The whole of what one reconcile decides from (`Observed`), and the parts the shell
remembers for it: the marker as found, and what creating objects ran into. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import JobSpec, SpecError, parse_spec
from tfmw_operator.api.status import JobStatus
from tfmw_operator.core.claim_checks import Claim, FolderReached
from tfmw_operator.core.evaluation import EvaluationReading
from tfmw_operator.core.owned import Owned
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS, ProgressReading
from tfmw_operator.core.reports import PodReport, StacksReading
from tfmw_operator.core.step_times import StepTimesSnapshot
from tfmw_operator.core.workloads import WorkloadState


@dataclass(frozen=True)
class MarkerState:
    """The completion marker as found on the shared storage."""

    exists: bool = False
    job_uid: str | None = None  # from the trainer's JSON; None when the content says nothing
    modified: datetime | None = None
    attempt: int | None = None  # the attempt that wrote it, from the trainer's JSON


class CreateErrorKind(StrEnum):
    INVALID = "Invalid"  # refused as written (400, 413, 422): it never will be taken
    FORBIDDEN = "Forbidden"  # quota, Pod Security, RBAC (403): may pass once someone acts
    UNAVAILABLE = "Unavailable"  # throttled, a failing webhook, the server (429, 5xx): may pass soon


class CreatedObject(StrEnum):
    PODS = "worker pods"
    SERVICE = "Service"


@dataclass(frozen=True)
class CreateError:
    """What the last creations of this job's Service or pods ran into, remembered by the shell."""

    kind: CreateErrorKind
    message: str
    failures: int  # in a row
    at: datetime
    refused: CreatedObject = CreatedObject.PODS
    since: datetime | None = None  # the first refusal in a row; None: `at`


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
    evaluation: EvaluationReading | None = None  # the evaluator's document; None: there is none
    # At most one progress write per job per this many seconds.
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL_SECONDS
    workload: WorkloadState | None = None  # None: the job names no queue, or Kueue made none yet
    # When this operator last wrote the job's status (None: not since it started): a change of
    # the worker counts alone waits a moment, so a gang coming up is one write, not one a pod.
    status_written_at: datetime | None = None
    # Another job's worker found the job's claim reaching the operator's folders (claim_checks).
    claim_reached: FolderReached | None = None
    # The supervisors' reports of a gang that restarts in place (core/supervision.py), those
    # that name this job; None: not read, or they could not be read.
    reports: tuple[PodReport, ...] | None = None
    # The supervised pods' stacks files, while a stacks request is outstanding.
    stacks: tuple[StacksReading, ...] = ()
    # The training pods' step-times documents, read now; None: not read in this reconcile
    # (read at most once per progress interval, while the job runs).
    step_times: StepTimesSnapshot | None = None
    # The Pod Security level the job's namespace enforces by its label ("" none; None: not known).
    pod_security: str | None = None
    claim: Claim | None = None  # the job's claim as the claims watch saw it
    claim_known: bool = False  # that watch lists fresh: a claim not seen does not exist
    # The progress document changed since this operator last read it (True: not known). Only a
    # Running job's is read: one that came while the job was Pending is read at once when it
    # turns Running, not at the document's next change.
    unread_progress: bool = True

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
        evaluation: EvaluationReading | None = None,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL_SECONDS,
        workload: WorkloadState | None = None,
        status_written_at: datetime | None = None,
        claim_reached: FolderReached | None = None,
        reports: tuple[PodReport, ...] | None = None,
        stacks: tuple[StacksReading, ...] = (),
        step_times: StepTimesSnapshot | None = None,
        pod_security: str | None = None,
        claim: Claim | None = None,
        claim_known: bool = False,
        unread_progress: bool = True,
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
            evaluation=evaluation,
            progress_interval=progress_interval,
            workload=workload,
            status_written_at=status_written_at,
            claim_reached=claim_reached,
            reports=reports,
            stacks=stacks,
            step_times=step_times,
            pod_security=pod_security,
            claim=claim,
            claim_known=claim_known,
            unread_progress=unread_progress,
        )

    @property
    def generation(self) -> int:
        generation = (self.job.get("metadata") or {}).get("generation")
        return generation if isinstance(generation, int) else 1
