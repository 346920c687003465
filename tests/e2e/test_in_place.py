"""Real TensorFlow, gang restarts that keep the pods (docs/supervisor.md): a template that gives
its command runs under the in-pod supervisor, so a worker's death restarts every command in
place (the surviving pods keep their UIDs) and only a pod really gone is made again; a
template without a command keeps the restart that re-creates every pod, and the status says
why. The time each restart loses (from the fault to the new gang training) is printed, in
place and re-created alike. Also: a hung gang's stacks are taken before its ProgressStalled
restart, and the history names the frame the chief hung in."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e.test_stall import DEADLINE, attempt_of, progress, slowed, timed, training_job
from e2e.test_training import NAMESPACE, TRAINING_TIMEOUT, epoch_lines, logs, submit
from kube import ClusterClient, kubectl, trainer_pids, wait_for
from tfmw_operator import contract

Json = dict[str, Any]
COMMAND = ["python3", "-m", "tfmw_trainer"]  # the trainer image's entrypoint, given as the command
on_this_node = pytest.mark.skipif(
    os.environ.get("TFMW_E2E_KUBECONFIG") is not None, reason="needs the node's processes here"
)


def supervised(manifest: Json) -> Json:
    manifest["spec"]["template"]["spec"]["containers"][0]["command"] = list(COMMAND)
    return manifest


def uids(kube: ClusterClient, name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.pods(NAMESPACE, name)}


def condition(kube: ClusterClient, name: str, kind: str) -> Json:
    found = [c for c in kube.status(NAMESPACE, name).get("conditions") or [] if c.get("type") == kind]
    return found[0] if found else {}


def kill_worker(uid: str, index: int) -> float:
    pids = trainer_pids(uid, index)
    assert pids, f"worker {index}'s trainer is not on this node"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def restarted(kube: ClusterClient, shared_dir: Path, name: str, since: float, fault: str) -> Json:
    """The job's status once it has Succeeded after `fault` at `since`; printed on the way: when
    the restart was decided, and when the new gang trained (its first progress report of
    attempt 1), from the fault."""
    decided = timed("the gang restarted", lambda: attempt_of(kube, name) >= 1, 120) - since
    trained = (
        timed(
            "the new gang training", lambda: progress(shared_dir, name).get("attempt") == 1, TRAINING_TIMEOUT
        )
        - since
    )
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    print(
        f"\n{name}: {fault}: restart decided {decided:.1f} s after it, new gang training {trained:.1f} s after it"
    )
    return status


def attempt_log(shared_dir: Path, name: str, attempt: int, stem: str) -> str:
    """A pod's output in one attempt, as its supervisor kept it in the job's folder."""
    return (shared_dir / NAMESPACE / name / "logs" / f"attempt-{attempt}" / f"{stem}.log").read_text()


def running_epoch(shared_dir: Path, name: str, epoch: int) -> None:
    wait_for(
        f"epoch {epoch} reported",
        lambda: progress(shared_dir, name).get("epoch", 0) >= epoch,
        timeout=TRAINING_TIMEOUT,
    )


@on_this_node
def test_a_killed_worker_restarts_in_place_and_the_pods_are_kept(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """SIGKILL to worker 1's trainer: its supervisor reports the end (137), the operator raises
    the attempt, worker 0's supervisor stops its command, both wait at the barrier and start
    attempt 1 together, in the same pods."""
    name = fresh_name("inplace")
    job = submit(kube, supervised(slowed(training_job(name, 4))), name)
    wait_for(
        "RestartInPlace True",
        lambda: condition(kube, name, "RestartInPlace").get("status") == "True",
        timeout=60,
    )
    running_epoch(shared_dir, name, 1)
    before = uids(kube, name)
    killed_at = kill_worker(job["metadata"]["uid"], 1)
    status = restarted(kube, shared_dir, name, killed_at, "in place, SIGKILL to worker 1")
    assert uids(kube, name) == before, "the gang's pods were made again"
    assert status["restarts"] == 1 and status["attempt"] == 1
    record = status["history"][0]
    assert (record["outcome"], record["worker"], record.get("restart")) == ("Restarted", 1, "InPlace"), record
    assert record.get("exitCode") == 137, record
    for index in (0, 1):
        output = attempt_log(shared_dir, name, 1, f"worker-{index}")
        assert "attempt=1" in output and "resumed_from_epoch=" in output, output[-2000:]
        assert epoch_lines(output)[-1].startswith("epoch=4 "), output[-2000:]
    # Each attempt's output is in its own file, the kill's attempt too.
    assert attempt_log(shared_dir, name, 0, "worker-1")


@on_this_node
def test_with_warm_start_a_killed_workers_gang_restarts_in_processes_that_imported_ahead(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """runPolicy.warmStart: each supervisor keeps the next attempt's Python with TensorFlow
    imported; after worker 1's SIGKILL both commands of attempt 1 are those standbys, and the
    trainer (which forks its training process) trains on to the end."""
    name = fresh_name("inplace-warm")
    manifest = supervised(slowed(training_job(name, 6, warmStart={})))
    job = submit(kube, manifest, name)
    pods = [f"{name}-worker-{i}" for i in (0, 1)]

    def standbys_ready() -> bool:
        return all(
            "ready: tensorflow imported in" in kubectl("logs", "-n", NAMESPACE, pod, check=False).stdout
            for pod in pods
        )

    wait_for("both standbys ready", standbys_ready, timeout=TRAINING_TIMEOUT, interval=0.5)
    running_epoch(shared_dir, name, 1)
    killed_at = kill_worker(job["metadata"]["uid"], 1)
    status = restarted(kube, shared_dir, name, killed_at, "warm, in place, SIGKILL to worker 1")
    assert status["restarts"] == 1 and status["history"][0].get("restart") == "InPlace", status
    for index in (0, 1):
        output = attempt_log(shared_dir, name, 1, f"worker-{index}")
        assert "warm: imported ahead" in output, output[-2000:]
        assert "attempt=1" in output and "resumed_from_epoch=" in output, output[-2000:]
        assert epoch_lines(output)[-1].startswith("epoch=6 "), output[-2000:]


def test_a_deleted_worker_pod_alone_is_made_again(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """Worker 1's pod deleted: it cannot restart in place, so it alone is made again; worker 0
    keeps its pod and restarts its command in it. The supervisor in the job's folder was
    emptied first (a 0-byte file would exit 0): the operator puts it back before the new pod."""
    name = fresh_name("inplace-del")
    submit(kube, supervised(slowed(training_job(name, 4))), name)
    running_epoch(shared_dir, name, 1)
    before = uids(kube, name)
    placed = shared_dir / NAMESPACE / name / ".tfmw" / "supervisor.py"
    sealed = placed.read_bytes()
    assert sealed.rpartition(contract.SUPERVISOR_SEAL)[2].strip(), "the supervisor is not sealed"
    placed.unlink()
    placed.write_bytes(b"")
    kubectl("delete", "pod", f"{name}-worker-1", "-n", NAMESPACE, "--wait=false")
    deleted_at = time.monotonic()
    status = restarted(kube, shared_dir, name, deleted_at, "in place, worker 1's pod deleted")
    after = uids(kube, name)
    assert after[f"{name}-worker-0"] == before[f"{name}-worker-0"]
    assert after[f"{name}-worker-1"] != before[f"{name}-worker-1"]
    # The pod made again has a name of its attempt (no stale DNS answer for it: builders.
    # member_host); worker 0 kept its own, and its command of attempt 1 reached the new one
    # by the name the control file gave it, or the gang would not have trained again.
    hosts = {p["metadata"]["name"]: p["spec"]["hostname"] for p in kube.pods(NAMESPACE, name)}
    assert hosts == {f"{name}-worker-0": f"{name}-worker-0", f"{name}-worker-1": "worker-1-a1"}, hosts
    assert status["restarts"] == 1 and status["attempt"] == 1
    record = status["history"][0]
    assert record["outcome"] == "Restarted" and record.get("restart") == "InPlace", record
    assert "attempt=1" in logs(name, 1)
    worker_0 = attempt_log(shared_dir, name, 1, "worker-0")
    assert epoch_lines(worker_0)[-1].startswith("epoch=4 "), worker_0[-2000:]
    assert placed.read_bytes() == sealed


@on_this_node
def test_a_template_without_command_restarts_by_re_creating_and_says_why(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """The image's entrypoint cannot be wrapped: RestartInPlace is False with the reason, and
    a worker's death re-creates every pod (the time lost printed beside the in-place one)."""
    name = fresh_name("recreate")
    job = submit(kube, slowed(training_job(name, 4)), name)
    wait_for(
        "RestartInPlace said",
        lambda: condition(kube, name, "RestartInPlace").get("status") == "False",
        timeout=60,
    )
    said = condition(kube, name, "RestartInPlace")
    assert said["reason"] == "TemplateHasNoCommand" and "spec.template has no command" in said["message"]
    running_epoch(shared_dir, name, 1)
    before = uids(kube, name)
    killed_at = kill_worker(job["metadata"]["uid"], 1)
    status = restarted(kube, shared_dir, name, killed_at, "re-created, SIGKILL to worker 1")
    after = uids(kube, name)
    assert not set(after.values()) & set(before.values()), "a pod was kept without the supervisor"
    record = status["history"][0]
    assert record["outcome"] == "Restarted" and record.get("restart") != "InPlace", record


def test_a_hung_gang_s_stacks_are_taken_and_the_chief_s_frame_named(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    """Worker 1 stops training after epoch 2 (its process lives on): before the ProgressStalled
    restart every worker's stacks are written, and the history points at them and names the
    frame the chief waited in."""
    name = fresh_name("hung-stacks")
    manifest = supervised(training_job(name, 4, progressDeadlineSeconds=DEADLINE))
    manifest["spec"]["template"]["spec"]["containers"][0]["args"] += ["--hang-at-epoch=2", "--hang-worker=1"]
    submit(kube, manifest, name)
    running_epoch(shared_dir, name, 2)
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    record = status["history"][0]
    assert (record["attempt"], record["outcome"], record["cause"]) == (0, "Restarted", "ProgressStalled"), (
        record
    )
    print(f"\n{name}: {record.get('stacks')}: {record.get('message')}")
    assert (record.get("stacks") or "").endswith(f"{name}/logs/attempt-0/worker-0.stacks"), record
    folder = shared_dir / NAMESPACE / name / "logs" / "attempt-0"
    chief = (folder / "worker-0.stacks").read_text()
    assert "most recent call first" in chief, chief
    assert (folder / "worker-1.stacks").read_text()
    # The frame named is the chief's own (the trainer's code, not TensorFlow's), and in its dump.
    named = re.search(r"the chief \(worker 0\) was in (\S+) \((\S+):(\d+)\)", record.get("message") or "")
    assert named is not None, record
    function, path, line = named.groups()
    assert "tfmw_trainer" in path, record
    assert f'File "{path}", line {line} in {function}' in chief, (named.group(0), chief[-3000:])
