"""On the real node, each ended attempt keeps its own cause in status.history: a worker the
kernel's OOM killer took is `OOMKilled`, one evicted through the Eviction API is `Evicted`."""

from __future__ import annotations

import copy
from collections.abc import Callable

from e2e.test_training import NAMESPACE, TRAINING_TIMEOUT, sample, submit
from kube import ClusterClient, kubectl, wait_for


def test_an_oom_killed_worker_shows_oomkilled(kube: ClusterClient, fresh_name: Callable[[str], str]) -> None:
    name = fresh_name("oom")
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    manifest["spec"]["workers"] = 1
    manifest["spec"]["runPolicy"] = {"backoffLimit": 0}
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python3", "-c", "x = bytearray(512 * 1024 * 1024); print(len(x))"]
    container.pop("args", None)
    container["resources"] = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}}
    submit(kube, manifest, name)
    status = kube.wait_phase(NAMESPACE, name, "Failed", timeout=180)
    assert status["reason"] == "BackoffLimitExceeded", status
    record = status["history"][0]
    assert (record["cause"], record["exitCode"], record["worker"]) == ("OOMKilled", 137, 0), record
    assert record["node"] and record["container"] == "tensorflow"
    row = kubectl("get", "tfmw", name, "-n", NAMESPACE, "-o", "wide", "--no-headers").stdout
    assert row.split()[-1] == "OOMKilled", row


def test_an_evicted_worker_shows_evicted(kube: ClusterClient, fresh_name: Callable[[str], str]) -> None:
    name = fresh_name("evicted")
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    manifest["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=1000"]
    submit(kube, manifest, name)
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": f"{name}-worker-1", "namespace": NAMESPACE},
    }
    kube.core.create_namespaced_pod_eviction(f"{name}-worker-1", NAMESPACE, eviction)
    history = wait_for(
        "the eviction in the history",
        lambda: kube.status(NAMESPACE, name).get("history"),
        timeout=120,
    )
    record = history[0]
    assert (record["cause"], record["worker"], record["outcome"]) == ("Evicted", 1, "Restarted"), record
    assert kube.status(NAMESPACE, name)["restarts"] == 1
