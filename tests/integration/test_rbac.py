"""The operator with deploy/'s RBAC and its ServiceAccount's token: enough to work, nothing more."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kube import REPO, ClusterClient, SimulatedKubelet, kubectl
from operator_process import OperatorProcess
from ports import free_ports
from wrappers import simulated_job

SERVICE_ACCOUNT = "system:serviceaccount:tfmw-system:tfmw-operator"


@pytest.fixture(scope="module")
def operator_kubeconfig(kube: ClusterClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    kubectl("apply", "-f", str(REPO / "deploy" / "namespace.yaml"), "-f", str(REPO / "deploy" / "rbac.yaml"))
    token = kubectl("create", "token", "tfmw-operator", "-n", "tfmw-system", "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "tfmw-operator", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "tfmw-operator"}}],
        "current-context": "sa",
    }
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_operator_with_its_service_account_reconciles_a_job(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    shared_root: Path,
    operator_kubeconfig: str,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    namespace = kube.new_namespace("rbac")
    metrics_port, liveness_port = free_ports(2)
    operator_process(namespace, operator_kubeconfig, (metrics_port, liveness_port))
    job = kube.create_job(namespace, simulated_job("least").run_policy(cleanPodPolicy="All").manifest())
    kube.wait_pods(namespace, "least", 2, timeout=60)
    kubelet.run_all(namespace, "least")
    kube.wait_phase(namespace, "least", "Running", timeout=30)
    kubelet.exit(namespace, "least-worker-1", 137)
    kube.wait_pods(namespace, "least", 2, attempt=1, timeout=30)
    (shared_root / namespace / "least" / "multiworker-complete.txt").write_text(
        json.dumps({"job_uid": job["metadata"]["uid"]})
    )
    kube.wait_phase(namespace, "least", "Succeeded", timeout=30)
    kube.wait_events(namespace, "least", {"PodsCreated", "GangRestart", "Succeeded"})
    # Its own endpoints: Prometheus metrics that counted this job, and the liveness probe.
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert "tfmw_jobs_succeeded_total 1.0" in metrics
    assert "tfmw_gang_restarts_total 1.0" in metrics
    assert "tfmw_reconcile_duration_seconds_count" in metrics
    assert "tfmw_marker_detection_latency_seconds_count 1.0" in metrics
    assert urllib.request.urlopen(f"http://127.0.0.1:{liveness_port}/healthz", timeout=5).status == 200
    log = (shared_root / f"operator-{namespace}.log").read_text()
    assert "Forbidden" not in log and "403" not in log, log[-2000:]
    kube.delete_namespace(namespace)


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("list", "pods", "yes"),
        ("create", "pods", "yes"),
        ("patch", "tfmwjobs.tfmw.dev --subresource=status", "yes"),
        ("get", "pods --subresource=log", "yes"),
        ("get", "secrets", "no"),
        ("list", "secrets", "no"),
        ("create", "pods --subresource=exec", "no"),
        ("create", "pods --subresource=eviction", "no"),
        ("patch", "pods", "no"),
        ("update", "tfmwjobs.tfmw.dev", "no"),
        ("delete", "services", "no"),
        ("list", "nodes", "no"),
        ("create", "rolebindings.rbac.authorization.k8s.io", "no"),
    ],
)
def test_least_privilege(operator_kubeconfig: str, verb: str, resource: str, allowed: str) -> None:
    result = kubectl("auth", "can-i", verb, *resource.split(), "-A", "--as", SERVICE_ACCOUNT, check=False)
    assert result.stdout.strip() == allowed, f"{verb} {resource}: {result.stdout} {result.stderr}"
