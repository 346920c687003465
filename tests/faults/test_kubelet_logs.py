"""A worker's log under a restarting kubelet (issue 34, item 5): the log of a worker that
exits while its node's kubelet is down is kept on the shared volume, to its last line, once
the kubelet is back; where it cannot be had (the kubelet stays down past the operator's
retries), the file the job's history points to says so and why, and the job goes on."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from faults.conftest import kill_component, processes_with
from faults.test_faults import (
    NAMESPACE,
    TRAINING_TIMEOUT,
    Json,
    Report,
    all_running,
    condition,
    kill_worker,
    manifest,
    node_ready,
    trainer,
)
from kube import ClusterClient, kubectl, wait_for

EXIT_CODE = 137  # the trainer's, once its training process is SIGKILLed (as the OOM killer does)
PEER_LOST_EXIT_CODE = 170  # the trainer's when TensorFlow lost a peer


def started(kube: ClusterClient, name: str, shared_dir: Path) -> tuple[str, Path]:
    """The 2-worker sample training (its template gives no command, so no supervisor streams
    its logs: they are the kubelet's to serve); its uid and its folder."""
    uid: str = kube.create_job(NAMESPACE, manifest(name))["metadata"]["uid"]
    status = kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    supervised = condition(status, "Supervised") or {"reason": "TemplateHasNoCommand"}
    assert supervised["reason"] == "TemplateHasNoCommand", status
    wait_for(
        "worker 1 training",
        lambda: "epoch=" in kubectl("logs", f"{name}-worker-1", check=False).stdout,
        timeout=120,
    )
    return uid, shared_dir / NAMESPACE / name


def exit_worker_1(kube: ClusterClient, uid: str, name: str) -> str:
    """SIGKILL worker 1's training; once its container has ended (seen from this machine,
    not from the kubelet, which may be down), the last line its container printed, from the
    node's own file of the container's output."""
    kill_worker(uid, 1)
    wait_for("worker 1 exited", lambda: not trainer(uid, 1), timeout=30)
    pod = kube.core.read_namespaced_pod(f"{name}-worker-1", NAMESPACE)
    (output,) = Path("/var/log/pods", f"{NAMESPACE}_{name}-worker-1_{pod.metadata.uid}", "tensorflow").glob(
        "*.log"
    )
    # CRI's format: "<time> <stream> <F|P> <text>"; the last full line's text.
    lines = [line.split(" ", 3) for line in output.read_text().splitlines()]
    last = [parts[3] for parts in lines if len(parts) == 4 and parts[2] == "F" and parts[3].strip()][-1]
    assert last, output
    return last


def worker_1_terminated(kube: ClusterClient, name: str) -> datetime | None:
    """When worker 1 finished, once the API server says so (its kubelet reported it)."""
    pod = kube.core.read_namespaced_pod(f"{name}-worker-1", NAMESPACE)
    for container in pod.status.container_statuses or []:
        if container.state.terminated is not None:
            finished: datetime = container.state.terminated.finished_at
            return finished
    return None


def restarted(kube: ClusterClient, name: str) -> Json:
    """The gang restarted once for worker 1's exit, and the next attempt Running (the job goes on).
    The job's phase follows its pods' by one reconcile (CI, stop 50: read at once, it still
    said Restarting), so both are waited for."""

    def running() -> bool:
        return all_running(kube, name, 2, 1) and kube.status(NAMESPACE, name).get("phase") == "Running"

    try:
        wait_for("the new gang running", running, timeout=180, interval=0.5)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{diagnosis(kube, name)}") from None
    status = kube.status(NAMESPACE, name)
    assert status["phase"] == "Running" and status["restarts"] == 1, status
    (record,) = status["history"]
    # Worker 1 was SIGKILLed. Its peer may have noticed first (TensorFlow's peer-loss exit,
    # 170) while the kubelet was down: a kubelet back reports both ends, one pod at a time,
    # and the operator takes the first it is told of.
    cause = (record["attempt"], record["worker"], record["exitCode"])
    assert cause in ((0, 1, EXIT_CODE), (0, 0, PEER_LOST_EXIT_CODE)), record
    return dict(record)


def diagnosis(kube: ClusterClient, name: str) -> str:
    """What the job, its pods and the operator looked like."""
    pods = kubectl("get", "pods", "-l", f"tfmw.dev/job-name={name}", "-o", "wide", check=False).stdout
    events = [(e["reason"], e["message"][:300]) for e in kube.events(NAMESPACE, name)]
    logs = kubectl(
        "-n", "tfmw-system", "logs", "-l", "app.kubernetes.io/name=tfmw-operator", "--tail=40", check=False
    )
    return f"status: {kube.status(NAMESPACE, name)}\npods:\n{pods}\nevents: {events}\n{logs.stdout}"


def kept_log(folder: Path, record: Json, name: str) -> str:
    """Worker 1's log, as it was saved where the history entry points: the attempt's folder."""
    assert record["logs"] == f"{NAMESPACE}/{name}/logs/attempt-0/worker-{record['worker']}.log", record
    saved = folder / "logs" / "attempt-0" / "worker-1.log"
    return wait_for("the log saved", lambda: saved.read_text() if saved.exists() else None, timeout=60)


@pytest.fixture
def kubelet_back(restore_cluster: Callable[[], None], kube: ClusterClient) -> Iterator[Callable[[], None]]:
    """The kubelet started again, and the node Ready: by the test, and after it whatever happened."""

    def back() -> None:
        restore_cluster()
        wait_for("the node Ready", lambda: node_ready(kube), timeout=120, interval=1)

    yield back
    back()


@pytest.mark.parametrize("down_seconds", [3, 20])
def test_a_worker_that_exits_while_the_kubelet_is_down_keeps_its_last_lines(
    kube: ClusterClient,
    fresh_name: Callable[[str], str],
    shared_dir: Path,
    report: Report,
    kubelet_back: Callable[[], None],
    down_seconds: int,
) -> None:
    """The kubelet SIGKILLed, the worker exits, the kubelet back `down_seconds` later: it
    reports the exit only then, the log is read (asked again while the kubelet starts) and
    saved before the pod is deleted. 20 s outlasts the operator's retries counted from the
    worker's end."""
    name = fresh_name("lastwords")
    uid, folder = started(kube, name, shared_dir)
    kill_component("kubelet")
    killed = time.monotonic()
    last = exit_worker_1(kube, uid, name)
    time.sleep(max(0.0, down_seconds - (time.monotonic() - killed)))
    assert worker_1_terminated(kube, name) is None  # no kubelet to report it yet
    kubelet_back()
    back = time.monotonic()
    record = restarted(kube, name)
    log = kept_log(folder, record, name)
    assert log.rstrip("\n").endswith(last) and "epoch=" in log, (last, log[-2000:])
    assert not [e for e in kube.events(NAMESPACE, name) if e["reason"] == "LogNotSaved"]
    report(
        f"kubelet SIGKILLed {down_seconds} s across a worker's exit",
        "log kept to its last line",
        "log kept, restarts=1",
        time.monotonic() - back,
    )


@pytest.fixture
def operators_paused(kube: ClusterClient) -> Iterator[Callable[[bool], None]]:
    """SIGSTOP/SIGCONT every process of the deployed operator's pods (both replicas): an
    operator busy elsewhere for a few seconds, well within its lease's renew deadline."""
    # Only the pods that serve: one of a rollout's old pods may still be terminating, and its
    # processes end under the test (a local run, right after hack/up.sh rolled a new image).
    listed = kube.core.list_namespaced_pod(
        "tfmw-system", label_selector="app.kubernetes.io/name=tfmw-operator"
    )
    pods = [p.metadata.name for p in listed.items if p.metadata.deletion_timestamp is None]
    processes = [pid for pod in pods for pid in processes_with(f"HOSTNAME={pod}")]
    assert processes, f"no operator process for {pods}"

    def pause(stopped: bool) -> None:
        for pid in processes:
            try:
                os.kill(pid, signal.SIGSTOP if stopped else signal.SIGCONT)
            except ProcessLookupError:
                if stopped:
                    raise
                # ended while stopped (its container was killed): nothing left to resume

    yield pause
    pause(False)


def test_a_log_the_kubelet_never_serves_says_why_where_the_history_points(
    kube: ClusterClient,
    fresh_name: Callable[[str], str],
    shared_dir: Path,
    report: Report,
    kubelet_back: Callable[[], None],
    operators_paused: Callable[[bool], None],
) -> None:
    """Worker 1 exits and its kubelet reports it; the kubelet is SIGKILLed before the
    operator (paused those few seconds) reads the log, and stays down past every retry.
    The file the history entry points to says the log could not be read, and why; a Warning
    says so; the pod is deleted all the same and, once the kubelet is back, the job goes on."""
    name = fresh_name("nolog")
    uid, folder = started(kube, name, shared_dir)
    operators_paused(True)
    try:
        last = exit_worker_1(kube, uid, name)
        finished = wait_for("the exit reported", lambda: worker_1_terminated(kube, name), timeout=30)
        kill_component("kubelet")
    finally:
        operators_paused(False)
    resumed = time.monotonic()
    # Down past the operator's retries (1 + 2 + 4 + 4 s from the worker's end), and more.
    while (datetime.now(UTC) - finished).total_seconds() < 11 + 10:
        time.sleep(0.5)
    saved = folder / "logs" / "attempt-0" / "worker-1.log"
    said = wait_for("the absence said", lambda: saved.read_text() if saved.exists() else None, timeout=30)
    kubelet_back()
    record = restarted(kube, name)
    assert kept_log(folder, record, name) == said
    assert said.startswith("[tfmw] the log of container tensorflow of pod") and f"{name}-worker-1" in said
    assert "could not be read: its node's kubelet was not reached" in said, said
    assert last not in said
    warnings = [e["message"] for e in kube.events(NAMESPACE, name) if e["reason"] == "LogNotSaved"]
    assert any(f"{name}-worker-1" in message for message in warnings), warnings
    report(
        "kubelet SIGKILLed after a worker's exit, down 20 s",
        "history's log file says why",
        "absence said, restarts=1",
        time.monotonic() - resumed,
    )
