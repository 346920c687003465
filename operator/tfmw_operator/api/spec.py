"""A TFMultiWorkerJob's spec as the operator reads it: typed, with defaults applied.

The CRD applies defaults at admission; the parser applies the same defaults again so
the core never depends on which API server version served the object.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from tfmw_operator.api.names import API_VERSION, FOLDER_CHECK_CONTAINER, KIND, LABEL_QUEUE_NAME
from tfmw_operator.api.objects import Json, cut_spec_reason
from tfmw_operator.contract import (
    CHIEF,
    DEFAULT_MARKER_FILE,
    EVALUATION_FILE,
    EVALUATOR,
    MAX_MODULE_NAME_CHARS,
    MAX_WARM_MODULES,
    MODULE_NAME_PATTERN,
    PROGRESS_FILE,
    PS,
    WORKER,
    pod_stem,
)

DEFAULT_PORT = 2222
DEFAULT_MOUNT_PATH = "/shared"
DEFAULT_CHIEF_EXIT_GRACE_SECONDS = 30
DEFAULT_BACKOFF_LIMIT = 3
DEFAULT_RESTART_GRACE_SECONDS = 5
# runPolicy.nodeExclusion's defaults: a node blamed for an attempt's end is kept out of the
# job's next attempts for an hour, and at most two nodes at once.
DEFAULT_EXCLUDED_NODES = 2
DEFAULT_EXCLUSION_SECONDS = 3600
MAX_EXCLUDED_NODES = 32
MAX_EXCLUSION_SECONDS = 7 * 24 * 3600


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


class CompletionPolicy(StrEnum):
    """What ends a job well."""

    MARKER = "Marker"  # the chief writes its marker on the shared volume
    CHIEF_EXIT_CODE = "ChiefExitCode"  # the chief's main container exits 0
    ALL_WORKERS_EXIT_CODE = "AllWorkersExitCode"  # the chief's and every worker's exit 0


class RuleAction(StrEnum):
    RESTART = "Restart"  # counted against backoffLimit
    RESTART_NOT_COUNTED = "RestartNotCounted"
    FAIL = "Fail"


class ReplicaType(StrEnum):
    """A job's replica sets, in TF_CONFIG's words."""

    CHIEF = CHIEF
    WORKER = WORKER
    PS = PS
    EVALUATOR = EVALUATOR

    @property
    def rank(self) -> int:
        """The order the sets are listed, launched and reported in."""
        return _RANKS[self]


_RANKS = {ReplicaType.CHIEF: 0, ReplicaType.WORKER: 1, ReplicaType.PS: 2, ReplicaType.EVALUATOR: 3}


@dataclass(frozen=True)
class Member:
    """One pod's place in a job: `<job>-<type>-<index>`."""

    type: ReplicaType
    index: int

    @classmethod
    def worker(cls, index: int) -> Member:
        return cls(ReplicaType.WORKER, index)

    @property
    def stem(self) -> str:
        return pod_stem(self.type, self.index)

    @property
    def order(self) -> tuple[int, int]:
        return self.type.rank, self.index


@dataclass(frozen=True)
class ReplicaSet:
    type: ReplicaType
    replicas: int
    template: Json


@dataclass(frozen=True)
class FailureRule:
    """An entry of runPolicy.failureRules: it matches a failure when every matcher it has
    matches (a rule with none matches all), and then its action decides."""

    action: RuleAction
    name: str = ""
    exit_codes: frozenset[int] | None = None  # onExitCodes: the main container's exit code is one of these
    exit_codes_not_in: frozenset[int] | None = None  # onExitCodesNotIn: it has one, and not one of these
    causes: frozenset[str] | None = None  # onCauses, in status.history's words
    roles: frozenset[str] | None = None  # onRoles: the failed pod's role
    disruption: bool | None = None  # onDisruption: the pod was taken away (evicted, deleted, node lost)
    node_fault: bool = False  # the failed pod's node is to blame (runPolicy.nodeExclusion)

    def describe(self, position: int) -> str:
        return f"failureRules[{position}]" + (f" ({self.name})" if self.name else "")


@dataclass(frozen=True)
class NodeExclusion:
    """runPolicy.nodeExclusion: after an attempt ends for its node's fault (NodeLost, or a
    failure rule that says nodeFault), the next attempts avoid that node for a while."""

    max_nodes: int = DEFAULT_EXCLUDED_NODES  # at most this many at once: the oldest goes first
    duration_seconds: int = DEFAULT_EXCLUSION_SECONDS


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
    failure_rules: tuple[FailureRule, ...] = ()  # the user's, tried before restartPolicy's own
    node_exclusion: NodeExclusion | None = None  # None: no node is ever kept out
    # Modules the next attempt's Python imports ahead (the supervisor's standby); (): none.
    warm_start: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """The parts of a job the operator acts on, with defaults applied."""

    name: str
    namespace: str
    uid: str
    workers: int
    port: int
    claim_name: str | None  # None: no shared volume (an exit-code completion policy)
    mount_path: str
    marker_file: str
    chief_exit_grace_seconds: int
    run_policy: RunPolicy
    template: Json  # the worker set's
    queue_name: str | None = None  # the Kueue LocalQueue the job's label names
    # The image of the init container that checks the claim reaches the job's folder (the
    # operator's own); "" leaves it out.
    folder_check_image: str = ""
    # The operator's own image, which places the in-pod supervisor into the pods of a gang that
    # restarts in place (core/supervision.py); "": none is placed.
    supervisor_image: str = ""
    completion_policy: CompletionPolicy = CompletionPolicy.MARKER
    chief_template: Json | None = None  # a chief of its own
    parameter_servers: int = 0
    ps_template: Json | None = None
    evaluator_template: Json | None = None
    # The object the job is, for the owner references of what the operator creates.
    api_version: str = API_VERSION
    kind: str = KIND
    # A TFJob's: its replica types as it spells them, by set ("worker" -> "Worker"): its pods
    # carry Kubeflow's labels too (api/tfjob.py).
    kubeflow_replica_types: tuple[tuple[str, str], ...] = ()
    tf_config: bool = True  # False: a TFJob of one replica, which TFJob gives no TF_CONFIG
    # A TFJob whose Chief and Worker restartPolicy is OnFailure or Always: the gang's pods
    # restart a failed container themselves (pod restartPolicy OnFailure), as under Kubeflow's
    # controller, where the in-pod supervisor cannot (core/supervision.py).
    restart_containers: bool = False
    # A TFJob's: where tfmw runs it differently from Kubeflow's controller (`tfmw convert`'s
    # notes, "<field>: <what>"), said in the first launch's PodsCreated Event.
    conversion_notes: tuple[str, ...] = ()
    # spec.minWorkers: a restart that cannot place the whole gang may go on with fewer workers,
    # down to this many (None: never fewer than `workers`).
    min_workers: int | None = None
    # Set on the job as one attempt runs it (`sized`): spec.workers, when the attempt has fewer.
    full_workers: int | None = None
    # Nodes the pods built now must avoid (runPolicy.nodeExclusion, from the status).
    avoid_nodes: tuple[str, ...] = ()
    # A TFJob's: its generation and what its replica sets hash to, "<generation>:<fingerprint>"
    # (api/tfjob.py sets_version), on each pod it makes; a change under a running attempt makes
    # its pods again (core/policies/spec_change.py). None: a TFMultiWorkerJob, whose CRD holds
    # its sets.
    sets_version: str | None = None

    @property
    def requested_workers(self) -> int:
        """spec.workers, whatever the size of the attempt this job describes."""
        return self.full_workers if self.full_workers is not None else self.workers

    def sized(self, workers: int) -> JobSpec:
        """The job as an attempt of `workers` workers runs it: its members, TF_CONFIG,
        TFMW_NUM_WORKERS and Kueue pod group count follow."""
        if workers == self.workers:
            return self
        return dataclasses.replace(self, workers=workers, full_workers=self.requested_workers)

    # Cached: a reconcile asks for these dozens of times, and a spec never changes (frozen;
    # `sized` and `dataclasses.replace` build a new one, whose cache starts empty).
    @functools.cached_property
    def replica_sets(self) -> tuple[ReplicaSet, ...]:
        """The job's sets, in rank order: chief, worker, ps, evaluator."""
        sets = []
        if self.chief_template is not None:
            sets.append(ReplicaSet(ReplicaType.CHIEF, 1, self.chief_template))
        sets.append(ReplicaSet(ReplicaType.WORKER, self.workers, self.template))
        if self.parameter_servers and self.ps_template is not None:
            sets.append(ReplicaSet(ReplicaType.PS, self.parameter_servers, self.ps_template))
        if self.evaluator_template is not None:
            sets.append(ReplicaSet(ReplicaType.EVALUATOR, 1, self.evaluator_template))
        return tuple(sets)

    def replicas(self, kind: ReplicaType) -> int:
        return next((s.replicas for s in self.replica_sets if s.type is kind), 0)

    def template_of(self, kind: ReplicaType) -> Json:
        return next((s.template for s in self.replica_sets if s.type is kind), self.template)

    @functools.cached_property
    def members(self) -> tuple[Member, ...]:
        """Every pod of an attempt, in rank order."""
        return tuple(Member(s.type, i) for s in self.replica_sets for i in range(s.replicas))

    @property
    def chief(self) -> Member:
        """The chief: the chief set's pod, else worker 0 (TensorFlow's rule)."""
        has_chief = self.chief_template is not None
        return Member(ReplicaType.CHIEF, 0) if has_chief else Member(ReplicaType.WORKER, 0)

    def role(self, member: Member) -> str:
        """The pod's role: its set's, but `chief` for worker 0 of a job without a chief."""
        return CHIEF if member == self.chief else str(member.type)

    @property
    def parameter_server_training(self) -> bool:
        """ParameterServerStrategy: a worker that dies is replaced alone; under
        MultiWorkerMirroredStrategy (no parameter servers) the gang restarts whole."""
        return self.parameter_servers > 0

    @property
    def shared(self) -> bool:
        """The job has a shared volume (its folder, marker, progress and kept logs)."""
        return self.claim_name is not None

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

    @property
    def evaluation_relpath(self) -> str:
        return f"{self.directory}/{EVALUATION_FILE}"


class SpecError(ValueError):
    """A spec the operator cannot act on; the message names the field and the fix."""


MAX_REPLICAS = 1024
INT64_MAX = 2**63 - 1  # the CRD's integers are int64
MAX_PARAMETER_SERVERS = 64
EXIT_CODES = range(256)
# The causes status.history records, which onCauses may name (docs/reference.md).
CAUSES = frozenset(
    {
        "OOMKilled",
        "Evicted",
        "Preempted",
        "NodeLost",
        "PodDeleted",
        "Shutdown",
        "Terminated",
        "DeadlineExceeded",
        "ProgressStalled",
        "PeerLost",
        "Error",
        "ContainerCannotRun",
        "StartError",
        "Unknown",
    }
)


def _template(raw: object, field: str) -> Json:
    """A pod template, its shape checked where the builders read or add to it (labels,
    annotations, containers' env, mounts and ports, volumes); the rest is the API server's to judge."""
    template = raw if isinstance(raw, dict) else {}
    metadata = object_at(template.get("metadata"), f"{field}.metadata")
    for key in ("labels", "annotations"):
        object_at(metadata.get(key), f"{field}.metadata.{key}")
    spec = object_at(template.get("spec"), f"{field}.spec")
    if not spec.get("containers"):
        raise SpecError(f"{field}.spec.containers must list at least one container")
    for key in ("containers", "initContainers", "volumes"):
        objects_at(spec.get(key), f"{field}.spec.{key}")
    for kind in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(kind) or []):
            for key in ("env", "volumeMounts", "ports"):
                objects_at(container.get(key), f"{field}.spec.{kind}[{index}].{key}")
    for index, container in enumerate(spec.get("initContainers") or []):
        # The CRD refuses it too (hack/gen_template_schema.py), but not Kubeflow's TFJob CRD: the
        # folder check's exit is what the claim check trusts (core/claim_checks.py).
        if container.get("name") == FOLDER_CHECK_CONTAINER:
            raise SpecError(
                f"{field}.spec.initContainers[{index}].name: {FOLDER_CHECK_CONTAINER} is the name of the "
                "operator's own init container: give yours another name"
            )
    return template


def objects_at(raw: object, field: str) -> list[Json]:
    """A list of objects the CRD's schema types; `[]` when absent (checked again, as object_at)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise SpecError(f"{field} must be a list of objects")
    return raw


def object_at(raw: object, field: str) -> Json:
    """An object the CRD's schema types; `{}` when absent. Checked again: a CRD of another
    release, or a manifest read from a file (tfmw convert), may hold anything there."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f"{field} must be an object, got {type(raw).__name__}")
    return raw


def _text(raw: object, field: str, default: str) -> str:
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise SpecError(f"{field} must be a string, got {raw!r}")
    return raw


def _flag(raw: object, field: str) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise SpecError(f"{field} must be true or false, got {raw!r}")
    return raw


def _seconds(raw: object, field: str, low: int) -> int | None:
    """An optional count of seconds (the CRD's int64 from `low`)."""
    return None if raw is None else _bounded(raw, field, 0, low, INT64_MAX)


def _codes(raw: object, field: str) -> frozenset[int] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(type(c) is int and c in EXIT_CODES for c in raw):
        raise SpecError(f"{field} must be a list of exit codes, 0..255")
    return frozenset(raw)


def _names(raw: object, field: str, allowed: Iterable[str]) -> frozenset[str] | None:
    if raw is None:
        return None
    known = frozenset(allowed)
    if not isinstance(raw, list) or not all(isinstance(n, str) and n in known for n in raw):
        raise SpecError(f"{field} must list some of {', '.join(sorted(known))}")
    return frozenset(raw)


def parse_rules(raw: object) -> tuple[FailureRule, ...]:
    """runPolicy.failureRules, as the CRD has checked them (checked again: the CRD of an
    older release may have let anything through)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("spec.runPolicy.failureRules must be a list of rules")
    rules = []
    for position, item in enumerate(raw):
        field = f"spec.runPolicy.failureRules[{position}]"
        if not isinstance(item, dict):
            raise SpecError(f"{field} must be a rule: {{action: Restart|RestartNotCounted|Fail, on...}}")
        try:
            action = RuleAction(str(item.get("action")))
        except ValueError:
            raise SpecError(f"{field}.action must be Restart, RestartNotCounted or Fail") from None
        disruption = item.get("onDisruption")
        rules.append(
            FailureRule(
                action=action,
                name=str(item.get("name") or ""),
                exit_codes=_codes(item.get("onExitCodes"), f"{field}.onExitCodes"),
                exit_codes_not_in=_codes(item.get("onExitCodesNotIn"), f"{field}.onExitCodesNotIn"),
                causes=_names(item.get("onCauses"), f"{field}.onCauses", CAUSES),
                roles=_names(item.get("onRoles"), f"{field}.onRoles", (CHIEF, WORKER, PS, EVALUATOR)),
                disruption=disruption if isinstance(disruption, bool) else None,
                node_fault=item.get("nodeFault") is True,
            )
        )
    return tuple(rules)


def _bounded(raw: object, field: str, default: int, low: int, high: int) -> int:
    if raw is None:
        return default
    if type(raw) is not int or not low <= raw <= high:
        raise SpecError(f"{field} must be an integer in {low}..{high}, got {raw!r}")
    return raw


def parse_node_exclusion(raw: object) -> NodeExclusion | None:
    """runPolicy.nodeExclusion: present (even `{}`) turns it on."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError("spec.runPolicy.nodeExclusion must be an object: {maxNodes, durationSeconds}")
    field = "spec.runPolicy.nodeExclusion"
    return NodeExclusion(
        max_nodes=_bounded(
            raw.get("maxNodes"), f"{field}.maxNodes", DEFAULT_EXCLUDED_NODES, 1, MAX_EXCLUDED_NODES
        ),
        duration_seconds=_bounded(
            raw.get("durationSeconds"),
            f"{field}.durationSeconds",
            DEFAULT_EXCLUSION_SECONDS,
            1,
            MAX_EXCLUSION_SECONDS,
        ),
    )


WARM_MODULE = re.compile(MODULE_NAME_PATTERN + r"\Z")
DEFAULT_WARM_MODULES = ("tensorflow",)


def parse_warm_start(raw: object) -> tuple[str, ...]:
    """runPolicy.warmStart: present (even `{}`) turns it on; the modules to import ahead."""
    if raw is None:
        return ()
    field = "spec.runPolicy.warmStart"
    if not isinstance(raw, dict):
        raise SpecError(f"{field} must be an object: {{preload: [module, ...]}}")
    preload = raw.get("preload", list(DEFAULT_WARM_MODULES))
    if not isinstance(preload, list) or not 1 <= len(preload) <= MAX_WARM_MODULES:
        raise SpecError(f"{field}.preload must be a list of 1 to {MAX_WARM_MODULES} module names")
    for index, name in enumerate(preload):
        if not isinstance(name, str) or len(name) > MAX_MODULE_NAME_CHARS or not WARM_MODULE.match(name):
            raise SpecError(
                f"{field}.preload[{index}] must be a Python module name such as tensorflow, got {name!r}"
            )
    return tuple(preload)


def _min_workers(raw: object, workers: int, parameter_servers: int) -> int | None:
    if raw is None:
        return None
    if type(raw) is not int or not 1 <= raw <= workers:
        raise SpecError(f"spec.minWorkers must be an integer in 1..spec.workers ({workers}), got {raw!r}")
    if parameter_servers:
        raise SpecError(
            "spec.minWorkers is for MultiWorkerMirroredStrategy jobs: a job with spec.parameterServers "
            "replaces a lost worker alone"
        )
    return raw


def parse_job(job: Json, folder_check_image: str = "", supervisor_image: str = "") -> JobSpec:
    meta = object_at(job.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError(f"metadata.name must be the job's name, got {name!r}")
    if (cut := cut_spec_reason(job)) is not None:
        raise SpecError(cut)
    spec = object_at(job.get("spec"), "spec")
    shared = object_at(spec.get("sharedVolume"), "spec.sharedVolume")
    completion = object_at(spec.get("completion"), "spec.completion")
    run = object_at(spec.get("runPolicy"), "spec.runPolicy")
    labels = object_at(meta.get("labels"), "metadata.labels")
    workers = spec.get("workers")
    if type(workers) is not int or not 1 <= workers <= MAX_REPLICAS:
        raise SpecError(f"spec.workers must be an integer in 1..{MAX_REPLICAS}, got {workers!r}")
    try:
        completion_policy = CompletionPolicy(completion.get("policy", CompletionPolicy.MARKER.value))
    except ValueError:
        raise SpecError(
            "spec.completion.policy must be Marker, ChiefExitCode or AllWorkersExitCode"
        ) from None
    claim = _text(shared.get("claimName"), "spec.sharedVolume.claimName", "") or None
    if claim is None and completion_policy is CompletionPolicy.MARKER:
        raise SpecError(
            "spec.sharedVolume.claimName is required: name a PVC in the job's namespace (or set "
            "spec.completion.policy to ChiefExitCode or AllWorkersExitCode, which need no shared volume)"
        )
    template = _template(spec.get("template"), "spec.template")
    chief = spec.get("chief")
    ps = spec.get("parameterServers")
    evaluator = spec.get("evaluator")
    for role, raw in (("chief", chief), ("parameterServers", ps), ("evaluator", evaluator)):
        if raw is not None:
            object_at(raw, f"spec.{role}")
    parameter_servers = 0
    if isinstance(ps, dict):
        parameter_servers = ps.get("replicas", 1)
        if type(parameter_servers) is not int or not 1 <= parameter_servers <= MAX_PARAMETER_SERVERS:
            raise SpecError(
                f"spec.parameterServers.replicas must be an integer in 1..{MAX_PARAMETER_SERVERS}, "
                f"got {parameter_servers!r}"
            )
    try:
        restart_policy = RestartPolicy(run.get("restartPolicy", RestartPolicy.EXIT_CODE.value))
        clean_pod_policy = CleanPodPolicy(run.get("cleanPodPolicy", CleanPodPolicy.RUNNING.value))
        deadline_policy = ProgressDeadlinePolicy(
            run.get("progressDeadlinePolicy", ProgressDeadlinePolicy.RESTART.value)
        )
    except ValueError as error:
        raise SpecError(f"spec.runPolicy: {error}") from error
    return JobSpec(
        name=name,
        namespace=_text(meta.get("namespace"), "metadata.namespace", "default"),
        uid=_text(meta.get("uid"), "metadata.uid", ""),
        workers=workers,
        port=_bounded(spec.get("port"), "spec.port", DEFAULT_PORT, 1, 65535),
        claim_name=claim,
        mount_path=_text(shared.get("mountPath"), "spec.sharedVolume.mountPath", DEFAULT_MOUNT_PATH),
        marker_file=_text(completion.get("markerFile"), "spec.completion.markerFile", DEFAULT_MARKER_FILE),
        chief_exit_grace_seconds=_bounded(
            completion.get("chiefExitGraceSeconds"),
            "spec.completion.chiefExitGraceSeconds",
            DEFAULT_CHIEF_EXIT_GRACE_SECONDS,
            0,
            INT64_MAX,
        ),
        run_policy=RunPolicy(
            restart_policy=restart_policy,
            backoff_limit=_bounded(
                run.get("backoffLimit"), "spec.runPolicy.backoffLimit", DEFAULT_BACKOFF_LIMIT, 0, INT64_MAX
            ),
            active_deadline_seconds=_seconds(
                run.get("activeDeadlineSeconds"), "spec.runPolicy.activeDeadlineSeconds", 1
            ),
            pending_timeout_seconds=_seconds(
                run.get("pendingTimeoutSeconds"), "spec.runPolicy.pendingTimeoutSeconds", 1
            ),
            ttl_seconds_after_finished=_seconds(
                run.get("ttlSecondsAfterFinished"), "spec.runPolicy.ttlSecondsAfterFinished", 0
            ),
            clean_pod_policy=clean_pod_policy,
            suspend=_flag(run.get("suspend"), "spec.runPolicy.suspend"),
            restart_grace_seconds=_bounded(
                run.get("restartGracePeriodSeconds"),
                "spec.runPolicy.restartGracePeriodSeconds",
                DEFAULT_RESTART_GRACE_SECONDS,
                0,
                INT64_MAX,
            ),
            progress_deadline_seconds=_seconds(
                run.get("progressDeadlineSeconds"), "spec.runPolicy.progressDeadlineSeconds", 1
            ),
            progress_deadline_policy=deadline_policy,
            failure_rules=parse_rules(run.get("failureRules")),
            node_exclusion=parse_node_exclusion(run.get("nodeExclusion")),
            warm_start=parse_warm_start(run.get("warmStart")),
        ),
        template=template,
        queue_name=_text(labels.get(LABEL_QUEUE_NAME), f"metadata.labels[{LABEL_QUEUE_NAME}]", "") or None,
        folder_check_image=folder_check_image if claim is not None else "",
        supervisor_image=supervisor_image,
        completion_policy=completion_policy,
        chief_template=_template(chief.get("template"), "spec.chief.template")
        if isinstance(chief, dict)
        else None,
        parameter_servers=parameter_servers,
        ps_template=_template(ps.get("template"), "spec.parameterServers.template")
        if isinstance(ps, dict)
        else None,
        evaluator_template=_template(evaluator.get("template"), "spec.evaluator.template")
        if isinstance(evaluator, dict)
        else None,
        min_workers=_min_workers(spec.get("minWorkers"), workers, parameter_servers),
    )


def parse_spec(job: Json, folder_check_image: str = "", supervisor_image: str = "") -> JobSpec | SpecError:
    try:
        return parse_job(job, folder_check_image, supervisor_image)
    except SpecError as error:
        return error
