"""The TFJob acceptance harness: the controller under test (a parameter), the TFJob CRD,
the examples as run here (what is changed and why), and waiting for what a TFJob reports.

TFJOB_CONTROLLER picks the controller every job of the suite is served by:
  kubeflow  Kubeflow's training-operator at TFJOB_VERSION (hack/tfjob.sh builds it), out of
            cluster as the benchmark runs it (bench.peer.TFJob, as shipped), watching the
            suite's namespace only;
  tfmw      this repository's operator, out of cluster, watching the suite's namespace.
Either way the operator deployed in tfmw-system is paused for the run, so that exactly one
controller serves the suite's TFJobs.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from kube import REPO, ClusterClient, wait_for
from kubernetes.client.exceptions import ApiException
from tfjob.upstream import EXAMPLES, Manifest

CONTROLLERS = ("kubeflow", "tfmw")
# The suite's default controller: tfmw, which serves TFJobs (docs/tfjob.md).
DEFAULT_CONTROLLER = "tfmw"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
CRD_NAME = "tfjobs.kubeflow.org"
GPU = "nvidia.com/gpu"
LOGS = REPO / ".tfjob" / "logs"  # each example's pod logs and status, from the last run
Json = dict[str, Any]


def controller_under_test() -> str:
    chosen = os.environ.get("TFJOB_CONTROLLER") or DEFAULT_CONTROLLER
    if chosen not in CONTROLLERS:
        raise ValueError(f"TFJOB_CONTROLLER={chosen}: must be one of {', '.join(CONTROLLERS)}")
    return chosen


def log(message: str) -> None:
    print(f"[tfjob {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- the controller under test ----


class Controller(Protocol):
    name: str
    log: Path | None

    def stop(self) -> None: ...

    def check_alive(self) -> None: ...


def start_kubeflow(kube: ClusterClient, namespace: str, logs: Path) -> Controller:
    """Kubeflow's training-operator as shipped (no tuning), its TFJob controller only."""
    import subprocess

    from bench.peer import TFJob

    binary = subprocess.run(
        [str(REPO / "hack" / "tfjob.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()
    controller = TFJob(binary, namespace, tuned=False)
    controller.prepare(kube, namespace)
    controller.start(logs / "training-operator.log")
    controller.after_start(kube, namespace)
    return controller


@dataclass
class TfmwController:
    """tfmw's operator, out of cluster, for the suite's namespace (tests/operator_process.py)."""

    namespace: str
    shared_root: Path
    name: str = "tfmw"
    log: Path | None = None
    process: Any = None

    def start(self) -> TfmwController:
        from operator_process import OperatorProcess

        self.process = OperatorProcess(self.namespace, self.shared_root, args=("--tfjobs", "all")).start()
        self.log = self.process.log
        self.process.wait_started(timeout=60)
        return self

    def check_alive(self) -> None:
        if self.process is not None and self.process.process.poll() is not None:
            raise RuntimeError(f"tfmw's operator exited; see {self.log}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


# ---- the CRD ----


def install_crd(kube: ClusterClient, module: Path) -> bool:
    """Kubeflow's TFJob CRD from the module. True if this run created it (and should remove it)."""
    crd = yaml.safe_load((module / "manifests" / "base" / "crds" / "kubeflow.org_tfjobs.yaml").read_text())
    return kube.create_crd(crd)


def remove_crd(kube: ClusterClient) -> None:
    try:
        kube.apiext.delete_custom_resource_definition(CRD_NAME)
    except ApiException as error:
        if error.status != 404:
            raise


# ---- TFJobs through the API ----


class TFJobs:
    def __init__(self, kube: ClusterClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def create(self, job: Json) -> Json:
        created: Json = self.kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, job
        )
        return created

    def get(self, name: str) -> Json | None:
        try:
            job: Json = self.kube.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return job

    def keep_logs(self, name: str, folder: Path) -> None:
        """Every pod's `tensorflow` log (and the job's status) in folder: what each program did."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "status.yaml").write_text(yaml.safe_dump((self.get(name) or {}).get("status")))
        for pod in self.pods(name):
            pod_name = pod["metadata"]["name"]
            try:
                text = self.kube.core.read_namespaced_pod_log(
                    pod_name, self.namespace, container="tensorflow"
                )
            except ApiException as error:
                text = f"(no log: {error.reason})"
            (folder / f"{pod_name}.log").write_text(str(text))

    def delete_and_wait(self, name: str, timeout: float = 120) -> None:
        """The job gone, and every pod of it. The garbage collector would take them with their
        grace period, which servers blocked in `server.join()` (dist-mnist's PS and workers,
        left running by cleanPodPolicy None) sit out in full: 30 s of nothing. So they are
        deleted here with one second's grace, after the job's result was read."""
        try:
            self.kube.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as error:
            if error.status != 404:
                raise
        wait_for(f"TFJob {name} gone", lambda: self.get(name) is None, timeout=timeout, interval=0.5)
        for pod in self.pods(name):
            try:
                self.kube.core.delete_namespaced_pod(
                    pod["metadata"]["name"], self.namespace, grace_period_seconds=1
                )
            except ApiException as error:
                if error.status != 404:
                    raise
        wait_for(f"pods of {name} gone", lambda: not self.pods(name), timeout=timeout, interval=0.5)

    def pods(self, name: str) -> list[Json]:
        items = self.kube.core.list_namespaced_pod(
            self.namespace, label_selector=f"training.kubeflow.org/job-name={name}"
        ).items
        pods: list[Json] = self.kube.sanitize(items)
        return pods

    def events(self, involved: str) -> list[Json]:
        items = self.kube.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={involved}"
        ).items
        events: list[Json] = self.kube.sanitize(items)
        return events


def true_conditions(job: Json | None) -> set[str]:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


def wait_finished(jobs: TFJobs, name: str, timeout: float, alive: Callable[[], None]) -> Json:
    """Until the job is Succeeded or Failed (the controller's death fails it at once)."""

    def probe() -> Json | None:
        alive()
        job = jobs.get(name)
        return job if true_conditions(job) & {"Succeeded", "Failed"} else None

    return wait_for(f"TFJob {name} Succeeded or Failed", probe, timeout=timeout, interval=1)


def describe(jobs: TFJobs, name: str, lines: int = 40) -> str:
    """What to read when a job did not do what was expected: its status, its pods and the
    tail of each pod's log, and the Events of both."""
    out = [f"--- TFJob {name}: {yaml.safe_dump((jobs.get(name) or {}).get('status'))}"]
    for event in jobs.events(name):
        out.append(f"  event {event.get('type')} {event.get('reason')}: {event.get('message')}")
    for pod in jobs.pods(name):
        pod_name = pod["metadata"]["name"]
        out.append(f"--- pod {pod_name}: {pod['status'].get('phase')}")
        for event in jobs.events(pod_name):
            out.append(f"  event {event.get('type')} {event.get('reason')}: {event.get('message')}")
        try:
            text = jobs.kube.core.read_namespaced_pod_log(
                pod_name, jobs.namespace, container="tensorflow", tail_lines=lines
            )
            out.extend(f"  | {line}" for line in str(text).splitlines())
        except ApiException as error:
            out.append(f"  (no log: {error.reason})")
    return "\n".join(out)


# ---- the examples as run here ----


@dataclass
class Example:
    """A TFJob of examples/tensorflow as this suite runs it, and what it must end in."""

    manifest: Manifest
    variant: str = ""  # "" as written; else what was taken out
    expect: str = "Succeeded"  # or "Unschedulable: <resource>" (pods Pending for lack of it)
    why: str = ""
    changes: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        path = str(self.manifest.path.relative_to(EXAMPLES))
        return f"{path} ({self.variant})" if self.variant else path


def containers(job: Json) -> list[Json]:
    return [
        c for spec in job["spec"]["tfReplicaSpecs"].values() for c in spec["template"]["spec"]["containers"]
    ]


def asks_for(job: Json, resource: str) -> bool:
    return any(
        resource in (c.get("resources") or {}).get(kind, {})
        for c in containers(job)
        for kind in ("limits", "requests")
    )


def examples(manifests: list[Manifest]) -> list[Example]:
    """Each TFJob as written; one that asks for a GPU (none here) is expected to stay
    Pending for it, and runs once more without that request."""
    found = []
    for manifest in manifests:
        if asks_for(manifest.job, GPU):
            found.append(
                Example(
                    manifest, expect=f"Unschedulable: {GPU}", why=f"asks for {GPU}; this machine has no GPU"
                )
            )
            found.append(Example(manifest, variant=f"without {GPU}"))
        else:
            found.append(Example(manifest))
    return found


def adapt(example: Example, namespace: str) -> Json:
    """The manifest as submitted here; every change is recorded in example.changes:
    - metadata.namespace: the suite's namespace (the examples name `kubeflow` or none);
    - imagePullPolicy IfNotPresent where unset: the images are built here and not in any
      registry, and a `:latest` tag would make the kubelet pull (no internet here);
    - the GPU request taken out, for the variant that says so."""
    job = copy.deepcopy(example.manifest.job)
    was = job["metadata"].get("namespace")
    job["metadata"]["namespace"] = namespace
    example.changes = [f"metadata.namespace {was or '(unset)'} -> the suite's"]
    for replica, spec in job["spec"]["tfReplicaSpecs"].items():
        for container in spec["template"]["spec"]["containers"]:
            where = f"{replica} container {container['name']}"
            if "imagePullPolicy" not in container:
                container["imagePullPolicy"] = "IfNotPresent"
                example.changes.append(f"{where}: imagePullPolicy IfNotPresent")
            if example.variant == f"without {GPU}":
                for kind in ("limits", "requests"):
                    if (container.get("resources") or {}).get(kind, {}).pop(GPU, None) is not None:
                        example.changes.append(f"{where}: resources.{kind} {GPU} removed")
    return job


def claim_names(job: Json) -> list[str]:
    return sorted(
        {
            volume["persistentVolumeClaim"]["claimName"]
            for spec in job["spec"]["tfReplicaSpecs"].values()
            for volume in spec["template"]["spec"].get("volumes") or []
            if "persistentVolumeClaim" in volume
        }
    )


def example_claim(module: Path, name: str) -> tuple[Path, Json]:
    """The PersistentVolumeClaim of that name among the examples' own files."""
    for path in sorted((module / EXAMPLES).rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if (
                isinstance(doc, dict)
                and doc.get("kind") == "PersistentVolumeClaim"
                and doc["metadata"]["name"] == name
            ):
                return path.relative_to(module), doc
    raise LookupError(f"no PersistentVolumeClaim {name} in {EXAMPLES}")


@dataclass
class Volumes:
    """The examples' claims, each bound to a hostPath volume of the suite's own on the node
    (a folder under a temporary directory of this machine, where the local node runs)."""

    kube: ClusterClient
    namespace: str
    module: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tfjob-volumes-")))
    made: list[str] = field(default_factory=list)

    def provide(self, claim: str, example: Example) -> None:
        source, pvc = example_claim(self.module, claim)
        pvc = copy.deepcopy(pvc)
        pvc["metadata"] = {
            "name": claim,
            "namespace": self.namespace,
            "labels": pvc["metadata"].get("labels", {}),
        }
        was = pvc["spec"].get("storageClassName")
        pvc["spec"]["storageClassName"] = ""  # bound to the volume made here, by claimRef
        example.changes.append(
            f"claim {claim} from {source}: storageClassName {was!r} -> '' (a hostPath volume)"
        )
        folder = self.root / claim
        folder.mkdir(mode=0o777, exist_ok=True)
        folder.chmod(0o777)  # the images run as uid 1000
        volume_name = f"{self.namespace}-{claim}"
        self.kube.core.create_persistent_volume(
            {
                "metadata": {"name": volume_name, "labels": {"tfmw.dev/test": "tfjob"}},
                "spec": {
                    "capacity": {"storage": pvc["spec"]["resources"]["requests"]["storage"]},
                    "accessModes": pvc["spec"]["accessModes"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "hostPath": {"path": str(folder), "type": "Directory"},
                    "claimRef": {"namespace": self.namespace, "name": claim},
                },
            }
        )
        self.made.append(volume_name)
        self.kube.core.create_namespaced_persistent_volume_claim(self.namespace, pvc)

    def release(self, claim: str) -> None:
        try:
            self.kube.core.delete_namespaced_persistent_volume_claim(claim, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
        wait_for(
            f"claim {claim} gone",
            lambda: (
                not self.kube.core.list_namespaced_persistent_volume_claim(
                    self.namespace, field_selector=f"metadata.name={claim}"
                ).items
            ),
            timeout=60,
            interval=0.5,
        )
        volume_name = f"{self.namespace}-{claim}"
        try:
            self.kube.core.delete_persistent_volume(volume_name)
        except ApiException as error:
            if error.status != 404:
                raise
        # Its pv-protection finalizer holds it a moment after the claim goes: the next example
        # that names the same claim makes a volume of the same name (409 "being deleted").
        wait_for(
            f"volume {volume_name} gone",
            lambda: (
                not self.kube.core.list_persistent_volume(field_selector=f"metadata.name={volume_name}").items
            ),
            timeout=60,
            interval=0.5,
        )
        if volume_name in self.made:
            self.made.remove(volume_name)
        shutil.rmtree(self.root / claim, ignore_errors=True)

    def close(self) -> None:
        for volume_name in list(self.made):
            try:
                self.kube.core.delete_persistent_volume(volume_name)
            except ApiException as error:
                if error.status != 404:
                    raise
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Result:
    test: str
    controller: str
    outcome: str
    seconds: float
    changes: list[str] = field(default_factory=list)
    note: str = ""


# What ran, in order: conftest.py prints it at the end of the session.
RESULTS: list[Result] = []


def record(result: Result) -> None:
    RESULTS.append(result)
