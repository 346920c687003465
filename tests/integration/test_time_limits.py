"""Deadlines, stuck pods, suspend/resume, TTL, missing and stale markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from kube import ClusterClient, Json, SimulatedKubelet, wait_for
from wrappers import simulated_job, write_marker


def test_active_deadline_fails_and_deletes_pods(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kube.create_job(namespace, simulated_job("slow").run_policy(activeDeadlineSeconds=3).manifest())
    kube.wait_pods(namespace, "slow", 2)
    kubelet.run_all(namespace, "slow")
    status = kube.wait_phase(namespace, "slow", "Failed", timeout=15)
    assert status["reason"] == "DeadlineExceeded" and "activeDeadlineSeconds=3" in status["message"]
    wait_for("pods deleted", lambda: not kube.pods(namespace, "slow"), timeout=15)


def test_unschedulable_pod_is_stalled_with_the_schedulers_reason_then_times_out(
    kube: ClusterClient, namespace: str
) -> None:
    job = simulated_job("stuck").run_policy(pendingTimeoutSeconds=4).manifest()
    spec = job["spec"]["template"]["spec"]
    del spec["nodeName"]
    spec["nodeSelector"] = {"tfmw.dev/no-such-node": "true"}
    kube.create_job(namespace, job)

    def stalled() -> dict | None:  # type: ignore[type-arg]
        conditions = kube.status(namespace, "stuck").get("conditions", [])
        return next((c for c in conditions if c["type"] == "Stalled" and c["status"] == "True"), None)

    condition = wait_for("Stalled condition", stalled, timeout=20)
    assert condition["reason"] == "Unschedulable"
    assert "node(s) didn't match" in condition["message"] or "nodes are available" in condition["message"]
    status = kube.wait_phase(namespace, "stuck", "Failed", timeout=20)
    assert status["reason"] == "PendingTimeout" and "pendingTimeoutSeconds=4" in status["message"]


def test_suspend_deletes_pods_and_resume_starts_a_fresh_attempt(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("pause").manifest())
    kube.patch_job(namespace, "pause", {"spec": {"runPolicy": {"suspend": True}}})
    kube.wait_phase(namespace, "pause", "Suspended")
    wait_for("pods deleted", lambda: not kube.pods(namespace, "pause"), timeout=15)
    kube.patch_job(namespace, "pause", {"spec": {"runPolicy": {"suspend": False}}})
    kube.wait_pods(namespace, "pause", 2, attempt=1)

    def resumed() -> Json | None:
        # The launch writes its status once its pods exist: a moment after they can be seen.
        status = kube.status(namespace, "pause")
        return status if status["attempt"] == 1 else None

    status = wait_for("attempt 1 in the status", resumed)
    assert status["restarts"] == 0 and status["phase"] == "Pending"


def test_ttl_deletes_the_finished_job(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    job = kube.create_job(namespace, simulated_job("short").run_policy(ttlSecondsAfterFinished=2).manifest())
    kube.wait_pods(namespace, "short", 2)
    write_marker(shared_root / namespace / "short", job["metadata"]["uid"])
    kube.wait_phase(namespace, "short", "Succeeded")
    wait_for("job deleted by its TTL", lambda: kube.get_job(namespace, "short") is None, timeout=15)


def test_chief_exit_zero_without_marker_fails_marker_missing(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("quiet").completion(chiefExitGraceSeconds=2).manifest())
    kubelet.exit(namespace, "quiet-worker-0", 0)
    status = kube.wait_phase(namespace, "quiet", "Failed", timeout=15)
    assert status["reason"] == "MarkerMissing" and "chiefExitGraceSeconds=2" in status["message"]


@pytest.mark.parametrize("earlier_uid", ["an-earlier-job", None], ids=["json-marker", "plain-text-marker"])
def test_stale_marker_of_an_earlier_job_with_the_same_name_is_ignored(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path, earlier_uid: str | None
) -> None:
    marker = write_marker(shared_root / namespace / "again", earlier_uid)
    kubelet.start_job(namespace, simulated_job("again").manifest())
    assert not marker.exists(), "the stale marker is removed before the first pods"
    status = kube.status(namespace, "again")
    assert status["phase"] == "Running" and "marker" not in status
