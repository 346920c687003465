"""Faults on the local cluster: each ends in a terminal or clearly explained state, with
nothing lost, no duplicate or orphan pod, and no other job touched."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from faults.conftest import kill_component, processes_with, stop_component
from kube import REPO, ClusterClient, kubectl, wait_for
from kubernetes import client

Json = dict[str, Any]
NAMESPACE = "default"
Report = Callable[[str, str, str, float], None]
TRAINING_TIMEOUT = 600
WORKER_UID = 1000  # the samples' runAsUser


def manifest(name: str, epochs: int = 100_000, workers: int = 2, **run_policy: Any) -> Json:
    """The 2-worker sample; by default it trains until the test ends it."""
    job: Json = yaml.safe_load((REPO / "deploy" / "samples" / "mnist-2-workers.yaml").read_text())
    job["metadata"]["name"] = name
    job["spec"]["workers"] = workers
    job["spec"]["runPolicy"].update(run_policy)
    job["spec"]["template"]["spec"]["containers"][0]["args"] = [f"--epochs={epochs}", "--steps-per-epoch=4"]
    return job


def condition(status: Json, kind: str) -> Json | None:
    return next(
        (c for c in status.get("conditions", []) if c["type"] == kind and c["status"] == "True"), None
    )


def status_with(kube: ClusterClient, namespace: str, name: str, kind: str) -> Json | None:
    """The job's status once its condition `kind` is True."""
    status = kube.status(namespace, name)
    return status if condition(status, kind) else None


def finished(kube: ClusterClient, name: str) -> Json | None:
    status = kube.status(NAMESPACE, name)
    return status if status.get("phase") in ("Succeeded", "Failed") else None


def wait_finished(kube: ClusterClient, name: str, timeout: float = TRAINING_TIMEOUT) -> Json:
    """The job's final status; on a timeout, what the job and the operator looked like."""
    try:
        return wait_for(f"{name} finished", lambda: finished(kube, name), timeout=timeout, interval=0.5)
    except AssertionError as error:
        operators = kubectl("-n", "tfmw-system", "get", "pods", "-o", "wide", check=False).stdout
        logs = kubectl(
            "-n",
            "tfmw-system",
            "logs",
            "-l",
            "app.kubernetes.io/name=tfmw-operator",
            "--tail=30",
            check=False,
        )
        pods = kubectl("get", "pods", "-l", f"tfmw.dev/job-name={name}", "-o", "wide", check=False).stdout
        raise AssertionError(
            f"{error}\nstatus: {kube.status(NAMESPACE, name)}\npods:\n{pods}\noperators:\n{operators}\n{logs.stdout}"
        ) from None


def all_running(kube: ClusterClient, name: str, workers: int, attempt: int) -> bool:
    pods = [
        p
        for p in kube.pods(NAMESPACE, name)
        if p["metadata"]["labels"]["tfmw.dev/attempt"] == str(attempt)
        and not p["metadata"].get("deletionTimestamp")
    ]
    return len(pods) == workers and all(p["status"].get("phase") == "Running" for p in pods)


def trainer(uid: str, index: int) -> list[int]:
    return processes_with(f"TFMW_JOB_UID={uid}", f"TFMW_WORKER_INDEX={index}")


def kill_worker(uid: str, index: int) -> None:
    """SIGKILL a worker's training process, the way the OOM killer does."""
    pids = wait_for(f"worker {index} process", lambda: trainer(uid, index), timeout=60)
    # The trainer trains in a child of the container's PID 1: kill the one whose parent is
    # also the trainer, as the OOM killer would pick the big one.
    (child,) = [pid for pid in pids if parent_of(pid) in pids]
    os.kill(child, signal.SIGKILL)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class PodLedger:
    """Every pod seen of some jobs: one uid per (job, attempt, index), never two attempts at once."""

    def __init__(self, kube: ClusterClient, names: list[str]) -> None:
        self.kube, self.names = kube, names
        self.uids: dict[tuple[str, str, str], set[str]] = {}
        self.overlaps: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> PodLedger:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                for name in self.names:
                    attempts = set()
                    for pod in self.kube.pods(NAMESPACE, name):
                        labels = pod["metadata"]["labels"]
                        attempts.add(labels["tfmw.dev/attempt"])
                        key = (name, labels["tfmw.dev/attempt"], labels["tfmw.dev/replica-index"])
                        self.uids.setdefault(key, set()).add(pod["metadata"]["uid"])
                    if len(attempts) > 1:
                        self.overlaps.append(f"{name}: {sorted(attempts)}")
            except Exception:  # the API server may be down on purpose
                pass
            time.sleep(0.2)

    def assert_clean(self) -> None:
        duplicates = {k: v for k, v in self.uids.items() if len(v) > 1}
        assert not duplicates, f"workers created twice: {duplicates}"
        assert not self.overlaps, f"two attempts at once: {self.overlaps[:3]}"


@pytest.fixture
def operator_pods(kube: ClusterClient) -> Iterator[None]:
    """Both operator replicas up before a fault, and after it."""
    kubectl("-n", "tfmw-system", "rollout", "status", "deployment/tfmw-operator", "--timeout=180s")
    yield
    kubectl("-n", "tfmw-system", "rollout", "status", "deployment/tfmw-operator", "--timeout=180s")


def test_worker_death_restarts_the_whole_gang(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report
) -> None:
    name = fresh_name("death")
    job = kube.create_job(NAMESPACE, manifest(name))
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    with PodLedger(kube, [name]) as ledger:
        killed = time.monotonic()
        kill_worker(job["metadata"]["uid"], 1)
        wait_for("the new gang running", lambda: all_running(kube, name, 2, 1), timeout=120, interval=0.1)
        seconds = time.monotonic() - killed
    status = kube.status(NAMESPACE, name)
    (restart,) = [e for e in kube.events(NAMESPACE, name) if e["reason"] == "GangRestart"]
    assert status["restarts"] == 1 and "worker 1" in restart["message"] and "137" in restart["message"]
    ledger.assert_clean()
    report(
        "worker SIGKILLed mid-training",
        "gang restart, new gang Running",
        f"Running, restarts={status['restarts']}",
        seconds,
    )


def leader(kube: ClusterClient) -> str:
    """The lease holder's identity: `<pod name>-<random>`, new for every start of a process."""
    lease = client.CoordinationV1Api(kube.api_client).read_namespaced_lease("tfmw-operator", "tfmw-system")
    identity: str = lease.spec.holder_identity or ""
    return identity


def pod_of(identity: str) -> str:
    return identity.rsplit("-", 1)[0]


def new_leader(kube: ClusterClient, old: str) -> str | None:
    """A leader other than the killed process: the standby, or the killed pod restarted."""
    identity = leader(kube)
    return identity if identity and identity != old else None


def test_operator_leader_killed_during_a_gang_restart(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report, operator_pods: None
) -> None:
    name = fresh_name("leader")
    job = kube.create_job(NAMESPACE, manifest(name))
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    old_leader = wait_for("a leader", lambda: leader(kube), timeout=30)
    with PodLedger(kube, [name]) as ledger:
        kill_worker(job["metadata"]["uid"], 0)
        wait_for(
            "the gang restart begun", lambda: kube.status(NAMESPACE, name).get("restarts") == 1, timeout=60
        )
        operators = processes_with(f"HOSTNAME={pod_of(old_leader)}")
        assert operators, f"no operator process for {old_leader}"
        killed = time.monotonic()
        for pid in operators:
            os.kill(pid, signal.SIGKILL)
        successor = wait_for("a new leader", lambda: new_leader(kube, old_leader), timeout=90)
        takeover = time.monotonic() - killed
        wait_for("the new gang running", lambda: all_running(kube, name, 2, 1), timeout=180)
    status = kube.status(NAMESPACE, name)
    assert status["restarts"] == 1 and status["attempt"] == 1, status
    ledger.assert_clean()
    report(
        "operator leader SIGKILLed in a gang restart",
        "standby leads, one restart",
        f"{'standby' if pod_of(successor) != pod_of(old_leader) else 'restarted pod'} leads, restarts={status['restarts']}",
        takeover,
    )


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_control_plane_component_killed_and_restarted_mid_job(
    kube: ClusterClient,
    fresh_name: Callable[[str], str],
    report: Report,
    restore_cluster: Callable[[], None],
    component: str,
) -> None:
    name = fresh_name(component.replace("kube-", ""))
    kube.create_job(NAMESPACE, manifest(name, epochs=300))
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    with PodLedger(kube, [name]) as ledger:
        kill_component(component)
        time.sleep(3)
        restore_cluster()
        back = time.monotonic()
        status = wait_finished(kube, name)
    ledger.assert_clean()
    assert status["phase"] == "Succeeded" and status["restarts"] == 0, status
    report(
        f"{component} SIGKILLed, restarted",
        "job goes on to Succeeded",
        "Succeeded, restarts=0",
        time.monotonic() - back,
    )


def test_kubelet_stopped_then_started_mid_job(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report, restore_cluster: Callable[[], None]
) -> None:
    name = fresh_name("kubelet")
    kube.create_job(NAMESPACE, manifest(name))
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    with PodLedger(kube, [name]) as ledger:
        stop_component("kubelet")
        wait_for("the node NotReady", lambda: not node_ready(kube), timeout=120, interval=1)
        during = kube.status(NAMESPACE, name)
        restore_cluster()
        back = time.monotonic()
        wait_for("the node Ready", lambda: node_ready(kube), timeout=120, interval=1)
        status = wait_for("all workers Ready again", lambda: all_ready(kube, name), timeout=120)
        seconds = time.monotonic() - back
    ledger.assert_clean()
    # The containers ran on while no kubelet watched them: nothing to restart.
    assert during["phase"] == "Running" and status["restarts"] == 0, (during, status)
    report(
        "kubelet stopped (node NotReady), started",
        "job stays Running, no restart",
        f"{during['phase']} while down, 2/2 Ready",
        seconds,
    )


def node_ready(kube: ClusterClient) -> bool:
    node = kube.core.read_node("tfmw-node")
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def all_ready(kube: ClusterClient, name: str) -> Json | None:
    status = kube.status(NAMESPACE, name)
    return status if status.get("phase") == "Running" and status.get("readyWorkers") == "2/2" else None


def test_a_fifo_at_the_marker_path_is_a_storage_error_not_a_hang(
    kube: ClusterClient, fresh_name: Callable[[str], str], shared_dir: Path, report: Report
) -> None:
    hostile, bystander = fresh_name("fifo"), fresh_name("bystander")
    kube.create_job(NAMESPACE, manifest(hostile, activeDeadlineSeconds=60))
    kube.wait_phase(NAMESPACE, hostile, "Running", timeout=TRAINING_TIMEOUT)
    os.mkfifo(shared_dir / NAMESPACE / hostile / "multiworker-complete.txt")
    planted = time.monotonic()
    status = wait_for(
        "StorageError",
        lambda: status_with(kube, NAMESPACE, hostile, "StorageError"),
        timeout=30,
    )
    seconds = time.monotonic() - planted
    assert "not a regular file" in condition(status, "StorageError")["message"]  # type: ignore[index]
    # The operator is not stuck: another job trains to the end meanwhile.
    kube.create_job(NAMESPACE, manifest(bystander, epochs=2))
    kube.wait_phase(NAMESPACE, bystander, "Succeeded", timeout=TRAINING_TIMEOUT)
    final = kube.wait_phase(NAMESPACE, hostile, "Failed", timeout=180)
    assert final["reason"] == "DeadlineExceeded"
    report(
        "FIFO at the marker path",
        "StorageError, then the deadline",
        f"StorageError, {final['reason']}",
        seconds,
    )


def test_a_symlink_planted_by_a_worker_never_reaches_another_job(
    kube: ClusterClient, fresh_name: Callable[[str], str], shared_dir: Path, report: Report
) -> None:
    attacker, victim = fresh_name("attacker"), fresh_name("victim")
    attacking = kube.create_job(NAMESPACE, manifest(attacker))
    kube.create_job(NAMESPACE, manifest(victim))
    kube.wait_phase(NAMESPACE, attacker, "Running", timeout=TRAINING_TIMEOUT)
    kube.wait_phase(NAMESPACE, victim, "Running", timeout=TRAINING_TIMEOUT)
    # What a worker of `attacker` can do in its own folder: plant links to its neighbour.
    logs = shared_dir / NAMESPACE / attacker / "logs" / "attempt-0"
    logs.mkdir(parents=True, exist_ok=True)
    target = shared_dir / NAMESPACE / victim / "multiworker-complete.txt"
    for index in (0, 1):
        (logs / f"worker-{index}.log").symlink_to(f"../../../{victim}/multiworker-complete.txt")
    for path in (logs.parent, logs, *logs.iterdir()):  # made by the worker's user, as a worker would
        os.chown(path, WORKER_UID, WORKER_UID, follow_symlinks=False)
    wait_for(
        "worker 1 training", lambda: "epoch=" in kubectl("logs", f"{attacker}-worker-1").stdout, timeout=120
    )
    started = time.monotonic()
    kill_worker(attacking["metadata"]["uid"], 1)  # a gang restart makes the operator save logs
    wait_for("the attacker's new gang", lambda: all_running(kube, attacker, 2, 1), timeout=120)
    seconds = time.monotonic() - started
    assert not target.exists(), "the operator wrote through a planted link into another job's folder"
    archived = logs / "worker-1.log"
    assert not archived.is_symlink() and "epoch=" in archived.read_text(), "the log was not saved in place"
    assert kube.status(NAMESPACE, victim)["phase"] == "Running"
    report(
        "worker plants symlinks to another job",
        "links replaced, neighbour untouched",
        "neighbour Running",
        seconds,
    )


def test_a_template_the_api_server_refuses_fails_the_job_naming_the_field(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report
) -> None:
    # Valid for the CRD's schema, refused by the API server's pod validation: a mount of a
    # volume the template does not declare.
    name = fresh_name("badmount")
    job = manifest(name)
    job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"}
    ]
    created = time.monotonic()
    kube.create_job(NAMESPACE, job)
    status = kube.wait_phase(NAMESPACE, name, "Failed", timeout=60)
    assert status["reason"] == "InvalidTemplate" and "volumeMounts[0].name" in status["message"], status
    assert not kube.pods(NAMESPACE, name)
    report(
        "pod template the API refuses (422)",
        "Failed InvalidTemplate",
        f"Failed {status['reason']}",
        time.monotonic() - created,
    )


def test_pod_creation_refused_by_quota_is_stalled_with_the_api_message(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report
) -> None:
    name = fresh_name("quota")
    namespace = kube.new_namespace("faults-quota")
    try:
        kube.core.create_namespaced_resource_quota(
            namespace, {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}}
        )
        created = time.monotonic()
        kube.create_job(namespace, manifest(name))

        def stalled() -> Json | None:
            status = kube.status(namespace, name)
            found = condition(status, "Stalled")
            return found if found and found["reason"] == "PodCreationRefused" else None

        found = wait_for("Stalled PodCreationRefused", stalled, timeout=60)
        assert "exceeded quota" in found["message"], found
        assert len(kube.pods(namespace, name)) == 1  # slow start: no request storm
        report(
            "pod quota exhausted (403)",
            "Stalled PodCreationRefused",
            "Stalled, 1 of 2 pods",
            time.monotonic() - created,
        )
    finally:
        kube.delete_namespace(namespace)


def test_a_job_recreated_under_its_name_waits_for_its_predecessor(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report
) -> None:
    name = fresh_name("again")
    first = manifest(name)
    spec = first["spec"]["template"]["spec"]
    spec["terminationGracePeriodSeconds"] = 15
    # A sidecar that ignores SIGTERM keeps the old pods terminating for their grace period.
    spec["containers"].append(
        {
            "name": "stubborn",
            "image": "tfmw-trainer:dev",
            "imagePullPolicy": "IfNotPresent",
            "command": [
                "python3",
                "-c",
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1e6)",
            ],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    )
    old = kube.create_job(NAMESPACE, first)
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    kube.delete_job(NAMESPACE, name)
    wait_for("the old job gone", lambda: kube.get_job(NAMESPACE, name) is None, timeout=30)
    recreated = time.monotonic()
    new = kube.create_job(NAMESPACE, manifest(name, epochs=2))
    waiting = wait_for(
        "NameInUse",
        lambda: status_with(kube, NAMESPACE, name, "Stalled"),
        timeout=30,
    )
    assert condition(waiting, "Stalled")["reason"] == "NameInUse"  # type: ignore[index]
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    seconds = time.monotonic() - recreated
    assert status["restarts"] == 0, status
    service = kube.core.read_namespaced_service(name, NAMESPACE)
    assert service.metadata.owner_references[0].uid == new["metadata"]["uid"] != old["metadata"]["uid"]
    report(
        "job re-created while its namesake terminates",
        "waits (NameInUse), then Succeeded",
        "Succeeded, own Service",
        seconds,
    )


# A chief that writes what a user's program might: a progress document from the far future
# (and its file's mtime too), then, a moment later, its marker.
FAR_FUTURE_CHIEF = """
import json, os, time
folder = os.environ["TFMW_SHARED_DIR"]
if os.environ["TFMW_WORKER_INDEX"] == "0":
    progress = os.path.join(folder, "progress.json")
    for stamp in ("9999-12-31T23:59:50Z", "9999-12-31T23:59:59Z"):
        with open(progress, "w") as f:
            json.dump({"epoch": 1, "totalEpochs": 4, "updatedAt": stamp}, f)
        time.sleep(12)
    os.utime(progress, (2**34, 2**34))  # a far-ahead mtime, and no updatedAt
    with open(progress, "w") as f:
        json.dump({"epoch": 2, "totalEpochs": 4}, f)
    os.utime(progress, (2**34, 2**34))
    time.sleep(12)
    with open(os.environ["TFMW_MARKER_PATH"], "w") as f:
        json.dump({"jobUid": os.environ["TFMW_JOB_UID"]}, f)
time.sleep(3600)
"""


def test_a_progress_document_from_year_9999_is_refused_and_the_marker_still_ends_the_job(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report
) -> None:
    name = fresh_name("future")
    job = manifest(name)
    main = job["spec"]["template"]["spec"]["containers"][0]
    main["command"], main["args"] = ["python3", "-c", FAR_FUTURE_CHIEF], []
    kube.create_job(NAMESPACE, job)
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    started = time.monotonic()
    refused = wait_for(
        "the progress refused",
        lambda: (
            kube.status(NAMESPACE, name)
            if "ahead of" in str(kube.status(NAMESPACE, name).get("progress"))
            else None
        ),
        timeout=30,
    )
    assert condition(refused, "ReconcileError") is None
    final = wait_finished(kube, name, timeout=120)
    assert final["phase"] == "Succeeded", final
    report(
        "progress dated 9999-12-31",
        "refused, then Succeeded",
        f"refused, {final['phase']}",
        time.monotonic() - started,
    )


def test_a_quota_that_refuses_the_service_stalls_the_job_without_pods(
    kube: ClusterClient, fresh_name: Callable[[str], str], report: Report
) -> None:
    name = fresh_name("nosvc")
    namespace = kube.new_namespace("faults-services")
    try:
        kube.core.create_namespaced_resource_quota(
            namespace, {"metadata": {"name": "no-services"}, "spec": {"hard": {"services": "0"}}}
        )
        wait_for(
            "the quota to count",
            lambda: kube.core.read_namespaced_resource_quota("no-services", namespace).status.hard,
        )
        created = time.monotonic()
        kube.create_job(namespace, manifest(name))
        found = wait_for(
            "Stalled ServiceCreationRefused",
            lambda: (
                (c := condition(kube.status(namespace, name), "Stalled"))
                and c["reason"] == "ServiceCreationRefused"
                and c
            ),
            timeout=60,
        )
        assert "exceeded quota" in found["message"], found
        assert kube.status(namespace, name)["phase"] == "Pending" and kube.pods(namespace, name) == []
        report(
            "services=0 quota (403 on the Service)",
            "Stalled, no pods",
            "Stalled, 0 pods",
            time.monotonic() - created,
        )
    finally:
        kube.delete_namespace(namespace)
