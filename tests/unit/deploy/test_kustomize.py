"""deploy/: the kustomize base (no storage, the released image) and its overlays, rendered
by kubectl's kustomize (hack/bin), no cluster."""

from __future__ import annotations

import copy
import functools
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
KUBECTL = REPO / "hack" / "bin" / "kubectl"
Json = dict[str, Any]


def documents(*command: str) -> list[Json]:
    """The objects a command prints as YAML (a copy of one run per command)."""
    return copy.deepcopy(_documents(command))


@functools.cache
def _documents(command: tuple[str, ...]) -> list[Json]:
    out = subprocess.run(list(command), check=True, capture_output=True, text=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def render(folder: str) -> list[Json]:
    """The objects `kubectl kustomize <folder>` makes."""
    return documents(str(KUBECTL), "kustomize", str(REPO / folder))


def version() -> str:
    project: Json = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return str(project["version"])


@functools.cache
def pinned(variable: str) -> str:
    """A variable of hack/versions.env, as the hack/ scripts see it."""
    out = subprocess.run(
        ["bash", "-c", f'source "$1" && echo "${variable}"', "-", str(REPO / "hack" / "versions.env")],
        check=True,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    return out.strip()


def local_registry() -> str:
    return pinned("LOCAL_REGISTRY")


def kube_version() -> str:
    return pinned("KUBE_VERSION")


def kinds(docs: list[Json]) -> list[tuple[str, str, str]]:
    return sorted((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs)


def operator(docs: list[Json]) -> Json:
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "tfmw-operator"
    ]
    return deployment


def test_the_base_brings_no_storage_and_the_released_image() -> None:
    docs = render("deploy")
    assert not [d for d in docs if d["kind"] in ("PersistentVolume", "PersistentVolumeClaim", "StorageClass")]
    (container,) = operator(docs)["spec"]["template"]["spec"]["containers"]
    # The one version (pyproject.toml) on the image the local registry serves (make push).
    assert container["image"] == f"{local_registry()}/tfmw-operator:{version()}"
    assert ("PodDisruptionBudget", "tfmw-system", "tfmw-operator") in kinds(docs)
    assert ("Service", "tfmw-system", "tfmw-operator-metrics") in kinds(docs)


def test_the_two_replicas_prefer_two_nodes_and_one_may_be_disrupted() -> None:
    docs = render("deploy")
    spec = operator(docs)["spec"]
    assert spec["replicas"] == 2
    (term,) = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (pdb,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    # A replica that runs but is not Ready (crash-looping) never holds a drain.
    assert pdb["spec"] == {
        "minAvailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": spec["selector"],
    }


def test_the_local_overlay_is_the_base_with_the_nodes_folder_and_the_loaded_image() -> None:
    base, local = render("deploy"), render("deploy/overlays/local")
    added = set(kinds(local)) - set(kinds(base))
    assert added == {
        ("Namespace", "", "default"),  # labelled: the wall is Pod Security (below)
        ("PersistentVolume", "", "tfmw-shared-operator"),
        ("PersistentVolume", "", "tfmw-shared-default"),
        ("PersistentVolumeClaim", "tfmw-system", "tfmw-shared"),
        ("PersistentVolumeClaim", "default", "tfmw-shared"),
    }
    assert set(kinds(base)) <= set(kinds(local))
    (container,) = operator(local)["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "tfmw-operator:dev"  # hack/images.sh loads it into the node


ENFORCE = "pod-security.kubernetes.io/enforce"


def test_the_nfs_example_for_real_clusters_lowers_no_namespaces_pod_security() -> None:
    """docs/examples/nfs-storage is the local overlay on an NFS export, for real clusters:
    it applies no Namespace `default` (whose `baseline` would lower a `restricted` there; the
    user labels it, raising only), and the one Namespace it applies, tfmw-system, is
    `restricted`, which nothing is above. The local overlay keeps its `default`."""
    docs = render("docs/examples/nfs-storage")
    namespaces = {
        d["metadata"]["name"]: d["metadata"].get("labels", {}) for d in docs if d["kind"] == "Namespace"
    }
    assert namespaces == {"tfmw-system": namespaces["tfmw-system"]}
    assert namespaces["tfmw-system"][ENFORCE] == "restricted"
    # Its claim in `default` is still there, on the export's folder: labelling is the user's.
    (claim,) = [
        d for d in docs if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["namespace"] == "default"
    ]
    assert claim["spec"]["volumeName"] == "tfmw-shared-default"
    text = (REPO / "docs" / "examples" / "nfs-storage" / "kustomization.yaml").read_text()
    assert "case $level in baseline|restricted) ;;" in text  # the command raises, never lowers
    local = [d for d in render("deploy/overlays/local") if d["kind"] == "Namespace"]
    assert {d["metadata"]["name"] for d in local} == {"tfmw-system", "default"}


def test_the_readmes_images_step_moves_both_images_and_the_trainer_default(tmp_path: Path) -> None:
    """The README's kustomize install: a copy of the rwx overlay with its `images:` line.
    That one list reaches the operator's container, every worker's folder check
    (TFMW_FOLDER_CHECK_IMAGE, by the overlay's replacement) and the trainer image of the
    ConfigMap tfmw-version (deploy/base/kustomizeconfig.yaml), as the chart's
    image.registry does."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Install on your cluster", 1)[1].split("\n## ", 1)[0]
    registry = f"{local_registry()}/ml"
    entries = re.findall(r"\{name: ([^,}]+), newName: ([^,}]+)\}", section)
    assert [name for name, _ in entries] == ["localhost:5000/tfmw-operator", "localhost:5000/tfmw-trainer"]
    images = [{"name": name, "newName": new.replace("$REGISTRY", registry)} for name, new in entries]
    mine = tmp_path / "mine"
    shutil.copytree(REPO / "deploy" / "overlays" / "rwx", mine)
    kustomization = yaml.safe_load((mine / "kustomization.yaml").read_text())
    base = os.path.relpath(REPO / "deploy" / "base", mine)  # kustomize takes no absolute base
    kustomization["resources"] = [base, "claim.yaml"]
    kustomization["images"] = images
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    docs = documents(str(KUBECTL), "kustomize", str(mine))
    (container,) = operator(docs)["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{registry}/tfmw-operator:{version()}"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TFMW_FOLDER_CHECK_IMAGE"] == container["image"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tfmw-version"]
    assert config_map["data"]["trainerImage"] == f"{registry}/tfmw-trainer:{version()}"


def test_the_rwx_overlay_adds_the_operators_claim_only() -> None:
    base, rwx = render("deploy"), render("deploy/overlays/rwx")
    assert set(kinds(rwx)) - set(kinds(base)) == {("PersistentVolumeClaim", "tfmw-system", "tfmw-shared")}
    (claim,) = [d for d in rwx if d["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert "volumeName" not in claim["spec"]
    # The Deployment mounts exactly that claim.
    volumes = operator(rwx)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "tfmw-shared"}} in volumes


def test_the_local_overlays_job_namespace_is_walled_by_pod_security() -> None:
    """`default` gets the whole root's folder default/ by claim; a pod of its own with a
    hostPath volume would get the whole root, unless Pod Security refuses it (baseline)."""
    docs = render("deploy/overlays/local")
    (default,) = [d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == "default"]
    labels = default["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] in ("baseline", "restricted")
    assert labels["pod-security.kubernetes.io/enforce-version"] == "latest"
    assert labels["tfmw.dev/shared-storage"] == "true"
    (system,) = [d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == "tfmw-system"]
    assert system["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # Every namespace a claim of the overlay is in enforces one of the two.
    claimed = {d["metadata"]["namespace"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    enforced = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "Namespace"
        and d["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce")
        in ("baseline", "restricted")
    }
    assert claimed <= enforced


def rules(role: Json) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_namespaced_overlay_moves_every_namespaced_right_into_a_role_of_the_namespace_served() -> None:
    base, namespaced = render("deploy"), render("deploy/overlays/namespaced")
    (wide,) = [d for d in base if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tfmw-operator"]
    (cluster,) = [
        d for d in namespaced if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tfmw-operator"
    ]
    (role,) = [d for d in namespaced if d["kind"] == "Role" and d["metadata"]["name"] == "tfmw-operator"]
    (binding,) = [
        d for d in namespaced if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "tfmw-operator"
    ]
    # Cluster-wide, only what is cluster-scoped and read-only.
    assert rules(cluster) == {
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
    }
    # Nothing lost: the base's rights are the two together.
    assert rules(role) | rules(cluster) == rules(wide)
    assert not rules(role) & rules(cluster)
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "default"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "tfmw-operator",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
    ]
    # ... and the operator watches that namespace only.
    (container,) = operator(namespaced)["spec"]["template"]["spec"]["containers"]
    assert [a for a in container["args"] if a.startswith("--namespace")] == ["--namespace=default"]
    # Otherwise the base, object by object.
    rbac = {"ClusterRole", "Role", "RoleBinding", "Deployment"}
    assert [d for d in namespaced if d["kind"] not in rbac] == [d for d in base if d["kind"] not in rbac]
