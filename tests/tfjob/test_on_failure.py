"""A TFJob whose workers restart `OnFailure`: a worker's process killed is restarted by the
kubelet inside its pod, under either controller (TFJOB_CONTROLLER), and the job goes on to
Succeeded. The same pods throughout (no gang re-created: docs/tfjob.md, `restartPolicy:
OnFailure`); under tfmw the restart is counted once in tfmw's status (`restarts`, a
`ContainerRestarted` entry in its history with the exit code) and told by an Event. Past
`backoffLimit`, the job is Failed, and under tfmw its pods are deleted (the kubelet would
restart them on).

The program is a shell loop, not TensorFlow: what is under test is the controller's part,
and the kill reaches the container's own process (PID 1 in its container) from this machine,
which runs the local cluster's node."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import Any

from faults.conftest import processes_with
from kube import ClusterClient, wait_for
from tfjob.harness import Controller, TFJobs, describe, log, true_conditions, wait_finished

Json = dict[str, Any]
IMAGE = "tfmw-trainer:dev"
TIMEOUT = 120
STATUS_ANNOTATION = "tfmw.dev/status"


def tfjob(name: str, program: str, backoff: int) -> Json:
    container = {
        "name": "tensorflow",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", program],
        "env": [{"name": "ON_FAILURE_JOB", "value": name}],
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"backoffLimit": backoff, "cleanPodPolicy": "None"},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}},
                }
            },
        },
    }


def processes_of(job: str, pod: str) -> list[int]:
    """The container processes of `pod` on this machine (its node): by the env var the
    template gives and the host name the runtime sets (a pod's name under both controllers)."""
    return processes_with(f"ON_FAILURE_JOB={job}", f"HOSTNAME={pod}")


def kill(job: str, pod: str) -> None:
    """SIGKILL the pod's container processes; one that ended between the look and the signal
    is not one killed, and they are looked for again until one is."""

    def killed() -> int:
        count = 0
        for pid in processes_of(job, pod):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                count += 1
        return count

    wait_for(f"{pod}'s process killed", killed, timeout=60, interval=0.2)


def pod_uids(jobs: TFJobs, name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in jobs.pods(name)}


def restart_count(jobs: TFJobs, name: str, pod: str) -> int:
    for found in jobs.pods(name):
        if found["metadata"]["name"] == pod:
            statuses = found.get("status", {}).get("containerStatuses") or []
            return sum(int(s.get("restartCount") or 0) for s in statuses)
    return 0


def tfmw_status(job: Json) -> Json:
    raw = (job.get("metadata", {}).get("annotations") or {}).get(STATUS_ANNOTATION)
    status: Json = json.loads(raw) if raw else {}
    return status


def test_a_killed_worker_is_restarted_in_its_pod_and_the_job_succeeds(
    kube: ClusterClient, namespace: str, controller: Controller, controller_name: str
) -> None:
    jobs = TFJobs(kube, namespace)
    name = "on-failure"
    # Each container instance sleeps 12 s and exits 0: worker 1's restarted one ends after the chief.
    jobs.create(tfjob(name, "sleep 12", backoff=3))
    try:
        pod = f"{name}-worker-1"
        wait_for(f"{pod} running", lambda: processes_of(name, pod) or None, timeout=TIMEOUT, interval=0.5)
        before = pod_uids(jobs, name)
        kill(name, pod)
        killed = time.monotonic()
        wait_for(
            f"{pod} restarted", lambda: restart_count(jobs, name, pod) >= 1, timeout=TIMEOUT, interval=0.2
        )
        log(f"{controller_name}: {pod} restarted in its pod {time.monotonic() - killed:.1f}s after the kill")
        finished = wait_finished(jobs, name, TIMEOUT, controller.check_alive)
        assert "Succeeded" in true_conditions(finished), describe(jobs, name)
        assert pod_uids(jobs, name) == before, "the pods were made again"
        if controller_name == "tfmw":
            status = tfmw_status(finished)
            assert status.get("restarts") == 1, status
            record = status["history"][0]
            assert (record["outcome"], record["worker"], record["exitCode"]) == ("ContainerRestarted", 1, 137)
            told = [e for e in jobs.events(name) if e.get("reason") == "ContainerRestarted"]
            assert len(told) == 1 and pod in told[0]["message"], told
    finally:
        jobs.delete_and_wait(name)


def test_past_backoff_limit_the_job_fails(
    kube: ClusterClient, namespace: str, controller: Controller, controller_name: str
) -> None:
    """Both controllers fail it; tfmw also deletes its pods, which under cleanPodPolicy None
    Kubeflow leaves to crash-loop (tfmw's deviation, docs/tfjob.md)."""
    jobs = TFJobs(kube, namespace)
    name = "on-failure-limit"
    jobs.create(tfjob(name, f'if [ "$HOSTNAME" = {name}-worker-1 ]; then exit 3; fi; sleep 100', backoff=1))
    try:
        finished = wait_finished(jobs, name, TIMEOUT, controller.check_alive)
        assert "Failed" in true_conditions(finished), describe(jobs, name)
        if controller_name == "tfmw":
            failed = next(c for c in finished["status"]["conditions"] if c["type"] == "Failed")
            assert "backoffLimit 1 reached" in failed["message"], failed
            assert tfmw_status(finished).get("restarts") == 1
            wait_for(f"{name}'s pods gone", lambda: not jobs.pods(name), timeout=60, interval=0.5)
    finally:
        jobs.delete_and_wait(name)
