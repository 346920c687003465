"""Real TensorFlow, a real hang: worker 1 of a MultiWorkerMirroredStrategy job is frozen with
SIGSTOP mid-epoch, the chief waits in the all-reduce with every pod Running, and the progress
deadline restarts the gang, which resumes from its checkpoint and succeeds. Also: a suspended
and resumed job loses no completed epoch, and every ended attempt keeps its cause."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e.test_training import NAMESPACE, TRAINING_TIMEOUT, epoch_lines, logs, sample, submit
from faults.conftest import processes_with
from kube import ClusterClient, kubectl, wait_for

Json = dict[str, Any]
STEPS_PER_EPOCH = 200
DEADLINE = 20  # above the operator's progress interval (10 s) plus the trainer's report gap (2 s)


def progress(shared_dir: Path, name: str) -> Json:
    try:
        document = json.loads((shared_dir / NAMESPACE / name / "progress.json").read_text())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def training_job(name: str, epochs: int, **run_policy: Any) -> Json:
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    manifest["metadata"]["name"] = name
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [f"--epochs={epochs}", "--batch-size=8", f"--steps-per-epoch={STEPS_PER_EPOCH}"]
    manifest["spec"].setdefault("runPolicy", {}).update(run_policy)
    return manifest


def slowed(manifest: Json) -> Json:
    """Steps slowed so an epoch lasts at least 4 s: on an idle node an epoch took about 2 s,
    the trainer's interval between interim reports, and none came within an epoch."""
    manifest["spec"]["template"]["spec"]["containers"][0]["args"].append("--step-pause=0.02")
    return manifest


def timed(what: str, probe: Callable[[], bool], timeout: float) -> float:
    """When `probe` first held, on the monotonic clock."""
    return wait_for(what, lambda: time.monotonic() if probe() else None, timeout=timeout, interval=0.2)


def attempt_of(kube: ClusterClient, name: str) -> int:
    return int(kube.status(NAMESPACE, name).get("attempt") or 0)


def test_a_hung_worker_stalls_the_gang_which_is_restarted_and_succeeds(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """Worker 1's training thread stops after epoch 2 while its process lives on, so
    TensorFlow's heartbeats say it is healthy: the chief waits in the all-reduce for ever,
    every pod Running. Only the progress deadline notices."""
    name = fresh_name("hung")
    manifest = training_job(name, 8, progressDeadlineSeconds=DEADLINE)
    manifest["spec"]["template"]["spec"]["containers"][0]["args"] += ["--hang-at-epoch=2", "--hang-worker=1"]
    submit(kube, manifest, name)
    hung_at = timed(
        "epoch 2 reported", lambda: progress(shared_dir, name).get("epoch", 0) >= 2, TRAINING_TIMEOUT
    )
    time.sleep(DEADLINE / 2)
    assert kube.status(NAMESPACE, name)["phase"] == "Running"
    assert all(p["status"]["phase"] == "Running" for p in kube.pods(NAMESPACE, name))
    restarted_at = timed("the gang restarted", lambda: attempt_of(kube, name) == 1, DEADLINE + 60)
    trained_at = timed(
        "the new gang training", lambda: progress(shared_dir, name).get("attempt") == 1, TRAINING_TIMEOUT
    )
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    print(
        f"\n{name}: hung after epoch 2; restart decided {restarted_at - hung_at:.1f} s after the last epoch, "
        f"new gang training {trained_at - hung_at:.1f} s after it (progressDeadlineSeconds={DEADLINE}, "
        "progress interval 10 s)"
    )
    assert status["restarts"] == 1 and status["attempt"] == 1
    (record,) = status["history"]
    assert (record["attempt"], record["outcome"], record["cause"]) == (0, "Restarted", "ProgressStalled")
    # The epoch-end checkpoint of epoch 2 holds its 2 x 200 steps (the trainer reports the step too).
    assert record["checkpoint"] == {"epoch": 2, "step": 400, "path": "checkpoints/ckpt-2"}
    assert record["epochsLost"] == 0
    for index in (0, 1):
        output = logs(name, index)
        assert "resumed_from_epoch=2" in output
        assert epoch_lines(output)[0].startswith("epoch=3 ")
    assert "ProgressStalled" in kube.wait_events(NAMESPACE, name, {"ProgressStalled"})
    assert (
        "injected_hang epoch=2"
        in (shared_dir / NAMESPACE / name / "logs" / "attempt-0" / "worker-1.log").read_text()
    )
    row = kubectl("get", "tfmw", name, "-n", NAMESPACE, "-o", "wide", "--no-headers").stdout
    assert row.split()[-1] == "ProgressStalled", row


@pytest.mark.skipif(
    os.environ.get("TFMW_E2E_KUBECONFIG") is not None, reason="needs the node's processes here"
)
def test_a_frozen_worker_is_noticed_and_the_gang_restarted_and_succeeds(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """SIGSTOP freezes every thread of worker 1, its heartbeats too: TensorFlow's coordination
    service notices (about 10 s), the chief's all-reduce fails with UnavailableError, and the
    trainer exits 170 (a peer lost: retried under restartPolicy ExitCode)."""
    name = fresh_name("frozen")
    job = submit(kube, training_job(name, 8, progressDeadlineSeconds=DEADLINE), name)
    uid = job["metadata"]["uid"]
    wait_for(
        "epoch 2 reported", lambda: progress(shared_dir, name).get("epoch", 0) >= 2, timeout=TRAINING_TIMEOUT
    )
    frozen = processes_with(f"TFMW_JOB_UID={uid}", "TFMW_WORKER_INDEX=1")
    assert frozen, "worker 1's processes are not on this node"
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    froze_at = time.monotonic()
    before = progress(shared_dir, name)
    restarted_at = timed("the gang restarted", lambda: attempt_of(kube, name) == 1, DEADLINE + 60)
    trained_at = timed(
        "the new gang training", lambda: progress(shared_dir, name).get("attempt") == 1, TRAINING_TIMEOUT
    )
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    record = status["history"][0]
    print(
        f"\n{name}: frozen at epoch {before.get('epoch')} step {before.get('step')}; restart decided "
        f"{restarted_at - froze_at:.1f} s after the freeze ({record['cause']}, worker {record.get('worker')}, "
        f"exit {record.get('exitCode')}), new gang training {trained_at - froze_at:.1f} s after it"
    )
    assert status["restarts"] == 1 and status["attempt"] == 1
    assert record["outcome"] == "Restarted" and record["cause"] in ("Error", "PeerLost", "ProgressStalled"), (
        record
    )
    # Every epoch done before the freeze was checkpointed, and the new gang resumed after it.
    # (The history has the progress as last recorded, at most the progress interval old.)
    assert before["checkpointEpoch"] == before["epoch"]
    assert f"resumed_from_epoch={before['epoch']}" in logs(name, 0)


SAVED = re.compile(r"worker=(\d) sigterm_checkpoint step=(\d+) epoch=(\d+) told=(\w+) save_seconds=([\d.]+)")


def mid_epoch(shared_dir: Path, name: str) -> Json:
    """Progress reported within an epoch, after at least one whole epoch."""
    document = progress(shared_dir, name)
    step, epoch = document.get("step", 0), document.get("epoch", 0)
    return document if epoch >= 1 and step > epoch * STEPS_PER_EPOCH else {}


def seen_mid_epoch(kube: ClusterClient, shared_dir: Path, name: str) -> Json:
    """Waits for a report within an epoch; fails at once if the job ended without one."""
    seen = wait_for(
        "a mid-epoch report",
        lambda: mid_epoch(shared_dir, name) or ended(kube, name),
        timeout=TRAINING_TIMEOUT,
    )
    assert "phase" not in seen, f"{name} ended before a report within an epoch: {seen}"
    return seen


def ended(kube: ClusterClient, name: str) -> Json:
    status = kube.status(NAMESPACE, name)
    return status if status.get("phase") in ("Succeeded", "Failed") else {}


def sigterm_saves(shared_dir: Path, name: str) -> list[tuple[int, int, str, float]]:
    """What each worker of the ended attempts saved on SIGTERM: worker, step, told, seconds."""
    found = []
    for log in sorted((shared_dir / NAMESPACE / name / "logs").glob("attempt-*/worker-*.log")):
        for match in SAVED.finditer(log.read_text(errors="replace")):
            found.append((int(match[1]), int(match[2]), match[4], float(match[5])))
    return found


def assert_resumed_mid_epoch(
    shared_dir: Path, name: str, seen: Json, told: set[int], logged: frozenset[int] = frozenset({0, 1})
) -> int:
    """Every worker saved at the same step, at or after the step last seen mid-epoch, and the
    resumed gang started at that very step: no completed step lost. `told`: the workers that
    must have been told themselves before that step (at least one always was); `logged`:
    the workers whose saved logs must show their save."""
    saves = sigterm_saves(shared_dir, name)
    steps = {step for _, step, _, _ in saves}
    assert {worker for worker, *_ in saves} >= logged and len(steps) == 1, saves
    (saved,) = steps
    assert saved >= seen["step"] > seen["epoch"] * STEPS_PER_EPOCH, (saves, seen)
    # A worker told after the step was agreed saved for a peer ("told=no"), then got its own.
    told_themselves = {worker for worker, _, said, _ in saves if said == "yes"}
    assert told_themselves >= told, saves
    print(
        f"\n{name}: SIGTERM at step {seen['step']} or later (epoch {seen['epoch'] + 1} of "
        f"{STEPS_PER_EPOCH} steps); every worker saved step {saved}; save times "
        + ", ".join(f"worker {w} {s:.3f} s" for w, _, _, s in sorted(saves))
    )
    for index in (0, 1):
        output = logs(name, index)
        assert f"resumed_from_step={saved}" in output, output[-2000:]
        assert epoch_lines(output)[0].startswith(f"epoch={saved // STEPS_PER_EPOCH + 1} "), output[-2000:]
    return saved


def test_a_suspended_and_resumed_job_loses_no_completed_step(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """Suspension SIGTERMs every worker at once, mid-epoch: the gang agrees on a step, saves
    it within the grace period, and the resumed gang starts from that step."""
    name = fresh_name("pause")
    submit(kube, slowed(training_job(name, 4)), name)
    seen = seen_mid_epoch(kube, shared_dir, name)
    kube.patch_job(NAMESPACE, name, {"spec": {"runPolicy": {"suspend": True}}})
    suspended = kube.wait_phase(NAMESPACE, name, "Suspended", timeout=60)
    wait_for("pods gone", lambda: not kube.pods(NAMESPACE, name), timeout=120)
    kube.patch_job(NAMESPACE, name, {"spec": {"runPolicy": {"suspend": False}}})
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    record = status["history"][0]
    assert (record["outcome"], record["cause"]) == ("Suspended", "Suspended")
    saved = assert_resumed_mid_epoch(shared_dir, name, seen, told=set())
    assert status["progress"]["checkpoint"]["step"] >= saved
    assert suspended["restarts"] == 0 and status["restarts"] == 0


def test_a_deleted_worker_loses_no_completed_step(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """Worker 1 gets SIGTERM (its pod deleted) while worker 0 trains on: the notice rides on
    the step's all-reduce, both save the same step, worker 1 ends first and is the cause."""
    name = fresh_name("deleted")
    submit(kube, slowed(training_job(name, 4)), name)
    seen = seen_mid_epoch(kube, shared_dir, name)
    kubectl("delete", "pod", f"{name}-worker-1", "-n", NAMESPACE, "--wait=false")
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    record = status["history"][0]
    # Deleted, it is seen either gone or ended by the SIGTERM (143).
    assert (record["outcome"], record["worker"]) == ("Restarted", 1) and record["cause"] in (
        "PodDeleted",
        "Error",
    ), record
    assert record["epochsLost"] == 0, record
    # Worker 1's log goes with its deleted pod. Worker 0 saves once, at the step worker 1's
    # notice rode on: untold ("told=no") when the all-reduce brought it first, told when the
    # operator's own SIGTERM (the gang restart) won the race to worker 0; either way the same step.
    saved = assert_resumed_mid_epoch(shared_dir, name, seen, told=set(), logged=frozenset({0}))
    assert len([said for worker, _, said, _ in sigterm_saves(shared_dir, name) if worker == 0]) == 1
    assert status["restarts"] == 1 and status["progress"]["checkpoint"]["step"] >= saved
