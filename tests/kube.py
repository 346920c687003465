"""Helpers for tests that talk to a real API server: clients, kubectl, waiting, playing the kubelet."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from tfmw_operator.api.names import GROUP, LABEL_JOB_NAME, PLURAL, VERSION
from tfmw_operator.api.times import format_time
from watching import follow
from wrappers import SIM_NODE

REPO = Path(__file__).resolve().parent.parent
# The local cluster and the node's shared folder, where the Makefile and hack/lib.sh put them.
CLUSTER_DIR = Path(os.environ.get("TFMW_CLUSTER_DIR") or REPO / ".cluster")
SHARED_DIR = Path(os.environ.get("TFMW_SHARED_DIR") or "/var/lib/tfmw/shared")
LOCAL_KUBECONFIG = str(CLUSTER_DIR / "kubeconfig")
Json = dict[str, Any]
T = TypeVar("T")


def trainer_pids(job_uid: str, index: int) -> list[int]:
    """On this node, the processes of worker `index`'s trainer (`python3 -m tfmw_trainer`): the
    trainer and the training process it forks. Not its supervisor, and not a warm standby
    still waiting for its attempt (the supervisor's child, with no child of its own): a
    standby that became the trainer runs `python3 -c ... -m tfmw_trainer`, and its training
    process is its child."""
    found: dict[int, int] = {}  # pid -> parent pid
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = environ.read_bytes().split(b"\0")
            cmdline = (environ.parent / "cmdline").read_bytes().split(b"\0")
            parent = int((environ.parent / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        ours = f"TFMW_JOB_UID={job_uid}".encode() in env and f"TFMW_WORKER_INDEX={index}".encode() in env
        if ours and b"tfmw_trainer" in cmdline and cmdline[1:2] != [b"-I"]:
            found[int(environ.parent.name)] = parent
    return sorted(pid for pid, parent in found.items() if parent in found or pid in found.values())


def kubectl(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, input=input, timeout=120, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def pause_deployed_operator() -> Callable[[], None]:
    """Tests that run an operator of their own must not share jobs with a deployed one.

    Returns what puts the deployed operator back as it was.
    """
    found = kubectl("-n", "tfmw-system", "get", "deployment", "tfmw-operator", "-o", "json", check=False)
    if found.returncode != 0:
        return lambda: None
    replicas = int(json.loads(found.stdout)["spec"].get("replicas", 1))
    selector = "app.kubernetes.io/name=tfmw-operator"
    kubectl("-n", "tfmw-system", "scale", "deployment", "tfmw-operator", "--replicas=0")
    gone = kubectl(
        "-n", "tfmw-system", "wait", "--for=delete", "pod", "-l", selector, "--timeout=30s", check=False
    )
    if gone.returncode != 0:  # its node is down (a control-plane-only run): no kubelet will confirm
        kubectl("-n", "tfmw-system", "delete", "pod", "-l", selector, "--force", "--grace-period=0")

    def resume() -> None:
        kubectl("-n", "tfmw-system", "scale", "deployment", "tfmw-operator", f"--replicas={replicas}")

    return resume


@contextlib.contextmanager
def applied(*paths: Path) -> Iterator[None]:
    """Apply manifests for the tests; afterwards put back each object as it was, or remove it."""
    before: list[tuple[Path, str | None]] = []
    for path in paths:
        found = kubectl("get", "-f", str(path), "-o", "yaml", check=False)
        before.append((path, found.stdout if found.returncode == 0 else None))
        # Server-side: the CRD is too large for client-side apply's annotation.
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    try:
        yield
    finally:
        for path, saved in reversed(before):
            if saved is None:
                kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait=false", check=False)
            else:
                restored = yaml.safe_load(saved)
                for item in restored.get("items", [restored]):
                    for field in (
                        "resourceVersion",
                        "managedFields",
                        "uid",
                        "creationTimestamp",
                        "generation",
                    ):
                        item["metadata"].pop(field, None)
                    item.pop("status", None)
                kubectl(
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "-f",
                    "-",
                    input=yaml.safe_dump(restored),
                    check=False,
                )


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
        self.apiext = client.ApiextensionsV1Api(api_client)
        self.sanitize = api_client.sanitize_for_serialization
        self.created_namespaces: list[str] = []

    # ---- namespaces ----

    def new_namespace(self, prefix: str, pod_security: str | None = None) -> str:
        """A namespace of the test's own, enforcing the Pod Security level given (a bench's
        namespace is walled, as every namespace a team runs jobs in); the session deletes it at
        the end in any case."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        labels = {} if pod_security is None else {"pod-security.kubernetes.io/enforce": pod_security}
        self.core.create_namespace({"metadata": {"name": name, "labels": labels}})
        self.created_namespaces.append(name)
        wait_for("default service account", lambda: self._has_default_sa(name), timeout=30)
        return name

    def _has_default_sa(self, namespace: str) -> bool:
        try:
            self.core.read_namespaced_service_account("default", namespace)
        except ApiException:
            return False
        return True

    def create_crd(self, crd: Json) -> bool:
        """Create a CRD through the API (Kubeflow's TFJob CRD, 600 KB, is more than client-side
        apply can record) and wait until it serves; True if this call created it (and the
        caller should remove it), False if it was there."""
        try:
            self.apiext.create_custom_resource_definition(crd)
            created = True
        except ApiException as error:
            if error.status != 409:
                raise
            created = False
        name = crd["metadata"]["name"]
        wait_for(
            f"the CRD {name} to serve",
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in (self.apiext.read_custom_resource_definition(name).status.conditions or [])
            ),
            timeout=60,
        )
        return created

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
        seen: list[Json] = [{}]

        def probe() -> Json | None:
            seen[0] = status = self.status(namespace, name)
            return status if status.get("phase") == phase else None

        try:
            return wait_for(f"{namespace}/{name} phase {phase}", probe, timeout=timeout)
        except AssertionError as error:  # what the job said instead: its phase, reason, conditions
            raise AssertionError(f"{error}; its status then: {json.dumps(seen[0])[:3000]}") from None

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


GRACE_CAP_SECONDS = 1.0
# Deletions confirmed at once, at most: a burst of thousands (the scale bench's) is sent by
# these few threads, not a thread each.
CONFIRMING_AT_ONCE = 8


class SimulatedKubelet:
    """Plays the kubelet of a node that has none: sets pod phases, finishes deletions.

    Pods are bound to SIM_NODE (a Node object without a kubelet) through the job
    template, so neither a real kubelet nor the scheduler touches them. Like a real
    kubelet it takes its time to confirm a graceful deletion (the pod's grace period,
    capped at GRACE_CAP_SECONDS so tests stay quick), and it fills a container's
    termination message only as the real one would: from the log's tail, on an error,
    when the container asks for `FallbackToLogsOnError`.
    """

    def __init__(
        self,
        kube: ClusterClient,
        grace_cap_seconds: float = GRACE_CAP_SECONDS,
        confirming_at_once: int = CONFIRMING_AT_ONCE,
    ) -> None:
        self.kube = kube
        self.grace_cap_seconds = grace_cap_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._finish_deletions, daemon=True)
        self._confirming: set[str] = set()
        self._lock = threading.Lock()
        self._senders = ThreadPoolExecutor(confirming_at_once, thread_name_prefix="kubelet-delete")
        self.deletions_sent = 0  # DELETE requests of confirmations: not the operator's

    @staticmethod
    def register_node(kube: ClusterClient) -> None:
        try:
            kube.core.create_node({"metadata": {"name": SIM_NODE, "labels": {"tfmw.dev/simulated": "true"}}})
        except ApiException as error:
            if error.status != 409:
                raise

    @staticmethod
    def remove_node(kube: ClusterClient) -> None:
        """The node and every pod still bound to it: nothing of the simulation stays behind."""
        for pod in kube.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={SIM_NODE}").items:
            with contextlib.suppress(ApiException):
                kube.core.delete_namespaced_pod(
                    pod.metadata.name, pod.metadata.namespace, body={"gracePeriodSeconds": 0}
                )
        with contextlib.suppress(ApiException):
            kube.core.delete_node(SIM_NODE)

    def start(self) -> SimulatedKubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._senders.shutdown(wait=False, cancel_futures=True)

    def _finish_deletions(self) -> None:
        """A real kubelet confirms a graceful deletion once the containers stop."""
        follow(
            self.kube.core.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={SIM_NODE}",
            on_event=self.confirm_later,
            stop=self._stop,
        )

    def confirm_later(self, kind: str, pod: Json) -> None:
        """A watch event of a pod this kubelet plays: a graceful deletion is confirmed after
        the grace period (capped), once per pod, by UID. Fed by this kubelet's own watch
        of SIM_NODE, or by the caller's (the scale bench's, for kwok's nodes)."""
        meta = pod["metadata"]
        if kind == "DELETED" or not meta.get("deletionTimestamp"):
            return
        uid = meta["uid"]
        with self._lock:
            if uid in self._confirming:
                return
            self._confirming.add(uid)
        grace = min(float(meta.get("deletionGracePeriodSeconds") or 0), self.grace_cap_seconds)
        send = (meta["namespace"], meta["name"], uid)
        if grace <= 0:
            self._send(*send)
            return
        timer = threading.Timer(grace, self._send, send)
        timer.daemon = True
        timer.start()

    def _send(self, namespace: str, name: str, uid: str) -> None:
        with contextlib.suppress(RuntimeError):  # stopped: the deletion is no longer ours to finish
            self._senders.submit(self._confirm, namespace, name, uid)

    def _confirm(self, namespace: str, name: str, uid: str) -> None:
        # By UID, so trying again can never hit a newer namesake.
        for attempt in range(3):
            with self._lock:
                self.deletions_sent += 1
            try:
                self.force_delete(namespace, name, uid)
                return
            except Exception as error:  # a pool thread's error is otherwise silent
                print(f"simulated kubelet: deleting {namespace}/{name} failed (try {attempt + 1}): {error}")
                time.sleep(1)

    def force_delete(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Like a kubelet, finish the deletion of that very pod, never a newer namesake."""
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid} if uid else None}
        try:
            self.kube.core.delete_namespaced_pod(name, namespace, body=options)
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    def _statuses(self, pod: Json, changes: dict[str, Json]) -> list[Json]:
        """Container statuses for every container: `changes`, else as they were, else running."""
        started = now()
        current = {c["name"]: c["state"] for c in (pod.get("status") or {}).get("containerStatuses") or []}
        states = {**current, **changes}
        return [
            {
                "name": container["name"],
                "image": container.get("image", ""),
                "imageID": "",
                "ready": "running" in states.get(container["name"], {"running": {}}),
                "restartCount": 0,
                "state": states.get(container["name"], {"running": {"startedAt": started}}),
            }
            for container in pod["spec"]["containers"]
        ]

    def _read(self, namespace: str, name: str) -> Json:
        pod: Json = self.kube.sanitize(self.kube.core.read_namespaced_pod(name, namespace))
        return pod

    def run(self, namespace: str, name: str) -> None:
        started = now()
        pod = self._read(namespace, name)
        self.kube.core.patch_namespaced_pod_status(
            name,
            namespace,
            {
                "status": {
                    "phase": "Running",
                    "startTime": started,
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": self._statuses(
                        pod,
                        {c["name"]: {"running": {"startedAt": started}} for c in pod["spec"]["containers"]},
                    ),
                }
            },
        )

    def exit(
        self,
        namespace: str,
        name: str,
        code: int,
        log_tail: str = "",
        reason: str = "",
        container: str | None = None,
        phase: str | None = None,
        pod_reason: str = "",
        pod_message: str = "",
    ) -> None:
        """`container` (the first by default) exits with `code`; the others go on running.

        The pod's phase is what a kubelet would say once every container has stopped:
        Succeeded if all exited 0, else Failed. Pass `phase` when other containers run on.
        """
        pod = self._read(namespace, name)
        spec = next(c for c in pod["spec"]["containers"] if container is None or c["name"] == container)
        terminated = {
            "exitCode": code,
            "reason": reason or ("Completed" if code == 0 else "Error"),
            "startedAt": now(),
            "finishedAt": now(),
        }
        if code != 0 and log_tail and spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            terminated["message"] = log_tail
        status: Json = {
            "phase": phase or ("Succeeded" if code == 0 else "Failed"),
            "containerStatuses": self._statuses(pod, {spec["name"]: {"terminated": terminated}}),
        }
        if pod_reason:
            status.update(reason=pod_reason, message=pod_message)
        self.kube.core.patch_namespaced_pod_status(name, namespace, {"status": status})

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
