"""Worker failures: gang restarts, permanent failures, backoffLimit, vanished pods."""

from __future__ import annotations

import threading

from kube import ClusterClient, SimulatedKubelet, wait_for
from wrappers import simulated_job


def env_of(pod: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def test_exit_137_restarts_the_whole_gang_only_after_old_pods_are_gone(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("oom", workers=3).manifest())
    first = kube.pods(namespace, "oom")

    # Watch every pod event: no attempt-1 pod may exist while an attempt-0 pod does.
    overlaps: list[str] = []
    stop = threading.Event()

    def monitor() -> None:
        while not stop.is_set():
            attempts = {p["metadata"]["labels"]["tfmw.dev/attempt"] for p in kube.pods(namespace, "oom")}
            if {"0", "1"} <= attempts:
                overlaps.append(str(attempts))

    watcher = threading.Thread(target=monitor, daemon=True)
    watcher.start()
    kubelet.exit(namespace, "oom-worker-1", 137, reason="OOMKilled", message="killed at step 40")
    second = kube.wait_pods(namespace, "oom", 3, attempt=1, timeout=30)
    stop.set()
    watcher.join()
    assert not overlaps, f"new pods beside old ones: {overlaps[:3]}"

    status = kube.status(namespace, "oom")
    assert status["restarts"] == 1 and status["attempt"] == 1
    assert "worker 1" in status["message"] and "137" in status["message"]
    for old, new in zip(first, second, strict=True):
        assert env_of(old)["TF_CONFIG"] == env_of(new)["TF_CONFIG"]
        assert env_of(new)["TFMW_ATTEMPT"] == "1"
    kubelet.run_all(namespace, "oom")
    status = kube.wait_phase(namespace, "oom", "Running")
    assert status["restarts"] == 1
    kube.wait_events(namespace, "oom", {"GangRestart"})


def test_exit_1_under_exit_code_policy_fails_naming_worker_and_code(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("bug").manifest())
    kubelet.exit(namespace, "bug-worker-0", 1, message="Traceback ...\nValueError: bad shape (3, 4)")
    status = kube.wait_phase(namespace, "bug", "Failed")
    assert status["reason"] == "WorkerFailed"
    assert "worker 0 (pod bug-worker-0) exited with code 1" in status["message"]
    assert "bad shape (3, 4)" in status["message"]
    # cleanPodPolicy Running: the worker still running is deleted, the failed one kept for its logs.
    wait_for(
        "running worker deleted",
        lambda: [p["metadata"]["name"] for p in kube.pods(namespace, "bug")] == ["bug-worker-0"],
    )


def test_backoff_limit_exhausted_fails(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kube.create_job(namespace, simulated_job("flaky").run_policy(backoffLimit=1).manifest())
    for attempt in (0, 1):
        kube.wait_pods(namespace, "flaky", 2, attempt=attempt)
        kubelet.run_all(namespace, "flaky")
        kubelet.exit(namespace, "flaky-worker-1", 137)
    status = kube.wait_phase(namespace, "flaky", "Failed")
    assert status["reason"] == "BackoffLimitExceeded" and status["restarts"] == 1
    assert "backoffLimit 1" in status["message"]


def test_a_deleted_pod_restarts_the_gang(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("gone").manifest())
    kubelet.force_delete(namespace, "gone-worker-0")
    kube.wait_pods(namespace, "gone", 2, attempt=1)
    status = kube.status(namespace, "gone")
    assert status["restarts"] == 1 and "disappeared" in status["message"]


def test_restart_does_not_wait_on_logs_that_cannot_be_read(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    # No kubelet serves logs for the simulated node; archiving them (seen in e2e) must
    # not hold the restart up.
    kube.create_job(namespace, simulated_job("nologs").manifest())
    kube.wait_pods(namespace, "nologs", 2)
    kubelet.run_all(namespace, "nologs")
    kubelet.exit(namespace, "nologs-worker-1", 143)
    kube.wait_pods(namespace, "nologs", 2, attempt=1, timeout=20)
    assert kube.status(namespace, "nologs")["restarts"] == 1
