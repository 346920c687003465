"""Deleting a worker, and keeping its log on the shared storage, read to its last line."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tfmw_operator.decision import DeletePods
from tfmw_operator.informer import Informer
from tfmw_operator.kube import Kube
from tfmw_operator.observed import ObservedPod, Owned
from tfmw_operator.storage import SharedStorage, archive_log, reported

logger = logging.getLogger(__name__)

LOG_ARCHIVE_BYTES = 4 * 1024 * 1024  # the tail of each container's log that is kept
# All logs being read at once share this much of the operator's memory: when a 1,024-worker
# gang is deleted, each container keeps a shorter tail (at least LOG_MIN_BYTES).
LOG_MEMORY_BYTES = 64 * 1024 * 1024
LOG_MIN_BYTES = 64 * 1024


class WorkerDeleter:
    def __init__(self, kube: Kube, storage: SharedStorage, pods: Callable[[str], Informer[Owned]]) -> None:
        self.kube = kube
        self.storage = storage
        self.pods = pods  # the view of a namespace's pods
        self._reading = 0  # containers whose logs are being read now

    async def delete(
        self,
        namespace: str,
        job_name: str,
        pod: ObservedPod,
        action: DeletePods,
        warnings: list[tuple[str, str]],
    ) -> None:
        """A running worker's log is followed while it stops; saving the log is best effort
        and never holds the deletion up."""
        if action.force or pod.phase == "Pending":
            await self.delete_pod(namespace, pod, action.grace_seconds)
            return
        follow = pod.active
        self._reading += len(pod.containers)
        try:
            limit = log_tail_bytes(self._reading)
            grace = pod.grace_seconds if action.grace_seconds is None else action.grace_seconds
            reads = [
                asyncio.ensure_future(self.kube.container_log(namespace, pod.name, c, limit, follow, grace))
                for c in pod.containers
            ]
            if follow:
                await asyncio.sleep(0)  # let the log requests go out before the stop
            await self.delete_pod(namespace, pod, action.grace_seconds)
            logs = await asyncio.gather(*reads)
        finally:
            self._reading -= len(pod.containers)
        job_relpath = f"{namespace}/{job_name}"
        for position, (container, text) in enumerate(zip(pod.containers, logs, strict=True)):
            if not text:
                continue
            suffix = "" if position == 0 else f".{container}"
            call = self.storage.call(
                job_relpath, archive_log, job_relpath, pod.attempt, f"{pod.index}{suffix}", text
            )
            await reported(warnings, call)

    async def delete_pod(self, namespace: str, pod: ObservedPod, grace_seconds: int | None) -> None:
        deleted = await self.kube.delete_pod(namespace, pod.name, pod.uid, grace_seconds)
        view = self.pods(namespace)
        if deleted is None:
            view.remove(namespace, pod.name, lambda held: held.pod is not None and held.pod.uid == pod.uid)
        else:
            view.put(deleted)


def log_tail_bytes(reading: int) -> int:
    """How much of each container's log to keep while `reading` containers are being read."""
    return max(LOG_MIN_BYTES, min(LOG_ARCHIVE_BYTES, LOG_MEMORY_BYTES // max(1, reading)))
