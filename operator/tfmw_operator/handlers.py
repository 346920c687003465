"""The kopf handlers: they only turn watch events into work-queue triggers.

No handler here changes a handler-progress annotation or adds a finalizer, so kopf
never writes to the job or its pods on its own and deletion never waits for us.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kopf

from tfmw_operator.api import GROUP, LABEL_JOB_NAME, LABEL_QUEUE_NAME, PLURAL, VERSION
from tfmw_operator.controller import JobController
from tfmw_operator.kube import Kube, load_api_client
from tfmw_operator.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS

SHARED_ROOT_ENV = "TFMW_SHARED_ROOT"
PROGRESS_INTERVAL_ENV = "TFMW_PROGRESS_INTERVAL"
API_THREADS = 64

logger = logging.getLogger(__name__)
_controller: JobController | None = None
_background: set[asyncio.Task[None]] = set()


def controller() -> JobController:
    if _controller is None:
        raise RuntimeError("the operator has not started")
    return _controller


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _controller
    settings.peering.standalone = True
    settings.posting.level = logging.WARNING  # kopf's own chatter; our Events are posted explicitly
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    # kopf keeps a worker, holding the last body, per object until it idles out; with
    # thousands of pods that is most of the operator's memory.
    settings.queueing.idle_timeout = 1.0
    # Pod creations of a job run concurrently; give them threads to run in.
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=API_THREADS))
    shared_root = Path(os.environ.get(SHARED_ROOT_ENV, "/var/lib/tfmw/shared"))
    progress_interval = float(os.environ.get(PROGRESS_INTERVAL_ENV, DEFAULT_PROGRESS_INTERVAL_SECONDS))
    api_client = await asyncio.to_thread(load_api_client)  # reads files: not on the event loop
    _controller = JobController(Kube(api_client), shared_root, progress_interval)
    _background.add(loop.create_task(_controller.watch_markers()))
    logger.info("tfmw operator started; shared root %s, progress every %.0fs", shared_root, progress_interval)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod its service account, elsewhere $KUBECONFIG as it is now, not at import time."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.cleanup()
async def stop(**_: Any) -> None:
    for task in _background:
        task.cancel()
    if _controller is not None:
        await _controller.queue.drain()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(type: str, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> None:
    key = (namespace or "", name)
    if type == "DELETED":
        controller().queue.forget(key)
        meta = body.get("metadata", {})
        if (meta.get("labels") or {}).get(LABEL_QUEUE_NAME):
            await controller().forget_deleted(key, meta.get("uid", ""))
        return
    controller().queue.trigger(key)


@kopf.on.event("", "v1", "pods", labels={LABEL_JOB_NAME: kopf.PRESENT})
async def pod_event(namespace: str | None, labels: Mapping[str, str], **_: Any) -> None:
    controller().queue.trigger((namespace or "", labels[LABEL_JOB_NAME]))
