"""Pure builders for everything the operator creates: plain dicts, no I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime

from tfmw_operator import contract
from tfmw_operator.api.names import (
    ANNOTATION_POD_GROUP_COUNT,
    ANNOTATION_SETS_VERSION,
    API_VERSION,
    FOLDER_CHECK_CONTAINER,
    KIND,
    LABEL_ATTEMPT,
    LABEL_JOB_NAME,
    LABEL_POD_GROUP,
    LABEL_QUEUE_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    LABEL_ROLE,
    PORT_NAME,
    SHARED_VOLUME_NAME,
)
from tfmw_operator.api.objects import Json, copy_json
from tfmw_operator.api.spec import JobSpec, Member, ReplicaType
from tfmw_operator.api.tfjob import kubeflow_pod_labels
from tfmw_operator.api.times import format_time
from tfmw_operator.contract import WORKER, pod_stem
from tfmw_operator.core.pods import ObservedPod, main_container_index
from tfmw_operator.core.supervision import GANG, supervision_of, template_command

EVENT_SOURCE = "tfmw-operator"
EVENT_MESSAGE_LIMIT = 1024


def pod_name(job_name: str, index: int, replica_type: str = WORKER) -> str:
    """`<job>-<type>-<index>`: `mnist-worker-0`, `mnist-chief-0`, `mnist-ps-1`, `mnist-evaluator-0`."""
    return f"{job_name}-{pod_stem(replica_type, index)}"


def member_pod_name(job: JobSpec, member: Member) -> str:
    return pod_name(job.name, member.index, member.type)


def pod_group_name(job: JobSpec, attempt: int) -> str:
    """The Kueue pod group (and so the Workload) of one attempt: a new group per attempt, so
    a gang restart is admitted afresh as a whole. The UID keeps a later job of the same name
    clear of a Workload still being removed; at most 63 characters, as a label value must."""
    return f"{pod_group_name_prefix(job.name, job.uid)}{attempt}"


def pod_group_name_prefix(job_name: str, job_uid: str) -> str:
    return f"tfmw-{job_name[:40]}-{job_uid[:8]}-"


# Linux refuses to start a program with an environment string ("NAME=value") longer than
# this (MAX_ARG_STRLEN): the container would fail with exit 128, again at every restart.
MAX_ENV_STRING_BYTES = 32 * 4096


def member_host(job: JobSpec, member: Member, attempt: int = 0) -> str:
    """The hostname of the member's pod made for `attempt`, its name's first label in DNS
    (`<host>.<job>.<namespace>.svc`): the pod's own name in the first attempt, else
    `<stem>-a<attempt>` (`worker-1-a2`). A pod made again has a new address, and a name asked
    for in the seconds before may still be answered with the old one (a DNS cache; a dying
    gang's survivors ask it again as their peer goes): gRPC then waits out its 30 s between
    resolutions before TensorFlow's cluster comes up (docs/benchmarks/history.md, "A gang
    re-created: 30 s lost to a stale DNS answer"). A new name has no answer cached. A pod
    that outlives attempts (a gang restarted in place) keeps the name it was made with: the
    control file tells its supervisor the others' (cluster_hosts)."""
    return member_pod_name(job, member) if attempt == 0 else f"{member.stem}-a{attempt}"


def cluster_hosts(job: JobSpec, attempt: int, kept: Iterable[ObservedPod] = ()) -> dict[Member, str]:
    """Every member's hostname in `attempt`: a pod of `kept` (that runs on into it) has its
    own; a pod still to be made gets the attempt's (member_host), unless a gang pod that runs
    on has a supervisor that cannot tell its command the new name (one an older operator
    placed: its report does not say `readsHosts`). Then the pod's own name, which that
    supervisor's TF_CONFIG already has. Level: the same pods give the same hosts."""
    alive = [p for p in kept if not p.deleting]
    own = {p.member: p.hostname or p.name for p in alive}
    renames = not supervision_of(job).in_place or all(
        p.report is not None and p.report.reads_hosts for p in alive if p.member.type in GANG
    )
    return {m: own.get(m) or member_host(job, m, attempt if renames else 0) for m in job.members}


def member_address(job: JobSpec, host: str, qualified: bool = True) -> str:
    """`<host>.<service>.<namespace>.svc:<port>`; unqualified, `<host>.<service>:<port>`, which
    the pod's DNS search path completes with its own namespace."""
    where = f".{job.namespace}.svc" if qualified else ""
    return f"{host}.{job.name}{where}:{job.port}"


def build_tf_config(
    job: JobSpec, member: Member, attempt: int = 0, hosts: Mapping[Member, str] | None = None
) -> str:
    """TF_CONFIG for one pod, as TensorFlow reads it: the cluster (`chief` when the job has
    one, `worker`, `ps` when it has parameter servers) is the same in every pod; the
    evaluator is never in it; a TFJob's also says `"environment": "cloud"`, as Kubeflow's
    does. `hosts`: each member's hostname (cluster_hosts), else the
    attempt's own. Names are qualified with the namespace unless that makes TF_CONFIG too
    long to start a program with; the shorter form fits every job the CRD accepts (1,024
    workers and parameter servers together, 51 characters of name, port 65535: 127 KB)."""
    training = [s for s in job.replica_sets if s.type is not ReplicaType.EVALUATOR]
    hosts = hosts or {}
    for qualified in (True, False):
        cluster = {
            str(s.type): [
                member_address(job, hosts.get(m) or member_host(job, m, attempt), qualified)
                for m in (Member(s.type, i) for i in range(s.replicas))
            ]
            for s in training
        }
        config: dict[str, object] = {
            "cluster": cluster,
            "task": {"type": str(member.type), "index": member.index},
        }
        if job.kubeflow_replica_types:
            # A TFJob's TF_CONFIG always says `"environment": "cloud"` (genTFConfigJSONStr,
            # Kubeflow's pkg/controller.v1/tensorflow/tensorflow.go): a program may read it.
            config["environment"] = "cloud"
        encoded = json.dumps(config, separators=(",", ":"))
        if len(contract.TF_CONFIG) + 1 + len(encoded) + 1 <= MAX_ENV_STRING_BYTES:
            break
    return encoded


def renamed_hosts(job: JobSpec, hosts: Mapping[Member, str]) -> dict[str, str]:
    """The gang's members whose hostname is not their pod's own name, by stem: what the
    control file tells the supervisors, whose TF_CONFIG was written when their pod was made
    (the supervisor puts these hosts into it before each attempt's command)."""
    if not job.tf_config:  # the template's own TF_CONFIG (a TFJob of one replica): not ours to change
        return {}
    return {m.stem: host for m, host in hosts.items() if m.type in GANG and host != member_pod_name(job, m)}


def owner_reference(job: JobSpec) -> Json:
    return {
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_selector(job_name: str) -> Json:
    return {LABEL_JOB_NAME: job_name}


def build_service(job: JobSpec) -> Json:
    """The headless Service that gives every worker a stable DNS name."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": job_selector(job.name),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "clusterIP": "None",
            # Peers must resolve each other while still starting, before any is Ready.
            "publishNotReadyAddresses": True,
            "selector": job_selector(job.name),
            "ports": [{"name": PORT_NAME, "port": job.port, "targetPort": job.port}],
        },
    }


def pod_labels(job: JobSpec, member: Member, attempt: int) -> dict[str, str]:
    labels = {
        LABEL_JOB_NAME: job.name,
        LABEL_REPLICA_TYPE: str(member.type),
        LABEL_REPLICA_INDEX: str(member.index),
        LABEL_ATTEMPT: str(attempt),
        LABEL_ROLE: job.role(member),
    }
    if job.kubeflow_replica_types:  # a TFJob's: Kubeflow's SDK finds its pods by these
        labels |= kubeflow_pod_labels(job, str(member.type), member.index)
    return labels


def build_env(
    job: JobSpec,
    member: Member,
    attempt: int,
    supervised: bool = False,
    hosts: Mapping[Member, str] | None = None,
) -> list[Json]:
    values = {contract.TF_CONFIG: build_tf_config(job, member, attempt, hosts)} if job.tf_config else {}
    values |= {
        contract.JOB_NAME_ENV: job.name,
        contract.JOB_UID_ENV: job.uid,
        contract.NAMESPACE_ENV: job.namespace,
        contract.ROLE_ENV: job.role(member),
        contract.REPLICA_TYPE_ENV: str(member.type),
        contract.REPLICA_INDEX_ENV: str(member.index),
    }
    if member.type is ReplicaType.WORKER:
        values[contract.WORKER_INDEX_ENV] = str(member.index)
    values[contract.NUM_WORKERS_ENV] = str(job.workers)
    values[contract.ATTEMPT_ENV] = str(attempt)
    if job.shared:
        shared_dir = job.mount_path.rstrip("/")
        logs = f"{shared_dir}/{contract.attempt_logs_folder(attempt)}"
        values |= {
            contract.SHARED_DIR_ENV: job.mount_path,
            contract.MARKER_PATH_ENV: f"{shared_dir}/{job.marker_file}",
            contract.PROGRESS_PATH_ENV: f"{shared_dir}/{contract.PROGRESS_FILE}",
            contract.EVALUATION_PATH_ENV: f"{shared_dir}/{contract.EVALUATION_FILE}",
            contract.STEP_TIMES_PATH_ENV: f"{shared_dir}/{contract.STEP_TIMES_FOLDER}/{member.stem}.json",
            contract.STACKS_PATH_ENV: f"{logs}/{member.stem}.stacks",
        }
    env: list[Json] = [{"name": name, "value": value} for name, value in values.items()]
    if supervised:
        # The supervisor's reports name the pod incarnation that wrote them.
        env.append({"name": contract.POD_UID_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}})
    return env


def _with_injections(container: Json, env: list[Json], mount: Json | None) -> Json:
    injected = {item["name"] for item in env}
    own = container.get("env") or []
    container["env"] = [
        e for e in own if not (isinstance(e.get("name"), str) and e["name"] in injected)
    ] + env
    # A default, not an injection: the template's own value wins, and so may an envFrom
    # source's, which an env entry would override.
    if not container.get("envFrom") and all(e.get("name") != contract.GRPC_OPTIONS_ENV for e in own):
        container["env"].append({"name": contract.GRPC_OPTIONS_ENV, "value": contract.GRPC_OPTIONS})
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != SHARED_VOLUME_NAME]
    container["volumeMounts"] = [*mounts, mount] if mount is not None else mounts
    # Without a termination-log file of its own, a failed container's message is the tail of
    # its log: the traceback that status.message then shows.
    container.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    return container


FOLDER_CHECK_USER = 1000  # the operator image's own user
# The init containers' (the folder check, the supervisor's copy) own user, whatever the
# template's pod runs as (root included), so that they meet the "restricted" profile wherever
# the workers do.
INIT_SECURITY_CONTEXT: Json = {
    "runAsNonRoot": True,
    "runAsUser": FOLDER_CHECK_USER,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
# What the folder check may use: it reads one small file and exits.
FOLDER_CHECK_RESOURCES: Json = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}


def build_folder_check(job: JobSpec, mount: Json) -> Json:
    """The first init container of every worker: it fails at once, with a termination message
    naming the claim, when the folder the claim gives is not the one the operator made for
    this job (no `.tfmw-job-uid` with the job's UID), so nothing trains into the wrong place.
    It runs the operator's image, whatever image the workers use; restricted as the
    "restricted" Pod Security profile asks, and read-only."""
    return {
        "name": FOLDER_CHECK_CONTAINER,
        "image": job.folder_check_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-m", "tfmw_operator.folder_check", f"--claim={job.claim_name}"],
        "env": [
            {"name": contract.JOB_UID_ENV, "value": job.uid},
            {"name": contract.SHARED_DIR_ENV, "value": job.mount_path},
        ],
        "volumeMounts": [{**mount, "readOnly": True}],
        "resources": copy_json(FOLDER_CHECK_RESOURCES),
        "terminationMessagePolicy": "File",
        "securityContext": copy_json(INIT_SECURITY_CONTEXT),
    }


def avoid_nodes(spec: Json, nodes: tuple[str, ...]) -> None:
    """Keep the pod off `nodes` (runPolicy.nodeExclusion): a required node affinity on the
    node's name (`matchFields` on `metadata.name`, exact where a hostname label may differ),
    added to every term of the template's own, so it still holds whichever term matches."""
    if not nodes:
        return
    keep_off = {"key": "metadata.name", "operator": "NotIn", "values": sorted(nodes)}
    affinity = spec.get("affinity")
    affinity = affinity if isinstance(affinity, dict) else {}
    node_affinity = affinity.get("nodeAffinity")
    node_affinity = node_affinity if isinstance(node_affinity, dict) else {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = required if isinstance(required, dict) else {}
    terms = [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)] or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*(term.get("matchFields") or []), keep_off]} for term in terms
    ]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity


def _supervise(main: Json, spec: Json, command: list[str], job: JobSpec) -> None:
    """The main container runs its command under the supervisor, from the operator's copy in
    the job's control folder (storage/control.py places it before the first pod)."""
    grace = spec.get("terminationGracePeriodSeconds")
    grace = grace if isinstance(grace, int) and grace >= 0 else 30
    path = contract.supervisor_path(job.mount_path)
    options = ["--grace-seconds", str(grace)]
    if job.run_policy.warm_start:
        options += ["--warm-start", ",".join(job.run_policy.warm_start)]
    main["command"] = contract.supervised_command(command, path, options)
    main.pop("args", None)


def build_pod(
    job: JobSpec,
    member: Member,
    attempt: int,
    pod_group: str | None = None,
    hosts: Mapping[Member, str] | None = None,
) -> Json:
    """The pod of `member` in `attempt`, from its set's pod template; `pod_group`: the Kueue
    pod group it joins (a gang restarted in place keeps its group), else the attempt's;
    `hosts`: the members' hostnames its TF_CONFIG names (cluster_hosts), else the attempt's."""
    template = copy_json(job.template_of(member.type))
    metadata = template.get("metadata") or {}
    spec = template.get("spec") or {}
    name = member_pod_name(job, member)
    command = template_command(template)
    supervision = supervision_of(job)
    supervised = supervision.covers(member) and command is not None
    env = build_env(job, member, attempt, supervised, hosts)
    # The namespace's claim exposes only its own folder; the job's is `<job>` inside it.
    mount = (
        {"name": SHARED_VOLUME_NAME, "mountPath": job.mount_path, "subPath": job.sub_path}
        if job.shared
        else None
    )

    containers = [_with_injections(c, env, mount) for c in spec.get("containers") or []]
    main = containers[main_container_index(containers) or 0]
    ports = [p for p in main.get("ports") or [] if p.get("name") != PORT_NAME]
    main["ports"] = [*ports, {"name": PORT_NAME, "containerPort": job.port, "protocol": "TCP"}]
    spec["containers"] = containers
    init_containers = [_with_injections(c, env, mount) for c in spec.get("initContainers") or []]
    if supervised and command is not None:
        _supervise(main, spec, command, job)
    if job.folder_check_image and mount is not None:
        init_containers.insert(0, build_folder_check(job, mount))
    if init_containers:
        spec["initContainers"] = init_containers

    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != SHARED_VOLUME_NAME]
    if job.claim_name is not None:
        volumes.append({"name": SHARED_VOLUME_NAME, "persistentVolumeClaim": {"claimName": job.claim_name}})
    spec["volumes"] = volumes
    spec["hostname"] = (hosts or {}).get(member) or member_host(job, member, attempt)
    spec["subdomain"] = job.name
    # Training needs no Kubernetes API: no token to steal, and no token volume to wait for
    # (the kubelet's first read of a namespace's CA ConfigMap can be refused for a second,
    # until the API server's node authorizer has seen the pod bound). A template that names
    # a service account wants what it grants: that account's own setting decides.
    if not spec.get("serviceAccountName") and not spec.get("serviceAccount"):
        spec.setdefault("automountServiceAccountToken", False)
    # The operator restarts what the strategy needs; a kubelet restart of one worker would
    # rejoin a collective that has already moved on. But a TFJob whose gang restarts OnFailure
    # asked for the kubelet's restart, and gets it as under Kubeflow (core/supervision.py).
    by_kubelet = supervision.by_kubelet and member.type in GANG
    spec["restartPolicy"] = "OnFailure" if by_kubelet else "Never"
    avoid_nodes(spec, job.avoid_nodes)

    labels = {**(metadata.get("labels") or {}), **pod_labels(job, member, attempt)}
    annotations = dict(metadata.get("annotations") or {})
    if job.sets_version is not None:
        annotations[ANNOTATION_SETS_VERSION] = job.sets_version
    if job.queue_name:
        # Kueue admits the whole group or none of it: no partial gang holds the nodes.
        group = pod_group or pod_group_name(job, attempt)
        labels.update({LABEL_QUEUE_NAME: job.queue_name, LABEL_POD_GROUP: group})
        annotations[ANNOTATION_POD_GROUP_COUNT] = str(len(job.members))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def build_event(job: Json, type: str, reason: str, message: str, now: datetime, suffix: str) -> Json:
    """A core/v1 Event about `job`; `suffix` makes its name unique."""
    meta = job["metadata"]
    stamp = format_time(now)
    return {
        "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": job.get("apiVersion", API_VERSION),
            "kind": job.get("kind", KIND),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "type": type,
        "reason": reason,
        "message": message[:EVENT_MESSAGE_LIMIT],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
    }
