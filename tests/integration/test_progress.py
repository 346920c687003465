"""Training progress against a real API server: the chief's document becomes status.progress,
throttled, with the final figures once, and a hostile document harms nothing."""

from __future__ import annotations

import itertools
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from kube import ClusterClient, SimulatedKubelet, kubectl, wait_for
from prometheus_client import REGISTRY
from wrappers import simulated_job, write_marker

Json = dict[str, Any]
INTERVAL = 10.0  # the operator's default: the in-process operator runs with it


def write_progress(job_dir: Path, uid: str, epoch: int, **fields: Any) -> None:
    """As the trainer's helper does: a whole new file renamed over the old one."""
    document = {
        "epoch": epoch,
        "totalEpochs": 10,
        "metrics": {"loss": round(1.0 / (epoch + 1), 4)},
        "updatedAt": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        + f".{int(time.time() % 1 * 1000):03d}Z",
        "jobUid": uid,
        "attempt": 0,
        **fields,
    }
    job_dir.mkdir(parents=True, exist_ok=True)
    partial = job_dir / ".progress.json.partial"
    partial.write_text(json.dumps(document))
    os.replace(partial, job_dir / "progress.json")


def gauge(namespace: str, name: str) -> float | None:
    value: float | None = REGISTRY.get_sample_value(
        "tfmw_job_progress_ratio", {"namespace": namespace, "job": name}
    )
    return value


def test_progress_is_recorded_at_most_once_per_interval_and_ends_with_the_markers_figures(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    job = kubelet.start_job(namespace, simulated_job("watched").manifest())
    uid, job_dir = job["metadata"]["uid"], shared_root / namespace / "watched"
    recorded: dict[str, Json] = {}  # lastUpdate -> status.progress
    began = time.monotonic()
    epoch = 0
    while time.monotonic() - began < 2.5 * INTERVAL:  # the chief reports twice a second
        epoch = min(9, int((time.monotonic() - began) / 3))
        write_progress(job_dir, uid, epoch)
        progress = kube.status(namespace, "watched").get("progress")
        if progress:
            recorded.setdefault(progress["lastUpdate"], progress)
        time.sleep(0.5)
    writes = sorted(recorded)
    assert len(writes) >= 2, recorded
    stamps = [datetime.fromisoformat(w.replace("Z", "+00:00")) for w in writes]
    assert all((b - a).total_seconds() >= INTERVAL for a, b in itertools.pairwise(stamps)), writes
    later = recorded[writes[-1]]
    assert later["epochs"] == f"{later['epoch']}/10" and later["percent"] == later["epoch"] * 10
    assert later["epoch"] > recorded[writes[0]]["epoch"]
    assert "eta" in later and later["summary"].startswith("loss=")
    assert gauge(namespace, "watched") == later["percent"] / 100
    row = kubectl("get", "tfmw", "watched", "-n", namespace, "--no-headers").stdout
    assert f" {later['epoch']}/10 " in row

    # The chief's last document and then its marker: the status ends with the final figures,
    # whatever the throttle, and the gauge goes with the job's end.
    final = {"loss": 0.05, "accuracy": 0.99, "eval_accuracy": 0.97}
    write_progress(job_dir, uid, 10, metrics=final)
    write_marker(job_dir, uid)
    status = kube.wait_phase(namespace, "watched", "Succeeded")
    assert status["progress"]["metrics"] == final and status["progress"]["epochs"] == "10/10"
    assert status["progress"]["eta"] == "0s"
    wait_for("the job's gauge removed", lambda: gauge(namespace, "watched") is None, timeout=5)

    # Never again after the end.
    write_progress(job_dir, uid, 3)
    time.sleep(3)
    assert kube.status(namespace, "watched")["progress"] == status["progress"]


def test_a_hostile_progress_document_is_refused_and_touches_nothing_else(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    neighbour = kubelet.start_job(namespace, simulated_job("neighbour").manifest())
    write_progress(shared_root / namespace / "neighbour", neighbour["metadata"]["uid"], 4)
    wait_for("neighbour's progress", lambda: kube.status(namespace, "neighbour").get("progress"))

    kubelet.start_job(namespace, simulated_job("hostile").manifest())
    hostile_dir = shared_root / namespace / "hostile"
    (hostile_dir / "progress.json").symlink_to(shared_root / namespace / "neighbour" / "progress.json")

    def refused() -> Json | None:
        progress = kube.status(namespace, "hostile").get("progress") or {}
        return progress if "ELOOP" in progress.get("error", "") else None

    progress = wait_for("the link refused", refused)
    assert "epoch" not in progress  # the neighbour's figures were never read through the link
    assert kube.status(namespace, "hostile")["phase"] == "Running"
    assert "ProgressRefused" in kube.wait_events(namespace, "hostile", {"ProgressRefused"})
    (hostile_dir / "progress.json").unlink()
    (hostile_dir / "progress.json").write_text("[" * 5000 + "]" * 5000)
    time.sleep(INTERVAL + 2)
    progress = kube.status(namespace, "hostile")["progress"]
    assert "not JSON" in progress["error"] and kube.status(namespace, "hostile")["phase"] == "Running"
    assert kube.status(namespace, "neighbour")["progress"]["epoch"] == 4
