"""A job's whole happy path against a real API server: objects, phases, marker, cleanup, events."""

from __future__ import annotations

import json
from pathlib import Path

from kube import ClusterClient, SimulatedKubelet, kubectl, wait_for
from tfmw_operator.shell.controller import LAUNCHES_AT_ONCE
from wrappers import env_of, simulated_job, write_marker


def test_service_and_pods_exactly_as_the_contract_says(kube: ClusterClient, namespace: str) -> None:
    job = kube.create_job(namespace, simulated_job("mnist", workers=3).port(2345).manifest())
    uid = job["metadata"]["uid"]
    pods = kube.wait_pods(namespace, "mnist", 3)
    service = kube.sanitize(kube.core.read_namespaced_service("mnist", namespace))
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"tfmw.dev/job-name": "mnist"}
    assert service["spec"]["ports"][0]["name"] == "tfmw" and service["spec"]["ports"][0]["port"] == 2345
    assert service["metadata"]["ownerReferences"][0]["uid"] == uid
    cluster = [f"mnist-worker-{i}.mnist.{namespace}.svc:2345" for i in range(3)]
    for index, pod in enumerate(pods):
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["name"] == f"mnist-worker-{index}"
        assert meta["labels"] == {
            "tfmw.dev/job-name": "mnist",
            "tfmw.dev/replica-type": "worker",
            "tfmw.dev/replica-index": str(index),
            "tfmw.dev/attempt": "0",
            "tfmw.dev/role": "chief" if index == 0 else "worker",
        }
        owner = meta["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("TFMultiWorkerJob", uid, True)
        assert spec["hostname"] == f"mnist-worker-{index}" and spec["subdomain"] == "mnist"
        assert spec["restartPolicy"] == "Never"
        container = spec["containers"][0]
        env = env_of(pod)
        assert json.loads(env["TF_CONFIG"]) == {
            "cluster": {"worker": cluster},
            "task": {"type": "worker", "index": index},
        }
        assert env["TFMW_JOB_UID"] == uid and env["TFMW_NAMESPACE"] == namespace
        assert env["TFMW_MARKER_PATH"] == "/shared/multiworker-complete.txt"
        mount = next(m for m in container["volumeMounts"] if m["name"] == "tfmw-shared")
        assert mount == {"name": "tfmw-shared", "mountPath": "/shared", "subPath": "mnist"}
        assert container["ports"][0]["containerPort"] == 2345
    assert meta.get("finalizers") is None


def test_running_then_succeeded_on_marker_then_cleanup_and_events(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    job = kube.create_job(namespace, simulated_job("happy").completion(chiefExitGraceSeconds=0).manifest())
    kube.wait_pods(namespace, "happy", 2)
    assert kube.wait_phase(namespace, "happy", "Pending")["readyWorkers"] == "0/2"
    kubelet.run_all(namespace, "happy")
    status = kube.wait_phase(namespace, "happy", "Running")
    assert status["readyWorkers"] == "2/2" and status["startTime"]

    write_marker(shared_root / namespace / "happy", job["metadata"]["uid"])
    status = kube.wait_phase(namespace, "happy", "Succeeded", timeout=10)
    assert status["marker"]["path"] == f"{namespace}/happy/multiworker-complete.txt"
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in status["conditions"])

    # cleanPodPolicy Running (default): running pods go once the grace period is over.
    wait_for("running pods deleted", lambda: not kube.pods(namespace, "happy"), timeout=15)
    kube.wait_events(namespace, "happy", {"PodsCreated", "Running", "Succeeded"})


def test_clean_pod_policy_none_keeps_pods_and_all_removes_finished_ones(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    # Each job: the chief writes the marker and exits 0 (as the trainer does) while worker 1
    # still runs. With no grace period, Running deletes worker 1; All deletes both; None
    # keeps both. "running" is the control the other two are measured against.
    policies = {"keep": "None", "wipe": "All", "running": "Running"}
    for name, policy in policies.items():
        manifest = simulated_job(name).run_policy(cleanPodPolicy=policy).completion(chiefExitGraceSeconds=0)
        job = kube.create_job(namespace, manifest.manifest())
        kube.wait_pods(namespace, name, 2)
        kubelet.run_all(namespace, name)
        kube.wait_phase(namespace, name, "Running")
        write_marker(shared_root / namespace / name, job["metadata"]["uid"])
        kubelet.exit(namespace, f"{name}-worker-0", 0)
        kube.wait_phase(namespace, name, "Succeeded")

    def names(job: str) -> list[str]:
        return [p["metadata"]["name"] for p in kube.pods(namespace, job)]

    wait_for("'wipe' pods deleted", lambda: not names("wipe"), timeout=15)
    # The chief may have been deleted too if it was still running when the marker was seen.
    wait_for("'running' keeps no running worker", lambda: "running-worker-1" not in names("running"))
    assert names("keep") == ["keep-worker-0", "keep-worker-1"]


def test_printer_columns_show_real_values(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    job = kube.create_job(namespace, simulated_job("cols", workers=3).manifest())
    kube.wait_pods(namespace, "cols", 3)
    kubelet.run_all(namespace, "cols")
    kube.wait_phase(namespace, "cols", "Running")
    table = kubectl("get", "tfmwjobs", "-n", namespace).stdout.splitlines()
    # PROGRESS and ETA stay empty until the chief reports progress.
    assert table[0].split() == ["NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    assert table[1].split()[:4] == ["cols", "Running", "3/3", "0"] and len(table[1].split()) == 5
    write_marker(shared_root / namespace / "cols", job["metadata"]["uid"])
    kube.wait_phase(namespace, "cols", "Succeeded")
    wide = kubectl("get", "tfmw", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == [
        "NAME",
        "PHASE",
        "READY",
        "RESTARTS",
        "PROGRESS",
        "ETA",
        "AGE",
        "WORKERS",
        "COMPLETED",
        "REASON",
        "METRICS",
        "EVALUATION",
        "LAST",
        "CAUSE",
    ]
    row = columns(wide[0], wide[1])
    assert row["PHASE"] == "Succeeded" and row["WORKERS"] == "3" and row["COMPLETED"] not in ("", "<none>")
    assert row["PROGRESS"] == "" and row["METRICS"] == "" and row["EVALUATION"] == ""  # none reported
    assert row["LAST"] == row["CAUSE"] == ""  # no attempt ended before this one


def columns(header: str, line: str) -> dict[str, str]:
    """A kubectl table row by column name (empty cells leave only spaces)."""
    names = header.split()
    starts = [header.index(f" {n}") + 1 if i else 0 for i, n in enumerate(names)]
    ends = [*starts[1:], None]
    return {n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)}


def test_deleting_the_job_removes_pods_and_service_through_the_garbage_collector(
    kube: ClusterClient, namespace: str
) -> None:
    kube.create_job(namespace, simulated_job("gc", workers=2).manifest())
    kube.wait_pods(namespace, "gc", 2)
    kube.delete_job(namespace, "gc")

    def gone() -> bool:
        services = kube.core.list_namespaced_service(namespace).items
        return not kube.pods(namespace, "gc") and not services

    wait_for("pods and service garbage-collected", gone, timeout=30)


def test_a_service_of_the_jobs_name_that_is_not_its_own_holds_the_launch(
    kube: ClusterClient, namespace: str
) -> None:
    # Someone's own Service, without our labels: the operator's watch never shows it, so it
    # learns of it from the refused creation (the first pod went out beside it, and is
    # deleted again), and waits until the name is free before it counts the attempt as
    # launched.
    kube.core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "taken"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}},
    )
    kube.create_job(namespace, simulated_job("taken").manifest())
    status = kube.wait_phase(namespace, "taken", "Pending")
    stalled = wait_for(
        "the Stalled condition",
        lambda: next(
            (c for c in kube.status(namespace, "taken").get("conditions", []) if c["type"] == "Stalled"), None
        ),
    )
    assert stalled["reason"] == "NameInUse" and "Service taken" in stalled["message"], status
    assert "launchedAttempt" not in kube.status(namespace, "taken")
    assert kube.pods(namespace, "taken") == []  # no worker runs without its Service
    kube.core.delete_namespaced_service("taken", namespace)
    wait_for("the attempt launched", lambda: "launchedAttempt" in kube.status(namespace, "taken"), timeout=15)
    assert len(kube.pods(namespace, "taken")) == 2
    owners = kube.core.read_namespaced_service("taken", namespace).metadata.owner_references
    assert owners and owners[0].kind == "TFMultiWorkerJob"


def test_a_burst_of_more_jobs_than_launch_at_once_launches_every_one(
    kube: ClusterClient, namespace: str
) -> None:
    # LAUNCHES_AT_ONCE launches decide and create together; the rest wait their turn, and
    # none is dropped or left half made.
    names = [f"burst-{i}" for i in range(2 * LAUNCHES_AT_ONCE + 3)]
    for name in names:
        kube.create_job(namespace, simulated_job(name).manifest())
    for name in names:
        kube.wait_pods(namespace, name, 2, timeout=60)
        assert kube.wait_phase(namespace, name, "Pending")["workers"]["pending"] == 2
    services = {s.metadata.name for s in kube.core.list_namespaced_service(namespace).items}
    assert services >= set(names)
