"""Kubeflow's TFJob CRD as tfmw ships it: taken byte for byte from training-operator's Go
module at hack/versions.env's TFJOB_VERSION (hack/gen-tfjob-crd.sh), in the chart behind
`tfjob.enabled` and in the kustomize overlay deploy/overlays/tfjob, with the operator's
rights on TFJobs. Rendered by the Helm and kubectl of hack/bin; the module comes from the
Go module cache (downloaded once through the module proxy)."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
from pathlib import Path

import yaml
from unit.charts.test_chart import CHART, HELM, Json, by_key
from unit.deploy.test_kustomize import KUBECTL, REPO, kube_version, pinned

MODULE = "github.com/kubeflow/training-operator"
CRD_NAME = "tfjobs.kubeflow.org"
TEMPLATE = CHART / "templates" / "tfjob-crd.yaml"
OVERLAY_CRD = REPO / "deploy" / "overlays" / "tfjob" / "component" / "kubeflow.org_tfjobs.yaml"


@functools.cache
def module_crd() -> bytes:
    """The CRD file in the module at the pinned version, as `go mod download` gives it."""
    version = pinned("TFJOB_VERSION")
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"],
        cwd=REPO / "hack",
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    module = Path(json.loads(out)["Dir"])
    return (module / "manifests" / "base" / "crds" / "kubeflow.org_tfjobs.yaml").read_bytes()


@functools.cache
def _parsed(command: tuple[str, ...]) -> list[Json]:
    out = subprocess.run(list(command), check=True, capture_output=True, text=True, timeout=120).stdout
    # libyaml: the CRD is 600 KB, a few seconds for the pure-Python parser at each render.
    return [d for d in yaml.load_all(out, Loader=yaml.CSafeLoader) if d]


def helm_template(*options: str) -> list[Json]:
    """The objects `helm template` makes with these options (as test_chart's, parsed by libyaml)."""
    command = (str(HELM), "template", "tfmw", str(CHART), "--namespace", "tfmw-system", "--include-crds")
    return copy.deepcopy(_parsed((*command, "--kube-version", kube_version(), *options)))


def render(folder: str) -> list[Json]:
    """The objects `kubectl kustomize <folder>` makes."""
    return copy.deepcopy(_parsed((str(KUBECTL), "kustomize", str(REPO / folder))))


def crds(docs: list[Json]) -> list[Json]:
    return [d for d in docs if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == CRD_NAME]


def tfjob_objects(docs: list[Json]) -> list[Json]:
    """What the chart renders for TFJobs: every object named for them (the CRD too)."""
    return [d for d in docs if "tfjob" in d["metadata"]["name"]]


def test_the_overlays_crd_is_the_modules_byte_for_byte() -> None:
    assert OVERLAY_CRD.read_bytes() == module_crd()


def test_the_charts_crd_template_is_the_modules_crd_between_a_header_and_a_footer() -> None:
    version = pinned("TFJOB_VERSION")
    lines = TEMPLATE.read_bytes().split(b"\n")
    header, condition, body, footer = lines[0], lines[1], lines[2:-2], lines[-2:]
    assert header.startswith(b"{{- /*") and header.endswith(b"*/}}")
    assert f"{MODULE}@{version} ".encode() in header  # says which module and version
    assert condition == b"{{- if and .Values.tfjob.enabled .Values.tfjob.installCRD }}"
    assert footer == [b"{{- end }}", b""]
    assert b"\n".join(body) + b"\n" == module_crd()


def test_tfjob_is_off_by_default_and_renders_nothing_for_tfjobs() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["tfjob"] == {
        "enabled": False,
        "installCRD": True,
        "serve": "all",
        "kubeflowNamespace": "kubeflow",
    }
    assert tfjob_objects(helm_template()) == []


def test_enabled_renders_the_modules_crd() -> None:
    (crd,) = crds(helm_template("--set", "tfjob.enabled=true"))
    assert crd == yaml.load(module_crd(), Loader=yaml.CSafeLoader)


def test_enabled_without_installing_the_crd_keeps_the_rights() -> None:
    docs = helm_template("--set", "tfjob.enabled=true", "--set", "tfjob.installCRD=false")
    assert crds(docs) == []
    assert {d["kind"] for d in tfjob_objects(docs)} == {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }


def test_enabled_renders_the_tfjob_overlay_object_by_object() -> None:
    overlay = by_key(render("deploy/overlays/tfjob"))
    chart = by_key(tfjob_objects(helm_template("--set", "tfjob.enabled=true")))
    assert sorted(chart) == sorted(overlay)
    for key, wanted in overlay.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/overlays/tfjob differ"


def test_the_operator_may_read_tfjobs_and_patch_their_status_and_no_more() -> None:
    docs = by_key(render("deploy/overlays/tfjob"))
    role = docs[("rbac.authorization.k8s.io/v1", "ClusterRole", "", "tfmw-operator-tfjob")]
    rights = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    tfjobs = {("kubeflow.org", "tfjobs", verb) for verb in ("get", "list", "watch", "patch", "delete")}
    assert rights == tfjobs | {
        ("kubeflow.org", "tfjobs/status", "patch"),
        ("kubeflow.org", "tfjobs/finalizers", "update"),
    }
    binding = docs[("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "tfmw-operator-tfjob")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
    ]


def test_the_admission_policy_for_tfjobs_follows_the_charts_switch() -> None:
    off = helm_template("--set", "tfjob.enabled=true", "--set", "admissionPolicy.enabled=false")
    assert [d for d in tfjob_objects(off) if d["apiVersion"].startswith("admissionregistration")] == []
    on = helm_template("--set", "tfjob.enabled=true")
    policies = {
        d["metadata"]["name"]: d for d in tfjob_objects(on) if d["kind"] == "ValidatingAdmissionPolicy"
    }
    assert set(policies) == {"tfmw-tfjob-creator-may-create-pods", "tfmw-tfjob-spec-held"}
    for policy in policies.values():
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert (rule["apiGroups"], rule["resources"]) == (["kubeflow.org"], ["tfjobs"])
    bindings = {d["spec"]["policyName"] for d in tfjob_objects(on) if d["kind"].endswith("PolicyBinding")}
    assert bindings == set(policies)
    # A TFJob tfmw does not serve is not held by tfmw's rules.
    off_serving = helm_template("--set", "tfjob.enabled=true", "--set", "tfjob.serve=off")
    names = {
        d["metadata"]["name"] for d in tfjob_objects(off_serving) if d["kind"] == "ValidatingAdmissionPolicy"
    }
    assert names == {"tfmw-tfjob-creator-may-create-pods"}


def test_helm_lint_is_clean_with_tfjob_enabled() -> None:
    done = subprocess.run(
        [str(HELM), "lint", "--strict", str(CHART), "--set", "tfjob.enabled=true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_watch_namespaces_give_the_tfjob_rights_in_each_namespace_and_none_cluster_wide() -> None:
    cluster_wide = by_key(tfjob_objects(helm_template("--set", "tfjob.enabled=true")))
    role = cluster_wide[("rbac.authorization.k8s.io/v1", "ClusterRole", "", "tfmw-operator-tfjob")]
    docs = tfjob_objects(
        helm_template("--set", "tfjob.enabled=true", "--set", "watchNamespaces={team-a,team-b}")
    )
    rbac = [d for d in docs if d["apiVersion"].startswith("rbac.")]
    assert not [d for d in rbac if d["kind"].startswith("Cluster")]
    found = by_key(rbac)
    for namespace in ("team-a", "team-b"):
        namespaced = found[("rbac.authorization.k8s.io/v1", "Role", namespace, "tfmw-operator-tfjob")]
        assert namespaced["rules"] == role["rules"]  # the same rights, only where it serves
        binding = found[("rbac.authorization.k8s.io/v1", "RoleBinding", namespace, "tfmw-operator-tfjob")]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "tfmw-operator-tfjob",
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
        ]
    assert len(rbac) == 4
