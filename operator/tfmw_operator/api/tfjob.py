"""Kubeflow's TFJob (`kubeflow.org/v1`), as tfmw serves it and as `tfmw convert` rewrites it.

A TFJob becomes the TFMultiWorkerJob that means the same (`convert`): the replica sets as
roles, each replica's `restartPolicy` as failure rules on its role, `successPolicy` as the
completion policy, `runPolicy` as tfmw's. `tfmw convert` prints that manifest, with a note
for every field it had to change; the operator parses it into the JobSpec its engine runs
(`parse_tfjob`), adding what only a TFJob's pods need (Kubeflow's labels, which the SDK's
log and pod look-ups use). A field tfmw cannot honour faithfully is refused, naming it
(`ConversionError`): never silently dropped. How training-operator v1.9 behaves, field by
field, is in docs/tfjob.md. Pure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from tfmw_operator.api.names import API_VERSION, FOLDER_CHECK_CONTAINER, KIND, LABEL_QUEUE_NAME
from tfmw_operator.api.objects import Json, copy_json, cut_spec_reason
from tfmw_operator.api.spec import (
    MAX_PARAMETER_SERVERS,
    MAX_REPLICAS,
    FailureRule,
    JobSpec,
    SpecError,
    object_at,
    objects_at,
    parse_job,
)
from tfmw_operator.api.status import ConditionType, JobStatus, Phase
from tfmw_operator.api.times import format_time

GROUP: Final = "kubeflow.org"
VERSION: Final = "v1"
PLURAL: Final = "tfjobs"
TFJOB_KIND: Final = "TFJob"
TFJOB_API_VERSION: Final = f"{GROUP}/{VERSION}"

# runPolicy.managedBy: who reconciles a TFJob (docs/tfjob.md, "One controller per job").
MANAGED_BY_TFMW: Final = "tfmw.dev/tfjob-controller"
MANAGED_BY_KUBEFLOW: Final = "kubeflow.org/training-operator"

# Kubeflow's pod labels, which its SDK looks pods up by.
LABEL_PREFIX: Final = "training.kubeflow.org/"
KF_JOB_NAME: Final = "training.kubeflow.org/job-name"
KF_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
KF_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
KF_JOB_ROLE: Final = "training.kubeflow.org/job-role"  # `master` on the chief
KF_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
# Kubeflow's own controller adopts pods labelled with its name: tfmw's say their own.
OPERATOR_NAME: Final = "tfmw"
KUBEFLOW_OPERATOR_NAME: Final = "tfjob-controller"

# Annotations on a TFJob that tfmw reads: a shared volume for its kept logs and progress.
ANNOTATION_SHARED_CLAIM: Final = "tfmw.dev/shared-claim"
ANNOTATION_SHARED_MOUNT_PATH: Final = "tfmw.dev/shared-mount-path"
# A PersistentVolumeClaim's name (a DNS subdomain), as the CRD checks spec.sharedVolume.claimName.
CLAIM_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# ... and writes: tfmw's own status of the job, which TFJob's status schema has no room for.
ANNOTATION_STATUS: Final = "tfmw.dev/status"
MAX_STATUS_ANNOTATION_BYTES: Final = 64 * 1024  # what the engine's own status may take on a TFJob

DEFAULT_PORT: Final = 2222
PORT_NAME: Final = "tfjob-port"
CONTAINER: Final = "tensorflow"
UNBOUNDED_BACKOFF: Final = 2**31 - 1  # TFJob without backoffLimit: no limit

# tfReplicaSpecs' keys, spelt any case (Kubeflow's defaulter does the same), and tfmw's sets.
REPLICA_TYPES: Final = {
    "chief": "Chief",
    "master": "Master",
    "worker": "Worker",
    "ps": "PS",
    "evaluator": "Evaluator",
}
# Exit codes 1..127: a program's own error (TFJob's ExitCode retries 128 and up).
PROGRAM_EXIT_CODES: Final = list(range(1, 128))


class ConversionError(SpecError):
    """A TFJob field tfmw has no faithful meaning for; `field` is its path."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


@dataclass(frozen=True)
class Note:
    """A field `convert` had to change, and how: a comment in `tfmw convert`'s output."""

    field: str
    said: str


# True of the TFMultiWorkerJob `tfmw convert` prints, which sets TF_CONFIG for every task;
# not of the TFJob tfmw serves, whose lone task gets none, as under Kubeflow (JobSpec.tf_config).
LONE_TASK_NOTE: Final = Note(
    "TF_CONFIG", "set for the lone task too (TFJob sets none for a job of one replica)"
)


@dataclass(frozen=True)
class Conversion:
    manifest: Json  # the TFMultiWorkerJob
    notes: tuple[Note, ...]
    replica_types: dict[str, str]  # tfmw's set -> the TFJob's key as written ("Worker", "Master" ...)
    distributed: bool  # TFJob sets TF_CONFIG only when its replicas add up to more than one
    # What the TFJob wrote that each of the manifest's failureRules stands for, in order:
    # `spec.tfReplicaSpecs.Worker.restartPolicy ExitCode`.
    rule_origins: tuple[str, ...] = ()
    # Every gang replica (Chief, Worker) restarts OnFailure or Always, and no PS: served by tfmw,
    # the gang's pods restart a failed container themselves (JobSpec.restart_containers).
    restart_containers: bool = False


def _replicas(spec: Json, key: str) -> int:
    value = spec.get("replicas", 1)
    if not isinstance(value, int) or value < 0:
        raise ConversionError(
            f"spec.tfReplicaSpecs.{key}.replicas", f"must be a non-negative integer, got {value!r}"
        )
    return value


def _sets(tfjob: Json) -> dict[str, tuple[str, Json]]:
    """tfReplicaSpecs by tfmw's set (chief, worker, ps, evaluator): (the key as written, spec)."""
    raw = (tfjob.get("spec") or {}).get("tfReplicaSpecs")
    if not isinstance(raw, dict) or not raw:
        raise ConversionError("spec.tfReplicaSpecs", "is required: at least a Worker or a Chief")
    sets: dict[str, tuple[str, Json]] = {}
    for key, replica in raw.items():
        kind = str(key).lower()
        if kind not in REPLICA_TYPES:
            raise ConversionError(
                f"spec.tfReplicaSpecs.{key}",
                "tfmw runs the replica types Chief (or Master), Worker, PS and Evaluator",
            )
        if not isinstance(replica, dict):
            raise ConversionError(f"spec.tfReplicaSpecs.{key}", "must be a replica spec")
        target = "chief" if kind in ("chief", "master") else kind
        if target in sets:
            first = sets[target][0]
            why = (
                "a TFJob has at most one Chief or Master"
                if target == "chief"
                else f"names the same replica type as spec.tfReplicaSpecs.{first}: keep one of them"
            )
            raise ConversionError(f"spec.tfReplicaSpecs.{key}", why)
        sets[target] = (str(key), replica)
    return sets


def _port(sets: dict[str, tuple[str, Json]], notes: list[Note]) -> int:
    """The one port every task listens on: TFJob's `tfjob-port` on the `tensorflow` container."""
    found: dict[int, str] = {}
    for key, replica in sets.values():
        field = f"spec.tfReplicaSpecs.{key}.template"
        pod = object_at(object_at(replica.get("template"), field).get("spec"), f"{field}.spec")
        for index, container in enumerate(objects_at(pod.get("containers"), f"{field}.spec.containers")):
            if container.get("name") == CONTAINER:
                for entry in objects_at(container.get("ports"), f"{field}.spec.containers[{index}].ports"):
                    if entry.get("name") == PORT_NAME:
                        number = entry.get("containerPort", DEFAULT_PORT)
                        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
                            raise ConversionError(
                                f"spec.tfReplicaSpecs.{key}.template.spec.containers[{CONTAINER}]"
                                f".ports[{PORT_NAME}].containerPort",
                                f"must be a port number from 1 to 65535, got {number!r}",
                            )
                        found.setdefault(number, key)
    if len(found) > 1:
        raise ConversionError(
            "spec.tfReplicaSpecs.*.template.spec.containers[tensorflow].ports[tfjob-port]",
            f"tfmw runs every task on one port; these replicas name several: {sorted(found)}",
        )
    port = next(iter(found), DEFAULT_PORT)
    if found:
        notes.append(Note("spec.port", f"{port}, the replicas' tfjob-port (the pods get it as port tfmw)"))
    return port


def _template(
    key: str, replica: Json, notes: list[Note], priority_class: str | None, launched: bool = False
) -> Json:
    field = f"spec.tfReplicaSpecs.{key}.template"
    template: Json = copy_json(object_at(replica.get("template"), field))
    spec = template["spec"] = object_at(template.get("spec"), f"{field}.spec")
    for index, init in enumerate(objects_at(spec.get("initContainers"), f"{field}.spec.initContainers")):
        if init.get("name") == FOLDER_CHECK_CONTAINER:
            raise ConversionError(
                f"{field}.spec.initContainers[{index}].name",
                f"{FOLDER_CHECK_CONTAINER} is the name of the operator's own init container: "
                "give yours another name",
            )
    containers = objects_at(spec.get("containers"), f"{field}.spec.containers")
    if not launched and not any(c.get("name") == CONTAINER for c in containers):
        # Kubeflow's webhook refuses it too ("must have at least one container with name
        # tensorflow"): its controller gives TF_CONFIG and the port to that container only.
        raise ConversionError(
            f"{field}.spec.containers",
            f"must have a container named {CONTAINER}: it runs the program and gets TF_CONFIG, as in TFJob",
        )
    if spec.get("restartPolicy"):
        notes.append(
            Note(
                f"spec.tfReplicaSpecs.{key}.template.spec.restartPolicy", "dropped: tfmw restarts pods itself"
            )
        )
        del spec["restartPolicy"]
    # Only the `tensorflow` container's tfjob-port became spec.port (_port): a sidecar's port of
    # that name is the sidecar's own and stays.
    for container in objects_at(spec.get("containers"), f"{field}.spec.containers"):
        if container.get("name") == CONTAINER and container.get("ports"):
            kept = [p for p in container["ports"] if not (isinstance(p, dict) and p.get("name") == PORT_NAME)]
            if len(kept) != len(container["ports"]):
                container["ports"] = kept
                if not kept:
                    del container["ports"]
    if priority_class and not spec.get("priorityClassName"):
        spec["priorityClassName"] = priority_class
    return template


def _rules(
    role_keys: dict[str, str], policies: dict[str, str], notes: list[Note], backoff_limit: object
) -> tuple[list[Json], list[str]]:
    """Each replica's restartPolicy as rules on its role, and what each rule stands for: Never
    fails, OnFailure and Always restart, ExitCode restarts what took the pod away and exit
    codes 128 and up. As in Kubeflow's training-operator v1.9, restarts that are no kubelet's
    container restart do not count against backoffLimit (`PastBackoffLimit` sums the
    restartCount of the OnFailure and Always replicas' pods, pkg/core/job.go), but for a
    limit of 0, under which its first failed pod fails the job (`exceedsBackoffLimit`,
    pkg/controller.v1/common/job.go): an ExitCode replica's, and a disruption's under
    OnFailure or Always (Kubeflow deletes the failed pod for a new one, pkg/controller.v1/
    common/pod.go, and the new pod's restartCount starts at 0)."""
    rules: list[Json] = []
    origins: list[str] = []
    for target, key in role_keys.items():
        policy = policies[target]
        roles = ["worker", "chief"] if target == "worker" and "chief" not in role_keys else [target]
        field = f"spec.tfReplicaSpecs.{key}.restartPolicy"
        restart = "Restart" if backoff_limit == 0 else "RestartNotCounted"
        made: list[Json]
        if policy == "Never":
            made = [{"onRoles": roles, "action": "Fail"}]
        elif policy in ("OnFailure", "Always"):
            if policy == "Always":
                notes.append(Note(field, "Always: a pod that exits 0 is not restarted (OnFailure's rule)"))
            made = [{"onRoles": roles, "action": "Restart"}]
            if restart == "RestartNotCounted":
                made.insert(0, {"onRoles": roles, "onDisruption": True, "action": restart})
        elif policy == "ExitCode":
            if backoff_limit not in (0, None):
                notes.append(
                    Note(field, "ExitCode: its restarts do not count against backoffLimit, as in TFJob")
                )
            made = [
                {"onRoles": roles, "onDisruption": True, "action": restart},
                {"onRoles": roles, "onExitCodes": PROGRAM_EXIT_CODES, "action": "Fail"},
                {"onRoles": roles, "onDisruption": False, "action": restart},
            ]
        else:
            raise ConversionError(field, f"must be Always, OnFailure, Never or ExitCode, got {policy!r}")
        rules += made
        origins += [f"{field} {policy}"] * len(made)
    return rules, origins


@dataclass(frozen=True)
class ConvertedRule(FailureRule):
    """A failure rule the conversion made of a replica's restartPolicy. A TFJob has no
    failureRules, so messages (`... (<rule>: Fail)`, a restart's, status.excludedNodes' rule)
    name what the TFJob wrote instead: its `name`, `spec.tfReplicaSpecs.Worker.restartPolicy
    ExitCode`."""

    def describe(self, position: int) -> str:
        return self.name


def _scheduling(run: Json, labels: Json, total: int, notes: list[Note]) -> str | None:
    """runPolicy.schedulingPolicy where it has a meaning in tfmw; the priority class to set."""
    policy = run.get("schedulingPolicy")
    if policy is None:
        return None
    if not isinstance(policy, dict):
        raise ConversionError("spec.runPolicy.schedulingPolicy", "must be an object")
    field = "spec.runPolicy.schedulingPolicy"
    minimum = policy.get("minAvailable")
    if minimum is not None and minimum != total:
        raise ConversionError(
            f"{field}.minAvailable",
            f"tfmw admits the whole gang together or none of it (under Kueue): minAvailable {minimum} "
            f"of {total} pods has no meaning here; leave it out or set it to {total}",
        )
    for unsupported in ("minResources", "scheduleTimeoutSeconds"):
        if policy.get(unsupported) is not None:
            raise ConversionError(
                f"{field}.{unsupported}",
                "belongs to a gang scheduler (volcano, scheduler-plugins) that tfmw does not drive: "
                "leave it out, and give the job a Kueue queue instead (docs/kueue.md)",
            )
    queue = policy.get("queue")
    if isinstance(queue, str) and queue and not labels.get(LABEL_QUEUE_NAME):
        labels[LABEL_QUEUE_NAME] = queue
        notes.append(
            Note(f"{field}.queue", f"metadata.labels[{LABEL_QUEUE_NAME}]: {queue} (a Kueue LocalQueue)")
        )
    priority_class = policy.get("priorityClass")
    if isinstance(priority_class, str) and priority_class:
        notes.append(
            Note(f"{field}.priorityClass", "every pod's priorityClassName, where its template sets none")
        )
        return priority_class
    return None


def convert(tfjob: Json, launched: bool = False) -> Conversion:
    """The TFMultiWorkerJob that means what `tfjob` means, or ConversionError naming the
    field tfmw cannot honour. `launched`: a job tfmw launched before, whose pods run: the
    refusals added since (a `tensorflow` container, the shared-volume annotations' form) are
    not made on it, so an upgrade of the operator never fails a running job for them."""
    meta = object_at(tfjob.get("metadata"), "metadata")
    spec = object_at(tfjob.get("spec"), "spec")
    run = object_at(spec.get("runPolicy"), "spec.runPolicy")
    notes: list[Note] = []
    sets = _sets(tfjob)
    counts = {target: _replicas(replica, key) for target, (key, replica) in sets.items()}
    for single in ("chief", "evaluator"):
        if counts.get(single, 1) not in (0, 1) and single in sets:
            raise ConversionError(
                f"spec.tfReplicaSpecs.{sets[single][0]}.replicas", f"tfmw runs one {single}"
            )
    # The bounds parse_spec puts on the converted job, said of the TFJob's own fields.
    for target, most in (("worker", MAX_REPLICAS), ("ps", MAX_PARAMETER_SERVERS)):
        if target in sets and counts[target] > most:
            raise ConversionError(
                f"spec.tfReplicaSpecs.{sets[target][0]}.replicas",
                f"tfmw runs at most {most}, got {counts[target]}",
            )
    sets = {target: value for target, value in sets.items() if counts[target] > 0}
    if "worker" not in sets:
        raise ConversionError(
            "spec.tfReplicaSpecs.Worker",
            "tfmw needs at least one worker; a lone chief runs as one Worker (worker 0 is the chief)",
        )
    if spec.get("enableDynamicWorker"):
        raise ConversionError(
            "spec.enableDynamicWorker",
            "tfmw gives every task the whole cluster in TF_CONFIG: leave it out (or false)",
        )
    for field in ("minResources",):
        if field in run:
            raise ConversionError(
                f"spec.runPolicy.{field}",
                "has no meaning in tfmw: leave it out, and give the job a Kueue queue for its quota "
                "(docs/kueue.md)",
            )
    labels = {k: v for k, v in object_at(meta.get("labels"), "metadata.labels").items() if isinstance(v, str)}
    total = sum(counts[t] for t in sets)
    priority_class = _scheduling(run, labels, total, notes)
    port = _port(sets, notes)
    templates = {
        target: _template(key, replica, notes, priority_class, launched)
        for target, (key, replica) in sets.items()
    }
    policies = {
        target: str(replica.get("restartPolicy") or "Never") for target, (key, replica) in sets.items()
    }
    role_keys = {target: key for target, (key, _) in sets.items()}
    if "chief" in sets and role_keys["chief"].lower() == "master":
        notes.append(
            Note(
                f"spec.tfReplicaSpecs.{role_keys['chief']}",
                "runs as TensorFlow 2's chief: pod <job>-chief-0, TF_CONFIG type chief (Kubeflow's: "
                "<job>-master-0, master); its replica-type label stays master",
            )
        )
    gang = [target for target in ("chief", "worker") if target in sets]
    restart_containers = "ps" not in sets and all(policies[t] in ("OnFailure", "Always") for t in gang)
    if restart_containers:
        notes.append(
            Note(
                f"spec.tfReplicaSpecs.{role_keys['worker']}.restartPolicy",
                "a failed container restarts the whole gang here (a TFJob tfmw serves keeps the "
                "kubelet's restart in the pod, as Kubeflow's controller does)",
            )
        )
    success = spec.get("successPolicy") or ""
    if success not in ("", "AllWorkers"):
        raise ConversionError("spec.successPolicy", f"must be empty or AllWorkers, got {success!r}")
    if "chief" in sets or success == "":
        policy = "ChiefExitCode"
        if success == "AllWorkers":
            notes.append(
                Note("spec.successPolicy", "ChiefExitCode: with a Chief, TFJob ends on the chief's exit")
            )
    else:
        policy = "AllWorkersExitCode"
    failure_rules, rule_origins = _rules(role_keys, policies, notes, run.get("backoffLimit"))
    run_policy: Json = {
        "restartPolicy": "Never",
        "failureRules": failure_rules,
        "cleanPodPolicy": run.get("cleanPodPolicy") or "None",
    }
    if "cleanPodPolicy" not in run:
        notes.append(Note("spec.runPolicy.cleanPodPolicy", "None, TFJob's default (tfmw's own is Running)"))
    backoff = run.get("backoffLimit")
    run_policy["backoffLimit"] = UNBOUNDED_BACKOFF if backoff is None else backoff
    if backoff is None:
        notes.append(Note("spec.runPolicy.backoffLimit", "unset: no limit, as TFJob has none"))
    for field in ("activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend"):
        if run.get(field) is not None:
            run_policy[field] = run[field]
    if run.get("managedBy") is not None:
        notes.append(Note("spec.runPolicy.managedBy", "dropped: a TFMultiWorkerJob is always tfmw's"))
    job_spec: Json = {
        "workers": counts["worker"],
        "port": port,
        "completion": {"policy": policy},
        "runPolicy": run_policy,
        "template": templates["worker"],
    }
    if "chief" in sets:
        job_spec["chief"] = {"template": templates["chief"]}
    if "ps" in sets:
        job_spec["parameterServers"] = {"replicas": counts["ps"], "template": templates["ps"]}
    if "evaluator" in sets:
        job_spec["evaluator"] = {"template": templates["evaluator"]}
        notes.append(
            Note(
                f"spec.tfReplicaSpecs.{role_keys['evaluator']}",
                "the evaluator is not in TF_CONFIG's cluster (TensorFlow's rule; TFJob put it there)",
            )
        )
    annotations = object_at(meta.get("annotations"), "metadata.annotations")
    claim = annotations.get(ANNOTATION_SHARED_CLAIM)
    if isinstance(claim, str) and claim:
        # The CRD's checks of spec.sharedVolume, which no CRD makes on a TFJob's annotations.
        if not launched and (len(claim) > 253 or not CLAIM_NAME.fullmatch(claim)):
            raise ConversionError(
                f"metadata.annotations[{ANNOTATION_SHARED_CLAIM}]",
                "must be a PersistentVolumeClaim's name: lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit",
            )
        shared: Json = {"claimName": claim}
        mount_path = annotations.get(ANNOTATION_SHARED_MOUNT_PATH)
        if isinstance(mount_path, str) and mount_path:
            if not launched and (not mount_path.startswith("/") or len(mount_path) > 4096):
                raise ConversionError(
                    f"metadata.annotations[{ANNOTATION_SHARED_MOUNT_PATH}]",
                    "must be an absolute path such as /shared",
                )
            shared["mountPath"] = mount_path
        job_spec["sharedVolume"] = shared
    manifest_meta: Json = {"name": meta.get("name")}
    if meta.get("namespace"):
        manifest_meta["namespace"] = meta["namespace"]
    if labels:
        manifest_meta["labels"] = labels
    manifest = {"apiVersion": API_VERSION, "kind": KIND, "metadata": manifest_meta, "spec": job_spec}
    # Kubeflow sets TF_CONFIG only when the replicas add up to other than 1 (isDistributed,
    # pkg/controller.v1/tensorflow/util.go; SetClusterSpec, tfjob_controller.go).
    distributed = total > 1
    if not distributed:
        notes.append(LONE_TASK_NOTE)
    return Conversion(
        manifest,
        tuple(notes),
        {t: k for t, k in role_keys.items()},
        distributed,
        tuple(rule_origins),
        restart_containers,
    )


def parse_tfjob(tfjob: Json, folder_check_image: str = "") -> JobSpec:
    """The JobSpec tfmw's engine runs for `tfjob`: its conversion's, owned by the TFJob, with
    Kubeflow's pod labels and failure rules named by the restartPolicy they came from;
    SpecError (ConversionError) naming the field it cannot run."""
    if (cut := cut_spec_reason(tfjob)) is not None:
        raise SpecError(cut)
    conversion = convert(tfjob, launched_before(tfjob))
    manifest = conversion.manifest
    meta = tfjob.get("metadata") or {}
    manifest["metadata"].update(namespace=meta.get("namespace", "default"), uid=meta.get("uid", ""))
    job = parse_job(manifest, folder_check_image)
    rules = tuple(
        ConvertedRule(**{**{f.name: getattr(rule, f.name) for f in dataclasses.fields(rule)}, "name": origin})
        for rule, origin in zip(job.run_policy.failure_rules, conversion.rule_origins, strict=True)
    )
    return dataclasses.replace(
        job,
        run_policy=dataclasses.replace(job.run_policy, failure_rules=rules),
        api_version=TFJOB_API_VERSION,
        kind=TFJOB_KIND,
        kubeflow_replica_types=tuple(sorted(conversion.replica_types.items())),
        tf_config=conversion.distributed,
        restart_containers=conversion.restart_containers,
        conversion_notes=tuple(
            f"{note.field}: {note.said}" for note in conversion.notes if note != LONE_TASK_NOTE
        ),
        sets_version=sets_version(tfjob),
    )


# The spec fields a TFJob's pods are made from: held while it runs (the admission policy
# tfmw-tfjob-spec-held), and made again from when they change anyway (policies/spec_change.py).
SETS_FIELDS: Final = ("tfReplicaSpecs", "successPolicy", "enableDynamicWorker")


def sets_fingerprint(tfjob: Json) -> str:
    """A hash of the TFJob's SETS_FIELDS as stored: the same spec gives the same one, whatever
    the operator's version (the conversion is not hashed: an upgrade that converts otherwise
    must not make every running job's pods again). An empty field is an absent one."""
    spec = tfjob.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    sets = {f: spec[f] for f in SETS_FIELDS if spec.get(f) not in (None, "", False, {})}
    encoded = json.dumps(sets, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:32]


def sets_version(tfjob: Json) -> str:
    """`<metadata.generation>:<sets_fingerprint>`: the generation tells a change a user wrote
    from one the API server makes on read (a default a newer CRD adds), which moves no
    generation and must not make running pods again."""
    generation = (tfjob.get("metadata") or {}).get("generation")
    return f"{generation if isinstance(generation, int) else 0}:{sets_fingerprint(tfjob)}"


def parse_sets_version(raw: str | None) -> tuple[int, str] | None:
    """(generation, fingerprint) of a sets_version (a pod's annotation, which may say anything);
    None for anything else."""
    generation, colon, fingerprint = (raw or "").partition(":")
    if not colon or not fingerprint or not generation.isdigit() or len(generation) > 18:
        return None
    return int(generation), fingerprint


def recorded_status(tfjob: Json) -> JobStatus:
    """tfmw's own status of the job, kept in its annotation (TFJob's status schema has no room
    for it): nothing known when it is missing, too large or not tfmw's JSON (edited by hand)."""
    raw = ((tfjob.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_STATUS)
    if not isinstance(raw, str) or len(raw) > MAX_STATUS_ANNOTATION_BYTES:
        return JobStatus()
    try:
        return JobStatus.from_json(json.loads(raw))
    except (ValueError, RecursionError):
        return JobStatus()


def launched_before(tfjob: Json) -> bool:
    """Whether tfmw's own status annotation says it launched the job (the job's owner can
    write it: it only ever spares the job checks that guard nothing but the job itself)."""
    return recorded_status(tfjob).launched_attempt is not None


def parse_tfjob_spec(tfjob: Json, folder_check_image: str = "") -> JobSpec | SpecError:
    try:
        return parse_tfjob(tfjob, folder_check_image)
    except SpecError as error:
        return error


def kubeflow_pod_labels(job: JobSpec, replica_type: str, index: int) -> dict[str, str]:
    """The labels Kubeflow's controller puts on a TFJob's pods, which its SDK reads: the
    replica type as the TFJob spells it, lower-cased (`master` for a Master), and
    `job-role: master` on the chief (worker 0 without one)."""
    spelt = dict(job.kubeflow_replica_types).get(replica_type, replica_type)
    labels = {
        KF_OPERATOR_NAME: OPERATOR_NAME,
        KF_JOB_NAME: job.name,
        KF_REPLICA_TYPE: spelt.lower(),
        KF_REPLICA_INDEX: str(index),
    }
    chief = job.chief
    if (str(chief.type), chief.index) == (replica_type, index):
        labels[KF_JOB_ROLE] = "master"
    return labels


def managed_by(tfjob: Json) -> str | None:
    value = ((tfjob.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
    return value if isinstance(value, str) and value else None


def is_kubeflows_pod(labels: Any) -> bool:
    """A pod Kubeflow's own TFJob controller made: its operator-name label."""
    return isinstance(labels, dict) and labels.get(KF_OPERATOR_NAME) == KUBEFLOW_OPERATOR_NAME


# ---- the status, in TFJob's own shape ----


def _condition(kind: str, true: bool, reason: str, message: str, stamp: str, old: Json | None) -> Json:
    """A TFJob condition; its transition time moves only when its status does."""
    status = "True" if true else "False"
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else stamp
    updated = (
        old.get("lastUpdateTime")
        if old and old.get("status") == status and old.get("reason") == reason
        else stamp
    )
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": updated or stamp,
        "lastTransitionTime": transition or stamp,
    }


def tfjob_conditions(status: JobStatus, namespace: str, name: str, old: list[Json], stamp: str) -> list[Json]:
    """TFJob's conditions for tfmw's status, as Kubeflow's controller keeps them: in the order
    they happened, the newest last; Running and Restarting exclude each other; Running turns
    False (kept) once the job has finished or is suspended; nothing changes once Failed.
    tfmw's own account (the cause, the worker, the log's end) is in the messages."""
    previous = {c.get("type"): c for c in old if isinstance(c, dict) and isinstance(c.get("type"), str)}
    if previous.get("Failed", {}).get("status") == "True":
        return old
    who = f"TFJob {namespace}/{name}"
    wanted: dict[str, tuple[bool, str, str]] = {}
    if status.launched_attempt is not None or status.phase is not None:
        wanted["Created"] = (True, "TFJobCreated", f"TFJob {name} is created.")
    phase = status.phase
    restarting = status.condition(ConditionType.RESTARTING)
    if phase is Phase.RUNNING:
        wanted["Running"] = (True, "TFJobRunning", f"{who} is running.")
    elif phase is Phase.RESTARTING and restarting is not None and restarting.true:
        wanted["Restarting"] = (True, "TFJobRestarting", restarting.message)
    elif phase is Phase.SUSPENDED:
        wanted["Suspended"] = (True, "TFJobSuspended", f"TFJob {name} is suspended.")
    elif phase is Phase.SUCCEEDED:
        succeeded = status.condition(ConditionType.SUCCEEDED)
        told = f" ({succeeded.message})" if succeeded is not None and succeeded.message else ""
        wanted["Succeeded"] = (True, "TFJobSucceeded", f"{who} successfully completed.{told}")
    elif phase is Phase.FAILED:
        wanted["Failed"] = (
            True,
            "TFJobFailed",
            f"{who} has failed because {status.message or status.reason}",
        )
    conditions = [c for c in old if isinstance(c, dict)]

    def put(kind: str, true: bool, reason: str, message: str) -> None:
        nonlocal conditions
        held = previous.get(kind)
        same = held is not None and (held.get("status"), held.get("reason")) == (
            "True" if true else "False",
            reason,
        )
        if same and held is not None and held.get("message") == message:
            return
        fresh = _condition(kind, true, reason, message, stamp, held)
        conditions = [c for c in conditions if c.get("type") != kind] + [fresh]
        previous[kind] = fresh

    for kind, (true, reason, message) in wanted.items():
        put(kind, true, reason, message)
        if kind in ("Running", "Restarting"):
            other = "Restarting" if kind == "Running" else "Running"
            conditions = [c for c in conditions if c.get("type") != other]
            previous.pop(other, None)
    if phase in (Phase.SUCCEEDED, Phase.FAILED):
        # Kubeflow flips Running's status alone, where it stands: reason, message and times
        # kept (filterOutCondition, pkg/util/status.go).
        conditions = [
            {**c, "status": "False"} if c.get("type") == "Running" and c.get("status") == "True" else c
            for c in conditions
        ]
    elif phase is Phase.SUSPENDED:
        # Kubeflow sets Running False with reason TFJobSuspended (pkg/controller.v1/common/job.go).
        conditions = [
            _condition("Running", False, "TFJobSuspended", c.get("message") or "", stamp, c)
            if c.get("type") == "Running" and c.get("status") == "True"
            else c
            for c in conditions
        ]
    if phase is not Phase.SUSPENDED and previous.get("Suspended", {}).get("status") == "True":
        put("Suspended", False, "TFJobResumed", f"TFJob {name} is resumed.")
    return conditions


def tfjob_status(status: JobStatus, spec: JobSpec | None, tfjob: Json, old: Json, stamp: str) -> Json:
    """TFJob's status (`conditions`, `replicaStatuses`, `startTime`, `completionTime`) for
    tfmw's: every tool that reads a TFJob's status reads it as Kubeflow's controller wrote it.
    `spec` is None for a TFJob tfmw refused (its status says why, in its Failed condition)."""
    meta = tfjob.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    spelt = dict(spec.kubeflow_replica_types) if spec is not None else {}
    replicas: Json = {}
    counted = {r.type: r for r in status.replicas}
    for replica_set in spec.replica_sets if spec is not None else ():
        # Kubeflow's defaulter spells the keys CamelCase in memory before its status is written
        # (setTypeNamesToCamelCase, pkg/apis/kubeflow.org/v1/tensorflow_defaults.go).
        written = spelt.get(str(replica_set.type), str(replica_set.type))
        key = REPLICA_TYPES.get(written.lower(), written)
        counts = counted.get(str(replica_set.type))
        if counts is None and replica_set.type.value == "worker" and status.workers is not None:
            active, succeeded, failed = (
                status.workers.running,
                status.workers.succeeded,
                status.workers.failed,
            )
        elif counts is not None:
            active, succeeded, failed = counts.running, counts.succeeded, counts.failed
        else:
            active = succeeded = failed = 0
        if status.phase is Phase.SUCCEEDED:  # as Kubeflow's cleanup pass moves them
            active, succeeded = 0, succeeded + active
        replicas[key] = {
            k: v for k, v in (("active", active), ("succeeded", succeeded), ("failed", failed)) if v
        }
    rendered: Json = {
        "conditions": tfjob_conditions(status, namespace, name, list(old.get("conditions") or []), stamp),
        "replicaStatuses": replicas,
    }
    if status.start_time is not None:
        rendered["startTime"] = format_time(status.start_time)
    if status.completion_time is not None:
        rendered["completionTime"] = format_time(status.completion_time)
    return rendered


# ---- one controller per job (docs/tfjob.md, "One controller per job") ----

SERVE_OFF: Final = "off"
SERVE_MANAGED_BY: Final = "managedBy"  # only TFJobs whose runPolicy.managedBy names tfmw
SERVE_ALL: Final = "all"  # also those that name no controller, or Kubeflow's, once it is gone
SERVE_MODES: Final = (SERVE_OFF, SERVE_MANAGED_BY, SERVE_ALL)
# Where Kubeflow's own manifests install its training-operator (manifests/overlays/standalone
# and the Kubeflow platform alike).
KUBEFLOW_NAMESPACE: Final = "kubeflow"


@dataclass(frozen=True)
class Serving:
    """Whether tfmw serves a TFJob, and why not when it does not."""

    served: bool
    why: str = ""
    settled: bool = True  # False: not known yet (look again soon, say nothing yet)


def serves(
    mode: str, tfjob: Json, kubeflows_pods: bool, kubeflow_running: bool | None, launched: bool = False
) -> Serving:
    """Exactly one controller reconciles a TFJob at any moment:

    - `runPolicy.managedBy: tfmw.dev/tfjob-controller` is tfmw's, in both modes (Kubeflow's
      training-operator v1.9 leaves a TFJob whose managedBy names another controller alone);
    - another controller named there is that controller's;
    - a TFJob that names none (or Kubeflow's) is tfmw's only in mode `all`, which the platform
      turns on once Kubeflow's TFJob controller is gone; and never one whose pods Kubeflow's
      controller made (a job started under it is left to finish there), nor one not yet
      launched while Kubeflow's controller is seen running (in its own namespace: a pod a
      tenant labels so proves nothing), nor while that namespace's pods are not listed yet
      (`kubeflow_running` None: unsettled). A job tfmw launched stays tfmw's: nothing seen
      elsewhere stops its reconciles."""
    if mode == SERVE_OFF:
        return Serving(False, "tfmw serves no TFJob (--tfjobs=off)")
    named = managed_by(tfjob)
    if named == MANAGED_BY_TFMW:
        return Serving(True)
    if named is not None and named != MANAGED_BY_KUBEFLOW:
        return Serving(False, f"spec.runPolicy.managedBy names {named[:80]}, not tfmw")
    hand_over = f"set spec.runPolicy.managedBy: {MANAGED_BY_TFMW} to hand a new TFJob to tfmw"
    if mode != SERVE_ALL:
        return Serving(False, f"tfmw serves only TFJobs handed to it (--tfjobs=managedBy): {hand_over}")
    if kubeflows_pods:
        return Serving(
            False,
            "its pods were made by Kubeflow's training-operator: tfmw does not take over a job started "
            "there; delete and create it again to run it under tfmw",
        )
    if launched:
        return Serving(True)
    if kubeflow_running is None:
        return Serving(False, "whether Kubeflow's training-operator runs is not known yet", settled=False)
    if kubeflow_running:
        return Serving(
            False,
            "Kubeflow's training-operator is running in this cluster and would serve it too: stop it, or "
            + hand_over,
        )
    return Serving(True)
