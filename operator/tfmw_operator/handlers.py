"""The kopf handlers: they only turn watch events into work-queue triggers.

No handler here changes a handler-progress annotation or adds a finalizer, so kopf
never writes to the job or its pods on its own and deletion never waits for us.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from tfmw_operator.api.kinds import KINDS
from tfmw_operator.api.names import LABEL_QUEUE_NAME
from tfmw_operator.api.objects import Key
from tfmw_operator.kube.client import Kube, connection_info
from tfmw_operator.runtime.health import Health
from tfmw_operator.runtime.settings import Settings
from tfmw_operator.shell.audit import live_job_uids
from tfmw_operator.shell.controller import JobController
from tfmw_operator.shell.events import EVENT_POSTERS
from tfmw_operator.storage.retention import FolderRetention

# At shutdown, the worker logs still being saved get this long (the pod's grace period is 30 s).
LOG_DRAIN_SECONDS = 10.0

logger = logging.getLogger(__name__)


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


class Operator:
    """One operator's life: its settings, and the controller and background tasks that
    start-up builds from them. The kopf handlers below close over one of these."""

    def __init__(self, settings: Settings, health: Health) -> None:
        self.settings = settings
        self._controller: JobController | None = None
        self._background: dict[asyncio.Task[None], str] = {}
        self._stopping = False
        health.live_while("operator", self._dead_task)
        health.ready_when("operator", self._not_ready)

    def _dead_task(self) -> str | None:
        """What the operator cannot work without, ended while it was running."""
        if self._stopping:
            return None
        for task, name in self._background.items():
            if task.done():
                error = None if task.cancelled() else task.exception()
                return f"{name} ended: {error!r}" if error else f"{name} ended"
        return None

    def _not_ready(self) -> str | None:
        if self._controller is None:
            return "starting"
        waiting = [w.path for w in self._controller.watches() if not w.synced.is_set()]
        return f"listing {', '.join(waiting)}" if waiting else None

    @property
    def controller(self) -> JobController:
        if self._controller is None:
            raise RuntimeError("the operator has not started")
        return self._controller

    async def start(self, kopf_settings: kopf.OperatorSettings) -> None:
        kopf_settings.peering.standalone = True
        kopf_settings.posting.level = logging.WARNING  # kopf's own chatter; our Events are posted explicitly
        kopf_settings.watching.server_timeout = 300
        kopf_settings.networking.request_timeout = 60
        # kopf keeps a worker, holding the last body, per object until it idles out; with
        # thousands of pods that is most of the operator's memory.
        kopf_settings.queueing.idle_timeout = 1.0
        kopf_settings.persistence.diffbase_storage = NoDiffBase()
        kopf_settings.persistence.progress_storage = NoProgress()
        loop = asyncio.get_running_loop()
        credentials = await asyncio.to_thread(connection_info)  # reads files: not on the event loop
        controller = self._controller = JobController(Kube(credentials), self.settings)
        background = {
            "the marker watcher": controller.files.run(),
            "the job audit": controller.audit.run(),
            **{f"the watch of {w.path}": w.run() for w in controller.watches()},
            **{f"the watch of {w.path}": w.run() for w in controller.claims.values()},
            **{f"the watch of {w.path} ({w.selector})": w.run() for w in controller.side_watches()},
            **{f"Event poster {i}": controller.events.run() for i in range(EVENT_POSTERS)},
        }
        retention = self.settings.folder_retention_seconds
        if retention is not None and (self.settings.exact_namespaces or not self.settings.namespaces):
            namespaces = self.settings.exact_namespaces
            served = self.settings.kinds
            unserved = tuple(k for k in KINDS.values() if k not in served)
            live_uids = functools.partial(
                live_job_uids, controller.kube, namespaces or ("",), served, unserved
            )
            sweeper = FolderRetention(controller.storage, retention, live_uids, namespaces)
            background["the folder retention sweep"] = sweeper.run()
        for name, work in background.items():
            self._background[loop.create_task(work, name=name)] = name
        # What start-up loaded (kopf, aiohttp, ours) lives as long as the process: kept out of
        # the collector's full passes, a stall that landed in the middle of a launch now and
        # then (docs/benchmarks.md, "The measurements behind the code").
        gc.freeze()
        logger.info(
            "tfmw operator started; shared root %s, progress every %.0fs",
            self.settings.shared_root,
            self.settings.progress_interval,
        )

    async def stop(self) -> None:
        self._stopping = True
        if self._controller is not None:
            await self._controller.queue.drain()  # no reconcile starts after this
            await self._controller.deleter.drain(LOG_DRAIN_SECONDS)
        for task in self._background:
            task.cancel()
        # The Event posters post what is left before they end.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._background, return_exceptions=True), timeout=10)
        if self._controller is not None:
            await self._controller.kube.close()

    async def job_event(self, event: Mapping[str, Any], key: Key) -> None:
        job = event["object"]
        controller = self.controller
        if event["type"] == "DELETED":
            controller.jobs.remove(job)
            if controller.jobs.get(key) is not None:  # a job of the other kind waited for the name
                controller.queue.trigger(key)
            else:  # its record and series too: a job with no pods left has no later event
                controller.forget(key)
            meta = job.get("metadata", {})
            if (meta.get("labels") or {}).get(LABEL_QUEUE_NAME):
                await controller.audit.end_workloads_of_deleted(key, meta.get("uid", ""))
            return
        if controller.jobs.put(job):  # not the echo of a status write of our own
            controller.queue.trigger(key)


def registry(operator: Operator) -> kopf.OperatorRegistry:
    """kopf's handlers for one operator. Pods and Services come from the controller's own
    watches: kopf can filter them by label only after receiving every pod in the cluster."""
    handlers = kopf.OperatorRegistry()

    @kopf.on.startup(registry=handlers)
    async def start(settings: kopf.OperatorSettings, **_: Any) -> None:
        await operator.start(settings)

    @kopf.on.login(registry=handlers)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """In a pod its service account, elsewhere $KUBECONFIG as it is now, not at import time."""
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.cleanup(registry=handlers)
    async def stop(**_: Any) -> None:
        await operator.stop()

    async def job_event(event: Mapping[str, Any], namespace: str | None, name: str, **_: Any) -> None:
        await operator.job_event(event, (namespace or "", name))

    for kind in operator.settings.kinds:  # TFMultiWorkerJobs, and TFJobs when served
        kopf.on.event(kind.group, kind.version, kind.plural, id=f"{kind.plural}-events", registry=handlers)(
            job_event
        )
    return handlers


async def operate(
    settings: Settings,
    health: Health | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
) -> None:
    """Run one operator until it is stopped (a signal, or `stop_flag`)."""
    await kopf.operator(
        registry=registry(Operator(settings, health or Health())),
        standalone=True,
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
