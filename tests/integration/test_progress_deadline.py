"""The progress deadline and status.history against a real API server, the operator in-process:
a gang whose progress stops is restarted, counted against backoffLimit, and then failed;
every ended attempt keeps its cause, shown by `kubectl get -o wide` and `describe`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from kube import ClusterClient, SimulatedKubelet, kubectl, wait_for
from prometheus_client import REGISTRY
from wrappers import simulated_job

DEADLINE = 3


def write_progress(job_dir: Path, uid: str, attempt: int, epoch: int) -> None:
    document = {
        "epoch": epoch,
        "totalEpochs": 10,
        "jobUid": uid,
        "attempt": attempt,
        "updatedAt": time.time(),
        "checkpointEpoch": epoch,
        "checkpointPath": f"checkpoints/ckpt-{epoch}",
    }
    job_dir.mkdir(parents=True, exist_ok=True)
    partial = job_dir / ".progress.json.partial"
    partial.write_text(json.dumps(document))
    os.replace(partial, job_dir / "progress.json")


def stalled_gauge(namespace: str, name: str) -> float | None:
    value: float | None = REGISTRY.get_sample_value("tfmw_job_stalled", {"namespace": namespace, "job": name})
    return value


def test_a_stalled_gang_is_restarted_then_failed_past_backoff_limit_with_its_history(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    manifest = simulated_job("hung").run_policy(progressDeadlineSeconds=DEADLINE, backoffLimit=1).manifest()
    created = kubelet.start_job(namespace, manifest)
    uid, job_dir = created["metadata"]["uid"], shared_root / namespace / "hung"
    write_progress(job_dir, uid, 0, 2)
    wait_for(
        "progress recorded",
        lambda: (kube.status(namespace, "hung").get("progress") or {}).get("epoch") == 2,
        timeout=10,
    )
    advancing = next(c for c in kube.status(namespace, "hung")["conditions"] if c["type"] == "Stalled")
    assert (advancing["status"], advancing["reason"]) == ("False", "ProgressAdvancing")
    assert stalled_gauge(namespace, "hung") == 0

    # Nothing more is written: the all-reduce hangs with every pod Running.
    kube.wait_pods(namespace, "hung", 2, attempt=1, timeout=DEADLINE + 20)
    status = kube.status(namespace, "hung")
    assert status["restarts"] == 1 and status["attempt"] == 1
    assert "no progress since" in status["message"] and "epoch 2/10" in status["message"]
    assert "attempt 1 resumes from the checkpoint of epoch 2 at checkpoints/ckpt-2" in status["message"]
    first = status["history"][0]
    assert (first["attempt"], first["outcome"], first["cause"], first["epochsLost"]) == (
        0,
        "Restarted",
        "ProgressStalled",
        0,
    )
    kube.wait_events(namespace, "hung", {"ProgressStalled", "GangRestart"})
    # Counted once the next attempt's launch is recorded, just after its pods are created.
    wait_for(
        "the restart counted",
        lambda: REGISTRY.get_sample_value("tfmw_gang_restarts_total", {"cause": "ProgressStalled"}),
        timeout=10,
    )

    # The new gang runs and never reports: timed from when it ran, so it stalls too, and
    # backoffLimit 1 is used up.
    kubelet.run_all(namespace, "hung")
    began = time.monotonic()
    status = kube.wait_phase(namespace, "hung", "Failed", timeout=DEADLINE + 30)
    assert time.monotonic() - began >= DEADLINE - 1
    assert status["reason"] == "BackoffLimitExceeded" and "backoffLimit 1 reached" in status["message"]
    assert "attempt 1 has reported none since all its workers ran" in status["message"]
    assert [(h["attempt"], h["outcome"], h["cause"]) for h in status["history"]] == [
        (1, "Failed", "ProgressStalled"),
        (0, "Restarted", "ProgressStalled"),
    ]
    # A finished job's series goes (after its status is written: the metrics follow it).
    wait_for("the stalled series to go", lambda: stalled_gauge(namespace, "hung") is None, timeout=10)

    row = kubectl("get", "tfmw", "hung", "-n", namespace, "-o", "wide", "--no-headers").stdout
    assert row.split()[-1] == "ProgressStalled", row
    described = kubectl("describe", "tfmw", "hung", "-n", namespace).stdout
    assert "History:" in described and "Cause:" in described and "Epochs Lost:" in described


def test_an_oom_killed_and_an_evicted_worker_each_show_their_own_cause(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str
) -> None:
    kubelet.start_job(namespace, simulated_job("causes").run_policy(backoffLimit=5).manifest())
    kubelet.exit(namespace, "causes-worker-1", 137, reason="OOMKilled", log_tail="step 40\nKilled")
    kube.wait_pods(namespace, "causes", 2, attempt=1, timeout=30)
    kubelet.run_all(namespace, "causes")
    kube.wait_phase(namespace, "causes", "Running")
    kubelet.exit(
        namespace,
        "causes-worker-0",
        143,
        pod_reason="Evicted",
        pod_message="The node was low on resource: memory.",
    )
    kube.wait_pods(namespace, "causes", 2, attempt=2, timeout=30)
    history = kube.status(namespace, "causes")["history"]
    assert [(h["attempt"], h["cause"], h["worker"]) for h in history] == [
        (1, "Evicted", 0),
        (0, "OOMKilled", 1),
    ]
    oom = history[1]
    assert oom["exitCode"] == 137 and oom["node"] and oom["container"] == "tensorflow"
    assert oom["logs"] == f"{namespace}/causes/logs/attempt-0/worker-1.log"
    row = kubectl("get", "tfmw", "causes", "-n", namespace, "-o", "wide", "--no-headers").stdout
    assert row.split()[-1] == "Evicted", row
    assert REGISTRY.get_sample_value("tfmw_gang_restarts_total", {"cause": "OOMKilled"}) is not None
