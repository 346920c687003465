"""The poisoned claim check of issue 34, against a real API server: a tenant's own pod,
owned by its own job and labelled as its worker, with an init container named
tfmw-folder-check (the operator's image even) that "passed", vouches for nothing; the
operator's own pod's pass does. The test plays the kubelet (and the tenant)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube import ClusterClient, SimulatedKubelet, kubectl, now, wait_for
from operator_process import OperatorProcess
from wrappers import SIM_NODE, simulated_job

Json = dict[str, object]
IMAGE = "tfmw-operator:dev"
CLAIM = "tfmw-shared"


@pytest.fixture
def checked_namespace(kube: ClusterClient, kubelet: SimulatedKubelet, shared_root: Path) -> Iterator[str]:
    """A namespace with a bound claim, served by an operator of its own that checks folders."""
    namespace = kube.new_namespace("cc")
    volume = f"tfmw-cc-{namespace}"
    kube.core.create_persistent_volume(
        {
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "hostPath": {"path": f"/tmp/{volume}"},
                "claimRef": {"namespace": namespace, "name": CLAIM},
            },
        }
    )
    kube.core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": CLAIM},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )

    def bound() -> bool:
        claim = kube.core.read_namespaced_persistent_volume_claim(CLAIM, namespace)
        return bool(claim.status.phase == "Bound")

    wait_for("the claim bound", bound, timeout=30)
    time.sleep(1.1)  # a check vouches only for a claim made before it, to the second
    operator = OperatorProcess(namespace, shared_root, args=("--folder-check-image", IMAGE)).start()
    try:
        operator.wait_started()
        yield namespace
    finally:
        operator.kill()
        kube.delete_namespace(namespace)
        kubectl("delete", "pv", volume, "--ignore-not-found", check=False)


def check_passed(kube: ClusterClient, namespace: str, pod: str, image: str) -> None:
    """As a kubelet reports it: the init container `image` ran and exited 0, the worker runs."""
    at = now()
    kube.core.patch_namespaced_pod_status(
        pod,
        namespace,
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "initContainerStatuses": [
                    {
                        "name": "tfmw-folder-check",
                        "image": image,
                        "imageID": "",
                        "ready": True,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at}},
                    }
                ],
            }
        },
    )


def init_containers(kube: ClusterClient, namespace: str, job: str) -> list[str]:
    pods = kube.wait_pods(namespace, job, 1)
    return [c["name"] for c in pods[0]["spec"].get("initContainers") or []]


def test_a_tenants_pod_with_a_check_of_that_name_poisons_nothing_the_operators_own_does(
    kube: ClusterClient, checked_namespace: str
) -> None:
    ns = checked_namespace
    poisoner = kube.create_job(ns, simulated_job("poisoner", workers=1).manifest())
    assert init_containers(kube, ns, "poisoner") == ["tfmw-folder-check"]
    # The tenant's pod: its own job's owner and labels, a "check" that exits 0.
    labels = {
        "tfmw.dev/job-name": "poisoner",
        "tfmw.dev/replica-type": "worker",
        "tfmw.dev/replica-index": "1",
        "tfmw.dev/attempt": "0",
    }
    owner = {
        "apiVersion": poisoner["apiVersion"],
        "kind": poisoner["kind"],
        "name": "poisoner",
        "uid": poisoner["metadata"]["uid"],
    }
    check = {"name": "tfmw-folder-check", "image": IMAGE, "command": ["sh", "-c", "exit 0"]}
    kube.core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "poisoner-worker-1", "labels": labels, "ownerReferences": [owner]},
            "spec": {
                "nodeName": SIM_NODE,
                "tolerations": [{"operator": "Exists"}],
                "initContainers": [check],
                "containers": [{"name": "tensorflow", "image": IMAGE}],
            },
        },
    )
    check_passed(kube, ns, "poisoner-worker-1", f"docker.io/library/{IMAGE}")
    time.sleep(3)  # the operator has seen it (its watch brings it in well under a second)
    fake = kube.core.read_namespaced_pod("poisoner-worker-1", ns)
    assert fake.metadata.deletion_timestamp is None  # still up: it would count, were names trusted
    kube.create_job(ns, simulated_job("second", workers=1).manifest())
    assert init_containers(kube, ns, "second") == ["tfmw-folder-check"]  # not skipped
    conditions = {c["type"] for c in kube.status(ns, "poisoner").get("conditions") or []}
    assert "SharedVolumeChecked" not in conditions
    # The operator's own pod passing its check does vouch: the next job starts without it.
    check_passed(kube, ns, "poisoner-worker-0", f"docker.io/library/{IMAGE}")

    def said() -> bool:
        found = kube.status(ns, "poisoner").get("conditions") or []
        return any(c["type"] == "SharedVolumeChecked" and c["status"] == "True" for c in found)

    wait_for("poisoner's SharedVolumeChecked", said, timeout=30)
    kube.create_job(ns, simulated_job("third", workers=1).manifest())
    assert init_containers(kube, ns, "third") == []
