"""The reconcile core: from what is observed now, what to do next. Pure and level-based.

The same job, pods, marker and clock always give the same decision, so the operator
may be killed between any two steps and pick up where the cluster actually is.
Everything that must survive a restart lives in the job's status: the current
`attempt`, whether its pods were all `launchedAttempt`, and the `restarts` count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tfmw_operator import conditions as cond
from tfmw_operator.api import CleanPodPolicy, JobSpec, Json, Phase, SpecError, parse_job
from tfmw_operator.builders import build_pod, build_service, pod_name
from tfmw_operator.observed import (
    PERMANENT_STALL_REASONS,
    MarkerState,
    ObservedPod,
    format_time,
    parse_time,
)
from tfmw_operator.restart_policy import WorkerFailure, failure_of, is_retryable, vanished

# ---- actions, carried out in order by the shell; it stops at the first that fails ----


@dataclass(frozen=True)
class EnsureJobDirectory:
    relpath: str


@dataclass(frozen=True)
class EnsureService:
    service: Json


@dataclass(frozen=True)
class CreatePods:
    pods: tuple[Json, ...]


@dataclass(frozen=True)
class DeletePods:
    names: tuple[str, ...]


@dataclass(frozen=True)
class RemoveMarker:
    relpath: str


@dataclass(frozen=True)
class PatchStatus:
    status: Json


@dataclass(frozen=True)
class DeleteJob:
    pass


Action = EnsureJobDirectory | EnsureService | CreatePods | DeletePods | RemoveMarker | PatchStatus | DeleteJob
Creation = EnsureJobDirectory | EnsureService | CreatePods


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None  # seconds until a time-based rule may fire

    @property
    def pods_to_create(self) -> tuple[Json, ...]:
        return tuple(p for a in self.actions if isinstance(a, CreatePods) for p in a.pods)

    @property
    def pods_to_delete(self) -> tuple[str, ...]:
        return tuple(n for a in self.actions if isinstance(a, DeletePods) for n in a.names)

    @property
    def status(self) -> Json | None:
        patches = [a.status for a in self.actions if isinstance(a, PatchStatus)]
        return patches[-1] if patches else None


@dataclass(frozen=True)
class Observed:
    job: Json
    pods: Sequence[ObservedPod]
    marker: MarkerState
    now: datetime


# ---- the core ----


@dataclass
class _Step:
    """The decision under construction, starting from the job's current status."""

    obs: Observed
    status: Json
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    due: list[datetime] = field(default_factory=list)

    @property
    def now(self) -> str:
        return format_time(self.obs.now)

    def set_condition(self, kind: str, true: bool, reason: str, message: str) -> None:
        current = self.status.get("conditions") or []
        self.status["conditions"] = cond.set_condition(current, kind, true, reason, message, self.now)

    def wake_at(self, when: datetime) -> None:
        self.due.append(when)

    def delete(self, pods: Sequence[ObservedPod]) -> None:
        names = tuple(p.name for p in pods if not p.deleting)
        if names:
            self.actions.append(DeletePods(names))


def reconcile(obs: Observed) -> Decision:
    old = obs.job.get("status") or {}
    step = _Step(obs, _copy_status(old))
    step.status["observedGeneration"] = (obs.job.get("metadata") or {}).get("generation", 1)
    try:
        job = parse_job(obs.job)
    except SpecError as error:
        _fail(step, None, "InvalidSpec", str(error), delete=list(obs.pods))
    else:
        _decide(step, job)
    return _finish(step, old)


def _copy_status(status: Json) -> Json:
    copied = {k: v for k, v in status.items() if k != "conditions"}
    copied["conditions"] = [dict(c) for c in status.get("conditions") or []]
    return copied


def _decide(step: _Step, job: JobSpec) -> None:
    status = step.status
    status.setdefault("attempt", 0)
    status.setdefault("restarts", 0)
    phase = status.get("phase")
    if phase in (Phase.SUCCEEDED.value, Phase.FAILED.value):
        _after_finish(step, job)
        return

    attempt: int = status["attempt"]
    current, stale = _by_attempt(step.obs.pods, attempt)
    _count_workers(step, job, current)
    marker = step.obs.marker
    marker_is_ours = marker.exists and marker.job_uid in (None, job.uid)
    if marker.exists and marker.job_uid not in (None, job.uid):
        step.actions.append(RemoveMarker(job.marker_relpath))

    if marker_is_ours and status.get("launchedAttempt") is not None:
        _succeed(step, job)
        return

    if job.run_policy.suspend:
        _suspend(step)
        return
    if phase == Phase.SUSPENDED.value:
        _resume(step)
        attempt = status["attempt"]
        stale = list(step.obs.pods)
        current = []

    if _deadline_passed(step, job):
        return

    if stale:
        # A new pod beside a terminating one registers the same task twice and TF
        # refuses it; the next attempt starts only once the old pods are gone.
        step.delete(stale)
        status["phase"] = status.get("phase") or Phase.PENDING.value
        return

    if status.get("launchedAttempt") != attempt:
        _launch(step, job, current, leftover_marker=marker_is_ours)
        return

    if _handle_failures(step, job, current):
        return
    if _handle_chief_exit(step, job, current):
        return
    if _handle_pending(step, job, current):
        return
    _set_progress_phase(step, job, current)


def _by_attempt(pods: Sequence[ObservedPod], attempt: int) -> tuple[list[ObservedPod], list[ObservedPod]]:
    """The pods of `attempt`, and those left over from other attempts."""
    return [p for p in pods if p.attempt == attempt], [p for p in pods if p.attempt != attempt]


def _count_workers(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> None:
    counts = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0}
    for pod in current:
        key = pod.phase.lower()
        if key in counts:
            counts[key] += 1
    step.status["workers"] = counts
    step.status["readyWorkers"] = f"{counts['running']}/{job.workers}"


def _launch(step: _Step, job: JobSpec, current: Sequence[ObservedPod], leftover_marker: bool) -> None:
    attempt: int = step.status["attempt"]
    present = {p.index for p in current}
    if leftover_marker and not current and step.status.get("launchedAttempt") is None:
        # Nothing of this job ever ran, so the marker is an earlier namesake's.
        step.actions.append(RemoveMarker(job.marker_relpath))
    missing = tuple(build_pod(job, i, attempt) for i in range(job.workers) if i not in present)
    step.actions.append(EnsureJobDirectory(job.directory))
    step.actions.append(EnsureService(build_service(job)))
    if missing:
        step.actions.append(CreatePods(missing))
    step.status["launchedAttempt"] = attempt
    step.status.setdefault("startTime", step.now)
    if not step.status.get("phase") or step.status["phase"] == Phase.SUSPENDED.value:
        step.status["phase"] = Phase.PENDING.value
    step.set_condition(
        cond.CREATED, True, "PodsCreated", f"created {job.workers} worker pods for attempt {attempt}"
    )
    if step.status["phase"] == Phase.PENDING.value:
        step.set_condition(cond.SUSPENDED, False, "Resumed", "the job is not suspended")
    step.events.append(
        Event("Normal", "PodsCreated", f"created {len(missing)} worker pods for attempt {attempt}")
    )


def _first_failure(job: JobSpec, current: Sequence[ObservedPod]) -> WorkerFailure | None:
    by_index = {p.index: p for p in current}
    failures: list[tuple[datetime, WorkerFailure]] = []
    never = datetime.max.replace(tzinfo=UTC)
    for index in range(job.workers):
        pod = by_index.get(index)
        if pod is None:
            failures.append((never, vanished(index, pod_name(job.name, index))))
        elif pod.phase == "Failed":
            failures.append((pod.finished_at or never, failure_of(pod)))
        elif pod.deleting and pod.phase != "Succeeded":
            failures.append((never, vanished(index, pod.name)))
    if not failures:
        return None
    # The worker that died first is the cause; the others usually fail because of it.
    return min(failures, key=lambda item: (item[0], item[1].index))[1]


def _handle_failures(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    failure = _first_failure(job, current)
    if failure is None:
        return False
    policy = job.run_policy
    restarts: int = step.status["restarts"]
    if not is_retryable(failure, policy.restart_policy):
        _fail(step, job, "WorkerFailed", failure.describe(), delete=_cleanup(job, current))
        return True
    if restarts >= policy.backoff_limit:
        message = f"{failure.describe()}; backoffLimit {policy.backoff_limit} reached"
        _fail(step, job, "BackoffLimitExceeded", message, delete=_cleanup(job, current))
        return True
    status = step.status
    status["attempt"] = status["attempt"] + 1
    status["restarts"] = restarts + 1
    status["phase"] = Phase.RESTARTING.value
    message = f"gang restart {restarts + 1}/{policy.backoff_limit}: {failure.describe()}"
    status["message"] = message
    step.set_condition(cond.RESTARTING, True, "WorkerFailed", message)
    step.set_condition(cond.RUNNING, False, "WorkerFailed", message)
    step.events.append(Event("Warning", "GangRestart", message))
    # Status first: if the operator dies after the deletes, the new attempt is on record.
    step.actions.append(PatchStatus(status))
    step.delete(current)
    return True


def _handle_chief_exit(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    chief = next((p for p in current if p.index == 0 and p.phase == "Succeeded"), None)
    if chief is None:
        return False
    exited = chief.finished_at or step.obs.now
    deadline = exited + timedelta(seconds=job.chief_exit_grace_seconds)
    if step.obs.now < deadline:
        step.wake_at(deadline)
        return False
    message = (
        f"worker 0 (pod {chief.name}) exited 0 but wrote no marker at "
        f"{job.marker_file} within chiefExitGraceSeconds={job.chief_exit_grace_seconds}; "
        "make the chief write TFMW_MARKER_PATH after training"
    )
    _fail(step, job, "MarkerMissing", message, delete=_cleanup(job, current))
    return True


def _handle_pending(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    stalled = sorted((p for p in current if p.phase == "Pending" and p.stall_reason), key=lambda p: p.index)
    if not stalled:
        step.set_condition(cond.STALLED, False, "WorkersStarted", "no worker is stuck")
        return False
    pod = stalled[0]
    message = f"worker {pod.index} (pod {pod.name}) is stuck Pending: {pod.stall_reason}: {pod.stall_message}"
    if not cond.condition_is_true(step.status["conditions"], cond.STALLED):
        step.events.append(Event("Warning", "Stalled", message))
    step.set_condition(cond.STALLED, True, pod.stall_reason, message)
    if pod.stall_reason in PERMANENT_STALL_REASONS:
        _fail(step, job, pod.stall_reason, message, delete=_cleanup(job, current))
        return True
    timeout = job.run_policy.pending_timeout_seconds
    if timeout is None:
        return False
    for pending in current:
        if pending.phase != "Pending" or pending.created is None:
            continue
        limit = pending.created + timedelta(seconds=timeout)
        if step.obs.now >= limit:
            reason = pending.stall_reason or "NotStarted"
            text = (
                f"worker {pending.index} (pod {pending.name}) was Pending longer than "
                f"pendingTimeoutSeconds={timeout}: {reason}: {pending.stall_message}"
            )
            _fail(step, job, "PendingTimeout", text, delete=_cleanup(job, current))
            return True
        step.wake_at(limit)
    return False


def _set_progress_phase(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> None:
    status = step.status
    if pending_timeout := job.run_policy.pending_timeout_seconds:
        for pod in current:
            if pod.phase == "Pending" and pod.created is not None:
                step.wake_at(pod.created + timedelta(seconds=pending_timeout))
    started = [p for p in current if p.phase in ("Running", "Succeeded")]
    if len(started) == job.workers:
        status["phase"] = Phase.RUNNING.value
        status.pop("message", None)
        step.set_condition(cond.RUNNING, True, "AllWorkersRunning", f"{job.workers} workers running")
        step.set_condition(cond.RESTARTING, False, "AllWorkersRunning", "the gang is running again")
    elif status.get("phase") != Phase.RESTARTING.value:
        status["phase"] = Phase.PENDING.value


def _deadline_passed(step: _Step, job: JobSpec) -> bool:
    limit = job.run_policy.active_deadline_seconds
    start = parse_time(step.status.get("startTime"))
    if limit is None or start is None:
        return False
    deadline = start + timedelta(seconds=limit)
    if step.obs.now < deadline:
        step.wake_at(deadline)
        return False
    message = f"the job ran longer than activeDeadlineSeconds={limit}"
    _fail(step, job, "DeadlineExceeded", message, delete=list(step.obs.pods))
    return True


def _suspend(step: _Step) -> None:
    status = step.status
    step.delete(step.obs.pods)
    if status.get("phase") != Phase.SUSPENDED.value:
        step.events.append(Event("Normal", "Suspended", "runPolicy.suspend is true: worker pods deleted"))
    status["phase"] = Phase.SUSPENDED.value
    step.set_condition(cond.SUSPENDED, True, "Suspended", "runPolicy.suspend is true")
    step.set_condition(cond.RUNNING, False, "Suspended", "runPolicy.suspend is true")


def _resume(step: _Step) -> None:
    status = step.status
    if status.get("launchedAttempt") == status["attempt"]:
        status["attempt"] += 1
    status.pop("startTime", None)
    status["phase"] = Phase.PENDING.value
    step.set_condition(cond.SUSPENDED, False, "Resumed", "runPolicy.suspend is false: a fresh attempt")
    step.events.append(Event("Normal", "Resumed", f"starting attempt {status['attempt']}"))


def _succeed(step: _Step, job: JobSpec) -> None:
    status = step.status
    status["phase"] = Phase.SUCCEEDED.value
    status["completionTime"] = step.now
    status["marker"] = {"path": job.marker_relpath, "observedTime": step.now}
    status.pop("message", None)
    message = f"worker 0 wrote {job.marker_file}"
    step.set_condition(cond.SUCCEEDED, True, "MarkerWritten", message)
    for kind in (cond.RUNNING, cond.RESTARTING, cond.STALLED):
        step.set_condition(kind, False, "Succeeded", message)
    step.events.append(Event("Normal", "Succeeded", message))
    _after_finish(step, job)


def _fail(step: _Step, job: JobSpec | None, reason: str, message: str, delete: Sequence[ObservedPod]) -> None:
    status = step.status
    status["phase"] = Phase.FAILED.value
    status["reason"] = reason
    status["message"] = message
    status["completionTime"] = step.now
    step.set_condition(cond.FAILED, True, reason, message)
    for kind in (cond.RUNNING, cond.RESTARTING):
        step.set_condition(kind, False, reason, message)
    step.events.append(Event("Warning", reason, message))
    step.actions.append(PatchStatus(status))
    step.delete(delete)
    if job is not None:
        _schedule_ttl(step, job)


def _cleanup(job: JobSpec, pods: Sequence[ObservedPod]) -> list[ObservedPod]:
    """Pods that `cleanPodPolicy` removes once the job has finished."""
    policy = job.run_policy.clean_pod_policy
    if policy is CleanPodPolicy.ALL:
        return list(pods)
    if policy is CleanPodPolicy.RUNNING:
        return [p for p in pods if not p.terminated]
    return []


def _after_finish(step: _Step, job: JobSpec) -> None:
    """A finished job: clean its pods per policy and delete it when its TTL ends."""
    status = step.status
    current, stale = _by_attempt(step.obs.pods, status.get("attempt", 0))
    doomed = stale + _cleanup(job, current)
    succeeded = status.get("phase") == Phase.SUCCEEDED.value
    if succeeded and job.run_policy.clean_pod_policy is CleanPodPolicy.RUNNING:
        # Workers exit on their own right after the marker; deleting them at once would
        # lose their logs, so running pods get the chief's grace period first.
        finished = parse_time(status.get("completionTime")) or step.obs.now
        grace_end = finished + timedelta(seconds=job.chief_exit_grace_seconds)
        if step.obs.now < grace_end:
            doomed = stale
            if any(p.active for p in current):
                step.wake_at(grace_end)
    step.delete(doomed)
    _schedule_ttl(step, job)


def _schedule_ttl(step: _Step, job: JobSpec) -> None:
    ttl = job.run_policy.ttl_seconds_after_finished
    finished = parse_time(step.status.get("completionTime"))
    if ttl is None or finished is None:
        return
    expiry = finished + timedelta(seconds=ttl)
    if step.obs.now >= expiry:
        step.actions.append(DeleteJob())
    else:
        step.wake_at(expiry)


def _finish(step: _Step, old: Json) -> Decision:
    """Add the status patch when anything changed, and the phase-transition event."""
    actions = list(step.actions)
    new = step.status
    already_patched = any(isinstance(a, PatchStatus) for a in actions)
    if not already_patched and new != old:
        # Creations come before the status that records them; deletions after it.
        creations = [
            i for i, a in enumerate(actions) if isinstance(a, EnsureJobDirectory | EnsureService | CreatePods)
        ]
        actions.insert(creations[-1] + 1 if creations else 0, PatchStatus(new))
    events = list(step.events)
    new_phase, old_phase = new.get("phase"), old.get("phase")
    if new_phase != old_phase and new_phase in (Phase.RUNNING.value, Phase.PENDING.value):
        events.append(Event("Normal", str(new_phase), f"phase {old_phase or '-'} -> {new_phase}"))
    requeue = None
    if step.due:
        requeue = max(0.0, (min(step.due) - step.obs.now).total_seconds())
    return Decision(tuple(actions), tuple(events), requeue)
