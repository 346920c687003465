"""The I/O shell around the reconcile core: gather what is observed, decide, apply."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tfmw_operator import metrics
from tfmw_operator.api import JobSpec, Json
from tfmw_operator.builders import build_event
from tfmw_operator.decision import (
    CreatePods,
    Decision,
    DeleteJob,
    DeletePods,
    EnsureJobDirectory,
    EnsureService,
    Milestone,
    Observed,
    PatchStatus,
    RemoveMarker,
    parse_spec,
)
from tfmw_operator.kube import Kube
from tfmw_operator.observed import MarkerState, ObservedPod
from tfmw_operator.reconcile import reconcile
from tfmw_operator.status import merge_patch
from tfmw_operator.storage import (
    archive_log,
    ensure_job_directory,
    marker_exists,
    read_marker,
    remove_marker,
)
from tfmw_operator.workqueue import Key, WorkQueue

logger = logging.getLogger(__name__)

MARKER_POLL_SECONDS = 0.2
LOG_ARCHIVE_BYTES = 4 * 1024 * 1024


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
        raw_pods = await self.kube.list_pods(namespace, name)
        spec = parse_spec(job)
        marker = MarkerState()
        if isinstance(spec, JobSpec):
            marker = await asyncio.to_thread(read_marker, self.shared_root, spec.marker_relpath)
        observed = Observed.of(job, raw_pods, marker, datetime.now(UTC), spec)
        decision = reconcile(observed)
        await self._apply(job, observed.pods, decision)
        self._track(key, decision, marker.modified)
        metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
        return decision.requeue_after

    async def _apply(self, job: Json, pods: Sequence[ObservedPod], decision: Decision) -> None:
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        by_name = {p.name: p for p in pods}
        for action in decision.actions:
            if isinstance(action, RemoveMarker):
                await asyncio.to_thread(remove_marker, self.shared_root, action.relpath)
            elif isinstance(action, EnsureJobDirectory):
                await asyncio.to_thread(ensure_job_directory, self.shared_root, action.relpath)
            elif isinstance(action, EnsureService):
                await self.kube.create_service(namespace, action.service)
            elif isinstance(action, CreatePods):
                await asyncio.gather(*(self.kube.create_pod(namespace, pod) for pod in action.pods))
            elif isinstance(action, PatchStatus):
                patch = merge_patch(job.get("status") or {}, action.status.to_json())
                if patch:
                    await self.kube.patch_job_status(namespace, name, patch)
            elif isinstance(action, DeletePods):
                doomed = [by_name[n] for n in action.names if n in by_name]
                await asyncio.gather(*(self._archive_and_delete(namespace, name, p) for p in doomed))
            elif isinstance(action, DeleteJob):
                await self.kube.delete_job(namespace, name)
        now = datetime.now(UTC)
        events = (
            build_event(job, e.type, e.reason, e.message, now, uuid.uuid4().hex[:12]) for e in decision.events
        )
        await asyncio.gather(*(self.kube.post_event(namespace, event) for event in events))

    async def _archive_and_delete(self, namespace: str, job_name: str, pod: ObservedPod) -> None:
        """Keep a worker's log on the shared storage before its pod, and the log, go away."""
        if pod.phase != "Pending":
            text = await self.kube.pod_log(namespace, pod.name, LOG_ARCHIVE_BYTES)
            if text:
                relpath = f"{namespace}/{job_name}"
                await asyncio.to_thread(archive_log, self.shared_root, relpath, pod.attempt, pod.index, text)
        await self.kube.delete_pod(namespace, pod.name, pod.uid)

    def _track(self, key: Key, decision: Decision, marker_time: datetime | None) -> None:
        milestones = decision.milestones
        if Milestone.LAUNCHED in milestones:
            metrics.JOBS_CREATED.inc()
        if Milestone.RESTARTED in milestones:
            metrics.GANG_RESTARTS.inc()
        if Milestone.SUCCEEDED in milestones:
            metrics.JOBS_SUCCEEDED.inc()
            if marker_time is not None:
                latency = (datetime.now(UTC) - marker_time).total_seconds()
                metrics.MARKER_LATENCY_SECONDS.observe(max(0.0, latency))
        if Milestone.FAILED in milestones:
            metrics.JOBS_FAILED.labels(reason=decision.status.reason or "").inc()
        if decision.finished:
            self.active.discard(key)
        else:
            self.active.add(key)
        if decision.watch_marker is None:
            self.awaiting_marker.pop(key, None)
        else:
            self.awaiting_marker[key] = decision.watch_marker
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
