"""Real TensorFlow under the operator: samples succeed, workers find each other, a killed gang resumes."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import REPO, ClusterClient, kubectl, wait_for

Json = dict[str, Any]
SAMPLES = REPO / "deploy" / "samples"
NAMESPACE = "default"  # where deploy/overlays/local puts the tfmw-shared claim
EPOCH_LINE = re.compile(r"^worker=(\d+) (epoch=\d+ loss=\S+ accuracy=\S+)$", re.M)
TRAINING_TIMEOUT = 600


def sample(name: str) -> Json:
    manifest: Json = yaml.safe_load((SAMPLES / name).read_text())
    return manifest


def submit(kube: ClusterClient, manifest: Json, name: str) -> Json:
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["name"] = name
    return kube.create_job(NAMESPACE, manifest)


def logs(name: str, index: int) -> str:
    return kubectl("logs", "-n", NAMESPACE, f"{name}-worker-{index}").stdout


def epoch_lines(text: str) -> list[str]:
    return [m.group(2) for m in EPOCH_LINE.finditer(text)]


def assert_trained_in_sync(name: str, workers: int) -> list[str]:
    outputs = [logs(name, i) for i in range(workers)]
    for index, output in enumerate(outputs):
        assert f"worker={index} start cluster_workers={workers} replicas={workers}" in output, output[-3000:]
    reference = epoch_lines(outputs[0])
    assert reference, outputs[0][-3000:]
    for output in outputs[1:]:
        assert epoch_lines(output) == reference, "workers printed different epoch lines"
    return reference


@pytest.mark.parametrize(
    ("manifest", "workers"),
    [("mnist-2-workers.yaml", 2), ("mnist-4-workers.yaml", 4), ("mnist-fit.yaml", 2)],
)
def test_sample_trains_to_success(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str], manifest: str, workers: int
) -> None:
    job = submit(kube, sample(manifest), fresh_name("sample"))
    name = job["metadata"]["name"]
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    assert status["restarts"] == 0
    lines = assert_trained_in_sync(name, workers)
    print(f"\n{name}: {workers} workers in sync: {lines}")
    marker = json.loads((shared_dir / NAMESPACE / name / "multiworker-complete.txt").read_text())
    assert marker["jobUid"] == job["metadata"]["uid"] and marker["replicas"] == workers
    job_dir = shared_dir / NAMESPACE / name
    assert (job_dir / "checkpoints" / "checkpoint").exists() or (job_dir / "final").exists()


def test_worker_killed_mid_training_restarts_the_gang_which_resumes(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    crash = fresh_name("crash")
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    # Attempt 0 only: worker 1 exits 137 after epoch 2, as if the OOM killer took it.
    container["args"] = ["--epochs=4", "--steps-per-epoch=8", "--crash-at-epoch=2", "--crash-worker=1"]
    job = submit(kube, manifest, crash)
    status = kube.wait_phase(NAMESPACE, crash, "Succeeded", timeout=TRAINING_TIMEOUT)
    assert status["restarts"] == 1 and status["attempt"] == 1
    for index in (0, 1):
        output = logs(crash, index)
        assert "attempt=1" in output and "resumed_from_epoch=2" in output
        assert [line.split()[0] for line in epoch_lines(output)] == ["epoch=3", "epoch=4"]
    assert_trained_in_sync(crash, 2)
    # The first attempt's logs were kept on the shared storage before its pods went.
    archived = shared_dir / NAMESPACE / crash / "logs" / "attempt-0" / "worker-1.log"
    assert "injected_crash epoch=2 exit_code=137" in archived.read_text()
    # The survivor, stopped at once (no save could finish without its peer), followed to its end.
    survivor = shared_dir / NAMESPACE / crash / "logs" / "attempt-0" / "worker-0.log"
    assert "worker=0 epoch=2 " in survivor.read_text()
    marker = json.loads((shared_dir / NAMESPACE / crash / "multiworker-complete.txt").read_text())
    assert marker["attempt"] == 1 and marker["jobUid"] == job["metadata"]["uid"]
    assert "GangRestart" in kube.wait_events(NAMESPACE, crash, {"GangRestart"})


def test_job_whose_image_does_not_exist_fails_with_a_readable_reason(
    kube: ClusterClient, fresh_name: Callable[[str], str]
) -> None:
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    name = fresh_name("no-image")
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["image"] = "tfmw-no-such-image:dev"
    container["imagePullPolicy"] = "Never"
    submit(kube, manifest, name)
    status = kube.wait_phase(NAMESPACE, name, "Failed", timeout=120)
    assert status["reason"] == "ErrImageNeverPull"
    assert "tfmw-no-such-image" in status["message"] and "worker" in status["message"]
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True"


def test_job_whose_claim_does_not_exist_is_stalled_then_fails(
    kube: ClusterClient, fresh_name: Callable[[str], str]
) -> None:
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    name = fresh_name("no-claim")
    manifest["spec"]["sharedVolume"]["claimName"] = "no-such-claim"
    manifest["spec"]["runPolicy"]["pendingTimeoutSeconds"] = 10
    submit(kube, manifest, name)
    status = kube.wait_phase(NAMESPACE, name, "Failed", timeout=120)
    assert status["reason"] == "PendingTimeout"
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "Unschedulable" and "no-such-claim" in stalled["message"]
    assert "no-such-claim" in status["message"]


def trainer_processes(uid: str) -> list[int]:
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"TFMW_JOB_UID={uid}".encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def test_deleting_a_running_job_leaves_no_pod_service_or_process(
    kube: ClusterClient, fresh_name: Callable[[str], str]
) -> None:
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    doomed = fresh_name("doomed")
    manifest["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=1000"]
    job = submit(kube, manifest, doomed)
    uid = job["metadata"]["uid"]
    kube.wait_phase(NAMESPACE, doomed, "Running", timeout=TRAINING_TIMEOUT)
    wait_for("trainer processes", lambda: trainer_processes(uid), timeout=60)
    kube.delete_job(NAMESPACE, doomed)

    def nothing_left() -> bool:
        services = [
            s for s in kube.core.list_namespaced_service(NAMESPACE).items if s.metadata.name == doomed
        ]
        return not kube.pods(NAMESPACE, doomed) and not services and not trainer_processes(uid)

    wait_for("pods, service and processes gone", nothing_left, timeout=120)
