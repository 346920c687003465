"""The TFMultiWorkerJob API as the operator reads it: names, labels and the typed spec.

The CRD applies defaults at admission; the parser applies the same defaults again so
the core never depends on which API server version served the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from tfmw_operator.contract import DEFAULT_MARKER_FILE, PROGRESS_FILE

GROUP = "tfmw.dev"
VERSION = "v1alpha1"
PLURAL = "tfmwjobs"
KIND = "TFMultiWorkerJob"
API_VERSION = f"{GROUP}/{VERSION}"

LABEL_JOB_NAME = "tfmw.dev/job-name"
LABEL_REPLICA_INDEX = "tfmw.dev/replica-index"
LABEL_ATTEMPT = "tfmw.dev/attempt"
LABEL_ROLE = "tfmw.dev/role"

# Kueue's plain-pod groups: a job that names a LocalQueue runs its workers as one group.
LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
LABEL_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
ANNOTATION_POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"

PORT_NAME = "tfmw"
DEFAULT_PORT = 2222
DEFAULT_MOUNT_PATH = "/shared"
DEFAULT_CHIEF_EXIT_GRACE_SECONDS = 30
DEFAULT_BACKOFF_LIMIT = 3
DEFAULT_RESTART_GRACE_SECONDS = 5
SHARED_VOLUME_NAME = "tfmw-shared"

Json = dict[str, Any]


def copy_json(value: Any) -> Any:
    """A deep copy of parsed JSON (dicts, lists and scalars only): a third of
    `copy.deepcopy`'s time, which keeps a memo for cycles JSON cannot have."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


# The ends of the calendar: a time limit that runs past the last one never fires.
NEVER = datetime.max.replace(tzinfo=UTC)
DAWN = datetime.min.replace(tzinfo=UTC)


def later(start: datetime, seconds: float) -> datetime:
    """`start` plus `seconds`, held to the calendar: limits come from specs, statuses and
    files, and any of them may be absurd (activeDeadlineSeconds 2**63-1 is valid)."""
    try:
        return start + timedelta(seconds=seconds)
    except OverflowError:
        return NEVER if seconds > 0 else DAWN


def _utc(value: datetime) -> datetime:
    # astimezone() may step past the calendar's end from an offset near it.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return NEVER if value.year > 1 else DAWN


def format_time(value: datetime) -> str:
    """Kubernetes' timestamp format (RFC 3339, seconds, UTC); years padded to four digits,
    which strftime does not do below 1000."""
    v = _utc(value)
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}Z"


def format_precise_time(value: datetime) -> str:
    """RFC 3339 with milliseconds: progress figures come faster than once a second."""
    v = _utc(value)
    return format_time(v)[:-1] + f".{v.microsecond // 1000:03d}Z"


def parse_time(value: object) -> datetime | None:
    """A Kubernetes timestamp, or None for anything that is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class RestartPolicy(StrEnum):
    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    EXIT_CODE = "ExitCode"


class ProgressDeadlinePolicy(StrEnum):
    """What a Running job whose progress stopped for progressDeadlineSeconds gets."""

    REPORT = "Report"  # the Stalled condition, a Warning and the gauge; nothing else
    RESTART = "Restart"  # a gang restart, counted against backoffLimit
    FAIL = "Fail"


class CleanPodPolicy(StrEnum):
    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


@dataclass(frozen=True)
class RunPolicy:
    restart_policy: RestartPolicy = RestartPolicy.EXIT_CODE
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    active_deadline_seconds: int | None = None
    pending_timeout_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.RUNNING
    suspend: bool = False
    # How long a gang being restarted gets to exit; at most the template's own grace period.
    restart_grace_seconds: int = DEFAULT_RESTART_GRACE_SECONDS
    progress_deadline_seconds: int | None = None  # None: a job's progress is not watched
    progress_deadline_policy: ProgressDeadlinePolicy = ProgressDeadlinePolicy.RESTART


@dataclass(frozen=True)
class JobSpec:
    """The parts of a job the operator acts on, with defaults applied."""

    name: str
    namespace: str
    uid: str
    workers: int
    port: int
    claim_name: str
    mount_path: str
    marker_file: str
    chief_exit_grace_seconds: int
    run_policy: RunPolicy
    template: Json
    queue_name: str | None = None  # the Kueue LocalQueue the job's label names

    @property
    def directory(self) -> str:
        """The job's directory relative to the shared root (and the pod's subPath)."""
        return f"{self.namespace}/{self.name}"

    @property
    def marker_relpath(self) -> str:
        return f"{self.directory}/{self.marker_file}"

    @property
    def progress_relpath(self) -> str:
        return f"{self.directory}/{PROGRESS_FILE}"


class SpecError(ValueError):
    """A spec the operator cannot act on; the message names the field and the fix."""


def parse_job(job: Json) -> JobSpec:
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    shared = spec.get("sharedVolume") or {}
    completion = spec.get("completion") or {}
    run = spec.get("runPolicy") or {}
    template = spec.get("template") or {}
    workers = spec.get("workers")
    if not isinstance(workers, int) or not 1 <= workers <= 1024:
        raise SpecError(f"spec.workers must be an integer in 1..1024, got {workers!r}")
    if not shared.get("claimName"):
        raise SpecError("spec.sharedVolume.claimName is required: name a PVC in the job's namespace")
    containers = (template.get("spec") or {}).get("containers") or []
    if not containers:
        raise SpecError("spec.template.spec.containers must list at least one container")
    try:
        restart_policy = RestartPolicy(run.get("restartPolicy", RestartPolicy.EXIT_CODE.value))
        clean_pod_policy = CleanPodPolicy(run.get("cleanPodPolicy", CleanPodPolicy.RUNNING.value))
        deadline_policy = ProgressDeadlinePolicy(
            run.get("progressDeadlinePolicy", ProgressDeadlinePolicy.RESTART.value)
        )
    except ValueError as error:
        raise SpecError(f"spec.runPolicy: {error}") from error
    return JobSpec(
        name=meta["name"],
        namespace=meta.get("namespace", "default"),
        uid=meta.get("uid", ""),
        workers=workers,
        port=int(spec.get("port", DEFAULT_PORT)),
        claim_name=shared["claimName"],
        mount_path=shared.get("mountPath", DEFAULT_MOUNT_PATH),
        marker_file=completion.get("markerFile", DEFAULT_MARKER_FILE),
        chief_exit_grace_seconds=int(
            completion.get("chiefExitGraceSeconds", DEFAULT_CHIEF_EXIT_GRACE_SECONDS)
        ),
        run_policy=RunPolicy(
            restart_policy=restart_policy,
            backoff_limit=int(run.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)),
            active_deadline_seconds=run.get("activeDeadlineSeconds"),
            pending_timeout_seconds=run.get("pendingTimeoutSeconds"),
            ttl_seconds_after_finished=run.get("ttlSecondsAfterFinished"),
            clean_pod_policy=clean_pod_policy,
            suspend=bool(run.get("suspend", False)),
            restart_grace_seconds=int(run.get("restartGracePeriodSeconds", DEFAULT_RESTART_GRACE_SECONDS)),
            progress_deadline_seconds=run.get("progressDeadlineSeconds"),
            progress_deadline_policy=deadline_policy,
        ),
        template=template,
        queue_name=(meta.get("labels") or {}).get(LABEL_QUEUE_NAME) or None,
    )


def parse_spec(job: Json) -> JobSpec | SpecError:
    try:
        return parse_job(job)
    except SpecError as error:
        return error
