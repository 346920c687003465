"""Test object wrappers: one builder for jobs and pods, used by unit, integration, e2e and bench.

`JobWrapper.obj()` is a job as the API server returns it (uid, generation, status), for
the pure core; `JobWrapper.manifest()` is what a user would apply.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tfmw_operator.api.names import API_VERSION, KIND
from tfmw_operator.api.spec import JobSpec, Member, ReplicaType, parse_job, parse_spec
from tfmw_operator.api.times import format_time
from tfmw_operator.contract import DEFAULT_MARKER_FILE, MARKER_ATTEMPT, MARKER_JOB_UID
from tfmw_operator.core.builders import build_pod, build_service
from tfmw_operator.core.decision import Decision
from tfmw_operator.core.observed import MarkerState, Observed
from tfmw_operator.core.owned import Owned
from tfmw_operator.core.progress import ProgressReport
from tfmw_operator.core.reconcile import reconcile
from tfmw_operator.core.reports import ChildEnd, PodReport

Json = dict[str, Any]
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
# A Node object with no kubelet behind it; the integration tests play its kubelet.
SIM_NODE = "tfmw-simulated-node"
# The operator's own image, as a deployed operator gives it (it places the in-pod supervisor).
SUPERVISOR_IMAGE = "tfmw-operator:dev"
# A trainer's command and args, given in full: a template the supervisor can wrap.
TRAINER_COMMAND = ["python3", "-m", "tfmw_trainer"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class JobWrapper:
    def __init__(self, name: str = "mnist", namespace: str = "default", workers: int = 2) -> None:
        self._job: Json = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "generation": 1,
                "creationTimestamp": format_time(T0),
            },
            "spec": {
                "workers": workers,
                "sharedVolume": {"claimName": "tfmw-shared"},
                "runPolicy": {},
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tfmw-trainer:dev"}]}},
            },
        }

    def workers(self, n: int) -> JobWrapper:
        self._job["spec"]["workers"] = n
        return self

    def port(self, port: int) -> JobWrapper:
        self._job["spec"]["port"] = port
        return self

    def spec(self, **fields: Any) -> JobWrapper:
        self._job["spec"].update(fields)
        return self

    def run_policy(self, **fields: Any) -> JobWrapper:
        self._job["spec"]["runPolicy"].update(fields)
        return self

    def completion(self, **fields: Any) -> JobWrapper:
        self._job["spec"].setdefault("completion", {}).update(fields)
        return self

    def template(self, template: Json) -> JobWrapper:
        self._job["spec"]["template"] = template
        return self

    def container(self, **fields: Any) -> JobWrapper:
        """Set fields of the first container."""
        self._job["spec"]["template"]["spec"]["containers"][0].update(fields)
        return self

    def commanded(self, *args: str) -> JobWrapper:
        """The trainer's command given in full (the image's entrypoint is not relied on): with
        the operator's image known, the gang restarts in place."""
        return self.container(command=list(TRAINER_COMMAND), args=list(args))

    def pod_spec(self, **fields: Any) -> JobWrapper:
        self._job["spec"]["template"]["spec"].update(fields)
        return self

    def role(self, field: str, image: str = "tfmw-trainer:dev", **more: Any) -> JobWrapper:
        """A replica set of its own: `chief`, `parameterServers` (more: replicas) or `evaluator`."""
        self._job["spec"][field] = {
            **more,
            "template": {"spec": {"containers": [{"name": "tensorflow", "image": image}]}},
        }
        return self

    def chief(self) -> JobWrapper:
        return self.role("chief")

    def parameter_servers(self, replicas: int = 1) -> JobWrapper:
        return self.role("parameterServers", replicas=replicas)

    def evaluator(self) -> JobWrapper:
        return self.role("evaluator")

    def rules(self, *rules: Json) -> JobWrapper:
        """runPolicy.failureRules."""
        return self.run_policy(failureRules=list(rules))

    def without_shared_volume(self, policy: str = "ChiefExitCode") -> JobWrapper:
        del self._job["spec"]["sharedVolume"]
        return self.completion(policy=policy)

    def simulated(self) -> JobWrapper:
        """Pods bound to the simulated node, where the test plays the kubelet."""
        return self.pod_spec(nodeName=SIM_NODE, tolerations=[{"operator": "Exists"}])

    def queue(self, name: str) -> JobWrapper:
        """The job names a Kueue LocalQueue, as users do: a label on the job."""
        self._job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = name
        return self

    def status(self, **fields: Any) -> JobWrapper:
        self._job.setdefault("status", {}).update(fields)
        return self

    def condition(self, kind: str, true: bool = True, reason: str = "Test") -> JobWrapper:
        conditions = self._job.setdefault("status", {}).setdefault("conditions", [])
        conditions.append(
            {
                "type": kind,
                "status": "True" if true else "False",
                "reason": reason,
                "message": "",
                "lastTransitionTime": format_time(T0),
            }
        )
        return self

    def launched(
        self, attempt: int = 0, phase: str = "Pending", started: float = 0, **more: Any
    ) -> JobWrapper:
        """A job whose pods of `attempt` were all created at time `started`."""
        return self.status(
            phase=phase,
            attempt=attempt,
            launchedAttempt=attempt,
            restarts=more.pop("restarts", attempt),
            startTime=format_time(at(started)),
            **more,
        )

    def obj(self) -> Json:
        return copy.deepcopy(self._job)

    def manifest(self) -> Json:
        """The job as a user writes it: no status, no fields the API server sets."""
        manifest = self.obj()
        manifest.pop("status", None)
        manifest["metadata"] = {"name": manifest["metadata"]["name"]}
        return manifest


def job(name: str = "mnist", **kwargs: Any) -> JobWrapper:
    return JobWrapper(name, **kwargs)


def simulated_job(name: str, workers: int = 2) -> JobWrapper:
    """A job whose pods are bound to the simulated node, where the test plays the kubelet."""
    return JobWrapper(name, workers=workers).simulated()


def simulated_tfjob(name: str, workers: int = 1) -> Json:
    """Kubeflow's TFJob (kubeflow.org/v1) of `workers` Workers, as a user applies it, its pods
    bound to the simulated node (tfmw serves it with --tfjobs)."""
    template = {
        "spec": {
            "nodeName": SIM_NODE,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "tensorflow", "image": "tfmw-trainer:dev"}],
        }
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": workers, "template": template}}},
    }


class PodWrapper:
    """A worker pod as the API server returns it, built by the operator's own builder (with
    the in-pod supervisor where the job's template gives its command)."""

    def __init__(self, job_obj: Json, index: int, attempt: int = 0, replica_type: str = "worker") -> None:
        spec = parse_job(job_obj, supervisor_image=SUPERVISOR_IMAGE)
        self._pod = build_pod(spec, Member(ReplicaType(replica_type), index), attempt)
        self._pod["metadata"]["creationTimestamp"] = format_time(T0)
        kind = "" if replica_type == "worker" else f"{replica_type}-"
        self._pod["metadata"]["uid"] = f"pod-uid-{kind}{index}-{attempt}"
        self._pod["status"] = {"phase": "Pending"}

    def created(self, seconds: float) -> PodWrapper:
        self._pod["metadata"]["creationTimestamp"] = format_time(at(seconds))
        return self

    def running(self, ready: bool = True) -> PodWrapper:
        self._pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "tensorflow", "state": {"running": {}}}],
        }
        return self

    def exited(self, code: int, at_seconds: float = 10, reason: str = "", message: str = "") -> PodWrapper:
        terminated = {"exitCode": code, "finishedAt": format_time(at(at_seconds))}
        if reason:
            terminated["reason"] = reason
        if message:
            terminated["message"] = message
        self._pod["status"] = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [{"name": "tensorflow", "state": {"terminated": terminated}}],
        }
        return self

    def evicted(self) -> PodWrapper:
        self._pod["status"] = {"phase": "Failed", "reason": "Evicted", "message": "node ran out of memory"}
        return self

    def unschedulable(self, message: str = "0/1 nodes are available: 1 Insufficient cpu.") -> PodWrapper:
        self._pod["status"] = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        }
        return self

    def gated(self) -> PodWrapper:
        """Held by Kueue's admission gate, as its webhook leaves every pod of a group."""
        self._pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
        self._pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        }
        return self

    def preempted(self) -> PodWrapper:
        """Kueue evicted the Workload: the pod is marked and deleted."""
        self._pod["status"].setdefault("conditions", []).append(
            {
                "type": "TerminationTarget",
                "status": "True",
                "reason": "WorkloadEvicted",
                "message": "Preempted",
            }
        )
        self._pod["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:15Z"
        return self

    def waiting(self, reason: str, message: str = "") -> PodWrapper:
        self._pod["status"] = {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "tensorflow", "state": {"waiting": {"reason": reason, "message": message}}}
            ],
        }
        return self

    def container_statuses(self, phase: str, *statuses: Json) -> PodWrapper:
        """Any phase and container statuses, for pods with sidecars or odd states."""
        self._pod["status"] = {"phase": phase, "containerStatuses": list(statuses)}
        return self

    def deleting(self, at_seconds: float = 0) -> PodWrapper:
        self._pod["metadata"]["deletionTimestamp"] = format_time(at(at_seconds))
        return self

    def on_node(self, node: str) -> PodWrapper:
        self._pod["spec"]["nodeName"] = node
        return self

    def node_not_ready(self, at_seconds: float = 50, node: str = "node-b") -> PodWrapper:
        """Running and ready on `node` until it stopped reporting: as the node lifecycle
        controller leaves its pods (MarkPodsNotReady), Ready False since `at_seconds` and the
        rest as the silent kubelet last wrote it."""
        self._pod["spec"]["nodeName"] = node
        self._pod["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": format_time(at(at_seconds))},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": format_time(T0)},
            ],
            "containerStatuses": [{"name": "tensorflow", "ready": True, "state": {"running": {}}}],
        }
        return self

    def obj(self) -> Json:
        return copy.deepcopy(self._pod)


def pod(job_obj: Json, index: int, attempt: int = 0, replica_type: str = "worker") -> PodWrapper:
    return PodWrapper(job_obj, index, attempt, replica_type)


def progress_report(seconds: float, epoch: int, **fields: Any) -> ProgressReport:
    """The chief's progress document of job mnist's attempt 0, written at `seconds`, at `epoch` of 10."""
    return ProgressReport(
        updated_at=at(seconds), epoch=epoch, total_epochs=10, job_uid="uid-mnist", attempt=0, **fields
    )


def report(
    pod_obj: Json,
    state: str,
    attempt: int = 0,
    exit_code: int | None = None,
    oom_killed: bool | None = None,
    finished: float = 10,
    log_tail: str = "",
    stacks: str | None = None,
    delivered: bool = False,
    reads_hosts: bool = True,
) -> PodReport:
    """What the supervisor of `pod_obj` reports (as storage reads it): its command of
    `attempt` running, exited with `exit_code`, or waiting for it; `reads_hosts` False: an
    older supervisor's, that cannot put new hostnames into TF_CONFIG."""
    meta = pod_obj["metadata"]
    labels = meta["labels"]
    end = None
    if state == "exited":
        end = ChildEnd(attempt, exit_code or 0, None, oom_killed, at(1), at(finished))
    return PodReport(
        stem=f"{labels['tfmw.dev/replica-type']}-{labels['tfmw.dev/replica-index']}",
        pod_uid=meta["uid"],
        attempt=attempt,
        state=state,
        end=end,
        started_at=at(1) if state == "running" else None,
        stacks=stacks,
        stacks_delivered=delivered,
        updated_at=at(finished),
        log_tail=log_tail,
        reads_hosts=reads_hosts,
    )


def container_env(container: Json) -> dict[str, str]:
    """A container's plain-value environment."""
    return {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}


def env_of(pod_obj: Json, container: int = 0) -> dict[str, str]:
    """The plain-value environment of one container of a pod."""
    return container_env(pod_obj["spec"]["containers"][container])


def write_marker(
    job_dir: Path, job_uid: str | None, name: str = DEFAULT_MARKER_FILE, attempt: int = 0
) -> Path:
    """The chief's marker as the trainer writes it; `job_uid=None` writes plain text."""
    path = job_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    content = "done\n" if job_uid is None else json.dumps({MARKER_JOB_UID: job_uid, MARKER_ATTEMPT: attempt})
    path.write_text(content)
    return path


def observe(
    job: Json,
    raw_pods: Sequence[Json],
    marker: MarkerState,
    now: datetime,
    service: Json | None = None,
    **observed: Any,
) -> Observed:
    """What the core decides from, for a job whose pods and Service are as the API server returns them."""
    pods = [Owned.pod_of(p) for p in raw_pods]
    owned_service = None if service is None else Owned.service_of(service)
    return Observed.of_owned(job, pods, marker, now, service=owned_service, **observed)


def decide(
    job_obj: Json,
    pods: Sequence[Json] = (),
    marker: MarkerState | None = None,
    now: datetime = T0 + timedelta(seconds=20),
    **observed: Any,
) -> Decision:
    """The core's decision for a job whose Service exists (unless `service=` says otherwise),
    at 20 s past T0 unless `now=` says otherwise, by an operator that knows its own image (a
    job whose template gives its command restarts in place)."""
    spec = parse_spec(job_obj, supervisor_image=SUPERVISOR_IMAGE)
    observed.setdefault("spec", spec)
    observed.setdefault("service", build_service(spec) if isinstance(spec, JobSpec) else None)
    return reconcile(observe(job_obj, pods, marker or MarkerState(), now, **observed))


# What a hostile or careless manifest puts where a field belongs: each type in the wrong place,
# out-of-range numbers, and a nest deeper than any field.
MALFORMED_VALUES: tuple[Any, ...] = (
    None,
    True,
    -1,
    2**63,
    1.5,
    "",
    "x",
    [],
    ["x"],
    [{}],
    {},
    {"x": 1},
    [[[[[[[[[[[]]]]]]]]]]],
)


def every_malformed(document: Any, path: tuple[str | int, ...] = ()) -> Any:
    """(path, a copy of `document` with the value at path replaced), for every path in it and
    every value of MALFORMED_VALUES: what a parser must refuse with its own error, never crash on."""
    children: list[tuple[str | int, Any]] = []
    if isinstance(document, dict):
        children = list(document.items())
    elif isinstance(document, list):
        children = list(enumerate(document))
    for key, child in children:
        for value in MALFORMED_VALUES:
            changed = copy.deepcopy(document)
            changed[key] = value
            yield (*path, key), changed
        for sub_path, sub_changed in every_malformed(child, (*path, key)):
            changed = copy.deepcopy(document)
            changed[key] = sub_changed
            yield sub_path, changed
