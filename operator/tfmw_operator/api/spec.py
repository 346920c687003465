"""A TFMultiWorkerJob's spec as the operator reads it: typed, with defaults applied.

The CRD applies defaults at admission; the parser applies the same defaults again so
the core never depends on which API server version served the object.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tfmw_operator.api.names import LABEL_QUEUE_NAME
from tfmw_operator.api.objects import Json
from tfmw_operator.contract import DEFAULT_MARKER_FILE, PROGRESS_FILE

DEFAULT_PORT = 2222
DEFAULT_MOUNT_PATH = "/shared"
DEFAULT_CHIEF_EXIT_GRACE_SECONDS = 30
DEFAULT_BACKOFF_LIMIT = 3
DEFAULT_RESTART_GRACE_SECONDS = 5


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
    # The image of the init container that checks the claim reaches the job's folder (the
    # operator's own); "" leaves it out.
    folder_check_image: str = ""

    @property
    def directory(self) -> str:
        """The job's directory relative to the operator's shared root."""
        return f"{self.namespace}/{self.name}"

    @property
    def sub_path(self) -> str:
        """The job's directory inside its namespace's volume: the workers' subPath. A
        namespace's claim exposes only `<shared root>/<namespace>`."""
        return self.name

    @property
    def marker_relpath(self) -> str:
        return f"{self.directory}/{self.marker_file}"

    @property
    def progress_relpath(self) -> str:
        return f"{self.directory}/{PROGRESS_FILE}"


class SpecError(ValueError):
    """A spec the operator cannot act on; the message names the field and the fix."""


def parse_job(job: Json, folder_check_image: str = "") -> JobSpec:
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
        folder_check_image=folder_check_image,
    )


def parse_spec(job: Json, folder_check_image: str = "") -> JobSpec | SpecError:
    try:
        return parse_job(job, folder_check_image)
    except SpecError as error:
        return error
