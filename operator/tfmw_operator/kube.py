"""Asynchronous access to the API server: the official client's calls, run off the event loop.

Every call carries a timeout, so a half-open connection costs one reconcile a retry,
never a thread and a job for ever.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tfmw_operator.api import GROUP, LABEL_JOB_NAME, PLURAL, VERSION, Json

MERGE_PATCH = "application/merge-patch+json"
logger = logging.getLogger(__name__)
CONNECTION_POOL_SIZE = 64
# (connect, read) seconds for every request.
REQUEST_TIMEOUT = (5.0, 30.0)
LOG_TIMEOUT = (5.0, 60.0)
KUEUE_GROUP, KUEUE_VERSION, WORKLOADS = "kueue.x-k8s.io", "v1beta2", "workloads"


def load_api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # Read KUBECONFIG now: the client's default was fixed when it was imported.
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    return client.ApiClient(configuration)


def _ignore(status: int, error: ApiException) -> None:
    if error.status != status and not _namespace_terminating(error):
        raise error


def _namespace_terminating(error: ApiException) -> bool:
    """Creating in a namespace being deleted is pointless, not an error: the job goes too."""
    return error.status == 403 and "NamespaceTerminating" in str(error.body or "")


def api_message(error: ApiException) -> str:
    """The API server's own words from an error, e.g. which field it refused."""
    try:
        body = json.loads(error.body or "")
    except (TypeError, ValueError):
        return f"{error.status} {error.reason}"
    message = body.get("message") if isinstance(body, dict) else None
    return str(message) if message else f"{error.status} {error.reason}"


class CreateRefused(Exception):
    """The API server refused a pod; `invalid` when it never will accept it as written."""

    def __init__(self, invalid: bool, message: str) -> None:
        super().__init__(message)
        self.invalid = invalid
        self.message = message


class Kube:
    """The handful of calls the operator makes; each runs in a worker thread."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.sanitize = api_client.sanitize_for_serialization

    async def _get_custom(
        self, group: str, version: str, plural: str, namespace: str, name: str
    ) -> Json | None:
        """A custom object; None when it (or its resource type) does not exist."""
        try:
            found: Json = await asyncio.to_thread(
                self.custom.get_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
                name,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            _ignore(404, error)
            return None
        return found

    async def _delete_custom(self, group: str, version: str, plural: str, namespace: str, name: str) -> None:
        try:
            await asyncio.to_thread(
                self.custom.delete_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
                name,
                propagation_policy="Background",
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            _ignore(404, error)

    async def get_job(self, namespace: str, name: str) -> Json | None:
        return await self._get_custom(GROUP, VERSION, PLURAL, namespace, name)

    async def list_pods(self, namespace: str, job_name: str) -> list[Json]:
        # Plain JSON, not the client's model objects: at thousands of pods, building and
        # converting those is most of the operator's CPU and memory.
        response = await asyncio.to_thread(
            self.core.list_namespaced_pod,
            namespace,
            label_selector=f"{LABEL_JOB_NAME}={job_name}",
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        pods: list[Json] = json.loads(response.data)["items"]
        return pods

    async def get_service(self, namespace: str, name: str) -> Json | None:
        try:
            response = await asyncio.to_thread(
                self.core.read_namespaced_service,
                name,
                namespace,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            _ignore(404, error)
            return None
        service: Json = json.loads(response.data)
        return service

    async def create_pod(self, namespace: str, pod: Json) -> None:
        """Create a pod exactly as built; a field the API server does not know is refused."""
        try:
            await asyncio.to_thread(
                self.core.create_namespaced_pod,
                namespace,
                pod,
                field_validation="Strict",
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status == 409:
                return  # created by an earlier reconcile that did not record it
            if error.status in (400, 422):
                raise CreateRefused(True, api_message(error)) from error
            if error.status == 403:
                raise CreateRefused(False, api_message(error)) from error
            raise

    async def create_service(self, namespace: str, service: Json) -> None:
        try:
            await asyncio.to_thread(
                self.core.create_namespaced_service,
                namespace,
                service,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            _ignore(409, error)

    async def delete_pod(self, namespace: str, name: str, uid: str, grace_seconds: int | None = None) -> None:
        """Delete exactly the pod observed: a newer pod of the same name must survive."""
        options: Json = {"preconditions": {"uid": uid}} if uid else {}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            await asyncio.to_thread(
                self.core.delete_namespaced_pod,
                name,
                namespace,
                body=options or None,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status != 409:  # 409: the precondition failed, that pod is already gone
                _ignore(404, error)

    async def patch_job_status(self, namespace: str, name: str, status: Json, resource_version: str) -> None:
        """Patch the status only if the job is still as read: a stale writer gets a 409."""
        await asyncio.to_thread(
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"metadata": {"resourceVersion": resource_version}, "status": status},
            _content_type=MERGE_PATCH,
            _request_timeout=REQUEST_TIMEOUT,
        )

    async def delete_job(self, namespace: str, name: str) -> None:
        await self._delete_custom(GROUP, VERSION, PLURAL, namespace, name)

    async def get_workload(self, namespace: str, name: str) -> Json | None:
        """A Kueue Workload; None when there is none (or Kueue is not installed)."""
        return await self._get_custom(KUEUE_GROUP, KUEUE_VERSION, WORKLOADS, namespace, name)

    async def list_workload_names(self, namespace: str) -> list[str]:
        try:
            listed: Json = await asyncio.to_thread(
                self.custom.list_namespaced_custom_object,
                KUEUE_GROUP,
                KUEUE_VERSION,
                namespace,
                WORKLOADS,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            _ignore(404, error)
            return []
        return [item["metadata"]["name"] for item in listed.get("items") or []]

    async def delete_workload(self, namespace: str, name: str) -> None:
        await self._delete_custom(KUEUE_GROUP, KUEUE_VERSION, WORKLOADS, namespace, name)

    async def post_event(self, namespace: str, event: Json) -> None:
        try:
            await asyncio.to_thread(
                self.core.create_namespaced_event,
                namespace,
                event,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:  # an Event is worth a log line, not a failed reconcile
            logger.warning("could not post event %s in %s: %s", event.get("reason"), namespace, error.reason)

    async def container_log(
        self, namespace: str, pod: str, container: str, limit_bytes: int, follow: bool = False
    ) -> str:
        """The last `limit_bytes` of a container's log, decoded leniently ("" when none).

        With `follow`, reading goes on until the container ends (or LOG_TIMEOUT passes),
        so a worker being stopped is read to its last line.
        """
        return await asyncio.to_thread(self._container_log, namespace, pod, container, limit_bytes, follow)

    def _container_log(self, namespace: str, pod: str, container: str, limit_bytes: int, follow: bool) -> str:
        tail: collections.deque[bytes] = collections.deque()
        kept = 0
        try:
            response = self.core.read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                follow=follow,
                _preload_content=False,
                _request_timeout=LOG_TIMEOUT,
            )
            try:
                for chunk in response.stream(64 * 1024):
                    tail.append(chunk)
                    kept += len(chunk)
                    while kept - len(tail[0]) >= limit_bytes:
                        kept -= len(tail.popleft())
            finally:
                response.release_conn()
        except ApiException as error:
            if error.status not in (400, 404):  # 400/404: never started, or already gone
                logger.warning(
                    "cannot read the log of %s/%s [%s]: %s", namespace, pod, container, api_message(error)
                )
        except Exception as error:  # a read timeout or a dropped stream: keep what came
            logger.warning("log of %s/%s [%s] cut short: %s", namespace, pod, container, error)
        data = b"".join(tail)[-limit_bytes:]
        # A byte limit may split a UTF-8 character, and programs print any bytes at all.
        return data.decode("utf-8", "replace")


__all__ = ["CreateRefused", "Kube", "api_message", "load_api_client"]
