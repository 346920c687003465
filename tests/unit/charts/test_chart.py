"""charts/tfmw against the kustomize base: with default values the chart renders the same
objects as `kubectl kustomize deploy/` (but the Namespace, which `helm install
--create-namespace` makes), so the two ways to install cannot drift. Rendered by the Helm
and kubectl of hack/bin (helm template, kubectl kustomize): no cluster."""

from __future__ import annotations

import filecmp
import subprocess
from typing import Any

import pytest
import yaml
from unit.deploy.test_kustomize import REPO, documents, kube_version, local_registry, render, version

HELM = REPO / "hack" / "bin" / "helm"
CHART = REPO / "charts" / "tfmw"
Json = dict[str, Any]
Key = tuple[str, str, str, str]


def helm_template(*options: str) -> list[Json]:
    """The objects `helm template` makes with these options."""
    return documents(
        str(HELM),
        "template",
        "tfmw",
        str(CHART),
        "--namespace",
        "tfmw-system",
        "--include-crds",
        "--kube-version",
        kube_version(),
        *options,
    )


def by_key(docs: list[Json]) -> dict[Key, Json]:
    keyed = {
        (d["apiVersion"], d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
    }
    assert len(keyed) == len(docs), "two objects of one name"
    return keyed


def test_default_values_render_the_kustomize_base_object_by_object() -> None:
    base = {k: v for k, v in by_key(render("deploy")).items() if k[1] != "Namespace"}
    chart = by_key(helm_template())
    assert sorted(chart) == sorted(base)
    for key, wanted in base.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/base differ"


def test_the_namespace_is_helms_to_make() -> None:
    (namespace,) = [d for d in render("deploy") if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "tfmw-system"
    assert not [d for d in helm_template() if d["kind"] == "Namespace"]


def test_the_charts_crd_is_the_crd() -> None:
    assert filecmp.cmp(
        CHART / "crds" / "tfmwjobs.tfmw.dev.yaml", REPO / "crds" / "tfmwjobs.tfmw.dev.yaml", shallow=False
    )


def test_the_chart_is_pyprojects_version_from_the_local_registry() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["registry"] == local_registry()


def operator_container(docs: list[Json]) -> Json:
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "tfmw-operator"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_image_replicas_and_resources_come_from_the_values() -> None:
    docs = helm_template(
        "--set", "image.registry=registry.example.com/ml", "--set", "image.tag=1.2.3", "--set", "replicas=3",
        "--set", "resources.limits.memory=1Gi",
    )  # fmt: skip
    container = operator_container(docs)
    assert container["image"] == "registry.example.com/ml/tfmw-operator:1.2.3"
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3


def test_the_shared_claim_is_the_rwx_overlays_when_the_chart_makes_it() -> None:
    (wanted,) = [d for d in render("deploy/overlays/rwx") if d["kind"] == "PersistentVolumeClaim"]
    docs = helm_template("--set", "sharedClaim.create=true", "--set", "sharedClaim.storageClassName=rwx")
    (claim,) = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert claim == wanted


def test_tensorboard_is_the_kustomize_components_with_the_released_trainer_image() -> None:
    wanted = by_key(render("deploy/tensorboard"))  # the component on its own
    docs = by_key(helm_template("--set", "tensorboard.enabled=true"))
    for key, obj in wanted.items():
        if obj["kind"] == "Deployment":
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            assert container["image"] == "tfmw-trainer:dev"
            container["image"] = f"{local_registry()}/tfmw-trainer:{version()}"
        assert docs[key] == obj, key


def test_metrics_off_means_no_port_no_service() -> None:
    docs = helm_template("--set", "metrics.enabled=false")
    assert not [d for d in docs if d["kind"] == "Service"]
    container = operator_container(docs)
    assert "--metrics-port=0" in container["args"]
    assert [p["name"] for p in container["ports"]] == ["health"]


def test_kueue_off_drops_the_workload_rights_only() -> None:
    def rules(docs: list[Json]) -> list[Json]:
        (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
        return list(role["rules"])

    on, off = rules(helm_template()), rules(helm_template("--set", "kueue.enabled=false"))
    assert [r for r in on if r not in off] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "delete"]}
    ]


def test_the_admission_policy_can_be_turned_off_or_to_warn() -> None:
    off = helm_template("--set", "admissionPolicy.enabled=false")
    assert not [d for d in off if d["apiVersion"].startswith("admissionregistration")]
    warn = helm_template("--set", "admissionPolicy.validationActions={Warn,Audit}")
    (binding,) = [d for d in warn if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]


def test_helm_lint_is_clean() -> None:
    done = subprocess.run(
        [str(HELM), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


def test_watch_namespaces_render_the_namespaced_overlay_object_by_object() -> None:
    overlay = {k: v for k, v in by_key(render("deploy/overlays/namespaced")).items() if k[1] != "Namespace"}
    chart = by_key(helm_template("--set", "watchNamespaces={default}"))
    assert sorted(chart) == sorted(overlay)
    for key, wanted in overlay.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/overlays/namespaced differ"


def test_each_namespace_served_gets_a_role_and_nothing_cluster_wide_touches_pods() -> None:
    docs = helm_template("--set", "watchNamespaces={team-a,team-b}")
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert {r for rule in cluster_role["rules"] for r in rule["resources"]} == {
        "customresourcedefinitions",
        "namespaces",
    }
    assert {v for rule in cluster_role["rules"] for v in rule["verbs"]} == {"list", "watch"}
    roles = {
        d["metadata"]["namespace"]: d
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"] == "tfmw-operator"
    }
    bindings = {
        d["metadata"]["namespace"]: d
        for d in docs
        if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "tfmw-operator"
    }
    assert set(roles) == set(bindings) == {"team-a", "team-b"}
    (default_role,) = [d for d in helm_template() if d["kind"] == "ClusterRole"]
    for namespace in ("team-a", "team-b"):
        assert roles[namespace]["rules"] + cluster_role["rules"] == default_role["rules"]
        assert bindings[namespace]["subjects"] == [
            {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
        ]
    assert [a for a in operator_container(docs)["args"] if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    # Every namespace: no --namespace, and no Role of ours but the Lease's and the version's
    # (the operator patches one ConfigMap, which every user may `get`).
    default = helm_template()
    assert not [a for a in operator_container(default)["args"] if a.startswith("--namespace")]
    names = sorted(d["metadata"]["name"] for d in default if d["kind"] == "Role")
    assert names == ["tfmw-operator-leader", "tfmw-operator-version", "tfmw-version-reader"]


def test_kueue_off_drops_the_workload_rights_from_each_namespaces_role() -> None:
    docs = helm_template("--set", "watchNamespaces={team-a}", "--set", "kueue.enabled=false")
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "tfmw-operator"]
    assert "kueue.x-k8s.io" not in {g for rule in role["rules"] for g in rule["apiGroups"]}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("watchNamespaces={Team-A}", "is not a namespace's exact name"),
        ("watchNamespaces={team-*}", "is not a namespace's exact name"),
        ("watchNamespaces={tfmw-system}", "is the release's namespace"),
        ("watchNamespaces={a,b,a}", "a namespace is named twice"),
        ("watchNamespaces=team-a", "a list of namespaces' names"),
    ],
)
def test_watch_namespaces_that_are_not_namespaces_are_refused(option: str, message: str) -> None:
    done = subprocess.run(
        [str(HELM), "template", "tfmw", str(CHART), "--namespace", "tfmw-system", "--kube-version",
         kube_version(), "--set", option],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_the_operators_version_is_written_by_the_operator_and_readable_by_every_user() -> None:
    """The install's ConfigMap carries the trainer image and no version: the operator that
    leads writes its own (runtime/published_version.py), patching that one object alone;
    every authenticated user may `get` it. The chart and deploy/ alike."""

    def published(docs: list[Json]) -> tuple[Json, Json, Json, Json, Json]:
        def one(kind: str, name: str) -> Json:
            (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
            return found

        return (
            one("ConfigMap", "tfmw-version"),
            one("Role", "tfmw-version-reader"),
            one("RoleBinding", "tfmw-version-reader"),
            one("Role", "tfmw-operator-version"),
            one("RoleBinding", "tfmw-operator-version"),
        )

    for docs in (render("deploy"), helm_template(), helm_template("--set", "image.tag=1.2.3")):
        config_map, reader, readers, writer, writers = published(docs)
        assert "version" not in config_map["data"], config_map
        assert reader["rules"] == [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["tfmw-version"],
                "verbs": ["get"],
            }
        ]
        assert readers["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
        ]
        assert writer["rules"] == [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["tfmw-version"],
                "verbs": ["patch"],
            }
        ]
        assert writers["subjects"] == [
            {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
        ]
        assert writer["metadata"]["namespace"] == config_map["metadata"]["namespace"] == "tfmw-system"
        # The operator writes into its own namespace's: the Deployment tells it which.
        env = {e["name"]: e for e in operator_container(docs).get("env", [])}
        assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    (config_map,) = [d for d in render("deploy") if d["kind"] == "ConfigMap"]
    assert config_map["data"]["trainerImage"] == f"{local_registry()}/tfmw-trainer:{version()}"
    (local,) = [d for d in render("deploy/overlays/local") if d["metadata"]["name"] == "tfmw-version"]
    assert local["data"] == {"trainerImage": "tfmw-trainer:dev"}
