"""One namespace, one folder: pods of another namespace cannot see or touch a job's folder.

A victim job runs in `default`. A second namespace gets its storage the documented way
(hack/namespace-storage.sh) and its pods try every way out of their own folder: a plain
pod on the claim, relative and absolute symlinks used as a subPath, `..` and absolute
subPaths, a subPathExpr that expands to `..`. The victim's folder and phase must be as
they were. A job whose claim does not reach its folder fails SharedVolumeMismatch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.conftest import NAMESPACE
from kube import REPO, ClusterClient, kubectl, wait_for

Json = dict[str, Any]
# Any image with python3 will do; the operator's is small (and non-root, as tenants' pods are).
IMAGE = "tfmw-operator:dev"
HOSTILE_SCRIPT = """
import json, os, sys
victim = sys.argv[1]
seen = {"root": sorted(os.listdir("/data"))}
for path in ("/data/../default/%s/multiworker-complete.txt" % victim,
             "/data/default/%s/multiworker-complete.txt" % victim,
             "/data/%s/multiworker-complete.txt" % victim):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write("pwned")
        seen[path] = "wrote"
    except OSError as error:
        seen[path] = str(error)
os.symlink("../default", "/data/escape")
os.symlink("/var/lib/tfmw/shared/default", "/data/escape-abs")
os.symlink("..", "/data/up")
print(json.dumps(seen))
"""
TEST_NAMESPACE_LABEL = "tfmw.dev/e2e-namespace"  # on the volumes a test makes: removed with its namespace
WRITE_MARKER = "import sys; open('/data/%s/multiworker-complete.txt' % sys.argv[1], 'w').write('pwned')"


def pod(
    name: str, namespace: str, mount: Json, script: str, *args: str, env: list[Json] | None = None
) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", script, *args],
                    "env": env or [],
                    "volumeMounts": [{"name": "shared", "mountPath": "/data", **mount}],
                }
            ],
            "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "tfmw-shared"}}],
        },
    }


def another_claim(namespace: str, name: str, node_path: str) -> None:
    """Claim `name` in `namespace`, bound to a hostPath volume of its own at `node_path`."""
    volume = f"tfmw-{name}-{namespace}"
    claim_spec = {"accessModes": ["ReadWriteMany"], "storageClassName": "tfmw-hostpath"}
    items = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume, "labels": {TEST_NAMESPACE_LABEL: namespace}},
            "spec": {
                **claim_spec,
                "capacity": {"storage": "1Gi"},
                "hostPath": {"path": node_path},
                "claimRef": {"namespace": namespace, "name": name},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {**claim_spec, "volumeName": volume, "resources": {"requests": {"storage": "1Gi"}}},
        },
    ]
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def create(manifest: Json) -> subprocess.CompletedProcess[str]:
    return kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)


def pod_phase(namespace: str, name: str) -> str:
    return kubectl("get", "pod", "-n", namespace, name, "-o", "jsonpath={.status.phase}").stdout


def waiting_reason(namespace: str, name: str) -> str | None:
    out = kubectl(
        "get",
        "pod",
        "-n",
        namespace,
        name,
        "-o",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}",
    ).stdout
    # ContainerCreating and PodInitializing are on the way, not the kubelet's verdict.
    return out if out not in ("", "ContainerCreating", "PodInitializing") else None


def namespace_storage(shared_dir: Path, namespace: str) -> None:
    env = {**os.environ, "TFMW_SHARED_DIR": str(shared_dir)}
    subprocess.run([str(REPO / "hack" / "namespace-storage.sh"), namespace], check=True, env=env)


@pytest.fixture
def hostile_namespace(kube: ClusterClient, shared_dir: Path) -> Iterator[str]:
    namespace = f"tfmw-hostile-{uuid.uuid4().hex[:6]}"
    namespace_storage(shared_dir, namespace)
    wait_for("default service account", lambda: kube._has_default_sa(namespace), timeout=30)
    yield namespace
    kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=120s", check=False)
    kubectl("delete", "pv", f"tfmw-shared-{namespace}", "--ignore-not-found", check=False)
    kubectl("delete", "pv", "-l", f"{TEST_NAMESPACE_LABEL}={namespace}", "--ignore-not-found", check=False)
    shutil.rmtree(shared_dir / namespace, ignore_errors=True)


def test_another_namespace_cannot_see_or_touch_a_jobs_folder(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str], hostile_namespace: str
) -> None:
    victim = fresh_name("victim")
    manifest = {
        "apiVersion": "tfmw.dev/v1alpha1",
        "kind": "TFMultiWorkerJob",
        "metadata": {"name": victim},
        "spec": {
            "workers": 1,
            "sharedVolume": {"claimName": "tfmw-shared"},
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python3", "-c", "import time; time.sleep(900)"],
                        }
                    ],
                }
            },
        },
    }
    kube.create_job(NAMESPACE, manifest)
    kube.wait_phase(NAMESPACE, victim, "Running", timeout=120)
    victim_pod_uid = kube.pods(NAMESPACE, victim)[0]["metadata"]["uid"]
    folder = shared_dir / NAMESPACE / victim
    before = sorted(p.name for p in folder.iterdir())
    ns = hostile_namespace

    # A plain pod on its namespace's claim: sees its own folder only, and its writes land there.
    assert create(pod("plain", ns, {}, HOSTILE_SCRIPT, victim)).returncode == 0
    wait_for("plain pod done", lambda: pod_phase(ns, "plain") in ("Succeeded", "Failed"), timeout=120)
    assert pod_phase(ns, "plain") == "Succeeded", kubectl("logs", "-n", ns, "plain", check=False).stdout
    seen = json.loads(kubectl("logs", "-n", ns, "plain").stdout.strip().splitlines()[-1])
    print("plain pod saw:", seen)
    assert "default" not in seen["root"] and victim not in seen["root"], seen
    assert (shared_dir / ns / victim / "multiworker-complete.txt").read_text() == "pwned"  # its own copy

    # The API server refuses `..` and absolute subPaths outright.
    for name, mount in [
        ("dotdot", {"subPath": ".."}),
        ("climb", {"subPath": "../default"}),
        ("abs", {"subPath": "/default"}),
    ]:
        refused = create(pod(name, ns, mount, WRITE_MARKER, victim))
        assert refused.returncode != 0 and "subPath" in refused.stderr, (name, refused.stdout, refused.stderr)

    # Symlinks planted by the plain pod, and a subPathExpr that expands to '..': the kubelet
    # refuses to start the container.
    tricks = {
        "link": {"subPath": "escape"},
        "link-abs": {"subPath": "escape-abs"},
        "link-up": {"subPath": "up"},
        "expr": {"subPathExpr": "$(UP)"},
    }
    for name, mount in tricks.items():
        env = [{"name": "UP", "value": ".."}] if name == "expr" else None
        assert create(pod(name, ns, mount, WRITE_MARKER, victim, env=env)).returncode == 0
    for name in tricks:
        reason = wait_for(f"{name} refused by the kubelet", lambda n=name: waiting_reason(ns, n), timeout=60)  # type: ignore[misc]
        print(f"{name}: {reason}")
        assert reason in ("CreateContainerConfigError", "CreateContainerError", "RunContainerError"), reason
        assert pod_phase(ns, name) == "Pending"

    # The victim is as it was: its folder, its phase, its worker.
    assert not (folder / "multiworker-complete.txt").exists()
    assert sorted(p.name for p in folder.iterdir()) == before
    assert kube.status(NAMESPACE, victim)["phase"] == "Running"
    assert kube.pods(NAMESPACE, victim)[0]["metadata"]["uid"] == victim_pod_uid


def test_a_claim_that_misses_the_jobs_folder_fails_before_training(
    kube: ClusterClient, shared_dir: Path, hostile_namespace: str
) -> None:
    ns = hostile_namespace
    (shared_dir / ns / "elsewhere").mkdir(mode=0o777)
    os.chmod(shared_dir / ns / "elsewhere", 0o777)
    another_claim(ns, "wrong", f"/var/lib/tfmw/shared/{ns}/elsewhere")
    manifest = {
        "apiVersion": "tfmw.dev/v1alpha1",
        "kind": "TFMultiWorkerJob",
        "metadata": {"name": "misplaced"},
        "spec": {
            "workers": 2,
            "sharedVolume": {"claimName": "wrong"},
            "template": {
                "spec": {"containers": [{"name": "tensorflow", "image": IMAGE, "args": ["--epochs=1"]}]}
            },
        },
    }
    kube.create_job(ns, manifest)
    status = kube.wait_phase(ns, "misplaced", "Failed", timeout=120)
    print("status.message:", status["message"])
    assert status["reason"] == "SharedVolumeMismatch"
    assert "spec.sharedVolume.claimName wrong" in status["message"]
    assert status.get("restarts", 0) == 0
    # Nothing trained: no checkpoint, no marker in the folder the claim gave.
    assert not any((shared_dir / ns / "elsewhere" / "misplaced").iterdir())


def sleeping_job(name: str, claim: str) -> Json:
    sleep = {
        "name": "tensorflow",
        "image": IMAGE,
        "command": ["python3", "-c", "import time; time.sleep(600)"],
    }
    return {
        "apiVersion": "tfmw.dev/v1alpha1",
        "kind": "TFMultiWorkerJob",
        "metadata": {"name": name},
        "spec": {
            "workers": 1,
            "sharedVolume": {"claimName": claim},
            "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [sleep]}},
        },
    }


def init_containers(kube: ClusterClient, namespace: str, job: str) -> list[str]:
    pods = kube.wait_pods(namespace, job, 1)
    return [c["name"] for c in pods[0]["spec"].get("initContainers") or []]


def volume_checked(kube: ClusterClient, namespace: str, job: str) -> Json:
    def probe() -> Json | None:
        conditions = kube.status(namespace, job).get("conditions") or []
        found = next((c for c in conditions if c["type"] == "SharedVolumeChecked"), None)
        return found if found and found["status"] == "True" else None

    return wait_for(f"{job}'s SharedVolumeChecked", probe, timeout=120)


def claim_predates_the_next_second(kube: ClusterClient, namespace: str, claim: str) -> None:
    """Wait until the clock is a second past the claim's creation. Both the claim's creation and
    a check's start are written to the second, and the operator trusts a check only for a claim
    older than it (one made in the same second may be a newer claim of the same name): a check
    started in the claim's own second is rightly not recorded, and the next job is checked too."""
    created = kube.core.read_namespaced_persistent_volume_claim(claim, namespace).metadata.creation_timestamp
    time.sleep(max(0.0, created.timestamp() + 1.0 - time.time()))


def test_a_claim_the_folder_check_passed_is_not_checked_again_but_another_claim_is(
    kube: ClusterClient, shared_dir: Path, hostile_namespace: str
) -> None:
    ns = hostile_namespace
    claim_predates_the_next_second(kube, ns, "tfmw-shared")
    kube.create_job(ns, sleeping_job("first", "tfmw-shared"))
    assert init_containers(kube, ns, "first") == ["tfmw-folder-check"]  # the supervisor needs none
    assert volume_checked(kube, ns, "first")["reason"] == "FolderReached"
    # The same claim: the second job's worker starts at once, and its status says why.
    kube.create_job(ns, sleeping_job("second", "tfmw-shared"))
    assert "tfmw-folder-check" not in init_containers(kube, ns, "second")
    reached = volume_checked(kube, ns, "second")
    print("second's SharedVolumeChecked:", reached["message"])
    assert reached["reason"] == "ClaimReached" and "job first's folder" in reached["message"]
    kube.wait_phase(ns, "second", "Running", timeout=120)
    # Another claim on the very same folder is checked on its own first use.
    another_claim(ns, "again", f"/var/lib/tfmw/shared/{ns}")
    claim_predates_the_next_second(kube, ns, "again")  # as for the first (a make test here raced it)
    kube.create_job(ns, sleeping_job("third", "again"))
    assert "tfmw-folder-check" in init_containers(kube, ns, "third")
    assert volume_checked(kube, ns, "third")["reason"] == "FolderReached"
    for job in ("first", "second", "third"):
        kube.delete_job(ns, job)
