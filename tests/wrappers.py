"""Test object wrappers: readable builders for jobs and pods, shared by every test layer."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from tfmw_operator.api import API_VERSION, KIND, parse_job
from tfmw_operator.builders import build_pod
from tfmw_operator.observed import format_time

Json = dict[str, Any]
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class JobWrapper:
    def __init__(self, name: str = "mnist", namespace: str = "default", workers: int = 2) -> None:
        self._job: Json = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "generation": 1,
                "creationTimestamp": format_time(T0),
            },
            "spec": {
                "workers": workers,
                "sharedVolume": {"claimName": "tfmw-shared"},
                "runPolicy": {},
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tfmw-trainer:dev"}]}},
            },
        }

    def workers(self, n: int) -> JobWrapper:
        self._job["spec"]["workers"] = n
        return self

    def port(self, port: int) -> JobWrapper:
        self._job["spec"]["port"] = port
        return self

    def run_policy(self, **fields: Any) -> JobWrapper:
        self._job["spec"]["runPolicy"].update(fields)
        return self

    def completion(self, **fields: Any) -> JobWrapper:
        self._job["spec"].setdefault("completion", {}).update(fields)
        return self

    def template(self, template: Json) -> JobWrapper:
        self._job["spec"]["template"] = template
        return self

    def status(self, **fields: Any) -> JobWrapper:
        self._job.setdefault("status", {}).update(fields)
        return self

    def launched(
        self, attempt: int = 0, phase: str = "Pending", started: float = 0, **more: Any
    ) -> JobWrapper:
        """A job whose pods of `attempt` were all created at time `started`."""
        return self.status(
            phase=phase,
            attempt=attempt,
            launchedAttempt=attempt,
            restarts=more.pop("restarts", attempt),
            startTime=format_time(at(started)),
            **more,
        )

    def obj(self) -> Json:
        return copy.deepcopy(self._job)


def job(name: str = "mnist", **kwargs: Any) -> JobWrapper:
    return JobWrapper(name, **kwargs)


class PodWrapper:
    """A worker pod as the API server returns it, built by the operator's own builder."""

    def __init__(self, job_obj: Json, index: int, attempt: int = 0) -> None:
        self._pod = build_pod(parse_job(job_obj), index, attempt)
        self._pod["metadata"]["creationTimestamp"] = format_time(T0)
        self._pod["status"] = {"phase": "Pending"}

    def created(self, seconds: float) -> PodWrapper:
        self._pod["metadata"]["creationTimestamp"] = format_time(at(seconds))
        return self

    def running(self) -> PodWrapper:
        self._pod["status"] = {
            "phase": "Running",
            "containerStatuses": [{"name": "tensorflow", "state": {"running": {}}}],
        }
        return self

    def exited(self, code: int, at_seconds: float = 10, reason: str = "", message: str = "") -> PodWrapper:
        terminated = {"exitCode": code, "finishedAt": format_time(at(at_seconds))}
        if reason:
            terminated["reason"] = reason
        if message:
            terminated["message"] = message
        self._pod["status"] = {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [{"name": "tensorflow", "state": {"terminated": terminated}}],
        }
        return self

    def evicted(self) -> PodWrapper:
        self._pod["status"] = {"phase": "Failed", "reason": "Evicted", "message": "node ran out of memory"}
        return self

    def unschedulable(self, message: str = "0/1 nodes are available: 1 Insufficient cpu.") -> PodWrapper:
        self._pod["status"] = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        }
        return self

    def waiting(self, reason: str, message: str = "") -> PodWrapper:
        self._pod["status"] = {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "tensorflow", "state": {"waiting": {"reason": reason, "message": message}}}
            ],
        }
        return self

    def deleting(self) -> PodWrapper:
        self._pod["metadata"]["deletionTimestamp"] = format_time(T0)
        return self

    def obj(self) -> Json:
        return copy.deepcopy(self._pod)


def pod(job_obj: Json, index: int, attempt: int = 0) -> PodWrapper:
    return PodWrapper(job_obj, index, attempt)
