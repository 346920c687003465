"""The kopf handlers: they only turn watch events into work-queue triggers.

No handler here changes a handler-progress annotation or adds a finalizer, so kopf
never writes to the job or its pods on its own and deletion never waits for us.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kopf

from tfmw_operator.api import GROUP, LABEL_QUEUE_NAME, PLURAL, VERSION
from tfmw_operator.controller import EVENT_POSTERS, JobController
from tfmw_operator.kube import Kube, connection_info
from tfmw_operator.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS

SHARED_ROOT_ENV = "TFMW_SHARED_ROOT"
PROGRESS_INTERVAL_ENV = "TFMW_PROGRESS_INTERVAL"
NAMESPACES_ENV = "TFMW_NAMESPACES"  # comma-separated; empty: every namespace

logger = logging.getLogger(__name__)
_controller: JobController | None = None
_background: set[asyncio.Task[None]] = set()


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf deep-copies every event's body twice to diff it for change handlers; there are
    none here (a reconcile reads the whole job), so nothing is built, kept or compared."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        pass


class NoProgress(kopf.ProgressStorage):
    """Handler progress is kopf's record of change handlers' retries: none here, so kopf
    never writes an annotation or status field of its own to a job."""

    def fetch(self, *, key: Any, body: kopf.Body) -> None:
        return None

    def store(self, *, key: Any, record: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        pass

    def purge(self, *, key: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        pass

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        pass

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


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
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.progress_storage = NoProgress()
    loop = asyncio.get_running_loop()
    shared_root = Path(os.environ.get(SHARED_ROOT_ENV, "/var/lib/tfmw/shared"))
    progress_interval = float(os.environ.get(PROGRESS_INTERVAL_ENV, DEFAULT_PROGRESS_INTERVAL_SECONDS))
    namespaces = [n for n in os.environ.get(NAMESPACES_ENV, "").split(",") if n]
    credentials = await asyncio.to_thread(connection_info)  # reads files: not on the event loop
    _controller = JobController(Kube(credentials), shared_root, progress_interval, namespaces)
    posters = (_controller.post_events() for _ in range(EVENT_POSTERS))
    for work in (_controller.watch_markers(), *(w.run() for w in _controller.watches()), *posters):
        _background.add(loop.create_task(work))
    # What start-up loaded (kopf, aiohttp, ours) lives as long as the process: kept out of
    # the collector's full passes, which took 30 ms each on a 2-core VM, a stall that
    # landed in the middle of a launch now and then.
    gc.freeze()
    logger.info("tfmw operator started; shared root %s, progress every %.0fs", shared_root, progress_interval)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod its service account, elsewhere $KUBECONFIG as it is now, not at import time."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.cleanup()
async def stop(**_: Any) -> None:
    if _controller is not None:
        await _controller.queue.drain()  # no reconcile starts after this
    for task in _background:
        task.cancel()
    # The Event posters post what is left before they end.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*_background, return_exceptions=True), timeout=10)
    if _controller is not None:
        await _controller.kube.close()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(event: Mapping[str, Any], namespace: str | None, name: str, **_: Any) -> None:
    """Pods and Services come from the controller's own watches: kopf can filter them by
    label only after receiving every pod in the cluster."""
    key = (namespace or "", name)
    job = event["object"]
    if event["type"] == "DELETED":
        controller().jobs.remove(job)
        controller().queue.forget(key)
        meta = job.get("metadata", {})
        if (meta.get("labels") or {}).get(LABEL_QUEUE_NAME):
            await controller().forget_deleted(key, meta.get("uid", ""))
        return
    if controller().jobs.put(job):  # not the echo of a status write of our own
        controller().queue.trigger(key)
