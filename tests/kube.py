"""Helpers for tests that talk to a real API server: clients, kubectl, waiting, playing the kubelet."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from tfmw_operator.api import GROUP, LABEL_JOB_NAME, PLURAL, VERSION, format_time
from wrappers import SIM_NODE

REPO = Path(__file__).resolve().parent.parent
Json = dict[str, Any]
T = TypeVar("T")


def kubectl(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, input=input, timeout=120, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def pause_deployed_operator() -> None:
    """Tests that run an operator of their own must not share jobs with a deployed one."""
    if kubectl("-n", "tfmw-system", "get", "deployment", "tfmw-operator", check=False).returncode == 0:
        selector = "app.kubernetes.io/name=tfmw-operator"
        kubectl("-n", "tfmw-system", "scale", "deployment", "tfmw-operator", "--replicas=0")
        gone = kubectl(
            "-n", "tfmw-system", "wait", "--for=delete", "pod", "-l", selector, "--timeout=30s", check=False
        )
        if gone.returncode != 0:  # its node is down (a control-plane-only run): no kubelet will confirm
            kubectl("-n", "tfmw-system", "delete", "pod", "-l", selector, "--force", "--grace-period=0")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30, interval: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last saw {last!r}")


def now() -> str:
    return format_time(datetime.now(UTC))


class ClusterClient:
    """The tests' own API client: plain calls, no operator code."""

    def __init__(self, kubeconfig: str | None = None) -> None:
        api_client = config.new_client_from_config(config_file=kubeconfig or os.environ["KUBECONFIG"])
        api_client.configuration.connection_pool_maxsize = 64
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.sanitize = api_client.sanitize_for_serialization

    # ---- namespaces ----

    def new_namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": name}})
        wait_for("default service account", lambda: self._has_default_sa(name), timeout=30)
        return name

    def _has_default_sa(self, namespace: str) -> bool:
        try:
            self.core.read_namespaced_service_account("default", namespace)
        except ApiException:
            return False
        return True

    def delete_namespace(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_namespace(name)

    # ---- jobs ----

    def create_job(self, namespace: str, job: Json) -> Json:
        created: Json = self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job)
        return created

    def get_job(self, namespace: str, name: str) -> Json | None:
        try:
            job: Json = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return job

    def patch_job(self, namespace: str, name: str, patch: Json) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, patch, _content_type="application/merge-patch+json"
        )

    def delete_job(self, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def status(self, namespace: str, name: str) -> Json:
        job = self.get_job(namespace, name) or {}
        status: Json = job.get("status") or {}
        return status

    def wait_phase(self, namespace: str, name: str, phase: str, timeout: float = 30) -> Json:
        def probe() -> Json | None:
            status = self.status(namespace, name)
            return status if status.get("phase") == phase else None

        return wait_for(f"{namespace}/{name} phase {phase}", probe, timeout=timeout)

    # ---- pods ----

    def pods(self, namespace: str, job_name: str) -> list[Json]:
        items = self.core.list_namespaced_pod(namespace, label_selector=f"{LABEL_JOB_NAME}={job_name}").items
        pods: list[Json] = self.sanitize(items)
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def wait_pods(
        self, namespace: str, job_name: str, count: int, attempt: int = 0, timeout: float = 30
    ) -> list[Json]:
        def probe() -> list[Json] | None:
            pods = [
                p
                for p in self.pods(namespace, job_name)
                if p["metadata"]["labels"].get("tfmw.dev/attempt") == str(attempt)
                and not p["metadata"].get("deletionTimestamp")
            ]
            return pods if len(pods) == count else None

        return wait_for(f"{count} pods of {job_name} attempt {attempt}", probe, timeout=timeout)

    def wait_events(self, namespace: str, name: str, reasons: set[str], timeout: float = 10) -> set[str]:
        """Events are posted right after the status they describe; wait for them to land."""

        def probe() -> set[str] | None:
            seen = {e["reason"] for e in self.events(namespace, name)}
            return seen if reasons <= seen else None

        return wait_for(f"events {sorted(reasons)} on {name}", probe, timeout=timeout)

    def events(self, namespace: str, name: str) -> list[Json]:
        items = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=TFMultiWorkerJob"
        ).items
        events: list[Json] = self.sanitize(items)
        return events


class SimulatedKubelet:
    """Plays the kubelet of a node that has none: sets pod phases, finishes deletions.

    Pods are bound to SIM_NODE (a Node object without a kubelet) through the job
    template, so neither a real kubelet nor the scheduler touches them.
    """

    def __init__(self, kube: ClusterClient) -> None:
        self.kube = kube
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._finish_deletions, daemon=True)

    @staticmethod
    def register_node(kube: ClusterClient) -> None:
        try:
            kube.core.create_node({"metadata": {"name": SIM_NODE, "labels": {"tfmw.dev/simulated": "true"}}})
        except ApiException as error:
            if error.status != 409:
                raise

    def start(self) -> SimulatedKubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _finish_deletions(self) -> None:
        """A real kubelet confirms a graceful deletion once the containers stop."""
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self.kube.core.list_pod_for_all_namespaces,
                    field_selector=f"spec.nodeName={SIM_NODE}",
                    timeout_seconds=30,
                )
                for event in stream:
                    pod = event["object"]
                    if self._stop.is_set():
                        return
                    if pod.metadata.deletion_timestamp and event["type"] != "DELETED":
                        self.force_delete(pod.metadata.namespace, pod.metadata.name, pod.metadata.uid)
            except Exception:  # a dropped watch is restarted, as a kubelet would
                time.sleep(0.2)

    def force_delete(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Like a kubelet, finish the deletion of that very pod, never a newer namesake."""
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid} if uid else None}
        try:
            self.kube.core.delete_namespaced_pod(name, namespace, body=options)
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    def _container_status(self, state: Json) -> list[Json]:
        return [
            {
                "name": "tensorflow",
                "image": "tfmw-trainer:dev",
                "imageID": "",
                "ready": "running" in state,
                "restartCount": 0,
                "state": state,
            }
        ]

    def run(self, namespace: str, name: str) -> None:
        started = now()
        self.kube.core.patch_namespaced_pod_status(
            name,
            namespace,
            {
                "status": {
                    "phase": "Running",
                    "startTime": started,
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": self._container_status({"running": {"startedAt": started}}),
                }
            },
        )

    def exit(self, namespace: str, name: str, code: int, message: str = "", reason: str = "") -> None:
        terminated = {
            "exitCode": code,
            "reason": reason or ("Completed" if code == 0 else "Error"),
            "message": message,
            "startedAt": now(),
            "finishedAt": now(),
        }
        self.kube.core.patch_namespaced_pod_status(
            name,
            namespace,
            {
                "status": {
                    "phase": "Succeeded" if code == 0 else "Failed",
                    "containerStatuses": self._container_status({"terminated": terminated}),
                }
            },
        )

    def start_job(self, namespace: str, job: Json) -> Json:
        """Create a job and play the kubelet until all its workers run; the created job."""
        name, workers = job["metadata"]["name"], job["spec"]["workers"]
        created = self.kube.create_job(namespace, job)
        self.kube.wait_pods(namespace, name, workers)
        self.run_all(namespace, name)
        self.kube.wait_phase(namespace, name, "Running")
        return created

    def run_all(self, namespace: str, job_name: str) -> None:
        for pod in self.kube.pods(namespace, job_name):
            if not pod["metadata"].get("deletionTimestamp"):
                self.run(namespace, pod["metadata"]["name"])
