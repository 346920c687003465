"""The I/O shell around the reconcile core: gather what is observed, decide, apply."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from tfmw_operator import metrics
from tfmw_operator.api import PROGRESS_FILE, JobSpec, Json, Phase
from tfmw_operator.builders import build_event, pod_group_name, pod_group_name_prefix
from tfmw_operator.decision import (
    CreateError,
    CreateErrorKind,
    CreatePods,
    Decision,
    DeleteJob,
    DeletePods,
    DeleteWorkloads,
    EnsureJobDirectory,
    EnsureService,
    Milestone,
    Observed,
    PatchStatus,
    ProgressWatch,
    RemoveMarker,
    parse_spec,
)
from tfmw_operator.file_watch import FolderEvents, WatchSync
from tfmw_operator.informer import Informer, LatestJobs
from tfmw_operator.kube import ApiError, CreateRefused, Kube
from tfmw_operator.observed import MarkerState, ObservedPod, Owned, WorkloadState, observe_workload
from tfmw_operator.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS, ProgressProblem, ProgressReading
from tfmw_operator.reconcile import reconcile
from tfmw_operator.status import JobStatus, merge_patch
from tfmw_operator.storage import (
    StorageError,
    archive_log,
    ensure_job_directory,
    file_signature,
    marker_exists,
    read_marker,
    read_progress,
    remove_marker,
)
from tfmw_operator.workqueue import Key, WorkQueue

logger = logging.getLogger(__name__)
T = TypeVar("T")

MARKER_POLL_SECONDS = 0.2
MAX_POLL_SECONDS = 2.0
MAX_POLL_STATS_PER_SECOND = 500
PROGRESS_POLL_SECONDS = 1.0
SWEEP_SECONDS = 10.0
QUEUE_RECHECK_SECONDS = 2.0
EVENT_POSTERS = 4
MAX_WAITING_EVENTS = 10_000
MAX_EVENT_DELAY_SECONDS = 2.0
LOG_ARCHIVE_BYTES = 4 * 1024 * 1024
# A hung network filesystem must not hang reconciles: storage calls get their own threads
# and a deadline (a thread stuck in the kernel stays stuck, but the job goes on).
STORAGE_TIMEOUT_SECONDS = 10.0
STORAGE_THREADS = 16
# Launches deciding and creating at once. More only queue for the connections, each with
# its built pods held: a burst of 100 8-worker jobs peaked 15 MB higher, and was no faster.
LAUNCHES_AT_ONCE = 16


class JobController:
    def __init__(
        self,
        kube: Kube,
        shared_root: Path,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL_SECONDS,
        namespaces: Sequence[str] = (),
    ) -> None:
        self.kube = kube
        self.shared_root = shared_root
        self.progress_interval = progress_interval
        self.queue = WorkQueue(self.reconcile)
        # What the watches last saw; reconciles decide from it, without reading the API.
        self.jobs = LatestJobs()
        scopes = [f"/api/v1/namespaces/{n}" for n in namespaces] or ["/api/v1"]
        by_scope = list(zip(namespaces or [""], scopes, strict=True))

        def views(resource: str, reduce: Callable[[Json], Owned]) -> dict[str, Informer[Owned]]:
            trigger = self.queue.trigger
            return {n: Informer(kube, f"{scope}/{resource}", reduce, trigger) for n, scope in by_scope}

        self.pods = views("pods", Owned.pod_of)
        self.services = views("services", Owned.service_of)
        # Services named like a job that are not its own (found when creating ours failed).
        self.foreign_services: dict[Key, Owned] = {}
        # Jobs whose marker may appear any moment: their marker's relative path.
        self.awaiting_marker: dict[Key, str] = {}
        # Running jobs' progress documents, and the signature (mtime, size) each had when last read.
        self.watched_progress: dict[Key, ProgressWatch] = {}
        self.progress_seen: dict[Key, tuple[int, int] | None] = {}
        self.active: set[Key] = set()
        # What the last pod creations of a job ran into; forgotten once creations succeed.
        self.create_errors: dict[Key, CreateError] = {}
        self._watch_sync: WatchSync | None = None  # while inotify watches the job folders
        self._events: asyncio.Queue[tuple[str, Json]] = asyncio.Queue(MAX_WAITING_EVENTS)
        self._creating = 0  # reconciles creating pods now
        self._not_creating = asyncio.Event()
        self._not_creating.set()
        self._launching = asyncio.Semaphore(LAUNCHES_AT_ONCE)
        self.storage_pool = concurrent.futures.ThreadPoolExecutor(STORAGE_THREADS, "tfmw-storage")

    async def storage(self, relpath: str, call: Callable[..., T], *args: object) -> T:
        """Run a storage function in the storage threads, within STORAGE_TIMEOUT_SECONDS."""
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self.storage_pool, functools.partial(call, self.shared_root, *args))
        try:
            # Not wait_for: on Python 3.11 it wraps the future in a task of its own, and a
            # read on a launch's path costs 0.13 ms more.
            async with asyncio.timeout(STORAGE_TIMEOUT_SECONDS):
                return await work
        except TimeoutError:
            raise StorageError(relpath, f"no answer within {STORAGE_TIMEOUT_SECONDS:.0f}s") from None

    def watches(self) -> list[Informer[Owned]]:
        return [*self.pods.values(), *self.services.values()]

    def _view(self, informers: dict[str, Informer[Owned]], namespace: str) -> Informer[Owned]:
        return informers[namespace] if namespace in informers else informers[""]

    async def reconcile(self, key: Key) -> float | None:
        # As a restarted controller must: decide nothing before the view holds every object.
        for watch in self.watches():
            await watch.synced.wait()
        job = self.jobs.get(key)
        if job is None or JobStatus.from_json(job.get("status")).launched:
            # A launched job's reconcile (its marker, its pods' fate) never waits behind launches.
            return await self._reconcile(key)
        async with self._launching:
            return await self._reconcile(key)

    async def _reconcile(self, key: Key) -> float | None:
        namespace, name = key
        started = time.perf_counter()
        job = self.jobs.get(key)
        if job is None:
            self._forget(key)
            return None
        pods = self._view(self.pods, namespace).of_job(key)
        service = next((s for s in self._view(self.services, namespace).of_job(key) if s.name == name), None)
        if key in self.foreign_services:
            service = await self._namesake_service(key)
        spec = parse_spec(job)
        recorded = JobStatus.from_json(job.get("status"))
        marker, storage_error, progress, workload = MarkerState(), None, None, None
        if isinstance(spec, JobSpec):
            try:
                marker = await self.storage(spec.marker_relpath, read_marker, spec.marker_relpath)
            except StorageError as error:
                storage_error = str(error)
            # Only a running gang trains; a job being launched or restarted costs no read.
            if recorded.phase is Phase.RUNNING:
                progress = await self._read_progress(key, spec.progress_relpath)
            if spec.queue_name and not recorded.finished:
                workload = await self._workload(namespace, pod_group_name(spec, recorded.attempt))
        observed = Observed.of_owned(
            job,
            pods,
            marker,
            datetime.now(UTC),
            spec,
            status=recorded,
            service=service,
            storage_error=storage_error,
            create_error=self.create_errors.get(key),
            progress=progress,
            progress_interval=self.progress_interval,
            workload=workload,
        )
        decision = reconcile(observed)
        completed = await self._apply(key, job, observed.pods, decision)
        if completed:
            self._track(key, decision, marker.modified)
        metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)
        # Cut short (a refused creation, a conflicting write): decide again from what is there now.
        requeue = decision.requeue_after if completed else 0.0
        waiting = workload is None or not workload.admitted
        if isinstance(spec, JobSpec) and spec.queue_name and not decision.finished and waiting:
            # Kueue's verdict changes only the Workload, which nothing here watches: look
            # again soon while the gang waits for it.
            requeue = QUEUE_RECHECK_SECONDS if requeue is None else min(requeue, QUEUE_RECHECK_SECONDS)
        return requeue

    async def _namesake_service(self, key: Key) -> Owned | None:
        """A Service of the job's name that is not its own, as it is now (gone, or still there)."""
        found = await self.kube.get_service(*key)
        if found is None:
            self.foreign_services.pop(key, None)
            return None
        service = Owned.service_of(found)
        self.foreign_services[key] = service
        return service

    async def _workload(self, namespace: str, name: str) -> WorkloadState | None:
        found = await self.kube.get_workload(namespace, name)
        return None if found is None else observe_workload(name, found)

    async def forget_deleted(self, key: Key, uid: str) -> None:
        """A deleted job's Kueue Workloads are owned by its pods alone, and Kueue holds those
        pods until their Workload goes: delete them, so the garbage collector can finish."""
        namespace, name = key
        prefix = pod_group_name_prefix(name, uid)
        for workload in await self.kube.list_workload_names(namespace):
            if workload.startswith(prefix):
                await self.kube.delete_workload(namespace, workload)

    async def _read_progress(self, key: Key, relpath: str) -> ProgressReading | None:
        try:
            self.progress_seen[key], reading = await self.storage(relpath, self._signed_progress, relpath)
        except StorageError as error:
            return ProgressProblem(str(error))
        return reading

    @staticmethod
    def _signed_progress(
        shared_root: Path, relpath: str
    ) -> tuple[tuple[int, int] | None, ProgressReading | None]:
        """The document's signature, then the document: a write in between is a change to see."""
        return file_signature(shared_root, relpath), read_progress(shared_root, relpath)

    async def _apply(self, key: Key, job: Json, pods: Sequence[ObservedPod], decision: Decision) -> bool:
        """Carry out the actions in order; False when one of them means deciding again."""
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        by_name = {p.name: p for p in pods}
        warnings: list[tuple[str, str]] = []
        completed = True
        actions = list(decision.actions)
        alongside: list[asyncio.Future[None]] = []
        while actions:
            action = actions.pop(0)
            if isinstance(action, RemoveMarker):
                await self._best_effort(warnings, self.storage(action.relpath, remove_marker, action.relpath))
            elif isinstance(action, EnsureJobDirectory):
                # Made while the Service and pods are created: no worker starts within the
                # millisecond it takes, and a failure is only reported either way.
                call = self.storage(action.relpath, ensure_job_directory, action.relpath, action.job_uid)
                alongside.append(asyncio.ensure_future(self._best_effort(warnings, call)))
            elif isinstance(action, EnsureService):
                following = actions[0] if actions else None
                pods_too = following.pods if isinstance(following, CreatePods) else ()
                if pods_too:
                    actions.pop(0)
                if not await self._launch(key, namespace, action.service, pods_too):
                    completed = False
                    break
            elif isinstance(action, CreatePods):
                if not await self._create_pods(key, namespace, action.pods):
                    completed = False
                    break
            elif isinstance(action, PatchStatus):
                patch = merge_patch(job.get("status") or {}, action.status.to_json())
                if patch and not await self._patch_status(namespace, name, patch, meta["resourceVersion"]):
                    completed = False
                    break
            elif isinstance(action, DeletePods):
                doomed = [by_name[n] for n in action.names if n in by_name]
                deletions = (self._archive_and_delete(namespace, name, p, action, warnings) for p in doomed)
                await asyncio.gather(*deletions)
            elif isinstance(action, DeleteWorkloads):
                await asyncio.gather(*(self.kube.delete_workload(namespace, n) for n in action.names))
            elif isinstance(action, DeleteJob):
                await self.kube.delete_job(namespace, name)
        await asyncio.gather(*alongside)
        events = [(e.type, e.reason, e.message) for e in decision.events] if completed else []
        events += [("Warning", reason, message) for reason, message in warnings]
        now = datetime.now(UTC)
        for event in events:
            self._post(namespace, build_event(job, *event, now, uuid.uuid4().hex[:12]))
        return completed

    def _post(self, namespace: str, event: Json) -> None:
        """Events are posted by a few background posters, after the work they tell of: a
        burst of launches creates pods first, and its Events follow."""
        try:
            self._events.put_nowait((namespace, event))
        except asyncio.QueueFull:
            logger.warning("too many Events waiting; dropped %s: %s", event["reason"], event.get("message"))

    async def post_events(self) -> None:
        """One of EVENT_POSTERS; runs until cancelled, then posts what is left. While pods
        are being created, it waits: in a burst of launches, the pods come first."""
        try:
            while True:
                namespace, event = await self._events.get()
                with contextlib.suppress(TimeoutError):  # but never for long
                    await asyncio.wait_for(self._not_creating.wait(), MAX_EVENT_DELAY_SECONDS)
                await self.kube.post_event(namespace, event)
        except asyncio.CancelledError:
            while not self._events.empty():
                namespace, event = self._events.get_nowait()
                await self.kube.post_event(namespace, event)
            raise

    async def _launch(self, key: Key, namespace: str, service: Json, pods: Sequence[Json]) -> bool:
        """The first pod alone, then the Service alongside the other pods.

        On a busy API server the Service's creation, and the Endpoints and EndpointSlice
        the controller-manager writes for it at once, slow a pod created beside them; a
        lone worker's pod need not wait for either, and a gang's Service still goes out
        with its second batch. False when either means deciding again.
        """
        created = await self._create_pods(key, namespace, pods[:1])
        ours, rest_created = await asyncio.gather(
            self._ensure_service(key, service),
            self._create_pods(key, namespace, pods[1:] if created else (), first_batch=2),
        )
        return created and ours and rest_created

    async def _ensure_service(self, key: Key, service: Json) -> bool:
        """False when a Service of that name is someone else's: decide again, knowing it."""
        namespace = key[0]
        created = await self.kube.create_service(namespace, service)
        if created is not None:
            self._view(self.services, namespace).put(created)
            return True
        # One of that name exists: ours (the view lags), or a namesake the view cannot see.
        found = await self.kube.get_service(namespace, service["metadata"]["name"])
        if found is None:
            return True
        uid = service["metadata"]["ownerReferences"][0]["uid"]
        if uid in Owned.service_of(found).owners:
            self._view(self.services, namespace).put(found)
            return True
        self.foreign_services[key] = Owned.service_of(found)
        return False

    @staticmethod
    async def _best_effort(warnings: list[tuple[str, str]], call: Awaitable[object]) -> None:
        """Storage trouble while acting is reported and the job goes on being reconciled."""
        try:
            await call
        except StorageError as error:
            logger.warning("shared storage: %s", error)
            warnings.append(("StorageError", f"shared storage: {error}"))

    async def _create_pods(
        self, key: Key, namespace: str, pods: Sequence[Json], first_batch: int = 1
    ) -> bool:
        """Create in slow-start batches (1, 2, 4, ...): a doomed template costs one request."""
        remaining, batch = list(pods), first_batch
        if not remaining:
            return True
        self._creating += 1
        self._not_creating.clear()
        try:
            while remaining:
                this_batch, remaining = remaining[:batch], remaining[batch:]
                created = await asyncio.gather(*(self.kube.create_pod(namespace, pod) for pod in this_batch))
                view = self._view(self.pods, namespace)
                for pod in created:
                    if pod is not None:
                        view.put(pod)
                batch *= 2
        except CreateRefused as refused:
            previous = self.create_errors.get(key)
            kind = CreateErrorKind.INVALID if refused.invalid else CreateErrorKind.FORBIDDEN
            failures = previous.failures + 1 if previous and previous.kind is kind else 1
            self.create_errors[key] = CreateError(kind, refused.message, failures, datetime.now(UTC))
            logger.warning("creating pods of %s/%s refused: %s", *key, refused.message)
            return False
        finally:
            self._creating -= 1
            if not self._creating:
                self._not_creating.set()
        self.create_errors.pop(key, None)
        return True

    async def _patch_status(self, namespace: str, name: str, patch: Json, resource_version: str) -> bool:
        try:
            self.jobs.put(await self.kube.patch_job_status(namespace, name, patch, resource_version))
        except ApiError as error:
            if error.status == 409:  # changed since it was read: decide again from the new one
                return False
            if error.status == 404:
                return False
            raise
        return True

    async def _archive_and_delete(
        self,
        namespace: str,
        job_name: str,
        pod: ObservedPod,
        action: DeletePods,
        warnings: list[tuple[str, str]],
    ) -> None:
        """Delete a worker and keep its log on the shared storage, read to its last line.

        A running worker's log is followed while it stops; saving the log is best effort
        and never holds the deletion up.
        """
        if action.force or pod.phase == "Pending":
            await self._delete_pod(namespace, pod, action.grace_seconds)
            return
        follow = pod.active
        reads = [
            asyncio.ensure_future(self.kube.container_log(namespace, pod.name, c, LOG_ARCHIVE_BYTES, follow))
            for c in pod.containers
        ]
        if follow:
            await asyncio.sleep(0)  # let the log requests go out before the stop
        await self._delete_pod(namespace, pod, action.grace_seconds)
        texts = await asyncio.gather(*reads)
        job_relpath = f"{namespace}/{job_name}"
        for position, (container, text) in enumerate(zip(pod.containers, texts, strict=True)):
            if not text:
                continue
            suffix = "" if position == 0 else f".{container}"
            call = self.storage(
                job_relpath, archive_log, job_relpath, pod.attempt, f"{pod.index}{suffix}", text
            )
            await self._best_effort(warnings, call)

    async def _delete_pod(self, namespace: str, pod: ObservedPod, grace_seconds: int | None) -> None:
        deleted = await self.kube.delete_pod(namespace, pod.name, pod.uid, grace_seconds)
        view = self._view(self.pods, namespace)
        if deleted is None:
            view.remove(namespace, pod.name, lambda held: held.pod is not None and held.pod.uid == pod.uid)
        else:
            view.put(deleted)

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
        folders = self._folders_of(key) if self._watch_sync is not None else None
        if decision.watch_marker is None:
            self.awaiting_marker.pop(key, None)
        else:
            self.awaiting_marker[key] = decision.watch_marker
        if decision.watch_progress is None:
            self.watched_progress.pop(key, None)
            self.progress_seen.pop(key, None)
        else:
            self.watched_progress[key] = decision.watch_progress
        if self._watch_sync is not None and self._folders_of(key) != folders:
            self._watch_sync.changed(key)
        progress = decision.status.progress
        if decision.finished or progress is None:
            metrics.forget_job_progress(*key)
        else:
            metrics.set_job_progress(*key, progress.percent, progress.examples_per_second)
        metrics.ACTIVE_JOBS.set(len(self.active))

    def _forget(self, key: Key) -> None:
        if self._watch_sync is not None:
            self._watch_sync.changed(key)
        self.active.discard(key)
        self.awaiting_marker.pop(key, None)
        self.watched_progress.pop(key, None)
        self.progress_seen.pop(key, None)
        metrics.forget_job_progress(*key)
        self.create_errors.pop(key, None)
        self.foreign_services.pop(key, None)
        self.queue.forget(key)
        metrics.ACTIVE_JOBS.set(len(self.active))

    @staticmethod
    def _markers_present(shared_root: Path, watched: list[tuple[Key, str]]) -> list[Key]:
        return [key for key, relpath in watched if marker_exists(shared_root, relpath)]

    @staticmethod
    def _progress_changed(
        shared_root: Path, watched: list[tuple[Key, str, tuple[int, int] | None]]
    ) -> list[Key]:
        return [key for key, relpath, seen in watched if file_signature(shared_root, relpath) != seen]

    def _progress_to_check(self) -> list[tuple[Key, str, tuple[int, int] | None]]:
        """Jobs whose progress document may be recorded now (the throttle allows it)."""
        now = datetime.now(UTC)
        return [
            (key, watch.relpath, self.progress_seen.get(key))
            for key, watch in self.watched_progress.items()
            if watch.not_before is None or watch.not_before <= now
        ]

    async def watch_markers(self) -> None:
        """Notice a new marker, or a changed progress document, and reconcile that job.

        Where the shared storage is local (inotify), the kernel names the folder that
        changed: nothing is done per running job per tick, and a full look at every job's
        files every SWEEP_SECONDS catches anything missed. Elsewhere (NFS, ...) the
        markers are polled, less often the more jobs there are (at most about
        MAX_POLL_STATS_PER_SECOND), and progress documents once a second.
        """
        try:
            events = await asyncio.to_thread(FolderEvents.open, self.shared_root)
        except Exception:  # polling still notices every marker
            logger.exception("cannot watch %s for markers; polling it instead", self.shared_root)
            events = None
        loop = asyncio.get_running_loop()
        if events is not None:
            self._watch_sync = WatchSync(events)
            loop.add_reader(events.fd, self._on_folder_events, events)
        last_progress = loop.time()
        last_sweep = last_progress - SWEEP_SECONDS  # the first tick: jobs tracked until now
        try:
            while True:
                count = len(self.awaiting_marker)
                interval = MARKER_POLL_SECONDS
                if events is None:
                    interval = min(
                        MAX_POLL_SECONDS, max(MARKER_POLL_SECONDS, count / MAX_POLL_STATS_PER_SECOND)
                    )
                await asyncio.sleep(interval)
                now = loop.time()
                sweep = events is None or now - last_sweep >= SWEEP_SECONDS
                progress_due = now - last_progress >= PROGRESS_POLL_SECONDS and (events is None or sweep)
                if sweep:
                    last_sweep = now
                if progress_due:
                    last_progress = now
                try:
                    await self._tick(sweep, progress_due)
                except Exception:  # nothing else notices a marker: this task must outlive any tick
                    logger.exception("marker detection: a look at the shared storage failed; looking again")
        finally:
            if events is not None:
                self._watch_sync = None
                loop.remove_reader(events.fd)
                events.close()

    async def _tick(self, sweep: bool, progress_due: bool) -> None:
        unwatched = set()
        if self._watch_sync is not None:
            every = self.awaiting_marker.keys() | self.watched_progress.keys() if sweep else None
            unwatched = self._watch_sync.sync(self._folders_of, every)
        if sweep:
            markers = list(self.awaiting_marker.items())
        else:
            markers = [(k, self.awaiting_marker[k]) for k in unwatched if k in self.awaiting_marker]
        progress = self._progress_to_check() if progress_due else []
        await self._look(markers, progress)

    async def _look(
        self, markers: list[tuple[Key, str]], progress: list[tuple[Key, str, tuple[int, int] | None]]
    ) -> None:
        """Stat the markers and progress documents given; trigger the jobs whose changed."""
        if not markers and not progress:
            return
        try:
            found = await self.storage(".", self._markers_present, markers) if markers else []
            if progress:
                found += await self.storage(".", self._progress_changed, progress)
        except (OSError, StorageError):  # storage trouble must not end marker detection for good
            logger.exception("cannot look for markers under %s", self.shared_root)
            return
        for key in found:
            self.queue.trigger(key)

    def _folders_of(self, key: Key) -> set[str]:
        folders = set()
        if (marker := self.awaiting_marker.get(key)) is not None:
            folders.add(marker.rsplit("/", 1)[0])
        if (watch := self.watched_progress.get(key)) is not None:
            folders.add(watch.relpath.rsplit("/", 1)[0])
        return folders

    def _on_folder_events(self, events: FolderEvents) -> None:
        changed = events.changed()
        if changed is None:  # the kernel dropped events: look at everything
            for key in self.awaiting_marker:
                self.queue.trigger(key)
            return
        now = datetime.now(UTC)
        for key, names in changed.items():
            marker = self.awaiting_marker.get(key)
            progress = self.watched_progress.get(key)
            urgent = {""}
            if marker is not None:
                inside = marker.split("/", 2)[2] if marker.count("/") >= 2 else marker
                urgent |= {inside.split("/", 1)[0], marker.rsplit("/", 1)[-1]}
            if names & urgent:
                if self._watch_sync is not None:  # a folder may have come or gone: watch again
                    self._watch_sync.changed(key)
                self.queue.trigger(key)
            elif progress is not None and PROGRESS_FILE in names:
                wait = (progress.not_before - now).total_seconds() if progress.not_before else 0.0
                self.queue.trigger_later(key, max(0.0, wait))
