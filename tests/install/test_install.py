"""The install path a platform team takes, on the local cluster (make test-install).

From nothing: the machine-local registry up (CNCF Distribution), both images pushed to
it, then tfmw installed twice, each time the sample trained to Succeeded with every image
pulled from the registry (the node's containerd resolves localhost:<port> through its
hosts.toml; nothing is imported with ctr, and the images are removed from the node first):

1. the chart, `helm install`, serving `default` only (`watchNamespaces`: the operator's
   pod and Service rights are a Role there, none elsewhere), in namespaces walled by Pod
   Security as the chart checks; then `helm uninstall` leaves nothing of ours behind but the
   CRD (Helm never deletes CRDs) and the Lease the operator took at run time (it goes
   with the namespace);
2. the kustomize base, `kubectl apply -k deploy/`; then `kubectl delete -k deploy/`.

Storage is the local overlay's (deploy/overlays/local/storage.yaml): the base and the
chart bring none. It labels `default` (Pod Security baseline), which stays: the API server
never deletes `default`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from install.timings import TIMINGS
from kube import CLUSTER_DIR, LOCAL_KUBECONFIG, REPO, SHARED_DIR, kubectl, wait_for

Json = dict[str, Any]
HELM = REPO / "hack" / "bin" / "helm"
STORAGE = REPO / "deploy" / "overlays" / "local" / "storage.yaml"
NAMESPACE_YAML = REPO / "deploy" / "base" / "namespace.yaml"
SAMPLE = REPO / "deploy" / "samples" / "mnist-2-workers.yaml"
SYSTEM = "tfmw-system"
JOBS = "default"  # where the local overlay's storage puts the jobs' claim
CRD = "tfmwjobs.tfmw.dev"


def pinned(variable: str) -> str:
    command = f'source "{REPO}/hack/versions.env" && echo "${variable}"'
    return subprocess.run(["bash", "-c", command], check=True, capture_output=True, text=True).stdout.strip()


REGISTRY = pinned("LOCAL_REGISTRY")
VERSION = str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])
OPERATOR_IMAGE = f"{REGISTRY}/tfmw-operator:{VERSION}"
TRAINER_IMAGE = f"{REGISTRY}/tfmw-trainer:{VERSION}"


def timed(step: str, command: list[str], timeout: float = 900) -> None:
    t0 = time.monotonic()
    subprocess.run(command, check=True, timeout=timeout)
    TIMINGS.append((step, time.monotonic() - t0))


def kubectl_long(*args: str, timeout: float = 900, input: str | None = None) -> None:
    """kubectl for what waits longer than tests/kube.py's kubectl allows (its own --timeout)."""
    done = subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, timeout=timeout, check=False, input=input
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"


def ctr(*args: str) -> subprocess.CompletedProcess[str]:
    sock = CLUSTER_DIR / "containerd" / "containerd.sock"
    return subprocess.run(
        ["ctr", "--address", str(sock), "-n", "k8s.io", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def forget_images() -> None:
    """Every tag of the two images out of the node (the released ones, and the :dev ones that
    make deploy imports, which may be the same build): only a pull can bring them back, and
    the kubelet reports the pulled name, not another tag of the same content."""
    ours = {
        OPERATOR_IMAGE.rsplit(":", 1)[0].rsplit("/", 1)[1],
        TRAINER_IMAGE.rsplit(":", 1)[0].rsplit("/", 1)[1],
    }

    def tagged_ours() -> list[str]:
        refs = ctr("images", "ls", "-q").stdout.split()
        return [r for r in refs if "@" not in r and r.rsplit(":", 1)[0].rsplit("/", 1)[-1] in ours]

    for ref in tagged_ours():
        ctr("images", "rm", ref)
    assert tagged_ours() == []


def registry_json(path: str, accept: str = "application/json") -> Json:
    request = urllib.request.Request(f"http://{REGISTRY}{path}", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        decoded: Json = json.load(response)
        return decoded


@pytest.fixture(scope="module")
def registry() -> Iterator[None]:
    os.environ["KUBECONFIG"] = LOCAL_KUBECONFIG
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    # From nothing: tfmw as make deploy or an earlier run left it (its release, the local
    # overlay: namespace, CRD and every job, storage) is removed first.
    if (
        kubectl("get", "namespace", SYSTEM, check=False).returncode == 0
        or kubectl("get", "crd", CRD, check=False).returncode == 0
    ):
        subprocess.run(
            [str(HELM), "uninstall", "tfmw", "--namespace", SYSTEM, "--wait"], check=False, timeout=300
        )
        delete_all_but_default(kubectl("kustomize", str(REPO / "deploy" / "overlays" / "local")).stdout, 300)
    assert kubectl("get", "namespace", SYSTEM, check=False).returncode != 0
    assert kubectl("get", "crd", CRD, check=False).returncode != 0
    timed("registry up (hack/registry.sh up)", [str(REPO / "hack" / "registry.sh"), "up"])
    # The node's own sandbox image, as a kind node image carries its pause; nothing else.
    timed("node sandbox image (hack/images.sh sandbox)", [str(REPO / "hack" / "images.sh"), "sandbox"])
    timed(
        "images built and pushed (make push)", ["make", "--no-print-directory", "-C", str(REPO), "push"], 1800
    )
    yield


def test_the_registry_serves_both_images_with_their_labels(registry: None) -> None:
    for name in ("tfmw-operator", "tfmw-trainer"):
        assert VERSION in registry_json(f"/v2/{name}/tags/list")["tags"]
        manifest = registry_json(
            f"/v2/{name}/manifests/{VERSION}",
            accept="application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.v2+json",
        )
        config = registry_json(f"/v2/{name}/blobs/{manifest['config']['digest']}")
        labels = config["config"]["Labels"]
        assert labels["org.opencontainers.image.version"] == VERSION
        assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
        assert labels["org.opencontainers.image.source"].startswith("https://")
        assert len(labels["org.opencontainers.image.revision"].removesuffix("-dirty")) == 40
        assert labels["org.opencontainers.image.title"] == name
        env = dict(e.split("=", 1) for e in config["config"]["Env"])
        assert env["TFMW_VERSION"] == VERSION


def pulled(pod_selector: str, namespace: str, image: str, pod_prefix: str) -> None:
    """The pods' image came from the registry: the kubelet pulled it (not 'already present')
    for a pod of this run (its name starts with pod_prefix)."""
    pods = json.loads(kubectl("-n", namespace, "get", "pods", "-l", pod_selector, "-o", "json").stdout)[
        "items"
    ]
    for pod in pods:
        for status in pod["status"].get("containerStatuses", []):
            assert status["image"] == image
            assert status["imageID"].startswith(f"{image.rsplit(':', 1)[0]}@sha256:"), status["imageID"]
    events = kubectl(
        "-n", namespace, "get", "events", "--field-selector", "reason=Pulled", "-o", "json"
    ).stdout
    messages = [
        e["message"]
        for e in json.loads(events)["items"]
        if e["involvedObject"]["name"].startswith(pod_prefix)
    ]
    assert any(f'Successfully pulled image "{image}"' in m for m in messages), messages


def train_the_sample(name: str) -> None:
    job = yaml.safe_load(SAMPLE.read_text())
    job["metadata"]["name"] = name
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["image"] = TRAINER_IMAGE
    t0 = time.monotonic()
    kubectl("-n", JOBS, "apply", "-f", "-", input=yaml.safe_dump(job))

    def phase() -> str | None:
        got = kubectl(
            "-n", JOBS, "get", "tfmwjob", name, "-o", "jsonpath={.status.phase}", check=False
        ).stdout
        assert got != "Failed", kubectl("-n", JOBS, "get", "tfmwjob", name, "-o", "yaml").stdout
        return got if got == "Succeeded" else None

    wait_for(f"{name} to succeed", phase, timeout=900, interval=2)
    TIMINGS.append((f"sample {name} trained to Succeeded", time.monotonic() - t0))
    pulled(f"tfmw.dev/job-name={name}", JOBS, TRAINER_IMAGE, pod_prefix=f"{name}-")
    kubectl_long("-n", JOBS, "delete", "tfmwjob", name, "--wait=true", "--timeout=180s")
    wait_for(
        f"{name}'s pods to go",
        lambda: (
            not kubectl("-n", JOBS, "get", "pods", "-l", f"tfmw.dev/job-name={name}", "-o", "name").stdout
        ),
        timeout=180,
        interval=1,
    )
    shutil.rmtree(SHARED_DIR / JOBS / name, ignore_errors=True)


def operator_pods_pulled_and_ready() -> None:
    kubectl_long("-n", SYSTEM, "rollout", "status", "deployment/tfmw-operator", "--timeout=600s")
    pulled("app.kubernetes.io/name=tfmw-operator", SYSTEM, OPERATOR_IMAGE, pod_prefix="tfmw-operator-")


def gone(obj: Json) -> bool:
    """The API server says NotFound for this object."""
    meta, group = obj["metadata"], obj["apiVersion"].rpartition("/")[0]
    where = ["-n", meta["namespace"]] if meta.get("namespace") else []
    kind = f"{obj['kind']}.{group}" if group else obj["kind"]
    found = kubectl(*where, "get", kind, meta["name"], check=False)
    return found.returncode != 0 and "NotFound" in found.stderr


def what_is_left_in_the_system_namespace() -> list[str]:
    kinds = kubectl("api-resources", "--namespaced", "--verbs=list", "-o", "name").stdout.split()
    kinds = [k for k in kinds if k not in ("events", "events.events.k8s.io")]
    listed = kubectl("-n", SYSTEM, "get", ",".join(kinds), "-o", "name", check=False).stdout.split()
    # Made by the cluster in every namespace: the root CA and the default ServiceAccount.
    return sorted(n for n in listed if n not in ("configmap/kube-root-ca.crt", "serviceaccount/default"))


def delete_all_but_default(manifests: str, timeout: int) -> None:
    """These objects deleted, but the namespace `default` (which the API server refuses to
    delete; it keeps its labels)."""
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    kept = [d for d in docs if not (d["kind"] == "Namespace" and d["metadata"]["name"] == "default")]
    kubectl_long(
        "delete", "-f", "-", "--ignore-not-found", "--wait=true", f"--timeout={timeout}s",
        input=yaml.safe_dump_all(kept), timeout=timeout + 60,
    )  # fmt: skip


def remove_storage_and_namespace() -> None:
    delete_all_but_default(STORAGE.read_text(), 180)
    kubectl_long("delete", "namespace", SYSTEM, "--ignore-not-found", "--wait=true", "--timeout=180s")


def test_helm_install_train_and_uninstall(registry: None) -> None:
    forget_images()
    # The namespace first (restricted Pod Security, deploy/base/namespace.yaml) and the
    # node's storage, which walls `default` (baseline); then the chart, which checks both.
    kubectl("apply", "-f", str(NAMESPACE_YAML), "-f", str(STORAGE))
    timed(
        "helm install, serving default (the operator ready)",
        [
            str(HELM),
            "install",
            "tfmw",
            str(REPO / "charts" / "tfmw"),
            "--namespace",
            SYSTEM,
            "--set",
            f"watchNamespaces={{{JOBS}}}",
            "--wait",
            "--timeout",
            "10m",
        ],
    )
    operator_pods_pulled_and_ready()
    # Rights where it serves, none elsewhere (kube-system above all).
    operator_account = f"system:serviceaccount:{SYSTEM}:tfmw-operator"
    for namespace, allowed in ((JOBS, "yes"), ("kube-system", "no")):
        for verb, resource in (("create", "pods"), ("create", "services"), ("delete", "pods")):
            can = kubectl(
                "auth", "can-i", verb, resource, "-n", namespace, "--as", operator_account, check=False
            )
            assert can.stdout.strip() == allowed, f"{verb} {resource} in {namespace}: {can.stdout}"
    manifest = subprocess.run(
        [str(HELM), "get", "manifest", "tfmw", "--namespace", SYSTEM],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    released = [d for d in yaml.safe_load_all(manifest) if d]
    assert {d["kind"] for d in released} >= {
        "Deployment", "ClusterRole", "Role", "RoleBinding", "Service", "PodDisruptionBudget"
    }  # fmt: skip
    train_the_sample("mnist-helm")
    timed(
        "helm uninstall", [str(HELM), "uninstall", "tfmw", "--namespace", SYSTEM, "--wait", "--timeout", "5m"]
    )
    assert [d["metadata"]["name"] for d in released if not gone(d)] == []
    assert kubectl("get", "crd", CRD, check=False).returncode == 0, "Helm keeps the CRD"
    # helm uninstall --wait sees the Deployment gone; its pods go after, by the garbage
    # collector and their grace period.
    wait_for(
        "the operator's pods to go",
        lambda: (
            not kubectl(
                "get", "pods", "-A", "-l", "app.kubernetes.io/name=tfmw-operator", "-o", "name"
            ).stdout
        ),
        timeout=120,
        interval=1,
    )
    # What is left in the namespace: the PVC we made for storage and the operator's Lease.
    left = what_is_left_in_the_system_namespace()
    assert left == ["lease.coordination.k8s.io/tfmw-operator", "persistentvolumeclaim/tfmw-shared"], left
    remove_storage_and_namespace()


def test_kustomize_apply_train_and_delete(registry: None) -> None:
    forget_images()
    t0 = time.monotonic()
    kubectl("apply", "--server-side", "-k", str(REPO / "deploy"))
    kubectl("wait", "--for", "condition=established", f"crd/{CRD}", "--timeout=60s")
    kubectl("apply", "-f", str(STORAGE))
    operator_pods_pulled_and_ready()
    TIMINGS.append(("kubectl apply -k deploy/ (the operator ready)", time.monotonic() - t0))
    train_the_sample("mnist-kustomize")
    t0 = time.monotonic()
    base = [d for d in yaml.safe_load_all(kubectl("kustomize", str(REPO / "deploy")).stdout) if d]
    # The operator first: its pods hold the claim, and so the volume, until they are gone.
    kubectl_long("delete", "-k", str(REPO / "deploy"), "--wait=true", "--timeout=300s")
    delete_all_but_default(STORAGE.read_text(), 180)
    TIMINGS.append(("kubectl delete -k deploy/", time.monotonic() - t0))
    assert [d["metadata"]["name"] for d in base if not gone(d)] == []
    assert kubectl("get", "namespace", SYSTEM, check=False).returncode != 0
    assert kubectl("get", "pv", "-o", "name").stdout.count("tfmw-shared") == 0
