"""Jobs and pods as the API server returns them, for the client's unit tests."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

Json = dict[str, Any]
NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(name: str = "mnist", namespace: str = "default", workers: int = 2, **status: Any) -> Json:
    return copy.deepcopy(
        {
            "apiVersion": "tfmw.dev/v1alpha1",
            "kind": "TFMultiWorkerJob",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "creationTimestamp": ago(300),
            },
            "spec": {
                "workers": workers,
                "sharedVolume": {"claimName": "tfmw-shared"},
                "runPolicy": {"backoffLimit": 3},
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tfmw-trainer:dev"}]}},
            },
            "status": status,
        }
    )


def running(name: str = "mnist", **extra: Any) -> Json:
    return job(
        name,
        phase="Running",
        readyWorkers="2/2",
        attempt=1,
        restarts=1,
        startTime=ago(290),
        progress={
            "attempt": 1,
            "epoch": 7,
            "totalEpochs": 10,
            "percent": 70.0,
            "eta": "4s",
            "epochs": "7/10",
            "summary": "loss=0.0412 accuracy=0.9871",
            "metrics": {"loss": 0.0412, "accuracy": 0.9871},
            "checkpoint": {"epoch": 6, "path": "checkpoints/ckpt-6"},
        },
        conditions=[
            {"type": "Created", "status": "True", "reason": "PodsCreated", "lastTransitionTime": ago(290)},
            {
                "type": "Running",
                "status": "True",
                "reason": "AllWorkersRunning",
                "lastTransitionTime": ago(60),
            },
            {"type": "Stalled", "status": "False", "reason": "WorkersStarted", "lastTransitionTime": ago(60)},
        ],
        history=[
            {
                "attempt": 0,
                "outcome": "Restarted",
                "cause": "OOMKilled",
                "worker": 1,
                "pod": f"{name}-worker-1",
                "node": "tfmw-node",
                "exitCode": 137,
                "message": "worker 1 (pod mnist-worker-1) was OOMKilled",
                "logs": f"default/{name}/logs/attempt-0/worker-1.log",
                "epoch": 5,
                "checkpoint": {"epoch": 4, "path": "checkpoints/ckpt-4"},
                "epochsLost": 1,
            }
        ],
        **extra,
    )


def failed(name: str = "broken") -> Json:
    return job(
        name,
        workers=1,
        phase="Failed",
        reason="WorkerFailed",
        message="worker 0 (pod broken-worker-0) exited with code 1 (Error): cannot open the training data",
        attempt=0,
        restarts=0,
        completionTime=ago(10),
        history=[
            {
                "attempt": 0,
                "outcome": "Failed",
                "cause": "Error",
                "worker": 0,
                "pod": f"{name}-worker-0",
                "container": "tensorflow",
                "exitCode": 1,
                "message": "cannot open the training data",
                "logs": f"default/{name}/logs/attempt-0/worker-0.log",
            }
        ],
    )


def pod(job_name: str, stem: str, attempt: int = 0, role: str | None = None, phase: str = "Running") -> Json:
    kind, index = stem.rsplit("-", 1)
    labels = {
        "tfmw.dev/job-name": job_name,
        "tfmw.dev/replica-index": index,
        "tfmw.dev/attempt": str(attempt),
        "tfmw.dev/role": role or ("chief" if stem == "worker-0" else kind),
    }
    return {
        "metadata": {
            "name": f"{job_name}-{stem}",
            "labels": labels,
            "creationTimestamp": ago(60),
            # As the operator makes them (core/builders.py owner_reference): controlled by the job.
            "ownerReferences": [
                {"kind": "TFMultiWorkerJob", "name": job_name, "uid": f"uid-{job_name}", "controller": True}
            ],
        },
        "spec": {"nodeName": "tfmw-node", "containers": [{"name": "tensorflow"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "tensorflow", "ready": phase == "Running", "state": {"running": {}}}
            ],
        },
    }
