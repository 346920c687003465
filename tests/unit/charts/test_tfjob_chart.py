"""Kubeflow's TFJob CRD as tfmw ships it: taken byte for byte from training-operator's Go
module at hack/versions.env's TFJOB_VERSION (hack/gen-tfjob-crd.sh), in the chart behind
`tfjob.enabled` and in the kustomize overlay deploy/overlays/tfjob, with the operator's
rights on TFJobs. Rendered by the Helm and kubectl of hack/bin; the module comes from the
Go module cache (downloaded once through the module proxy)."""

from __future__ import annotations

import copy
import functools
import json
import re
import subprocess
from pathlib import Path

import yaml
from unit.charts.test_chart import CHART, HELM, Json, by_key, user_role_rights, wanted_user_roles
from unit.deploy.test_kustomize import KUBECTL, REPO, kube_version, pinned, rules

MODULE = "github.com/kubeflow/training-operator"
CRD_NAME = "tfjobs.kubeflow.org"
TEMPLATE = CHART / "templates" / "tfjob-crd.yaml"
OVERLAY_CRD = REPO / "deploy" / "overlays" / "tfjob" / "component" / "kubeflow.org_tfjobs.yaml"
# The one line the chart's copy adds to the module's CRD, first among its annotations: Helm
# keeps the CRD when the release goes or tfjob.enabled turns false, for deleting it deletes
# every TFJob in the cluster.
KEEP = {"helm.sh/resource-policy": "keep"}
KEEP_LINE = b"    helm.sh/resource-policy: keep\n"
OPERATOR = {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
# What the operator may do with TFJobs, wherever it may: it reads them by a list (a name's
# field selector, as for tfmwjobs), never a GET of one.
TFJOB_RIGHTS = {("kubeflow.org", "tfjobs", verb) for verb in ("list", "watch", "patch", "delete")} | {
    ("kubeflow.org", "tfjobs/status", "patch"),
    ("kubeflow.org", "tfjobs/finalizers", "update"),
}


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


def without_keep(docs: list[Json]) -> list[Json]:
    """The objects with the TFJob CRD's keep annotation taken off (it must be there)."""
    for crd in crds(docs):
        annotations = crd["metadata"]["annotations"]
        assert annotations.pop("helm.sh/resource-policy") == "keep"
    return docs


def modules_crd_kept() -> bytes:
    """The module's CRD with KEEP_LINE first among its metadata's annotations."""
    head = b"\nmetadata:\n  annotations:\n"
    crd = module_crd()
    assert crd.count(head) == 1
    return crd.replace(head, head + KEEP_LINE)


def operator_rbac(docs: list[Json]) -> list[Json]:
    """The RBAC objects that are the operator's: not the users' aggregated roles."""
    users = set(user_role_rights(docs))
    return [d for d in docs if d["apiVersion"].startswith("rbac.") and d["metadata"]["name"] not in users]


def cluster_wide_rights_of_the_operator(docs: list[Json]) -> set[tuple[str, str, str]]:
    """What every ClusterRoleBinding of the operator's service account grants it."""
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding" and OPERATOR in d.get("subjects", [])]
    return set().union(*(rules(roles[b["roleRef"]["name"]]) for b in bindings))


def test_the_overlays_crd_is_the_modules_byte_for_byte() -> None:
    assert OVERLAY_CRD.read_bytes() == module_crd()


def test_the_charts_crd_template_is_the_modules_crd_kept_between_a_header_and_a_footer() -> None:
    """The module's bytes, but for one line: Helm's keep annotation (KEEP_LINE)."""
    version = pinned("TFJOB_VERSION")
    lines = TEMPLATE.read_bytes().split(b"\n")
    header, condition, body, footer = lines[0], lines[1], lines[2:-2], lines[-2:]
    assert header.startswith(b"{{- /*") and header.endswith(b"*/}}")
    assert f"{MODULE}@{version} ".encode() in header  # says which module and version
    assert condition == b"{{- if and .Values.tfjob.enabled .Values.tfjob.installCRD }}"
    assert footer == [b"{{- end }}", b""]
    assert b"\n".join(body) + b"\n" == modules_crd_kept()


def test_tfjob_is_off_by_default_and_renders_nothing_for_tfjobs() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["tfjob"] == {
        "enabled": False,
        "installCRD": True,
        "serve": "all",
        "kubeflowNamespace": "kubeflow",
    }
    assert tfjob_objects(helm_template()) == []


def test_enabled_renders_the_modules_crd_which_helm_keeps() -> None:
    (crd,) = crds(helm_template("--set", "tfjob.enabled=true"))
    wanted = yaml.load(module_crd(), Loader=yaml.CSafeLoader)
    wanted["metadata"]["annotations"] = {**KEEP, **wanted["metadata"]["annotations"]}
    assert crd == wanted


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
    """But for the CRD's keep annotation, which only Helm reads."""
    overlay = by_key(render("deploy/overlays/tfjob"))
    chart = by_key(without_keep(tfjob_objects(helm_template("--set", "tfjob.enabled=true"))))
    assert sorted(chart) == sorted(overlay)
    for key, wanted in overlay.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/overlays/tfjob differ"


def test_the_operator_may_read_tfjobs_and_patch_their_status_and_no_more() -> None:
    """No `get`: the operator never reads one TFJob by name (kube/client.py's get_job lists
    with a field selector), as it has no `get` on tfmwjobs. The same rules in the
    component's ClusterRole, the namespaced component's Role, and the chart's of both."""
    docs = by_key(render("deploy/overlays/tfjob"))
    role = docs[("rbac.authorization.k8s.io/v1", "ClusterRole", "", "tfmw-operator-tfjob")]
    assert rules(role) == TFJOB_RIGHTS
    binding = docs[("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "tfmw-operator-tfjob")]
    assert binding["subjects"] == [OPERATOR]
    namespaced = by_key(render("deploy/overlays/namespaced-tfjob"))
    assert (
        rules(namespaced[("rbac.authorization.k8s.io/v1", "Role", "default", "tfmw-operator-tfjob")])
        == TFJOB_RIGHTS
    )
    chart = by_key(helm_template("--set", "tfjob.enabled=true"))
    assert (
        rules(chart[("rbac.authorization.k8s.io/v1", "ClusterRole", "", "tfmw-operator-tfjob")])
        == TFJOB_RIGHTS
    )
    chart = by_key(helm_template("--set", "tfjob.enabled=true", "--set", "watchNamespaces={team-a}"))
    assert (
        rules(chart[("rbac.authorization.k8s.io/v1", "Role", "team-a", "tfmw-operator-tfjob")])
        == TFJOB_RIGHTS
    )


def test_the_operator_reads_no_tfjob_by_name() -> None:
    """What the rules above rest on: the operator's client GETs a single object only through
    `_get`, and only Services and Kueue Workloads so; jobs, of either kind, are read by a
    list with a name's field selector."""
    client = (REPO / "operator" / "tfmw_operator" / "kube" / "client.py").read_text()
    gets = re.findall(r"await self\._get\(_path\(namespace, (\w+|\"\w+\")", client)
    assert set(gets) == {'"services"', "WORKLOADS"}, gets
    assert client.count("self._get(") == len(gets)  # no other single GET
    get_job = client[client.index("async def get_job(") :].split("\n    async def ", 1)[0]
    assert '"fieldSelector": f"metadata.name={name}"' in get_job
    assert "_get(" not in get_job


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
    everything = helm_template("--set", "tfjob.enabled=true", "--set", "watchNamespaces={team-a,team-b}")
    assert not {r for r in cluster_wide_rights_of_the_operator(everything) if r[0] == "kubeflow.org"}
    docs = tfjob_objects(everything)
    rbac = operator_rbac(docs)  # the users' aggregated roles for TFJobs are bound to nobody
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


def test_the_namespaced_tfjob_overlay_gives_the_operator_no_cluster_wide_tfjob_rights() -> None:
    """deploy/overlays/namespaced-tfjob: the operator serves `default` alone (--namespace), and
    its rights on TFJobs are a Role there, as its other rights; nothing bound to it
    cluster-wide names a TFJob (the TFJob component alone would: a ClusterRole)."""
    docs = render("deploy/overlays/namespaced-tfjob")
    assert not {r for r in cluster_wide_rights_of_the_operator(docs) if r[0] == "kubeflow.org"}
    assert ("kubeflow.org", "tfjobs", "list") in cluster_wide_rights_of_the_operator(
        render("deploy/overlays/tfjob")
    )
    found = by_key(operator_rbac(docs))
    assert not [k for k in found if k[1].startswith("Cluster") and "tfjob" in k[3]]
    role = found[("rbac.authorization.k8s.io/v1", "Role", "default", "tfmw-operator-tfjob")]
    assert rules(role) == TFJOB_RIGHTS
    binding = found[("rbac.authorization.k8s.io/v1", "RoleBinding", "default", "tfmw-operator-tfjob")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "tfmw-operator-tfjob",
    }
    assert binding["subjects"] == [OPERATOR]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith(("--namespace", "--tfjobs"))] == [
        "--tfjobs=all",
        "--namespace=default",
    ]


def test_watch_namespaces_with_tfjobs_render_the_namespaced_tfjob_overlay_object_by_object() -> None:
    overlay = {
        k: v for k, v in by_key(render("deploy/overlays/namespaced-tfjob")).items() if k[1] != "Namespace"
    }
    chart = by_key(
        without_keep(helm_template("--set", "tfjob.enabled=true", "--set", "watchNamespaces={default}"))
    )
    assert sorted(chart) == sorted(overlay)
    for key, wanted in overlay.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/overlays/namespaced-tfjob differ"


def test_tfjobs_join_the_built_in_user_roles_where_their_crd_is_installed() -> None:
    """Where the chart or the component installs the CRD: edit and admin may do everything to
    TFJobs, view may read them, nobody but the operator writes tfjobs/status. Where the CRD
    came from elsewhere (installCRD: false), who may use TFJobs is that install's business."""
    jobs = wanted_user_roles("jobs", "tfmw.dev", "tfmwjobs")
    tfjobs = wanted_user_roles("tfjobs", "kubeflow.org", "tfjobs")
    assert user_role_rights(helm_template("--set", "tfjob.enabled=true")) == jobs | tfjobs
    assert user_role_rights(render("deploy/overlays/tfjob")) == tfjobs
    assert (
        user_role_rights(helm_template("--set", "tfjob.enabled=true", "--set", "tfjob.installCRD=false"))
        == jobs
    )
    off = ("--set", "tfjob.enabled=true", "--set", "aggregateToUserRoles=false")
    assert user_role_rights(helm_template(*off)) == {}
