"""The I/O shell around the reconcile core: gather what is observed, decide, apply."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

from tfmw_operator import metrics
from tfmw_operator.api import Json, Phase, SpecError, parse_job
from tfmw_operator.kube import Kube
from tfmw_operator.observed import MarkerState, ObservedPod, observe_pod
from tfmw_operator.reconcile import (
    CreatePods,
    Decision,
    DeleteJob,
    DeletePods,
    EnsureJobDirectory,
    EnsureService,
    Observed,
    PatchStatus,
    RemoveMarker,
    reconcile,
)
from tfmw_operator.storage import (
    ensure_job_directory,
    marker_exists,
    read_marker,
    remove_marker,
    write_text,
)
from tfmw_operator.workqueue import Key, WorkQueue

logger = logging.getLogger(__name__)

MARKER_POLL_SECONDS = 0.2
LOG_ARCHIVE_BYTES = 4 * 1024 * 1024


def status_patch(old: Json, new: Json) -> Json:
    """A merge patch from `old` to `new`: keys that disappeared are set to null."""
    patch = {key: value for key, value in new.items() if old.get(key) != value}
    patch.update({key: None for key in old if key not in new})
    return patch


class JobController:
    def __init__(self, kube: Kube, shared_root: Path) -> None:
        self.kube = kube
        self.shared_root = shared_root
        self.queue = WorkQueue(self.reconcile)
        # Jobs whose marker may appear any moment: their marker's relative path.
        self.awaiting_marker: dict[Key, str] = {}
        self.active: set[Key] = set()

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        started = time.perf_counter()
        job = await self.kube.get_job(namespace, name)
        if job is None:
            self._forget(key)
            return None
        uid = job["metadata"].get("uid")
        raw_pods = await self.kube.list_pods(namespace, name)
        observed = (observe_pod(p) for p in raw_pods if _owned_by(p, uid))
        pods = [p for p in observed if p is not None]
        try:
            marker_relpath: str | None = parse_job(job).marker_relpath
        except SpecError:
            marker_relpath = None  # the core fails the job; there is no marker to look for
        marker = MarkerState()
        if marker_relpath is not None:
            marker = await asyncio.to_thread(read_marker, self.shared_root, marker_relpath)
        decision = reconcile(Observed(job, pods, marker, datetime.now(UTC)))
        await self._apply(job, pods, decision)
        self._track(key, job, decision, marker_relpath, marker.modified)
        metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
        return decision.requeue_after

    async def _apply(self, job: Json, pods: list[ObservedPod], decision: Decision) -> None:
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        by_name = {p.name: p for p in pods}
        for action in decision.actions:
            if isinstance(action, EnsureJobDirectory):
                await asyncio.to_thread(ensure_job_directory, self.shared_root, action.relpath)
            elif isinstance(action, EnsureService):
                await self.kube.create_service(namespace, action.service)
            elif isinstance(action, CreatePods):
                await asyncio.gather(*(self.kube.create_pod(namespace, pod) for pod in action.pods))
            elif isinstance(action, DeletePods):
                doomed = [by_name[n] for n in action.names if n in by_name]
                await asyncio.gather(*(self._archive_and_delete(namespace, name, p) for p in doomed))
            elif isinstance(action, RemoveMarker):
                await asyncio.to_thread(remove_marker, self.shared_root, action.relpath)
            elif isinstance(action, PatchStatus):
                patch = status_patch(job.get("status") or {}, action.status)
                if patch:
                    await self.kube.patch_job_status(namespace, name, patch)
            elif isinstance(action, DeleteJob):
                await self.kube.delete_job(namespace, name)
        await asyncio.gather(
            *(self.kube.post_event(job, e.type, e.reason, e.message) for e in decision.events)
        )

    async def _archive_and_delete(self, namespace: str, job_name: str, pod: ObservedPod) -> None:
        """Keep a worker's log on the shared storage before its pod, and the log, go away."""
        if pod.phase != "Pending":
            text = await self.kube.pod_log(namespace, pod.name, LOG_ARCHIVE_BYTES)
            if text:
                directory = self.shared_root / namespace / job_name / "logs" / f"attempt-{pod.attempt}"
                await asyncio.to_thread(write_text, directory / f"worker-{pod.index}.log", text)
        await self.kube.delete_pod(namespace, pod.name, pod.uid)

    def _track(
        self,
        key: Key,
        job: Json,
        decision: Decision,
        marker_relpath: str | None,
        marker_time: datetime | None,
    ) -> None:
        old = job.get("status") or {}
        new = decision.status or old
        old_phase, new_phase = old.get("phase"), new.get("phase")
        if old_phase != new_phase:
            if old.get("launchedAttempt") is None and new.get("launchedAttempt") is not None:
                metrics.JOBS_CREATED.inc()
            if new_phase == Phase.SUCCEEDED.value:
                metrics.JOBS_SUCCEEDED.inc()
                if marker_time is not None:
                    latency = (datetime.now(UTC) - marker_time).total_seconds()
                    metrics.MARKER_LATENCY_SECONDS.observe(max(0.0, latency))
            elif new_phase == Phase.FAILED.value:
                metrics.JOBS_FAILED.labels(reason=new.get("reason", "")).inc()
        if new.get("restarts", 0) > old.get("restarts", 0):
            metrics.GANG_RESTARTS.inc()
        finished = new_phase in (Phase.SUCCEEDED.value, Phase.FAILED.value)
        if finished:
            self.active.discard(key)
            self.awaiting_marker.pop(key, None)
        else:
            self.active.add(key)
            if new.get("launchedAttempt") is not None and marker_relpath is not None:
                self.awaiting_marker[key] = marker_relpath
        metrics.ACTIVE_JOBS.set(len(self.active))

    def _forget(self, key: Key) -> None:
        self.active.discard(key)
        self.awaiting_marker.pop(key, None)
        self.queue.forget(key)
        metrics.ACTIVE_JOBS.set(len(self.active))

    def _markers_present(self, watched: list[tuple[Key, str]]) -> list[Key]:
        return [key for key, relpath in watched if marker_exists(self.shared_root, relpath)]

    async def watch_markers(self) -> None:
        """Poll the markers of running jobs; a new one triggers that job's reconcile at once.

        One stat per running job per tick is far cheaper than a reconcile per job per tick.
        """
        while True:
            await asyncio.sleep(MARKER_POLL_SECONDS)
            watched = list(self.awaiting_marker.items())
            if not watched:
                continue
            try:
                found = await asyncio.to_thread(self._markers_present, watched)
            except OSError:  # storage trouble must not end marker detection for good
                logger.exception("cannot look for markers under %s", self.shared_root)
                continue
            for key in found:
                self.queue.trigger(key)


def _owned_by(pod: Json, uid: str | None) -> bool:
    """Pods of an earlier job of the same name are not this job's workers."""
    owners = pod["metadata"].get("ownerReferences") or []
    return any(o.get("uid") == uid for o in owners)
