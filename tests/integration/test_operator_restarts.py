"""The operator killed -9 at random moments of jobs' lives: no duplicate, no orphan, right ending."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kube import ClusterClient, SimulatedKubelet
from operator_process import OperatorProcess
from wrappers import simulated_job, write_marker

JOBS = 16
WORKERS = 3


def test_operator_killed_at_random_points_never_duplicates_or_orphans(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    shared_root: Path,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    namespace = kube.new_namespace("kill")
    operator = operator_process(namespace)
    rng = random.Random(1234)
    kills = 0
    stop = threading.Event()
    violations: list[str] = []

    def killer() -> None:
        nonlocal kills
        while not stop.is_set():
            # Anywhere from the first reconcile to well into the job's life, but only once
            # this start is up: killing it while Python still imports would test nothing.
            operator.wait_started()
            time.sleep(rng.uniform(0.0, 0.8))
            operator.kill()
            kills += 1
            operator.start()

    # Every pod the operator ever created, by (job, attempt, index): more than one uid
    # for a key means a worker was created twice.
    created: dict[tuple[str, str, str], set[str]] = {}

    def monitor() -> None:
        while not stop.is_set():
            by_job: dict[str, set[str]] = {}
            for pod in kube.core.list_namespaced_pod(namespace).items:
                labels = pod.metadata.labels or {}
                job_name, attempt = labels.get("tfmw.dev/job-name", "?"), labels.get("tfmw.dev/attempt", "?")
                by_job.setdefault(job_name, set()).add(attempt)
                key = (job_name, attempt, labels.get("tfmw.dev/replica-index", "?"))
                created.setdefault(key, set()).add(pod.metadata.uid)
            violations.extend(f"{job}: attempts {a}" for job, a in by_job.items() if len(a) > 1)
            time.sleep(0.05)

    threads = [threading.Thread(target=killer, daemon=True), threading.Thread(target=monitor, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        for number in range(JOBS):
            name = f"job{number}"
            job = kube.create_job(
                namespace, simulated_job(name, workers=WORKERS).run_policy(backoffLimit=5).manifest()
            )
            kube.wait_pods(namespace, name, WORKERS, timeout=60)
            kubelet.run_all(namespace, name)
            kube.wait_phase(namespace, name, "Running", timeout=60)
            kubelet.exit(namespace, f"{name}-worker-{number % WORKERS}", 137)
            kube.wait_pods(namespace, name, WORKERS, attempt=1, timeout=60)
            kubelet.run_all(namespace, name)
            kube.wait_phase(namespace, name, "Running", timeout=60)
            write_marker(shared_root / namespace / name, job["metadata"]["uid"])
            status = kube.wait_phase(namespace, name, "Succeeded", timeout=60)
            assert status["restarts"] == 1, f"{name}: {status['restarts']} restarts recorded for one failure"
            assert status["attempt"] == 1
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    print(f"\n{JOBS} jobs of {WORKERS} workers, each with one gang restart, survived {kills} operator kills")
    assert kills >= JOBS // 2, "the operator was not killed often enough to mean something"
    assert not violations, f"pods of two attempts of one job at once: {violations[:5]}"
    duplicates = {key: uids for key, uids in created.items() if len(uids) > 1}
    assert not duplicates, f"workers created more than once: {list(duplicates)[:5]}"
    assert len(created) == JOBS * WORKERS * 2, "every worker of both attempts was seen exactly once"
    kube.delete_namespace(namespace)
