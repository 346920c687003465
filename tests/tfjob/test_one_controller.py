"""One controller per TFJob, with the real incumbent (docs/tfjob.md, "One controller per job";
issue 36.2): Kubeflow's training-operator at TFJOB_VERSION and tfmw's operator both running
for one namespace of this file's own.

- Both installed, tfmw in `--tfjobs=managedBy`: a TFJob that names no controller is run by
  Kubeflow alone (its pods carry Kubeflow's operator-name label, tfmw says on the job that it
  is not its), and one whose `runPolicy.managedBy` names tfmw is run by tfmw alone (tfmw's
  label on its pods, Kubeflow's log says it skipped it). Both reach Succeeded.
- A job started under Kubeflow, then Kubeflow stopped and tfmw started with `--tfjobs=all`:
  tfmw leaves it alone (the same pods, untouched, still Kubeflow's; the status as Kubeflow
  left it; tfmw's Event says why), while a TFJob created afterwards is tfmw's.

Kubeflow runs out of cluster as the rest of the suite runs it (bench.peer.TFJob, as shipped),
on a webhook port of its own. Its validating webhook is not registered with the API server
here; docs/tfjob.md says what that webhook does to `managedBy` in a real installation.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kube import ClusterClient, pause_deployed_operator, wait_for
from tfjob.harness import (
    TFJobs,
    describe,
    install_crd,
    log,
    remove_crd,
    true_conditions,
    wait_finished,
)

Json = dict[str, Any]
OPERATOR_NAME = "training.kubeflow.org/operator-name"
KUBEFLOWS = "tfjob-controller"  # Kubeflow's value of that label
TFMWS = "tfmw"
MANAGED_BY_TFMW = "tfmw.dev/tfjob-controller"
WEBHOOK_PORT = 9445  # neither the suite's Kubeflow (9443) nor the bench's tuned one (9444)
IMAGE = "tfmw-trainer:dev"
TIMEOUT = 180


def tfjob(name: str, seconds: int, managed_by: str | None = None) -> Json:
    run: Json = {"cleanPodPolicy": "None"}
    if managed_by is not None:
        run["managedBy"] = managed_by
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": run,
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "terminationGracePeriodSeconds": 1,
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": IMAGE,
                                    "imagePullPolicy": "IfNotPresent",
                                    "command": ["sh", "-c", f"sleep {seconds}"],
                                }
                            ],
                        }
                    },
                }
            },
        },
    }


@dataclass
class Cluster:
    kube: ClusterClient
    namespace: str
    jobs: TFJobs
    root: Path
    kubeflow: Any = None
    tfmw: Any = None

    def start_kubeflow(self) -> None:
        import subprocess

        from bench.peer import TFJob
        from kube import REPO

        binary = subprocess.run(
            [str(REPO / "hack" / "tfjob.sh")], check=True, stdout=subprocess.PIPE, text=True
        ).stdout.strip()
        controller = TFJob(binary, self.namespace, tuned=False)
        controller.command = [
            f"--webhook-server-port={WEBHOOK_PORT}" if a.startswith("--webhook-server-port") else a
            for a in controller.command
        ]
        controller.prepare(self.kube, self.namespace)
        controller.start(self.root / "training-operator.log")
        controller.after_start(self.kube, self.namespace)
        self.kubeflow = controller

    def stop_kubeflow(self) -> None:
        if self.kubeflow is not None:
            self.kubeflow.stop()
            self.kubeflow = None

    def start_tfmw(self, mode: str) -> None:
        from operator_process import OperatorProcess

        self.stop_tfmw()
        self.tfmw = OperatorProcess(self.namespace, self.root, args=("--tfjobs", mode)).start()
        self.tfmw.wait_started(timeout=60)

    def stop_tfmw(self) -> None:
        if self.tfmw is not None:
            self.tfmw.stop()
            self.tfmw = None

    def alive(self) -> None:
        for name, running in (("kubeflow", self.kubeflow), ("tfmw", self.tfmw)):
            process = None if running is None else running.process
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{name}'s controller exited; see {self.root}")

    def kubeflow_log(self) -> str:
        path = self.root / "training-operator.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def owners(self, name: str) -> dict[str, str]:
        """pod name -> the operator-name label it carries (who made it)."""
        return {
            p["metadata"]["name"]: (p["metadata"].get("labels") or {}).get(OPERATOR_NAME, "")
            for p in self.jobs.pods(name)
        }

    def said(self, name: str, reason: str) -> list[str]:
        return [str(e.get("message")) for e in self.jobs.events(name) if e.get("reason") == reason]


@pytest.fixture(scope="module")
def cluster(kube: ClusterClient, module: Path) -> Iterator[Cluster]:
    created = install_crd(kube, module)
    resume = pause_deployed_operator()
    namespace = kube.new_namespace("tfjob-switch")
    root = Path(tempfile.mkdtemp(prefix="tfjob-switch-"))
    made = Cluster(kube, namespace, TFJobs(kube, namespace), root)
    try:
        yield made
    finally:
        made.stop_tfmw()
        made.stop_kubeflow()
        kept = Path(__file__).resolve().parents[2] / ".tfjob" / "one-controller"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(root, kept, ignore=shutil.ignore_patterns("*.sock"))
        log(f"both controllers' logs are kept in {kept}")
        kube.delete_namespace(namespace)
        wait_for(
            f"namespace {namespace} gone",
            lambda: namespace not in {n.metadata.name for n in kube.core.list_namespace().items},
            timeout=180,
            interval=1,
        )
        resume()
        if created:
            remove_crd(kube)
        shutil.rmtree(root, ignore_errors=True)


def test_both_installed_each_runs_only_its_own(cluster: Cluster) -> None:
    cluster.start_kubeflow()
    cluster.start_tfmw("managedBy")
    cluster.jobs.create(tfjob("kubeflows", 5))
    cluster.jobs.create(tfjob("tfmws", 5, managed_by=MANAGED_BY_TFMW))
    for name, who in (("kubeflows", KUBEFLOWS), ("tfmws", TFMWS)):
        job = wait_finished(cluster.jobs, name, TIMEOUT, cluster.alive)
        assert "Succeeded" in true_conditions(job), describe(cluster.jobs, name)
        owners = cluster.owners(name)
        log(f"{name}: pods {owners}")
        # Two workers, made by one controller: never a second set beside them.
        assert len(owners) == 2, owners
        assert set(owners.values()) == {who}, owners
    said = cluster.said("kubeflows", "NotServedByTfmw")
    assert said and "--tfjobs=managedBy" in said[0], said
    assert not cluster.said("tfmws", "NotServedByTfmw")
    # Kubeflow's controller saw tfmw's job and left it (pkg/controller.v1/tensorflow, v1.9).
    assert "Skipping TFJob managed by a custom controller" in cluster.kubeflow_log()
    for name in ("kubeflows", "tfmws"):
        cluster.jobs.delete_and_wait(name)


def test_started_under_kubeflow_is_left_there_by_tfmw_all(cluster: Cluster) -> None:
    cluster.stop_tfmw()
    if cluster.kubeflow is None:
        cluster.start_kubeflow()
    cluster.jobs.create(tfjob("legacy", 3600))

    def running() -> Json | None:
        cluster.alive()
        job = cluster.jobs.get("legacy")
        pods = cluster.jobs.pods("legacy")
        ready = len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)
        return job if ready and "Running" in true_conditions(job) else None

    wait_for("legacy Running under Kubeflow", running, timeout=TIMEOUT, interval=1)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in cluster.jobs.pods("legacy")}
    status_before = (cluster.jobs.get("legacy") or {}).get("status")
    assert set(cluster.owners("legacy").values()) == {KUBEFLOWS}

    # The platform switches over: Kubeflow's controller goes, tfmw serves every TFJob.
    cluster.stop_kubeflow()
    cluster.start_tfmw("all")
    said = wait_for(
        "tfmw to say legacy is not its",
        lambda: cluster.said("legacy", "NotServedByTfmw"),
        timeout=60,
        interval=0.5,
    )
    assert "made by Kubeflow's training-operator" in said[0], said
    # A job created now is tfmw's: `all` serves, so leaving legacy alone was a decision.
    cluster.jobs.create(tfjob("fresh", 5))
    fresh = wait_finished(cluster.jobs, "fresh", TIMEOUT, cluster.alive)
    assert "Succeeded" in true_conditions(fresh), describe(cluster.jobs, "fresh")
    assert set(cluster.owners("fresh").values()) == {TFMWS}
    # legacy, meanwhile: the very same pods, still running, still Kubeflow's; status untouched.
    after = cluster.jobs.pods("legacy")
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in after} == before
    assert all(p["status"].get("phase") == "Running" for p in after)
    assert set(cluster.owners("legacy").values()) == {KUBEFLOWS}
    assert (cluster.jobs.get("legacy") or {}).get("status") == status_before
    for name in ("legacy", "fresh"):
        cluster.jobs.delete_and_wait(name)
