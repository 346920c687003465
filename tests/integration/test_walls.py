"""The wall between namespaces, on the local control plane (admission and binding are the
API server's and the controller manager's; no node is needed, and no pod here is ever
scheduled). A namespace's claim reaches only its own folder, but a pod of that namespace
with a hostPath volume of its own would reach every folder: the wall is Pod Security.

- hack/namespace-storage.sh: in a namespace it set up, a plain pod that mounts the shared
  root by hostPath is refused, and a pod on the namespace's claim admitted; in a namespace
  without the label the same pod is admitted (so the first check can fail); a namespace that
  enforces `privileged`, or nothing, is refused and left as it was, and raised only on
  --set-pod-security; a stronger label is kept.
- Running it again: after its namespace was deleted and made anew, the claim binds again
  (the Retain volume had kept the old claim's UID); twice in a row changes nothing;
  --delete takes the claim and the volume away, and again is a no-op.
- The chart, where Helm can look (`helm template --dry-run=server`, as install and upgrade
  do): refused when its namespace is not `restricted` or a watched one is below `baseline`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kube import LOCAL_KUBECONFIG, REPO, kubectl, wait_for
from unit.deploy.test_kustomize import kube_version

SCRIPT = REPO / "hack" / "namespace-storage.sh"
HELM = REPO / "hack" / "bin" / "helm"
ENFORCE = "pod-security.kubernetes.io/enforce"
# Pods made here never run: no node matches (a deletion then needs no kubelet to confirm).
NOWHERE = {"tfmw.dev/walls-test": "no-such-node"}


@pytest.fixture(scope="module", autouse=True)
def control_plane() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    subprocess.run([str(REPO / "hack" / "cluster.sh"), "up", "--no-node"], check=True)


@pytest.fixture
def names(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Namespace names of this test's own; afterwards each is deleted with its volume."""
    made: list[str] = []

    def fresh(prefix: str) -> str:
        made.append(f"walls-{prefix}-{uuid.uuid4().hex[:5]}")
        return made[-1]

    yield fresh
    for namespace in made:
        kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False)
        kubectl("delete", "pv", f"tfmw-shared-{namespace}", "--ignore-not-found", "--wait=false", check=False)


def storage(*args: str, shared: Path) -> subprocess.CompletedProcess[str]:
    """hack/namespace-storage.sh against the local cluster, its host folder `shared`."""
    return subprocess.run(
        [str(SCRIPT), *args],
        env={**os.environ, "TFMW_SHARED_DIR": str(shared)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def pod(namespace: str, name: str, volume: dict[str, object]) -> str:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": NOWHERE,
            "containers": [
                {"name": "c", "image": "tfmw-wall-test", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}
            ],
            "volumes": [{"name": "v", **volume}],
        },
    }
    return json.dumps(manifest)


def create_root_pod(namespace: str) -> subprocess.CompletedProcess[str]:
    """What a hostile tenant runs: a plain pod with the shared root as a hostPath volume."""
    return kubectl(
        "create",
        "-f",
        "-",
        input=pod(namespace, "root", {"hostPath": {"path": "/var/lib/tfmw/shared"}}),
        check=False,
    )


def enforced(namespace: str) -> str:
    labels = json.loads(kubectl("get", "namespace", namespace, "-o", "json").stdout)["metadata"].get(
        "labels", {}
    )
    return str(labels.get(ENFORCE, ""))


def claim_phase(namespace: str) -> str:
    return kubectl(
        "-n", namespace, "get", "pvc", "tfmw-shared", "-o", "jsonpath={.status.phase}", check=False
    ).stdout


def exists(*what: str) -> bool:
    return kubectl("get", *what, "-o", "name", check=False).returncode == 0


def test_in_a_namespace_the_script_set_up_a_pod_with_the_shared_root_by_hostpath_is_refused(
    names: Callable[[str], str], tmp_path: Path
) -> None:
    namespace = names("made")
    t0 = time.monotonic()
    done = storage(namespace, shared=tmp_path)
    assert done.returncode == 0, done.stderr
    print(f"set up and bound in {time.monotonic() - t0:.1f}s")
    assert enforced(namespace) == "baseline"
    assert claim_phase(namespace) == "Bound"
    assert (tmp_path / namespace).is_dir() and (tmp_path / namespace).stat().st_mode & 0o777 == 0o777
    refused = create_root_pod(namespace)
    assert refused.returncode != 0
    assert 'violates PodSecurity "baseline:latest": hostPath volumes' in refused.stderr, refused.stderr
    assert not exists("-n", namespace, "pod", "root")
    # The namespace's own claim is what its pods are for: admitted.
    on_claim = kubectl(
        "create",
        "-f",
        "-",
        input=pod(namespace, "on-claim", {"persistentVolumeClaim": {"claimName": "tfmw-shared"}}),
    )
    assert on_claim.returncode == 0
    kubectl("-n", namespace, "delete", "pod", "on-claim", "--wait=true")


def test_without_the_label_the_same_pod_is_admitted_and_the_script_refuses_the_namespace(
    names: Callable[[str], str], tmp_path: Path
) -> None:
    namespace = names("bare")
    kubectl("create", "namespace", namespace)  # as `kubectl create namespace` makes one: no label
    admitted = create_root_pod(namespace)
    assert admitted.returncode == 0, admitted.stderr  # the hole the wall closes
    kubectl("-n", namespace, "delete", "pod", "root", "--wait=true")
    done = storage(namespace, shared=tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"namespace {namespace} enforces Pod Security nothing" in done.stderr
    assert f"kubectl label --overwrite namespace {namespace} {ENFORCE}=baseline" in done.stderr
    assert enforced(namespace) == "" and not exists("pv", f"tfmw-shared-{namespace}")
    assert not exists("-n", namespace, "pvc", "tfmw-shared")


def test_a_privileged_namespace_is_refused_as_it_is_and_raised_only_when_asked(
    names: Callable[[str], str], tmp_path: Path
) -> None:
    namespace = names("priv")
    kubectl("create", "namespace", namespace)
    kubectl("label", "namespace", namespace, f"{ENFORCE}=privileged")
    done = storage(namespace, shared=tmp_path)
    assert done.returncode == 3
    assert f"namespace {namespace} enforces Pod Security 'privileged', less than baseline" in done.stderr
    assert "--set-pod-security" in done.stderr and "Nothing was changed" in done.stderr
    assert enforced(namespace) == "privileged"
    assert not exists("pv", f"tfmw-shared-{namespace}") and not exists("-n", namespace, "pvc", "tfmw-shared")
    assert not (tmp_path / namespace).exists()
    done = storage("--set-pod-security", namespace, shared=tmp_path)
    assert done.returncode == 0, done.stderr
    assert enforced(namespace) == "baseline" and claim_phase(namespace) == "Bound"
    assert create_root_pod(namespace).returncode != 0


def test_a_stronger_label_is_kept(names: Callable[[str], str], tmp_path: Path) -> None:
    namespace = names("strict")
    kubectl("create", "namespace", namespace)
    kubectl("label", "namespace", namespace, f"{ENFORCE}=restricted")
    done = storage("--set-pod-security", namespace, shared=tmp_path)
    assert done.returncode == 0, done.stderr
    assert enforced(namespace) == "restricted" and claim_phase(namespace) == "Bound"


def test_a_volume_of_that_name_that_is_not_the_namespaces_folder_is_refused(
    names: Callable[[str], str], tmp_path: Path
) -> None:
    namespace = names("squat")
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"tfmw-shared-{namespace}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "hostPath": {"path": "/var/lib/tfmw/shared"},  # the whole root
            "storageClassName": "tfmw-hostpath",
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(volume))
    done = storage(namespace, shared=tmp_path)
    assert done.returncode == 3 and "is not" in done.stderr and "folder" in done.stderr, done.stderr
    assert not exists("namespace", namespace)
    assert storage("--delete", namespace, shared=tmp_path).returncode == 3  # not ours to delete either
    assert exists("pv", f"tfmw-shared-{namespace}")


def test_running_again_after_the_namespace_was_deleted_binds_and_delete_takes_it_all_away(
    names: Callable[[str], str], tmp_path: Path
) -> None:
    namespace = names("again")
    volume = f"tfmw-shared-{namespace}"
    assert storage(namespace, shared=tmp_path).returncode == 0
    first_claim = kubectl(
        "-n", namespace, "get", "pvc", "tfmw-shared", "-o", "jsonpath={.metadata.uid}"
    ).stdout
    # Twice in a row: nothing changes.
    t0 = time.monotonic()
    again = storage(namespace, shared=tmp_path)
    print(f"run again, all in place: {time.monotonic() - t0:.1f}s")
    assert again.returncode == 0, again.stderr
    assert (
        kubectl("-n", namespace, "get", "pvc", "tfmw-shared", "-o", "jsonpath={.metadata.uid}").stdout
        == first_claim
    )
    (tmp_path / namespace / "kept.txt").write_text("a job's checkpoint")

    kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=120s")
    wait_for(
        "the volume to be Released",
        lambda: kubectl("get", "pv", volume, "-o", "jsonpath={.status.phase}").stdout == "Released",
        timeout=60,
    )
    assert kubectl("get", "pv", volume, "-o", "jsonpath={.spec.claimRef.uid}").stdout == first_claim
    t0 = time.monotonic()
    done = storage(namespace, shared=tmp_path)
    print(f"run again after the namespace was made anew, bound: {time.monotonic() - t0:.1f}s")
    assert done.returncode == 0, done.stderr
    assert "is gone; it binds" in done.stdout
    assert claim_phase(namespace) == "Bound"
    second_claim = kubectl(
        "-n", namespace, "get", "pvc", "tfmw-shared", "-o", "jsonpath={.metadata.uid}"
    ).stdout
    assert second_claim != first_claim
    assert kubectl("get", "pv", volume, "-o", "jsonpath={.spec.claimRef.uid}").stdout == second_claim
    assert (tmp_path / namespace / "kept.txt").read_text() == "a job's checkpoint"  # the same folder

    t0 = time.monotonic()
    removed = storage("--delete", namespace, shared=tmp_path)
    print(f"--delete: {time.monotonic() - t0:.1f}s")
    assert removed.returncode == 0, removed.stderr
    assert not exists("pv", volume) and not exists("-n", namespace, "pvc", "tfmw-shared")
    labels = json.loads(kubectl("get", "namespace", namespace, "-o", "json").stdout)["metadata"]["labels"]
    assert "tfmw.dev/shared-storage" not in labels and labels[ENFORCE] == "baseline"  # the wall stays
    assert (tmp_path / namespace / "kept.txt").exists()
    assert storage("--delete", namespace, shared=tmp_path).returncode == 0  # nothing left: a no-op
    assert storage("--delete", "--purge", namespace, shared=tmp_path).returncode == 0
    assert not (tmp_path / namespace).exists()


def test_delete_is_refused_while_a_pod_uses_the_claim(names: Callable[[str], str], tmp_path: Path) -> None:
    namespace = names("busy")
    assert storage(namespace, shared=tmp_path).returncode == 0
    kubectl(
        "create",
        "-f",
        "-",
        input=pod(namespace, "worker", {"persistentVolumeClaim": {"claimName": "tfmw-shared"}}),
    )
    done = storage("--delete", namespace, shared=tmp_path)
    assert done.returncode == 3 and "worker" in done.stderr, done.stderr
    assert claim_phase(namespace) == "Bound"
    kubectl("-n", namespace, "delete", "pod", "worker", "--wait=true")
    assert storage("--delete", namespace, shared=tmp_path).returncode == 0


def chart_against_the_cluster(release_namespace: str, *options: str) -> subprocess.CompletedProcess[str]:
    """The chart rendered as `helm install` renders it: `lookup` reads the cluster."""
    return subprocess.run(
        [str(HELM), "template", "tfmw", str(REPO / "charts" / "tfmw"), "--namespace", release_namespace,
         "--dry-run=server", "--kube-version", kube_version(), *options],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_chart_refuses_namespaces_without_their_wall(names: Callable[[str], str], tmp_path: Path) -> None:
    system, jobs = names("sys"), names("jobs")
    missing = chart_against_the_cluster(system)
    assert missing.returncode != 0 and f"namespace {system} does not exist" in missing.stderr, missing.stderr
    kubectl("create", "namespace", system)
    bare = chart_against_the_cluster(system)
    assert bare.returncode != 0 and 'enforces Pod Security "", not restricted' in bare.stderr, bare.stderr
    assert chart_against_the_cluster(system, "--set", "podSecurityCheck=false").returncode == 0
    kubectl("label", "namespace", system, f"{ENFORCE}=restricted")
    assert chart_against_the_cluster(system).returncode == 0
    watched = ("--set", f"watchNamespaces={{{jobs}}}")
    assert "does not exist" in chart_against_the_cluster(system, *watched).stderr
    kubectl("create", "namespace", jobs)
    kubectl("label", "namespace", jobs, f"{ENFORCE}=privileged")
    privileged = chart_against_the_cluster(system, *watched)
    assert privileged.returncode != 0
    assert f'namespace {jobs} enforces Pod Security "privileged", less than baseline' in privileged.stderr
    kubectl("label", "--overwrite", "namespace", jobs, f"{ENFORCE}=baseline")
    walled = chart_against_the_cluster(system, *watched)
    assert walled.returncode == 0, walled.stderr
    assert f"namespace: {jobs}" in walled.stdout  # its Role and RoleBinding
