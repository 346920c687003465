"""Worker failures: gang restarts, permanent failures, backoffLimit, vanished pods."""

from __future__ import annotations

import threading
import time

from kube import ClusterClient, SimulatedKubelet, wait_for
from wrappers import env_of, simulated_job


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
    kubelet.exit(namespace, "oom-worker-1", 137, reason="OOMKilled", log_tail="killed at step 40")
    second = kube.wait_pods(namespace, "oom", 3, attempt=1, timeout=30)
    stop.set()
    watcher.join()
    assert not overlaps, f"new pods beside old ones: {overlaps[:3]}"

    status = kube.status(namespace, "oom")
    assert status["restarts"] == 1 and status["attempt"] == 1
    assert "worker 1" in status["message"] and "137" in status["message"]
    for old, new in zip(first, second, strict=True):
        # The same cluster under the attempt's own host names (builders.member_host).
        renamed = env_of(old)["TF_CONFIG"]
        for index in range(3):
            renamed = renamed.replace(f"oom-worker-{index}.", f"worker-{index}-a1.")
        assert env_of(new)["TF_CONFIG"] == renamed
        assert new["spec"]["hostname"] == new["metadata"]["labels"]["tfmw.dev/replica-type"] + "-" + (
            new["metadata"]["labels"]["tfmw.dev/replica-index"] + "-a1"
        )
        assert env_of(new)["TFMW_ATTEMPT"] == "1"
    kubelet.run_all(namespace, "oom")
    status = kube.wait_phase(namespace, "oom", "Running")
    assert status["restarts"] == 1
    kube.wait_events(namespace, "oom", {"GangRestart"})


def test_exit_1_under_exit_code_policy_fails_naming_worker_and_code(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("bug").manifest())
    kubelet.exit(namespace, "bug-worker-0", 1, log_tail="Traceback ...\nValueError: bad shape (3, 4)")
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


def test_gangs_stopped_at_once_all_come_back(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    # A worker killed on its own: its peers are deleted with no grace, gone before their
    # DELETED events arrive, so the job must be decided again without them (once, 3 of 30
    # gangs in a scale run never came back).
    names = [f"fast{i}" for i in range(4)]
    for name in names:
        kubelet.start_job(namespace, simulated_job(name, workers=8).manifest())
    for name in names:
        kubelet.exit(namespace, f"{name}-worker-1", 137, reason="OOMKilled")
    for name in names:
        kube.wait_pods(namespace, name, 8, attempt=1, timeout=20)


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


def test_two_workers_failing_in_the_same_second_restart_the_gang_once(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("pair", workers=3).manifest())
    kubelet.exit(namespace, "pair-worker-2", 137)
    kubelet.exit(namespace, "pair-worker-1", 143)
    kube.wait_pods(namespace, "pair", 3, attempt=1, timeout=30)
    kubelet.run_all(namespace, "pair")
    status = kube.wait_phase(namespace, "pair", "Running")
    assert status["restarts"] == 1 and status["attempt"] == 1
    # Both died within one second: the lower index is named, whatever order the events came in.
    assert len([e for e in kube.events(namespace, "pair") if e["reason"] == "GangRestart"]) == 1


def test_a_sidecar_still_running_does_not_hide_a_dead_trainer(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    manifest = simulated_job("side").manifest()
    manifest["spec"]["template"]["spec"]["containers"].append({"name": "logger", "image": "busybox"})
    kubelet.start_job(namespace, manifest)
    kubelet.exit(
        namespace, "side-worker-1", 1, container="tensorflow", log_tail="ValueError: bad", phase="Running"
    )
    status = kube.wait_phase(namespace, "side", "Failed", timeout=15)
    assert status["reason"] == "WorkerFailed"
    assert "worker 1 (pod side-worker-1) exited with code 1" in status["message"]
    assert "ValueError: bad" in status["message"]


def test_a_sidecar_killed_by_a_signal_does_not_make_a_program_error_retryable(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    manifest = simulated_job("sig").manifest()
    manifest["spec"]["template"]["spec"]["containers"].insert(0, {"name": "logger", "image": "busybox"})
    kubelet.start_job(namespace, manifest)
    kubelet.exit(namespace, "sig-worker-0", 143, container="logger", phase="Running")
    kubelet.exit(namespace, "sig-worker-0", 1, container="tensorflow", log_tail="KeyError: 'x'")
    status = kube.wait_phase(namespace, "sig", "Failed", timeout=15)
    assert status["reason"] == "WorkerFailed" and "exited with code 1" in status["message"]


def test_survivors_held_by_a_finalizer_are_waited_for_and_the_restart_counted_once(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    # Kueue's finalizer on a survivor stopped with no grace: the API server keeps it,
    # terminating, so the next attempt waits for it instead of meeting its name (409).
    kubelet.start_job(namespace, simulated_job("held", workers=2).manifest())
    finalizer = {"metadata": {"finalizers": ["tfmw.dev/test-hold"]}}
    kube.core.patch_namespaced_pod("held-worker-0", namespace, finalizer)
    kubelet.exit(namespace, "held-worker-1", 137, reason="OOMKilled")
    wait_for(
        "the survivor terminating, held",
        lambda: (
            (pod := kube.core.read_namespaced_pod("held-worker-0", namespace)).metadata.deletion_timestamp
            and pod
        ),
        timeout=30,
    )
    time.sleep(2)  # long enough for a launch that took the held pod for gone
    assert all(p["metadata"]["labels"]["tfmw.dev/attempt"] == "0" for p in kube.pods(namespace, "held"))
    kube.core.patch_namespaced_pod("held-worker-0", namespace, {"metadata": {"finalizers": None}})
    kube.wait_pods(namespace, "held", 2, attempt=1, timeout=30)
    kubelet.run_all(namespace, "held")
    status = kube.wait_phase(namespace, "held", "Running")
    assert status["restarts"] == 1 and status["attempt"] == 1, status
    assert [h["cause"] for h in status.get("history", [])] == ["OOMKilled"], status
