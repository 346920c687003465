"""The I/O shell around the reconcile core: gather what is observed, decide, apply."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from tfmw_operator.api.kinds import TFJOBS, JobKind, StatusWrites, kind_of
from tfmw_operator.api.objects import Json, Key
from tfmw_operator.api.spec import JobSpec, SpecError
from tfmw_operator.api.status import JobStatus, Phase
from tfmw_operator.api.tfjob import KF_JOB_NAME, KF_OPERATOR_NAME, KUBEFLOW_OPERATOR_NAME, SERVE_OFF, serves
from tfmw_operator.core.builders import build_event, pod_group_name
from tfmw_operator.core.claim_checks import Claim, FolderReached, OwnPods, ReachedClaims, trusted_pass
from tfmw_operator.core.decision import (
    CreatePods,
    Decision,
    DeleteJob,
    DeletePods,
    DeleteWorkloads,
    EnsureJobDirectory,
    EnsureService,
    Milestone,
    PatchStatus,
    RemoveMarker,
    WriteControl,
)
from tfmw_operator.core.evaluation import EvaluationReading, reads_evaluation
from tfmw_operator.core.observed import CreateError, MarkerState, Observed
from tfmw_operator.core.owned import Owned
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.in_place import in_place, pod_group
from tfmw_operator.core.policies.progress_deadline import stalled_by_progress
from tfmw_operator.core.policies.straggler import TRAINING_SETS
from tfmw_operator.core.progress import ProgressProblem, ProgressReading
from tfmw_operator.core.reconcile import reconcile, reconcile_failed
from tfmw_operator.core.reports import PodReport, StacksReading
from tfmw_operator.core.step_times import StepTimesSnapshot
from tfmw_operator.core.supervision import GANG
from tfmw_operator.core.tenancy import pod_security_of
from tfmw_operator.core.workloads import WorkloadState, observe_workload
from tfmw_operator.kube.client import ApiError, Kube
from tfmw_operator.kube.fair import FairSlots
from tfmw_operator.kube.informer import Informer, LatestJobs, ignore_changes, own_name
from tfmw_operator.runtime import metrics
from tfmw_operator.runtime.settings import Settings
from tfmw_operator.shell.audit import JobAudit
from tfmw_operator.shell.creation import Created, Creator
from tfmw_operator.shell.events import EventPoster
from tfmw_operator.shell.worker_deletion import WorkerDeleter
from tfmw_operator.shell.workqueue import WorkQueue
from tfmw_operator.storage.control import (
    ReportCache,
    place_supervisor,
    read_reports,
    read_stacks,
    write_control,
)
from tfmw_operator.storage.files import (
    SharedStorage,
    StorageError,
    ensure_job_directory,
    file_signature,
    read_evaluation,
    read_marker,
    read_progress,
    remove_marker,
    reported,
)
from tfmw_operator.storage.job_files import JobFileWatcher, Signature
from tfmw_operator.storage.step_times import read_step_times, steps_relpath
from tfmw_operator.storage.watch import FolderStamp

logger = logging.getLogger(__name__)
T = TypeVar("T")

QUEUE_RECHECK_SECONDS = 2.0
# A reconcile that raises is tried again after 2, 4, 8 ... seconds, at most this often;
# from the third failure in a row the job's status and a Warning name the error.
FIRST_RETRY_SECONDS = 2.0
MAX_RETRY_SECONDS = 300.0
REPORT_AFTER_FAILURES = 3
# A control file that follows a written status, not written: tried again after this (the
# supervisors are bounded anyway: docs/supervisor.md, `--exited-wait-seconds`).
CONTROL_RETRY_SECONDS = 5.0
SERVICE_RETRY_SECONDS = 30.0  # a running gang's missing Service, refused: tried again after this
# Launches creating at once. More only queue for the connections, each with its built pods
# held: more memory, no faster (docs/benchmarks.md, "The measurements behind the code").
LAUNCHES_AT_ONCE = 16
# A running job's step-times documents are read once per progress interval; while a reading
# finds none (a program that writes none), this many intervals apart. While the job's steps
# folder is not there and inotify watches the job's folder, no timer at all: the folder's
# creation triggers the job (storage/job_files.py). A timer per running job that writes none
# was a reconcile per job per minute: nearly all of the operator's idle CPU (scale bench on
# kwok, 200 jobs: 0.5 % of a core with it, 0.03 % without).
STEP_TIMES_IDLE_INTERVALS = 6
# The longest a missing steps folder is taken as missing with no look, while nothing is told
# of the job's folder: a bound on trusting the kernel's word, and no timer of its own.
STEP_TIMES_ABSENT_TRUSTED_SECONDS = 60.0


@dataclass(frozen=True)
class _StepsAbsent:
    """A reading that found no steps folder in a job's watched folder."""

    reading: StepTimesSnapshot
    stamp: FolderStamp  # the job folder's, taken before the read
    read_at: float  # on the monotonic clock


@dataclass
class _JobState:
    """What the controller keeps of one job between reconciles (its files: JobFileWatcher)."""

    uid: str = ""  # of the job this is about: a new job of the same name starts afresh
    active: bool = False  # tracked and not finished
    create_error: CreateError | None = None  # what the last pod creations ran into, until one succeeds
    namesake_service: Owned | None = None  # a Service with the job's name that is not its own
    failures: int = 0  # reconciles that raised, in a row
    status_written_at: datetime | None = None  # by this operator, last
    # The supervisors' reports as last read (read again only when a file changed), and the
    # control file as this operator last wrote it (written again only when it changes).
    reports: ReportCache = dataclasses.field(default_factory=ReportCache.empty)
    control_written: Json | None = None
    control_unwritten: bool = False  # a control file that follows a status is not written yet (said once)
    step_times_due: float = 0.0  # on the monotonic clock: when its step-times documents are read next
    step_times_attempt: int | None = None  # the attempt they were read for last
    # While the steps folder is missing and the job's folder watched: that reading, the
    # folder's stamp then and when it was read. No timer then (_reconcile), and no read again
    # until the stamp changes (_read_step_times).
    steps_absent: _StepsAbsent | None = None
    # The resourceVersion of the job last parsed, and what it gave: the API server gives every
    # change of a job a new one, so one version parses the same (_parsed). The job itself is
    # not kept: a finished job, reconciled no more, would hold two versions of it.
    parsed_version: str = ""
    parsed: tuple[JobSpec | SpecError, JobStatus] | None = None
    # The job's own metric series as last published (runtime/metrics.py, publish_job).
    published: bool = False
    series: metrics.JobSeries | None = None


class JobController:
    def __init__(self, kube: Kube, settings: Settings) -> None:
        self.kube = kube
        self.settings = settings
        self.queue = WorkQueue(self.reconcile)
        # What the watches last saw; reconciles decide from it, without reading the API.
        self.jobs = LatestJobs()
        namespaces = settings.exact_namespaces
        scopes = [f"/api/v1/namespaces/{n}" for n in namespaces] or ["/api/v1"]
        by_scope = list(zip(namespaces or [""], scopes, strict=True))

        def views(resource: str, reduce: Callable[[Json], Owned]) -> dict[str, Informer[Owned]]:
            trigger = self.queue.trigger
            return {n: Informer(kube, f"{scope}/{resource}", reduce, trigger) for n, scope in by_scope}

        self.pods = views("pods", Owned.pod_of)
        self.services = views("services", Owned.service_of)
        # Not ours, so watched whole; reconciles only read it and never wait for it: a
        # claim not seen (yet) is simply checked again.
        self.claims = {
            n: Informer(kube, f"{scope}/persistentvolumeclaims", Claim.of, ignore_changes, "", own_name)
            for n, scope in by_scope
        }
        self.reached_claims = ReachedClaims()
        # The Pod Security level each namespace enforces (core/tenancy): read only.
        self.namespaces: Informer[str] = Informer(
            kube, "/api/v1/namespaces", pod_security_of, ignore_changes, "", own_name
        )
        self.own_pods = OwnPods()  # the UIDs of the pods this operator created (claim_checks)
        # Where TFJobs are served: Kubeflow's own TFJob controller, seen through its pods (the
        # job's, and the controller's own): one controller per job (api/tfjob.py `serves`).
        self.kubeflow_pods: dict[str, Informer[str]] = {}
        self.kubeflow_controllers: list[Informer[bool]] = []
        if settings.tfjobs != SERVE_OFF:
            self.kubeflow_pods = {
                n: Informer(kube, f"{scope}/pods", _name, self.queue.trigger, KUBEFLOW_PODS, _kubeflow_job)
                for n, scope in by_scope
            }
        if settings.kubeflow_controller_scope is not None:
            path = f"{settings.kubeflow_controller_scope}/pods"
            self.kubeflow_controllers = [
                Informer(kube, path, _running, ignore_changes, KUBEFLOW_CONTROLLER, own_name)
            ]
        self._told: set[str] = set()  # UIDs of jobs told once why they wait or are not served
        self.storage = SharedStorage(settings.shared_root)
        self.files = JobFileWatcher(self.storage, self.queue.trigger, self.queue.trigger_later)
        self.events = EventPoster(kube)
        self.audit = JobAudit(
            kube, self.jobs, self.pods.values(), settings.exact_namespaces, self.forget, settings.kinds
        )
        self.creator = Creator(kube, self.events, self._services_of, self._pods_of, self.own_pods.add)
        self.deleter = WorkerDeleter(kube, self.storage, self._pods_of)
        self._states: dict[Key, _JobState] = {}
        self._active = 0
        # TFJobs undecided while Kubeflow's pods are not listed: since when, and those told.
        self._unsettled_since: dict[str, float] = {}
        self._told_unsettled: set[str] = set()
        self._launching = FairSlots(LAUNCHES_AT_ONCE)  # in turn between namespaces (kube/fair)

    def watches(self) -> list[Informer[Owned]]:
        return [*self.pods.values(), *self.services.values()]

    def side_watches(self) -> list[Informer[str] | Informer[bool]]:
        """Watches of what is not the operator's own that reconciles only read (never wait for)."""
        return [self.namespaces, *self.kubeflow_pods.values(), *self.kubeflow_controllers]

    def _view(self, informers: dict[str, Informer[T]], namespace: str) -> Informer[T]:
        return informers[namespace] if namespace in informers else informers[""]

    def _claim(self, namespace: str, name: str) -> Claim | None:
        """The claim as its watch saw it last; None when that watch is not listing fresh (a
        claim made again since would go unseen)."""
        view = self._view(self.claims, namespace)
        return next(iter(view.of_job((namespace, name))), None) if view.fresh else None

    def _claim_reached(self, job: JobSpec, pods: Sequence[ObservedPod]) -> FolderReached | None:
        """Record a folder check this job's worker passed, and say whether any job's did for
        the claim as it is now. The worker must still be up (not deleted: the claim's
        protection finalizer keeps its claim while it runs), and the claim older than the
        check, so the claim seen is the one the check read. Only a pod this operator created
        counts, and only a check that ran the operator's image (claim_checks)."""
        if not job.folder_check_image or job.claim_name is None:
            return None
        claim = self._claim(job.namespace, job.claim_name)
        passed = trusted_pass(pods, self.own_pods, job.folder_check_image)
        if passed is not None:
            reached = FolderReached(job.name, passed.index)
            self.reached_claims.record(job.namespace, claim, reached, passed.folder_checked_at)
        return self.reached_claims.reached(job.namespace, claim)

    def _pod_security(self, namespace: str) -> str | None:
        """The Pod Security level the namespace enforces by its label; None when the
        namespaces watch is not listing fresh."""
        if not self.namespaces.fresh:
            return None
        return next(iter(self.namespaces.of_job(("", namespace))), "")

    def _pods_of(self, namespace: str) -> Informer[Owned]:
        return self._view(self.pods, namespace)

    def _services_of(self, namespace: str) -> Informer[Owned]:
        return self._view(self.services, namespace)

    async def reconcile(self, key: Key) -> float | None:
        # As a restarted controller must: decide nothing before the view holds every object.
        for watch in self.watches():
            await watch.synced.wait()
        try:
            requeue = await self._reconcile(key)
        except Exception as error:  # whatever one job runs into is that job's condition, not a loop
            return await self._reconcile_failed(key, error)
        if (state := self._states.get(key)) is not None:
            state.failures = 0
        return requeue

    async def _reconcile_failed(self, key: Key, error: Exception) -> float:
        """Try again with backoff; from REPORT_AFTER_FAILURES on, write the error into the
        job's status and a Warning, and let its deadlines end it (reconcile_failed)."""
        state = self._state(key)
        state.failures += 1
        delay = min(FIRST_RETRY_SECONDS * 2.0 ** min(state.failures - 1, 16), MAX_RETRY_SECONDS)
        logger.error(
            "reconcile of %s/%s failed (%d in a row); trying again in %.0fs",
            *key, state.failures, delay, exc_info=error,
        )  # fmt: skip
        job = self.jobs.get(key)
        if state.failures < REPORT_AFTER_FAILURES or job is None:
            return delay
        described = f"{type(error).__name__}: {error}"[:500]
        try:
            pods = self._pods_of(key[0]).of_job(key)
            kind = kind_of(job)
            spec = kind.parse(job, self.settings.folder_check_image, self.settings.supervisor_image)
            now = datetime.now(UTC)
            observed = Observed.of_owned(job, pods, MarkerState(), now, spec, kind.recorded_status(job))
            decision = reconcile_failed(observed, described)
            await self._apply(key, job, observed.pods, decision, spec if isinstance(spec, JobSpec) else None)
        except Exception:
            logger.exception("reporting the failed reconcile of %s/%s failed too", *key)
            return delay
        return delay if decision.requeue_after is None else min(delay, decision.requeue_after)

    async def _reconcile(self, key: Key) -> float | None:
        namespace, name = key
        started = time.perf_counter()
        job = self.jobs.get(key)
        if job is None:
            self.forget(key)
            return None
        self._tell_rivals(key, job)
        kind = kind_of(job)
        if kind is TFJOBS:
            served = self._serves_tfjob(key, job)
            if served is not True:
                return None if served is False else KUBEFLOW_RECHECK_SECONDS
        pods = self._pods_of(namespace).of_job(key)
        service = next((s for s in self._services_of(namespace).of_job(key) if s.name == name), None)
        state = self._state(key)
        if state.namesake_service is not None:
            service = await self._namesake_service(key)
        spec, recorded = self._parsed(state, kind, job)
        marker, storage_error, progress, evaluation, workload = MarkerState(), None, None, None, None
        reports: tuple[PodReport, ...] | None = None
        stacks: tuple[StacksReading, ...] = ()
        step_times: StepTimesSnapshot | None = None
        if isinstance(spec, JobSpec) and spec.shared:
            try:
                marker = await self.storage.call(spec.marker_relpath, read_marker, spec.marker_relpath)
            except StorageError as error:
                storage_error = str(error)
            if in_place(spec) and (not recorded.finished or any(o.pod and o.pod.supervised for o in pods)):
                reports, stacks = await self._read_supervisors(state, spec, recorded)
            # Only a running gang trains; a job being launched or restarted costs no read.
            if recorded.phase is Phase.RUNNING:
                progress = await self._read_progress(key, spec.progress_relpath)
                if not marker.exists:  # a job ending now has no straggler to find
                    step_times = await self._read_step_times(key, state, spec, recorded.attempt)
            if reads_evaluation(spec, recorded.phase, (o.pod for o in pods)):
                evaluation = await self._read_evaluation(spec.evaluation_relpath)
            if spec.queue_name and not recorded.finished:
                # A gang restarted in place keeps its pods' group; else the attempt's own.
                observed_pods = [o.pod for o in pods if o.pod is not None]
                group = pod_group(spec, observed_pods) or pod_group_name(spec, recorded.attempt)
                workload = await self._workload(namespace, group)
        observed = Observed.of_owned(
            job,
            pods,
            marker,
            datetime.now(UTC),
            spec,
            status=recorded,
            service=service,
            storage_error=storage_error,
            create_error=state.create_error,
            progress=progress,
            evaluation=evaluation,
            progress_interval=self.settings.progress_interval,
            workload=workload,
            status_written_at=state.status_written_at,
            reports=reports,
            stacks=stacks,
            step_times=step_times,
        )
        if isinstance(spec, JobSpec):
            observed = dataclasses.replace(
                observed,
                claim_reached=self._claim_reached(spec, observed.pods),
                pod_security=self._pod_security(spec.namespace),
                claim=None if spec.claim_name is None else self._claim(spec.namespace, spec.claim_name),
                claim_known=self._view(self.claims, spec.namespace).fresh,
                unread_progress=self.files.progress_unread(key),
            )
        decision = reconcile(observed)
        completed = await self._apply(
            key, job, observed.pods, decision, spec if isinstance(spec, JobSpec) else None
        )
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
        running = decision.status.phase is Phase.RUNNING
        if running and isinstance(spec, JobSpec) and _step_stems(spec) and state.steps_absent is None:
            # Nothing else tells when the workers' documents change: read them again then.
            if state.step_times_attempt != decision.status.attempt:
                # Not read for this attempt yet: the gang has just turned Running, and its
                # programs have written none. The first read comes with the next reconcile,
                # whatever brings it, and at the latest an interval from now: a reconcile of its
                # own at once was one more of each launch's five (make bench-scale).
                due = self.settings.progress_interval
            else:
                due = max(0.0, state.step_times_due - time.monotonic())
            requeue = due if requeue is None else min(requeue, due)
        return requeue

    def _parsed(self, state: _JobState, kind: JobKind, job: Json) -> tuple[JobSpec | SpecError, JobStatus]:
        """The job's spec and recorded status, parsed once per version: a launch reconciles a
        job once per pod event, while the job itself changes only with its status writes."""
        version = str((job.get("metadata") or {}).get("resourceVersion") or "")
        if state.parsed is None or not version or state.parsed_version != version:
            settings = self.settings
            spec = kind.parse(job, settings.folder_check_image, settings.supervisor_image)
            state.parsed_version, state.parsed = version, (spec, kind.recorded_status(job))
        return state.parsed

    async def _read_supervisors(
        self, state: _JobState, spec: JobSpec, status: JobStatus
    ) -> tuple[tuple[PodReport, ...] | None, tuple[StacksReading, ...]]:
        """The gang's supervisors' reports (None: they cannot be read now), and, while a stacks
        request of this attempt is out, their stacks files."""
        stems = [m.stem for m in spec.members if m.type in GANG]
        try:
            reports = await self.storage.call(
                spec.directory, read_reports, spec.directory, spec.uid, stems, state.reports
            )
        except StorageError as error:
            logger.warning("cannot read the supervisors' reports of %s: %s", spec.directory, error)
            return None, ()
        request = status.stacks_request
        if request is None or request.attempt != status.attempt or status.finished:
            return reports, ()
        try:
            stacks = await self.storage.call(
                spec.directory, read_stacks, spec.directory, status.attempt, stems, spec.chief.stem
            )
        except StorageError as error:
            logger.warning("cannot read the stacks of %s: %s", spec.directory, error)
            stacks = ()
        return reports, stacks

    async def _read_step_times(
        self, key: Key, state: _JobState, spec: JobSpec, attempt: int
    ) -> StepTimesSnapshot | None:
        """The training pods' step-times documents, at most once per progress interval (sooner
        when a new attempt runs); None when it is not time yet, or nothing could be compared.
        While there is no steps folder and inotify watches the job's folder: on no timer, its
        creation brings the next reconcile; and that reading stands, with no call, while no
        event of the job's folder has been read since (at most
        STEP_TIMES_ABSENT_TRUSTED_SECONDS). A read at every reconcile of a running job was a
        third storage call per reconcile beside the marker's and the progress document's."""
        stems = _step_stems(spec)
        now = time.monotonic()
        if not stems or (now < state.step_times_due and attempt == state.step_times_attempt):
            return None
        # Asked before the read: a folder made after the read is then surely told.
        stamp = self.files.folder_stamp(key, spec.directory)
        absent = state.steps_absent
        state.step_times_attempt = attempt
        trusted = absent is not None and now - absent.read_at < STEP_TIMES_ABSENT_TRUSTED_SECONDS
        if absent is not None and trusted and absent.stamp == stamp:
            return absent.reading
        relpath = steps_relpath(spec.directory)
        try:
            snapshot = await self.storage.call(relpath, read_step_times, spec.directory, stems)
        except StorageError as error:
            snapshot = StepTimesSnapshot(error=str(error))
        state.steps_absent = None
        if snapshot.no_folder and stamp is not None:
            state.steps_absent = _StepsAbsent(snapshot, stamp, now)
            state.step_times_due = now
            return snapshot
        idle = not snapshot.documents and snapshot.error is None
        state.step_times_due = now + self.settings.progress_interval * (
            STEP_TIMES_IDLE_INTERVALS if idle else 1
        )
        return snapshot

    def _tell_rivals(self, key: Key, job: Json) -> None:
        """Jobs of the other kind with this job's name wait for it to go: say so on each, once."""
        for rival in self.jobs.rivals(key):
            uid = str((rival.get("metadata") or {}).get("uid") or "")
            if uid in self._told:
                continue
            self._told.add(uid)
            message = (
                f"{job.get('kind')} {key[1]} has this name in this namespace and was created first: "
                f"their pods would have the same names: this {rival.get('kind')} waits for it to be deleted"
            )
            self._warn(key[0], rival, "NameInUse", message)

    def _serves_tfjob(self, key: Key, job: Json) -> bool | None:
        """Whether this TFJob is tfmw's to reconcile (api/tfjob.py `serves`); if not, say why
        on it once, and touch nothing of it. None: not known yet (the watches of Kubeflow's
        pods not listed yet), to be looked at again soon."""
        kubeflows_pods = (
            bool(self._view(self.kubeflow_pods, key[0]).of_job(key)) if self.kubeflow_pods else False
        )
        running: bool | None = None
        watches: list[Informer[bool] | Informer[str]] = [
            *self.kubeflow_controllers,
            *self.kubeflow_pods.values(),
        ]
        if all(view.fresh for view in watches):
            running = any(any(view.of_job(k)) for view in self.kubeflow_controllers for k in view.jobs())
        # Read only where it decides (the status annotation may be 64 KiB of JSON).
        launched = running is not False and TFJOBS.recorded_status(job).launched_attempt is not None
        serving = serves(self.settings.tfjobs, job, kubeflows_pods, running, launched)
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if not serving.settled:
            self._tell_unsettled(key, job, uid, serving.why)
            return None
        self._unsettled_since.pop(uid, None)
        if serving.served:
            return True
        if uid not in self._told:
            self._told.add(uid)
            logger.info("TFJob %s/%s is not tfmw's: %s", *key, serving.why)
            self._warn(key[0], job, "NotServedByTfmw", serving.why)
        return False

    def _tell_unsettled(self, key: Key, job: Json, uid: str, why: str) -> None:
        """A TFJob left undecided this long: its watches keep failing (the operator's log says
        why). It waits, and says so once."""
        now = time.monotonic()
        since = self._unsettled_since.setdefault(uid, now)
        if now - since < KUBEFLOW_UNKNOWN_TOLD_AFTER_SECONDS or uid in self._told_unsettled:
            return
        self._told_unsettled.add(uid)
        why = f"{why}: the pods that say so cannot be listed (the operator's log says why); it waits"
        logger.warning("TFJob %s/%s: %s", *key, why)
        self._warn(key[0], job, "NotServedByTfmw", why)

    async def _namesake_service(self, key: Key) -> Owned | None:
        """A Service of the job's name that is not its own, as it is now (gone, or still there)."""
        found = await self.kube.get_service(*key)
        service = None if found is None else Owned.service_of(found)
        self._state(key).namesake_service = service
        return service

    async def _workload(self, namespace: str, name: str) -> WorkloadState | None:
        found = await self.kube.get_workload(namespace, name)
        return None if found is None else observe_workload(name, found)

    async def _read_evaluation(self, relpath: str) -> EvaluationReading | None:
        try:
            return await self.storage.call(relpath, read_evaluation, relpath)
        except StorageError as error:
            return ProgressProblem(str(error))

    async def _read_progress(self, key: Key, relpath: str) -> ProgressReading | None:
        try:
            signature, reading = await self.storage.call(relpath, _signed_progress, relpath)
        except StorageError as error:
            return ProgressProblem(str(error))
        self.files.saw_progress(key, signature)
        return reading

    async def _apply(
        self, key: Key, job: Json, pods: Sequence[ObservedPod], decision: Decision, spec: JobSpec | None
    ) -> bool:
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
                # Not best effort: a namesake's marker left in place would end this job at once.
                await self.storage.call(action.relpath, remove_marker, action.relpath)
            elif isinstance(action, EnsureJobDirectory):
                # Made while the Service and pods are created: no worker starts within the
                # millisecond it takes, and a failure is only reported either way.
                call = self.storage.call(action.relpath, ensure_job_directory, action.relpath, action.job_uid)
                alongside.append(asyncio.ensure_future(reported(warnings, call)))
            elif isinstance(action, WriteControl):
                # In the job's folder, which a launch makes beside its pods: made first.
                await asyncio.gather(*alongside)
                document = action.document()
                state = self._state(key)
                if state.control_written != document:
                    try:
                        await self.storage.call(action.relpath, write_control, action.relpath, document)
                    except (StorageError, OSError) as error:
                        if not action.follows_status:
                            raise  # the pods that follow must not start without it
                        # The status is written: its Events, counters and the deletions after it
                        # go on; the file is written again at the next reconcile.
                        self._control_unwritten(key, action, error, warnings)
                        continue
                    state.control_written = document
                    state.control_unwritten = False
            elif isinstance(action, EnsureService) and not action.launch:
                if not await self.creator.recreate_service(namespace, action.service, warnings):
                    self.queue.trigger_later(key, SERVICE_RETRY_SECONDS)
            elif isinstance(action, EnsureService | CreatePods):
                # The pods that follow their Service go with it: none, or only the first (as
                # the core says), if it is refused.
                following = actions[0] if actions else None
                batch = action if isinstance(action, CreatePods) else None
                if isinstance(action, EnsureService) and isinstance(following, CreatePods):
                    batch = following
                    actions.pop(0)
                service = action if isinstance(action, EnsureService) else None
                if batch is not None and in_place(batch.job):
                    # The supervisor these pods will run, checked (and put back) right before
                    # them, whatever this decision wrote: it may have gone since the last look.
                    relpath = batch.job.directory
                    await self.storage.call(relpath, place_supervisor, relpath)
                # Only the creating waits its turn: a gang restart's deletions, or any other
                # job's decision, never queue behind a burst of launches.
                async with self._launching.held(namespace):
                    created = await self.creator.launch(namespace, service, batch)
                if not self._created(key, created):
                    completed = False
                    break
            elif isinstance(action, PatchStatus):
                writes = kind_of(job).status_writes(job, action.status, spec, datetime.now(UTC))
                if writes.metadata is not None or writes.status is not None:
                    if not await self._patch_status(job, writes):
                        completed = False
                        break
                    self._state(key).status_written_at = datetime.now(UTC)
            elif isinstance(action, DeletePods):
                doomed = [by_name[n] for n in action.names if n in by_name]
                warn = functools.partial(self._warn, namespace, job)
                deletions = (self.deleter.delete(namespace, name, p, action, warn) for p in doomed)
                if any(await asyncio.gather(*deletions)):
                    # Gone at once: no watch event will bring the job back (a gang restart's
                    # next attempt waits for exactly that), so decide again after this.
                    self.queue.trigger(key)
            elif isinstance(action, DeleteWorkloads):
                await asyncio.gather(*(self.kube.delete_workload(namespace, n) for n in action.names))
            elif isinstance(action, DeleteJob):
                uid = str((job.get("metadata") or {}).get("uid") or "")
                await self.kube.delete_job(namespace, name, uid, kind_of(job))
        await asyncio.gather(*alongside)
        events = [(e.type, e.reason, e.message) for e in decision.events] if completed else []
        events += [("Warning", reason, message) for reason, message in warnings]
        now = datetime.now(UTC)
        for event in events:
            self.events.post(namespace, build_event(job, *event, now, uuid.uuid4().hex[:12]))
        return completed

    def _control_unwritten(
        self, key: Key, action: WriteControl, error: Exception, warnings: list[tuple[str, str]]
    ) -> None:
        """A control file that follows a written status (a raised attempt, a finished job's
        `exit`) could not be written: said once until it is written, tried again soon."""
        state = self._state(key)
        message = f"shared storage: the control file of {action.relpath} was not written: {error}"[:500]
        logger.warning("%s", message)
        if not state.control_unwritten:
            warnings.append(("StorageError", message))
        state.control_unwritten = True
        self.queue.trigger_later(key, CONTROL_RETRY_SECONDS)

    def _warn(self, namespace: str, job: Json, reason: str, message: str) -> None:
        """A Warning Event on the job, from work that outlives its reconcile (saving a log)."""
        self.events.post(
            namespace, build_event(job, "Warning", reason, message, datetime.now(UTC), uuid.uuid4().hex[:12])
        )

    def _created(self, key: Key, outcome: Created) -> bool:
        """Remember what a launch ran into, for the core; False when it means deciding again."""
        state = self._state(key)
        if outcome.namesake is not None:
            state.namesake_service = outcome.namesake
        if outcome.refused is not None:
            what, refused = outcome.refused
            previous, now = state.create_error, datetime.now(UTC)
            same = previous is not None and previous.kind is refused.kind and previous.refused is what
            failures = previous.failures + 1 if previous is not None and same else 1
            since = now if previous is None else previous.since or previous.at
            state.create_error = CreateError(refused.kind, refused.message, failures, now, what, since)
            logger.warning("creating the %s of %s/%s was refused: %s", what, *key, refused.message)
        elif outcome.done:
            state.create_error = None
        return outcome.done

    async def _patch_status(self, job: Json, writes: StatusWrites) -> bool:
        """Write the job's status (for a TFJob, tfmw's own first, in an annotation); False when
        the job is not as read: decide again from it as it is, or forget it when it is gone (a
        deletion the watch missed, in a re-list's gap)."""
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        kind = kind_of(job)
        version = meta["resourceVersion"]
        try:
            if writes.metadata is not None:
                written = await self.kube.patch_job_metadata(
                    namespace, name, writes.metadata["metadata"], version, kind
                )
                self.jobs.put(written)
                version = (written.get("metadata") or {}).get("resourceVersion") or version
            if writes.status is not None:
                self.jobs.put(await self.kube.patch_job_status(namespace, name, writes.status, version, kind))
        except ApiError as error:
            if error.status not in (404, 409):
                raise
            if error.status == 409 and self.jobs.get((namespace, name)) is not job:
                return False  # the watch has brought the newer version already
            # Changed since it was read, or gone: the watch may never tell (it missed it).
            current = await self.kube.get_job(namespace, name, kind)
            if current is None or (current.get("metadata") or {}).get("uid") != meta.get("uid"):
                self.jobs.remove(job)
                self.forget((namespace, name))
                if current is not None:  # a new job of the same name: decide for it afresh
                    self.jobs.put(current)
            else:
                self.jobs.put(current)
            return False
        return True

    def _track(self, key: Key, decision: Decision, marker_time: datetime | None) -> None:
        milestones = decision.milestones
        if Milestone.LAUNCHED in milestones:
            metrics.JOBS_CREATED.inc()
        if Milestone.RESTARTED in milestones:  # the restart's record is final: its cause will not change
            history = decision.status.history
            metrics.GANG_RESTARTS.labels(cause=history[0].cause if history else "Unknown").inc()
        if Milestone.SUCCEEDED in milestones:
            metrics.JOBS_SUCCEEDED.inc()
            if marker_time is not None:
                latency = (datetime.now(UTC) - marker_time).total_seconds()
                metrics.MARKER_LATENCY_SECONDS.observe(max(0.0, latency))
        if Milestone.FAILED in milestones:
            metrics.JOBS_FAILED.labels(reason=decision.status.reason or "").inc()
        self._set_active(key, not decision.finished)
        self.files.track(key, decision.watch_marker, decision.watch_progress, decision.watch_reports)
        series = None if decision.finished else _series(decision.status)
        state = self._state(key)
        if not state.published or series != state.series:
            metrics.publish_job(*key, series)
            state.published, state.series = True, series

    def forget(self, key: Key) -> None:
        """Everything kept of a job that is gone: its record, files watched, queued work and series."""
        self._set_active(key, False)
        self._states.pop(key, None)
        self.files.forget(key)
        self.queue.forget(key)
        metrics.publish_job(*key, None)

    def _state(self, key: Key) -> _JobState:
        """The job's record; a fresh one when the job held now is another than it was about
        (deleted and created again under its name: nothing of the old job carries over)."""
        job = self.jobs.get(key)
        uid = str(((job or {}).get("metadata") or {}).get("uid") or "")
        state = self._states.get(key)
        if state is not None and (job is None or state.uid == uid):
            return state
        if state is not None:
            self._set_active(key, False)
        state = self._states[key] = _JobState(uid=uid)
        return state

    def _set_active(self, key: Key, active: bool) -> None:
        state = self._states.get(key) if not active else self._state(key)
        if state is None or state.active is active:
            return
        state.active = active
        self._active += 1 if active else -1
        metrics.ACTIVE_JOBS.set(self._active)


def _series(status: JobStatus) -> metrics.JobSeries:
    progress, stragglers = status.progress, status.stragglers
    return metrics.JobSeries(
        progress_ratio=None if progress is None or progress.percent is None else progress.percent / 100.0,
        examples_per_second=None if progress is None else progress.examples_per_second,
        stalled=stalled_by_progress(status),
        stragglers=len(stragglers.named) if stragglers is not None else 0,
    )


def _step_stems(spec: JobSpec) -> list[str]:
    """The pods whose compute times are compared (the chief and the workers, all of spec.workers:
    a smaller attempt's documents are simply fewer); none for a job of one, or without storage."""
    if not spec.shared:
        return []
    stems = [m.stem for m in spec.sized(spec.requested_workers).members if m.type in TRAINING_SETS]
    return stems if len(stems) > 1 else []


# Pods of Kubeflow's TFJob controller: its jobs' (by their job-name label) and its own.
KUBEFLOW_PODS = f"{KF_OPERATOR_NAME}={KUBEFLOW_OPERATOR_NAME}"
KUBEFLOW_CONTROLLER = "control-plane=kubeflow-training-operator"
# How soon a TFJob is looked at again while whether Kubeflow's controller runs is not known
# (its namespace's pods not listed yet), and after how long the job is told why it waits.
KUBEFLOW_RECHECK_SECONDS = 2.0
KUBEFLOW_UNKNOWN_TOLD_AFTER_SECONDS = 60.0


def _name(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _running(obj: Json) -> bool:
    """A controller pod that runs (a finished or terminating one serves nothing)."""
    meta = obj.get("metadata") or {}
    return (obj.get("status") or {}).get("phase") == "Running" and not meta.get("deletionTimestamp")


def _kubeflow_job(obj: Json) -> str | None:
    job = ((obj.get("metadata") or {}).get("labels") or {}).get(KF_JOB_NAME)
    return job if isinstance(job, str) else None


def _signed_progress(shared_root: Path, relpath: str) -> tuple[Signature | None, ProgressReading | None]:
    """The document's signature, then the document: a write in between is a change to see."""
    return file_signature(shared_root, relpath), read_progress(shared_root, relpath)
