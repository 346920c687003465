"""The operator with deploy/'s RBAC and its ServiceAccount's token: enough to work, nothing more."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import CLUSTER_DIR, REPO, ClusterClient, SimulatedKubelet, kubectl, wait_for
from operator_process import OperatorProcess
from ports import free_ports
from wrappers import simulated_job, write_marker

Json = dict[str, Any]

SERVICE_ACCOUNT = "system:serviceaccount:tfmw-system:tfmw-operator"


@pytest.fixture(scope="module")
def operator_kubeconfig(kube: ClusterClient, tmp_path_factory: pytest.TempPathFactory) -> str:
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


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found, f"{name} not in the metrics"
    return float(found.group(1))


def granted_by(role: Json) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) for every rule of a ClusterRole."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def requests_since(audit_log: Path, since: datetime) -> list[Json]:
    entries = [json.loads(line) for line in audit_log.read_text().splitlines() if line.strip()]
    return [
        e
        for e in entries
        if e["user"]["username"] == SERVICE_ACCOUNT
        and datetime.fromisoformat(e["requestReceivedTimestamp"].replace("Z", "+00:00")) >= since
    ]


def used_by(entries: list[Json]) -> set[tuple[str, str, str]]:
    used = set()
    for entry in entries:
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        used.add((ref.get("apiGroup", ""), resource, entry["verb"]))
    return used


def test_operator_with_its_service_account_reconciles_a_job(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    shared_root: Path,
    operator_kubeconfig: str,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    started = datetime.now(UTC).replace(microsecond=0)
    namespace = kube.new_namespace("rbac")
    metrics_port, liveness_port = free_ports(2)
    operator_process(namespace, operator_kubeconfig, (metrics_port, liveness_port))
    manifest = simulated_job("least").run_policy(cleanPodPolicy="All", ttlSecondsAfterFinished=1)
    job = kube.create_job(namespace, manifest.manifest())
    kube.wait_pods(namespace, "least", 2, timeout=60)
    kubelet.run_all(namespace, "least")
    kube.wait_phase(namespace, "least", "Running", timeout=30)
    kubelet.exit(namespace, "least-worker-1", 137)
    kube.wait_pods(namespace, "least", 2, attempt=1, timeout=30)
    write_marker(shared_root / namespace / "least", job["metadata"]["uid"])
    kube.wait_phase(namespace, "least", "Succeeded", timeout=30)
    kube.wait_events(namespace, "least", {"PodsCreated", "GangRestart", "Succeeded"})
    wait_for("the job deleted by its TTL", lambda: kube.get_job(namespace, "least") is None, timeout=30)
    # Its own endpoints: Prometheus metrics that counted this job, and the liveness probe.
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert metric(metrics, "tfmw_jobs_created_total") == 1
    assert metric(metrics, "tfmw_jobs_succeeded_total") == 1
    assert metric(metrics, 'tfmw_gang_restarts_total{cause="Error"}') == 1  # exit 137, no OOM reason
    assert metric(metrics, "tfmw_reconcile_duration_seconds_count") > 0
    assert metric(metrics, "tfmw_marker_detection_latency_seconds_count") == 1
    assert urllib.request.urlopen(f"http://127.0.0.1:{liveness_port}/healthz", timeout=5).status == 200

    # Least privilege, measured: the API server's audit log of this operator's requests.
    # Nothing was refused, and every grant of the ClusterRole was used.
    time.sleep(1)  # the audit log is written asynchronously
    entries = requests_since(CLUSTER_DIR / "logs" / "audit.log", started)
    refused = [e for e in entries if e.get("responseStatus", {}).get("code") == 403]
    assert not refused, [(e["verb"], e["requestURI"]) for e in refused[:5]]
    role = next(
        d
        for d in yaml.safe_load_all((REPO / "deploy" / "base" / "rbac.yaml").read_text())
        if d["kind"] == "ClusterRole"
    )
    # Not a request: the OwnerReferencesPermissionEnforcement admission plugin checks this
    # grant when the operator sets blockOwnerDeletion, so it never shows in the audit log.
    checked_not_called = {("tfmw.dev", "tfmwjobs/finalizers", "update")}
    # Only a job that names a Kueue queue reads and deletes Workloads: tests/e2e/test_kueue.py
    # runs those against a real Kueue, with the operator deployed under this ClusterRole.
    checked_not_called |= {("kueue.x-k8s.io", "workloads", verb) for verb in ("get", "list", "delete")}
    # Services are read one by one only when one of a job's name exists that is not its
    # own (tests/integration/test_lifecycle.py's namesake cases run that path).
    checked_not_called.add(("", "services", "get"))
    unused = granted_by(role) - used_by(entries) - checked_not_called
    assert not unused, f"granted but never used: {sorted(unused)}"


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
