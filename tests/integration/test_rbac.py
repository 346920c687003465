"""The operator with deploy/'s RBAC and its ServiceAccount's token: enough to work, nothing
more; with the chart's watchNamespaces, rights in the namespace it serves alone; and serving
TFJobs, the TFJob component's rights, each used."""

from __future__ import annotations

import json
import os
import re
import subprocess
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
from tfmw_operator.api import tfjob
from unit.deploy.test_kustomize import kube_version
from wrappers import simulated_job, simulated_tfjob, write_marker

Json = dict[str, Any]

SERVICE_ACCOUNT = "system:serviceaccount:tfmw-system:tfmw-operator"


@pytest.fixture(scope="module")
def operator_kubeconfig(kube: ClusterClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    return token_kubeconfig("tfmw-system", "tfmw-operator", tmp_path_factory.mktemp("sa") / "kubeconfig")


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found, f"{name} not in the metrics"
    return float(found.group(1))


def granted_by(role: Json) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) for every rule of a ClusterRole or Role."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def requests_since(audit_log: Path, since: datetime, user: str = SERVICE_ACCOUNT) -> list[Json]:
    entries = [json.loads(line) for line in audit_log.read_text().splitlines() if line.strip()]
    return [
        e
        for e in entries
        if e["user"]["username"] == user
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


def token_kubeconfig(namespace: str, service_account: str, path: Path) -> str:
    """A kubeconfig that is that service account, by a token of an hour."""
    token = kubectl("create", "token", service_account, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": service_account, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": service_account}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    return str(path)


def reconcile_a_job(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    shared_root: Path,
    namespace: str,
    kubeconfig: str,
    operator_process: Callable[..., OperatorProcess],
) -> tuple[int, int]:
    """An operator as that kubeconfig's user takes a job through creation, a gang restart,
    success and its TTL; the (metrics, liveness) ports it served."""
    metrics_port, liveness_port = free_ports(2)
    operator_process(namespace, kubeconfig, (metrics_port, liveness_port))
    manifest = simulated_job("least").run_policy(cleanPodPolicy="All", ttlSecondsAfterFinished=1)
    job = kube.create_job(namespace, manifest.manifest())
    kube.wait_pods(namespace, "least", 2, timeout=60)
    kubelet.run_all(namespace, "least")
    kube.wait_phase(namespace, "least", "Running", timeout=30)
    kubelet.exit(namespace, "least-worker-1", 137)
    kube.wait_pods(namespace, "least", 2, attempt=1, timeout=30)
    write_marker(shared_root / namespace / "least", job["metadata"]["uid"])
    # Not a wait for phase Succeeded: completionTime counts whole seconds, so a TTL of 1 s may
    # delete the job a few milliseconds after that phase is written (the audit log showed 63 ms,
    # twice in CI, a poll 0.1 s apart missed it). Its Succeeded event outlives it.
    wait_for("the job deleted by its TTL", lambda: kube.get_job(namespace, "least") is None, timeout=30)
    kube.wait_events(namespace, "least", {"PodsCreated", "GangRestart", "Succeeded"})
    return metrics_port, liveness_port


# Not a request: the OwnerReferencesPermissionEnforcement admission plugin checks this
# grant when the operator sets blockOwnerDeletion, so it never shows in the audit log.
CHECKED_NOT_CALLED = {("tfmw.dev", "tfmwjobs/finalizers", "update")}
# Only a job that names a Kueue queue reads and deletes Workloads: tests/e2e/test_kueue.py
# runs those against a real Kueue, with the operator deployed under this ClusterRole.
CHECKED_NOT_CALLED |= {("kueue.x-k8s.io", "workloads", verb) for verb in ("get", "list", "delete")}
# Services are read one by one only when one of a job's name exists that is not its
# own (tests/integration/test_lifecycle.py's namesake cases run that path).
CHECKED_NOT_CALLED.add(("", "services", "get"))
# As for tfmwjobs/finalizers: a TFJob's pods name it with blockOwnerDeletion.
CHECKED_NOT_CALLED.add(("kubeflow.org", "tfjobs/finalizers", "update"))


def assert_every_grant_used_and_nothing_refused(user: str, started: datetime, *roles: Json) -> list[Json]:
    """Least privilege, measured: the API server's audit log of this user's requests since
    `started`. Nothing was refused, and every grant of these roles was used. The requests."""
    time.sleep(1)  # the audit log is written asynchronously
    entries = requests_since(CLUSTER_DIR / "logs" / "audit.log", started, user)
    refused = [e for e in entries if e.get("responseStatus", {}).get("code") == 403]
    assert not refused, [(e["verb"], e["requestURI"]) for e in refused[:5]]
    granted = set().union(*(granted_by(role) for role in roles))
    unused = granted - used_by(entries) - CHECKED_NOT_CALLED
    assert not unused, f"granted but never used: {sorted(unused)}"
    return entries


def test_operator_with_its_service_account_reconciles_a_job(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    shared_root: Path,
    operator_kubeconfig: str,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    started = datetime.now(UTC).replace(microsecond=0)
    namespace = kube.new_namespace("rbac")
    metrics_port, liveness_port = reconcile_a_job(
        kube, kubelet, shared_root, namespace, operator_kubeconfig, operator_process
    )
    # Its own endpoints: Prometheus metrics that counted this job, and the liveness probe.
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert metric(metrics, "tfmw_jobs_created_total") == 1
    assert metric(metrics, "tfmw_jobs_succeeded_total") == 1
    assert metric(metrics, 'tfmw_gang_restarts_total{cause="Error"}') == 1  # exit 137, no OOM reason
    assert metric(metrics, "tfmw_reconcile_duration_seconds_count") > 0
    assert metric(metrics, "tfmw_marker_detection_latency_seconds_count") == 1
    assert urllib.request.urlopen(f"http://127.0.0.1:{liveness_port}/healthz", timeout=5).status == 200
    shipped = list(yaml.safe_load_all((REPO / "deploy" / "base" / "rbac.yaml").read_text()))
    role = next(d for d in shipped if d["kind"] == "ClusterRole")
    # And in its own namespace, the one ConfigMap it writes its version into as it starts.
    (version_role,) = [
        d for d in shipped if d["metadata"]["name"] == "tfmw-operator-version" and d["kind"] == "Role"
    ]
    assert_every_grant_used_and_nothing_refused(SERVICE_ACCOUNT, started, role, version_role)


def chart_rbac(watched: str) -> list[Json]:
    """The chart's rights for an operator in tfmw-system serving `watched` alone: its
    ClusterRole (renamed, to stand beside deploy/'s, which the session applied) and the Role
    in `watched`, with their bindings."""
    rendered = subprocess.run(
        [str(REPO / "hack" / "bin" / "helm"), "template", "tfmw", str(REPO / "charts" / "tfmw"),
         "--namespace", "tfmw-system", "--kube-version", kube_version(), "--set", f"watchNamespaces={{{watched}}}",
         "--show-only", "templates/rbac.yaml"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"]["name"] = NAMESPACED_CLUSTER_ROLE
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = NAMESPACED_CLUSTER_ROLE
    return [d for d in docs if d["kind"].startswith("Cluster") or d["metadata"].get("namespace") == watched]


NAMESPACED_CLUSTER_ROLE = "tfmw-operator-test-namespaced"


def test_an_operator_serving_one_namespace_needs_rights_there_alone(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    shared_root: Path,
    operator_kubeconfig: str,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """The chart's watchNamespaces: a Role in the namespace served holds every right but the
    cluster-scoped reads, and that is enough, used in full, and nothing is asked elsewhere.
    The operator's own service account (the API server's audit policy logs it alone), its
    cluster-wide binding taken away meanwhile (the deployed operator is paused)."""
    started = datetime.now(UTC).replace(microsecond=0)
    jobs = kube.new_namespace("rbac-ns")
    docs = chart_rbac(jobs)
    kubectl("delete", "clusterrolebinding", "tfmw-operator")
    try:
        kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        reconcile_a_job(kube, kubelet, shared_root, jobs, operator_kubeconfig, operator_process)
        (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
        (role,) = [d for d in docs if d["kind"] == "Role"]
        entries = assert_every_grant_used_and_nothing_refused(SERVICE_ACCOUNT, started, cluster_role, role)
        # Every request on a namespaced resource was in the namespace served, but the one
        # that writes the operator's version into its own namespace's ConfigMap.
        elsewhere = {
            (e["verb"], e["requestURI"])
            for e in entries
            if (e.get("objectRef") or {}).get("resource")
            not in ("namespaces", "customresourcedefinitions", None)
            and (e.get("objectRef") or {}).get("namespace") != jobs
            and e["requestURI"] != "/api/v1/namespaces/tfmw-system/configmaps/tfmw-version"
        }
        assert not elsewhere, sorted(elsewhere)[:5]
        for namespace, allowed in ((jobs, "yes"), ("kube-system", "no"), ("default", "no")):
            for verb, resource in (
                ("create", "pods"),
                ("create", "services"),
                ("list", "persistentvolumeclaims"),
            ):
                can = kubectl(
                    "auth", "can-i", verb, resource, "-n", namespace, "--as", SERVICE_ACCOUNT, check=False
                )
                assert can.stdout.strip() == allowed, f"{verb} {resource} in {namespace}: {can.stdout}"
    finally:
        kubectl("delete", "-f", "-", "--ignore-not-found", input=yaml.safe_dump_all(docs), check=False)
        kubectl("apply", "-f", str(REPO / "deploy" / "base" / "rbac.yaml"))


TFJOB_RBAC = REPO / "deploy" / "overlays" / "tfjob" / "component" / "tfjob-rbac.yaml"


def test_an_operator_serving_tfjobs_uses_every_tfjob_right_and_asks_no_more(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    tfjob_crd: None,
    operator_kubeconfig: str,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """The TFJob component's ClusterRole (the chart's is the same, a unit test compares),
    for the operator's own service account beside deploy/'s: a TFJob taken from creation to
    its TTL lists and watches TFJobs, patches one's annotations and status, and deletes it,
    and nothing the operator asks is refused. No `get`: a TFJob is read by a list by name."""
    started = datetime.now(UTC).replace(microsecond=0)
    namespace = kube.new_namespace("rbac-tfjob")
    (role,) = [d for d in yaml.safe_load_all(TFJOB_RBAC.read_text()) if d and d["kind"] == "ClusterRole"]
    assert "get" not in {v for rule in role["rules"] for v in rule["verbs"]}
    kubectl("apply", "-f", str(TFJOB_RBAC))
    try:
        operator_process(namespace, operator_kubeconfig, args=("--tfjobs", "all")).wait_started()
        manifest = simulated_tfjob("least")
        manifest["spec"]["runPolicy"] = {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 1}
        kube.custom.create_namespaced_custom_object(
            tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, manifest
        )

        def pods() -> list[str]:
            selector = f"{tfjob.KF_JOB_NAME}=least"
            listed = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
            return [p.metadata.name for p in listed if p.metadata.deletion_timestamp is None]

        def conditions() -> set[str]:
            job = kube.custom.get_namespaced_custom_object(
                tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, "least"
            )
            return {
                c["type"]
                for c in (job.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"
            }

        (pod,) = wait_for("the TFJob's pod", pods, timeout=30)
        kubelet.run(namespace, pod)
        wait_for("the TFJob Running", lambda: "Running" in conditions(), timeout=30)
        kubelet.exit(namespace, pod, 0)  # a TFJob succeeds by its workers' exit codes

        def deleted() -> bool:
            found = kube.custom.list_namespaced_custom_object(
                tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, field_selector="metadata.name=least"
            )
            return not found["items"]

        wait_for("the TFJob deleted by its TTL", deleted, timeout=30)
        entries = assert_every_grant_used_and_nothing_refused(SERVICE_ACCOUNT, started, role)
        assert ("kubeflow.org", "tfjobs", "get") not in used_by(entries)
    finally:
        kubectl("delete", "-f", str(TFJOB_RBAC), "--ignore-not-found", check=False)
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
