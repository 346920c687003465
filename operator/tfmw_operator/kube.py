"""Asynchronous access to the API server: the official client's calls, run off the event loop."""

from __future__ import annotations

import asyncio
import json
import logging
import os

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tfmw_operator.api import GROUP, LABEL_JOB_NAME, PLURAL, VERSION, Json

MERGE_PATCH = "application/merge-patch+json"
logger = logging.getLogger(__name__)
CONNECTION_POOL_SIZE = 64


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


class Kube:
    """The handful of calls the operator makes; each runs in a worker thread."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.sanitize = api_client.sanitize_for_serialization

    async def get_job(self, namespace: str, name: str) -> Json | None:
        try:
            job: Json = await asyncio.to_thread(
                self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name
            )
        except ApiException as error:
            _ignore(404, error)
            return None
        return job

    async def list_pods(self, namespace: str, job_name: str) -> list[Json]:
        # Plain JSON, not the client's model objects: at thousands of pods, building and
        # converting those is most of the operator's CPU and memory.
        response = await asyncio.to_thread(
            self.core.list_namespaced_pod,
            namespace,
            label_selector=f"{LABEL_JOB_NAME}={job_name}",
            _preload_content=False,
        )
        pods: list[Json] = json.loads(response.data)["items"]
        return pods

    async def create_pod(self, namespace: str, pod: Json) -> None:
        try:
            await asyncio.to_thread(self.core.create_namespaced_pod, namespace, pod)
        except ApiException as error:
            _ignore(409, error)  # created by an earlier reconcile that did not record it

    async def create_service(self, namespace: str, service: Json) -> None:
        try:
            await asyncio.to_thread(self.core.create_namespaced_service, namespace, service)
        except ApiException as error:
            _ignore(409, error)

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Delete exactly the pod observed: a newer pod of the same name must survive."""
        options = {"preconditions": {"uid": uid}} if uid else None
        try:
            await asyncio.to_thread(self.core.delete_namespaced_pod, name, namespace, body=options)
        except ApiException as error:
            if error.status != 409:  # 409: the precondition failed, that pod is already gone
                _ignore(404, error)

    async def patch_job_status(self, namespace: str, name: str, status: Json) -> None:
        await asyncio.to_thread(
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"status": status},
            _content_type=MERGE_PATCH,
        )

    async def delete_job(self, namespace: str, name: str) -> None:
        try:
            await asyncio.to_thread(
                self.custom.delete_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                propagation_policy="Background",
            )
        except ApiException as error:
            _ignore(404, error)

    async def post_event(self, namespace: str, event: Json) -> None:
        try:
            await asyncio.to_thread(self.core.create_namespaced_event, namespace, event)
        except ApiException as error:  # an Event is worth a log line, not a failed reconcile
            logger.warning("could not post event %s in %s: %s", event.get("reason"), namespace, error.reason)

    async def pod_log(self, namespace: str, name: str, limit_bytes: int) -> str:
        """The pod's log, or "" when there is none to read (never started, node gone)."""
        try:
            text: str = await asyncio.to_thread(
                self.core.read_namespaced_pod_log, name, namespace, limit_bytes=limit_bytes
            )
        except ApiException:
            return ""
        return text


__all__ = ["Kube", "load_api_client"]
