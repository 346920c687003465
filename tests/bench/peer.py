"""The benchmark's contenders, run side by side on one API server: tfmw's operator and the
incumbent, Kubeflow's training-operator (its TFJob controller), as shipped and tuned.

Pods name a scheduler that does not exist, so only the controllers work. Each contender
knows how to describe the same workload (N workers, one container) in its own API, and
which pods and Services a job of N workers must have.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import tfmw_operator
import yaml
from kube import REPO, ClusterClient, wait_for
from kubernetes.client.exceptions import ApiException
from wrappers import JobWrapper

Json = dict[str, Any]
NO_SCHEDULER = "tfmw-bench-no-scheduler"
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in the training-operator's source
WEBHOOK_SECRET = "training-operator-webhook-cert"
TUNED = ("--kube-api-qps=1000", "--kube-api-burst=2000", "--controller-threads=16")


def pod_template() -> Json:
    return {
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "containers": [{"name": "tensorflow", "image": "tfmw-trainer:dev", "command": ["true"]}],
        }
    }


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_queue_seconds(pid: int) -> float:
    """How long the process's live threads have waited, runnable, for a core (the second
    field of each thread's /proc/<pid>/task/<tid>/schedstat, in ns): on a saturated machine,
    the time a controller was ready to work and was not let. Threads that have ended are not
    counted; the event loop's thread, which does the work, never ends."""
    waited = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            waited += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between the listing and the read
    return waited / 1e9


def machine_ticks() -> tuple[int, int]:
    """The whole machine's CPU ticks so far: (busy, all), every core counted."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def machine_busy_percent(since: tuple[int, int]) -> float:
    """How busy all the machine's cores were since `since` (machine_ticks()), 100 = all of them:
    near 100, whatever runs then is bound by the machine, not by its own design."""
    busy, total = machine_ticks()
    return round(100 * (busy - since[0]) / max(1, total - since[1]), 1)


@dataclass
class Contender:
    """A controller process and the API it is driven through."""

    name: str
    command: list[str]
    job_label: str  # the pod and Service label that names the job
    api: tuple[str, str, str]  # group, version, plural
    env: dict[str, str] = field(default_factory=dict)
    # Every worker's pod template (the scale bench's select and tolerate its kwok nodes).
    template: Json = field(default_factory=pod_template)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    started_at: float = 0.0
    # Its gangs restart in place under the in-pod supervisor (tfmw with --supervisor-image).
    in_place: ClassVar[bool] = False

    def job(self, name: str, workers: int) -> Json:
        raise NotImplementedError

    def services(self, name: str, workers: int) -> int:
        raise NotImplementedError

    def prepare(self, kube: ClusterClient, namespace: str) -> None:
        """Whatever the contender needs in its namespace before it starts."""

    def start(self, log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            self.started_at = time.monotonic()
            self.process = subprocess.Popen(
                self.command, env={**os.environ, **self.env}, stdout=out, stderr=subprocess.STDOUT
            )

    def after_start(self, kube: ClusterClient, namespace: str) -> None:
        """Whatever must happen once it runs before it works."""

    def check_alive(self) -> None:
        """A contender that exited fails the run at once, not at a wait's timeout."""
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


def check_baseline(source: Path) -> None:
    """A baseline tree is its operator/ folder. Else PYTHONPATH finds no package there and the
    installed one, this tree's, runs under the baseline's name: a before-and-after of the same
    code (run scale-8). The benches call this before they start anything."""
    if not (source / "tfmw_operator" / "__main__.py").is_file():
        raise ValueError(f"{source} holds no tfmw_operator package: give the tree's operator/ folder")
    if not (source.parent / "Dockerfile").is_file():
        raise ValueError(f"{source.parent} has no Dockerfile: give the operator/ folder of a whole tree")


def image_malloc_env(tree: Path) -> dict[str, str]:
    """The malloc settings a tree's operator image gives it (its Dockerfile's `MALLOC_*`), so
    each tree's operator runs here as its own image runs it."""
    dockerfile = (tree / "Dockerfile").read_text()
    return dict(re.findall(r"\b(MALLOC_[A-Z_]+)=(\S+)", dockerfile))


class Tfmw(Contender):
    """The operator of this tree; or, with `source` (a folder holding another tree's
    tfmw_operator package), that one, as `name`: a design before and after, side by side."""

    def __init__(
        self, namespace: str, shared_root: Path, source: Path | None = None, name: str = "tfmw"
    ) -> None:
        if source is not None:
            check_baseline(source)
        self.source = source
        super().__init__(
            name,
            [
                sys.executable,
                "-m",
                "tfmw_operator",
                "--shared-root",
                str(shared_root),
                "--namespace",
                namespace,
                "--metrics-port",
                "0",
                "--liveness",
                "",
            ],
            "tfmw.dev/job-name",
            ("tfmw.dev", "v1alpha1", "tfmwjobs"),
            env={
                **image_malloc_env(REPO if source is None else source.parent),
                **({"PYTHONPATH": str(source)} if source else {}),
            },
        )

    def prepare(self, kube: ClusterClient, namespace: str) -> None:
        # As the operator image ships it: compiled, not compiled again at every start.
        package = (
            Path(tfmw_operator.__file__).parent if self.source is None else self.source / "tfmw_operator"
        )
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)

    def job(self, name: str, workers: int) -> Json:
        return JobWrapper(name, workers=workers).template(self.template).manifest()

    def services(self, name: str, workers: int) -> int:
        return 1  # one headless Service for the whole gang


class TfmwInPlace(Tfmw):
    """The operator of this tree with supervision on (`--supervisor-image`): the template gives
    its command, so each gang restarts in place. On kwok no supervisor runs: the scale bench
    writes their reports (bench.supervisors)."""

    in_place: ClassVar[bool] = True

    def __init__(self, namespace: str, shared_root: Path) -> None:
        super().__init__(namespace, shared_root, name="tfmw-in-place")
        self.command = [*self.command, "--supervisor-image", "tfmw-operator:dev"]


class TfmwTFJob(Tfmw):
    """tfmw's operator serving Kubeflow's TFJob API (`--tfjobs=all`), driven with the very
    TFJob manifests the incumbent gets (TFJob.job): the same jobs, another controller. Its
    pods carry Kubeflow's labels and tfmw's; its one headless Service only tfmw's, which is
    what the bench watches it by."""

    def __init__(self, namespace: str, shared_root: Path) -> None:
        super().__init__(namespace, shared_root, name="tfmw-tfjob")
        self.command = [*self.command, "--tfjobs", "all"]
        self.api = ("kubeflow.org", "v1", "tfjobs")

    def job(self, name: str, workers: int) -> Json:
        return TFJob.manifest(name, workers, TFJob.restart_policy, self.template)


class TFJob(Contender):
    """The training-operator out of cluster, as its issue tracker describes running it."""

    # Never: a failed worker fails the job. ExitCode: one that died of a signal (exit code
    # > 128) is replaced, alone (the scale bench's worker loss).
    restart_policy = "Never"

    def __init__(self, binary: str, namespace: str, tuned: bool) -> None:
        super().__init__(
            "tfjob-tuned" if tuned else "tfjob-shipped",
            [
                binary,
                "--enable-scheme=tfjob",
                f"--namespace={namespace}",
                "--leader-elect=false",
                "--metrics-bind-address=0",
                "--health-probe-bind-address=0",
                # Both run at once: each its own webhook server port (it always serves one).
                f"--webhook-server-port={9444 if tuned else 9443}",
                *(TUNED if tuned else ()),
            ],
            "training.kubeflow.org/job-name",
            ("kubeflow.org", "v1", "tfjobs"),
            env={"MY_POD_NAMESPACE": namespace},
        )

    def job(self, name: str, workers: int) -> Json:
        return self.manifest(name, workers, self.restart_policy, self.template)

    @staticmethod
    def manifest(name: str, workers: int, restart_policy: str, template: Json) -> Json:
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name},
            "spec": {
                # tfmw's default (TFJob's is None): the finished job's running pods go.
                "runPolicy": {"cleanPodPolicy": "Running"},
                "tfReplicaSpecs": {
                    "Worker": {
                        "replicas": workers,
                        "restartPolicy": restart_policy,
                        "template": template,
                    }
                },
            },
        }

    def services(self, name: str, workers: int) -> int:
        return workers  # one Service per replica

    def prepare(self, kube: ClusterClient, namespace: str) -> None:
        # Its certificate rotator needs the Secret to exist, then waits for the files a
        # Secret volume would hold.
        kube.core.create_namespaced_secret(namespace, {"metadata": {"name": WEBHOOK_SECRET}})
        for stale in CERT_DIR.glob("*"):
            stale.unlink()

    def after_start(self, kube: ClusterClient, namespace: str) -> None:
        def certificates() -> Json | None:
            data = kube.core.read_namespaced_secret(WEBHOOK_SECRET, namespace).data or {}
            return data if "tls.crt" in data and "tls.key" in data else None

        data = wait_for("the training-operator's certificates", certificates, timeout=60, interval=0.05)
        CERT_DIR.mkdir(parents=True, exist_ok=True)
        for key, value in data.items():
            (CERT_DIR / key).write_bytes(base64.b64decode(value))


def install_tfjob_crd(kube: ClusterClient) -> str:
    """Build the training-operator (once) and create its TFJob CRD; returns the binary."""
    binary = subprocess.run(
        [str(REPO / "hack" / "tfjob.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()
    kube.create_crd(yaml.safe_load((REPO / ".tfjob" / "tfjobs-crd.yaml").read_text()))
    return binary


def remove_tfjob_crd(kube: ClusterClient) -> None:
    try:
        kube.apiext.delete_custom_resource_definition("tfjobs.kubeflow.org")
    except ApiException as error:
        if error.status != 404:
            raise


def scratch_log(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"tfmw-bench-{name}.log"
