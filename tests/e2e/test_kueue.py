"""tfmw under a real Kueue on the local node: whole gangs admitted within quota, the
waiting one Queued with no pod scheduled, and the partial-gang stall it prevents."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from e2e.test_training import NAMESPACE, TRAINING_TIMEOUT, submit
from kube import REPO, ClusterClient, kubectl, wait_for

Json = dict[str, Any]
SAMPLES = REPO / "deploy" / "samples" / "kueue"
OPT_IN = "tfmw.dev/kueue"
GATE = "kueue.x-k8s.io/admission"


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def free_cpu_millicores(kube: ClusterClient) -> int:
    """What the node can still give: allocatable minus the requests of the pods it runs."""
    node = kube.core.list_node().items[0]
    allocatable = millicores(node.status.allocatable["cpu"])
    used = 0
    for pod in kube.core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={node.metadata.name}"
    ).items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            requests = (container.resources.requests or {}) if container.resources else {}
            used += millicores(requests.get("cpu", "0"))
    return allocatable - used


@pytest.fixture(scope="module")
def kueue(kube: ClusterClient) -> Iterator[int]:
    """Kueue up (built from its module by hack/kueue.sh), `default` opted in, and a
    ClusterQueue whose CPU quota fits exactly one 2-worker gang. Yields the per-worker
    CPU request (millicores), sized so that the node fits three workers but not four:
    without Kueue two gangs would share the node half and half. All undone afterwards."""
    installed = (
        kubectl("-n", "kueue-system", "get", "deployment/kueue-controller-manager", check=False).returncode
        == 0
    )
    subprocess.run([str(REPO / "hack" / "kueue.sh"), "up"], check=True)
    labels = json.loads(kubectl("get", "namespace", NAMESPACE, "-o", "json").stdout)["metadata"].get(
        "labels", {}
    )
    kubectl("label", "namespace", NAMESPACE, f"{OPT_IN}=enabled", "--overwrite")
    request = free_cpu_millicores(kube) * 2 // 7  # 3 fit, 4 do not
    queues = list(yaml.safe_load_all((SAMPLES / "queues.yaml").read_text()))
    for document in queues:
        if document["kind"] == "ClusterQueue":
            quota = document["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
            quota["nominalQuota"] = f"{2 * request}m"
            # Equal priorities never preempt each other: only the preemption test's
            # higher-priority gang does.
            document["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(queues))
    try:
        yield request
    finally:
        kubectl("delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(queues[::-1]))
        if labels.get(OPT_IN) is None:
            kubectl("label", "namespace", NAMESPACE, f"{OPT_IN}-")
        if not installed:
            subprocess.run([str(REPO / "hack" / "kueue.sh"), "down"], check=True)


def queued_jobs(request: int, queue: bool = True) -> list[Json]:
    jobs = [d for d in yaml.safe_load_all((SAMPLES / "jobs.yaml").read_text()) if d]
    for job in jobs:
        job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{request}m"
        if not queue:
            del job["metadata"]["labels"]
    return jobs


def condition(kube: ClusterClient, name: str, kind: str) -> Json | None:
    conditions = kube.status(NAMESPACE, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)


def scheduled(pods: list[Json]) -> list[str]:
    return [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]


def test_the_second_gang_waits_queued_holding_nothing_then_runs_whole(
    kube: ClusterClient, kueue: int, fresh_name: Callable[[str], str]
) -> None:
    first, second = fresh_name("queued-a"), fresh_name("queued-b")
    for name, manifest in zip((first, second), queued_jobs(kueue), strict=True):
        submit(kube, copy.deepcopy(manifest), name)

    def one_runs_one_waits() -> tuple[str, str] | None:
        for running, waiting in ((first, second), (second, first)):
            if kube.status(NAMESPACE, running).get("phase") == "Running" and condition(
                kube, waiting, "Queued"
            ):
                return running, waiting
        return None

    running, waiting = wait_for("one gang admitted, one Queued", one_runs_one_waits, timeout=180)
    queued = condition(kube, waiting, "Queued")
    assert queued is not None and "tfmw-queue" in queued["message"], queued
    assert not condition(kube, waiting, "Stalled")
    # While the first trains, every pod of the second waits behind Kueue's gate, on no node.
    while kube.status(NAMESPACE, running).get("phase") == "Running":
        pods = kube.pods(NAMESPACE, waiting)
        assert len(pods) == 2 and not scheduled(pods), [p["spec"].get("nodeName") for p in pods]
        assert all(GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []] for p in pods)
        time.sleep(0.5)
    assert kube.wait_phase(NAMESPACE, running, "Succeeded", timeout=TRAINING_TIMEOUT)["restarts"] == 0
    freed = time.monotonic()
    kube.wait_phase(NAMESPACE, waiting, "Running", timeout=180)
    print(f"\nquota freed -> second gang all Running: {time.monotonic() - freed:.1f}s")
    status = kube.wait_phase(NAMESPACE, waiting, "Succeeded", timeout=TRAINING_TIMEOUT)
    assert status["restarts"] == 0
    assert any(c["type"] == "Queued" and c["status"] == "False" for c in status["conditions"])


def test_without_kueue_the_same_gangs_split_the_node_and_one_is_stalled(
    kube: ClusterClient, kueue: int, fresh_name: Callable[[str], str]
) -> None:
    names = [fresh_name("unqueued-a"), fresh_name("unqueued-b")]
    for name, manifest in zip(names, queued_jobs(kueue, queue=False), strict=True):
        submit(kube, copy.deepcopy(manifest), name)

    def partial_gang() -> tuple[str, Json] | None:
        for name in names:
            stalled = condition(kube, name, "Stalled")
            if stalled and len(scheduled(kube.pods(NAMESPACE, name))) == 1:
                return name, stalled
        return None

    name, stalled = wait_for("a gang with one worker placed and one not", partial_gang, timeout=120)
    assert stalled["reason"] == "Unschedulable" and "Insufficient cpu" in stalled["message"], stalled
    print(f"\nwithout Kueue: {name} holds {kueue}m CPU with one worker while its peer cannot be placed")


def test_a_worker_killed_in_a_queued_gang_restarts_and_is_readmitted_whole(
    kube: ClusterClient, kueue: int, fresh_name: Callable[[str], str]
) -> None:
    manifest = queued_jobs(kueue)[0]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["args"] = ["--epochs=3", "--steps-per-epoch=40", "--crash-at-epoch=1", "--crash-worker=1"]
    name = fresh_name("queued-crash")
    submit(kube, manifest, name)
    groups: set[str] = set()

    def finished() -> Json | None:
        groups.update(
            p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in kube.pods(NAMESPACE, name)
        )
        status = kube.status(NAMESPACE, name)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for("the job to finish", finished, timeout=TRAINING_TIMEOUT, interval=0.5)
    assert status["phase"] == "Succeeded" and status["restarts"] == 1 and status["attempt"] == 1, status
    assert sorted(g.rsplit("-", 1)[1] for g in groups) == ["0", "1"], groups  # a new group per attempt

    def given_back() -> bool:  # both Workloads; Kueue's finalizer makes a deletion take a moment
        workloads = kubectl("get", "workloads.kueue.x-k8s.io", "-n", NAMESPACE, "-o", "name").stdout
        return not any(g in workloads for g in groups)

    wait_for("both attempts' Workloads to be deleted", given_back, timeout=30, interval=0.5)


def test_a_job_naming_a_queue_that_does_not_exist_is_queued_as_inadmissible(
    kube: ClusterClient, kueue: int, fresh_name: Callable[[str], str]
) -> None:
    manifest = queued_jobs(kueue)[0]
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "no-such-queue"
    name = fresh_name("lost")
    submit(kube, manifest, name)

    def inadmissible() -> Json | None:
        queued = condition(kube, name, "Queued")
        return queued if queued and queued["reason"] == "Inadmissible" else None

    queued = wait_for("Queued, Inadmissible", inadmissible, timeout=60)
    assert "no-such-queue" in queued["message"], queued
    assert kube.status(NAMESPACE, name)["phase"] == "Pending" and not scheduled(kube.pods(NAMESPACE, name))


HIGH_PRIORITY: Json = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "WorkloadPriorityClass",
    "metadata": {"name": "tfmw-e2e-high"},
    "value": 1000,
    "description": "tfmw e2e: preempts the default priority",
}


def test_a_higher_priority_gang_preempts_a_running_one_whose_history_says_preempted(
    kube: ClusterClient, kueue: int, fresh_name: Callable[[str], str]
) -> None:
    """Kueue gives the quota to a higher-priority gang: it evicts the running gang's Workload
    and deletes its pods; that attempt's record says Preempted, not counted as a restart."""
    low, high = queued_jobs(kueue)
    low_name, high_name = fresh_name("preempted-low"), fresh_name("preempting-high")
    low["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=50", "--steps-per-epoch=20"]
    high["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=1", "--steps-per-epoch=20"]
    metadata = high["spec"]["template"].setdefault("metadata", {})
    metadata.setdefault("labels", {})["kueue.x-k8s.io/priority-class"] = HIGH_PRIORITY["metadata"]["name"]
    kubectl("apply", "-f", "-", input=json.dumps(HIGH_PRIORITY))
    try:
        submit(kube, low, low_name)
        kube.wait_phase(NAMESPACE, low_name, "Running", timeout=180)
        submit(kube, high, high_name)

        def preempted() -> Json | None:
            history = kube.status(NAMESPACE, low_name).get("history") or []
            return history[0] if history else None

        record = wait_for("the low gang's attempt ended", preempted, timeout=180, interval=0.5)
        print(f"\n{low_name}: {record['outcome']} {record['cause']} (worker {record.get('worker')})")
        assert record["cause"] == "Preempted", record
        assert kube.status(NAMESPACE, low_name)["restarts"] == 0
        kube.wait_phase(NAMESPACE, high_name, "Succeeded", timeout=TRAINING_TIMEOUT)
    finally:
        kubectl("delete", "--ignore-not-found", "-f", "-", input=json.dumps(HIGH_PRIORITY))
