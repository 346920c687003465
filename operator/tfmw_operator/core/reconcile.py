"""The reconcile core: from what is observed now, what to do next. Pure and level-based.

The same job, pods, marker and clock always give the same decision, so the operator
may be killed between any two steps and pick up where the cluster actually is.
Everything that must survive a restart lives in the job's status: the current
`attempt`, whether its pods were all launched (`launchedAttempt`), and `restarts`.

This module is the job's lifecycle (phases, conditions, events); each run-policy rule
lives in a module of its own under policies/ and only returns a verdict, which is applied
here; how attempts ended is written by history.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tfmw_operator.api.names import FOLDER_CHECK_CONTAINER
from tfmw_operator.api.records import evolve
from tfmw_operator.api.spec import (
    CompletionPolicy,
    JobSpec,
    Member,
    ProgressDeadlinePolicy,
    ReplicaType,
    RuleAction,
    SpecError,
)
from tfmw_operator.api.status import (
    CONTAINER_RESTARTED,
    REPLACED,
    AttemptRecord,
    ConditionType,
    JobStatus,
    MarkerRecord,
    Phase,
    ReplicaCounts,
    StacksRequest,
    WorkerCounts,
)
from tfmw_operator.api.times import NEVER, format_time, later
from tfmw_operator.contract import reports_folder
from tfmw_operator.core.builders import (
    EVENT_MESSAGE_LIMIT,
    build_service,
    cluster_hosts,
    member_pod_name,
    pod_group_name,
)
from tfmw_operator.core.decision import (
    Action,
    CreatePods,
    Decision,
    DeleteJob,
    DeletePods,
    DeleteWorkloads,
    EnsureJobDirectory,
    EnsureService,
    Event,
    Milestone,
    ProgressWatch,
    RemoveMarker,
    WriteControl,
)
from tfmw_operator.core.evaluation import next_evaluation
from tfmw_operator.core.history import attempt_record, resumes_from, with_record, with_root_cause
from tfmw_operator.core.observed import CreatedObject, CreateErrorKind, Observed
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.cleanup import after_finish, doomed_by_policy, overdue_deletions
from tfmw_operator.core.policies.completion import chief_exit, exit_completion, judge_marker
from tfmw_operator.core.policies.container_restarts import judge_container_restarts
from tfmw_operator.core.policies.create_retry import judge_refusal
from tfmw_operator.core.policies.failure import (
    judge_failures,
    lost_node_behind,
    next_unknown_lost,
    restart_message,
    restart_or_give_up,
)
from tfmw_operator.core.policies.failure_rules import Failure, own_ruling
from tfmw_operator.core.policies.in_place import (
    IN_PLACE,
    attempt_began,
    control,
    gone_at_raise,
    in_place,
    late_at_barrier,
    pod_group,
    split,
)
from tfmw_operator.core.policies.node_exclusion import exclude, excluded_message, still_excluded
from tfmw_operator.core.policies.placement import UNPLACEABLE, Readmit, Shrink, judge_placement
from tfmw_operator.core.policies.progress_deadline import PROGRESS_STALLED, judge_progress
from tfmw_operator.core.policies.queue import judge_queue, workloads_of, workloads_over
from tfmw_operator.core.policies.restart_backoff import (
    judge_replacement_backoff,
    judge_restart_backoff,
    replacement_backoff_seconds,
    replacements_in_a_row,
)
from tfmw_operator.core.policies.spec_change import judge_spec_change
from tfmw_operator.core.policies.stacks import AskStacks, AwaitStacks, StacksTaken, judge_stacks
from tfmw_operator.core.policies.straggler import describe, judge_stragglers, straggler_message
from tfmw_operator.core.policies.time_limits import active_deadline, judge_pending
from tfmw_operator.core.policies.verdicts import Cause, Fail, MarkerVerdict, Pending, Queued, Restart, WakeAt
from tfmw_operator.core.progress import next_progress
from tfmw_operator.core.supervision import reported_ends, supervision_of, with_reports
from tfmw_operator.core.tenancy import claim_finding, pod_security_finding

NAMESAKE_RECHECK_SECONDS = 2.0
SUPERVISOR_RECHECK_SECONDS = 5.0  # a launch held while the shared storage cannot be read
COUNTS_WRITE_SECONDS = 1.0


@dataclass
class _Step:
    """The decision under construction, starting from the job's current status."""

    obs: Observed
    status: JobStatus
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    due: list[datetime] = field(default_factory=list)
    milestones: set[Milestone] = field(default_factory=set)
    # The pods as observed, before their supervisors' reports were folded in (in_place jobs).
    unfolded: tuple[ObservedPod, ...] = ()

    @property
    def now(self) -> datetime:
        return self.obs.now

    def update(self, **fields: object) -> None:
        self.status = evolve(self.status, **fields)

    def condition(
        self, kind: ConditionType, true: bool, reason: str, message: str, listed: bool = False
    ) -> None:
        self.status = self.status.with_condition(kind, true, reason, message, self.now, listed)

    def event(self, type: str, reason: str, message: str) -> None:
        self.events.append(Event(type, reason, message))

    def wake_at(self, when: datetime | None) -> None:
        if when is not None and when < NEVER:
            self.due.append(when)

    def delete(
        self,
        pods: Sequence[ObservedPod],
        grace_seconds: int | None = None,
        keep_logs: bool = True,
        withdrawn: bool = False,
    ) -> None:
        shared = keep_logs and isinstance(self.obs.spec, JobSpec) and self.obs.spec.shared
        doomed = {n for a in self.actions if isinstance(a, DeletePods) for n in a.names}
        pods = [p for p in pods if p.name not in doomed]  # each pod deleted once per decision
        # A supervised pod's supervisor streamed each attempt's log to the job's folder: the
        # pod's own log (every attempt it served, run together) is not saved over it.
        streamed = tuple(p.name for p in pods if not p.deleting and p.supervised)
        names = tuple(p.name for p in pods if not p.deleting and not p.supervised)
        if names:
            self.actions.append(DeletePods(names, grace_seconds, keep_logs=shared, withdrawn=withdrawn))
        if streamed:
            self.actions.append(DeletePods(streamed, grace_seconds, keep_logs=False, withdrawn=withdrawn))
        on_lost_nodes, stuck, next_check = overdue_deletions(pods, self.now)
        self.wake_at(next_check)
        if on_lost_nodes or stuck:
            self.actions.append(DeletePods((*on_lost_nodes, *stuck), 0, force=True))
        if on_lost_nodes:
            lost = ", ".join(on_lost_nodes)
            self.event("Warning", "ForcedDeletion", f"pods whose node was reported lost, forced: {lost}")
        if stuck:
            self.event(
                "Warning", "ForcedDeletion", f"pods stuck terminating (node gone?): {', '.join(stuck)}"
            )


def reconcile(obs: Observed) -> Decision:
    step = _Step(obs, evolve(obs.status, observed_generation=obs.generation))
    spec = obs.spec
    if isinstance(spec, SpecError):
        if step.status.finished:
            step.delete(obs.pods)
        else:
            _fail(step, None, Fail("InvalidSpec", str(spec), stop_all=True))
        _reconciled(step)
        return _finish(step, None)
    if in_place(spec):
        step.unfolded = tuple(obs.pods)
        pods = with_reports(obs.pods, obs.reports, obs.status.attempt)
        step.obs = obs = dataclasses.replace(obs, pods=pods)
    job = _attempt_job(spec, step.status)
    _decide(step, job)
    _progress(step, job)
    _evaluation(step, job)
    _stragglers(step, job)
    _progress_deadline(step, job)
    _reconciled(step)
    return _finish(step, job)


def _attempt_job(job: JobSpec, status: JobStatus) -> JobSpec:
    """The job as its current attempt runs it: with fewer workers after a gang that could not
    be placed went on smaller (spec.minWorkers, policies/placement.py)."""
    size = status.attempt_workers
    if size is None or job.min_workers is None or not job.min_workers <= size < job.workers:
        return job
    return job.sized(size)


def reconcile_failed(obs: Observed, error: str) -> Decision:
    """The job's reconcile keeps failing with `error`: say so in a condition and a Warning,
    and keep its clock running, so activeDeadlineSeconds and pendingTimeoutSeconds still
    end it. Nothing else is decided; the shell keeps trying with backoff."""
    step = _Step(obs, obs.status)
    message = f"the operator cannot reconcile this job: {error}; it keeps trying, less and less often"
    if not step.status.condition_is_true(ConditionType.RECONCILE_ERROR):
        step.event("Warning", "ReconcileError", message)
    step.condition(ConditionType.RECONCILE_ERROR, True, "ReconcileError", message)
    spec = obs.spec
    if not isinstance(spec, JobSpec) or step.status.finished:
        return _finish(step, None)
    deadline = active_deadline(spec, step.status.start_time, step.now)
    if isinstance(deadline, Fail):
        _fail(step, spec, deadline)
        return _finish(step, None)
    if isinstance(deadline, WakeAt):
        step.wake_at(deadline.at)
    if step.status.launched:
        current, _ = split(spec, step.status, obs.pods, step.now)
        pending = _judge_pending(step, spec, current)
        if pending.fail is not None:
            _fail(step, spec, pending.fail)
        else:
            step.wake_at(pending.wake_at)
    return _finish(step, None)


def _reconciled(step: _Step) -> None:
    """A ReconcileError condition, once there, turns False when a reconcile goes through."""
    if step.status.condition_is_true(ConditionType.RECONCILE_ERROR):
        step.condition(ConditionType.RECONCILE_ERROR, False, "Reconciled", "the job was reconciled")


def _split(step: _Step, job: JobSpec) -> tuple[list[ObservedPod], list[ObservedPod]]:
    """The pods of the current attempt, and those left over that go first (in_place.split)."""
    return split(job, step.status, step.obs.pods, step.now)


def _decide(step: _Step, job: JobSpec) -> None:
    _storage(step)
    _supervision(step, job)
    if step.status.finished:
        _clean_up(step, job)
        return
    _tenancy(step, job)
    current, stale = _split(step, job)
    _count_workers(step, job, current)
    marker = judge_marker(step.obs.marker, job.uid) if job.shared else MarkerVerdict.ABSENT
    if marker is MarkerVerdict.FOREIGN:
        step.actions.append(RemoveMarker(job.marker_relpath))
    if (
        marker is MarkerVerdict.OURS
        and job.completion_policy is CompletionPolicy.MARKER
        and step.status.launched_attempt is not None
    ):
        writer = "the chief" if job.chief_template is not None else "worker 0"
        _succeed(step, job, "MarkerWritten", f"{writer} wrote {job.marker_file}")
        return
    exited = exit_completion(job, current) if step.status.launched else None
    if exited is not None:
        _succeed(step, job, *exited)
        return

    if job.run_policy.suspend:
        _suspend(step, job)
        return
    if step.status.phase is Phase.SUSPENDED:
        _resume(step)
        current, stale = [], list(step.obs.pods)

    deadline = active_deadline(job, step.status.start_time, step.now)
    if isinstance(deadline, Fail):
        _fail(step, job, deadline)
        return
    if isinstance(deadline, WakeAt):
        step.wake_at(deadline.at)

    changed = judge_spec_change(job, current)
    if changed is not None:
        _restart(step, job, changed, current)
        return

    if stale:
        _find_root_cause(step, job, stale)
        # A new pod beside a terminating one registers the same task twice and TF
        # refuses it; the next attempt starts only once the old pods are gone.
        step.delete(stale, grace_seconds=_restart_grace(job))
        # A gang restarted in place keeps its survivors' group, and so its admission.
        in_use = set(workloads_of(current))
        _end_workloads(step, [w for w in workloads_over(stale, step.status.attempt) if w not in in_use])
        step.update(phase=step.status.phase or Phase.PENDING)
        return

    if not step.status.launched:
        withdrawing = _withdraw_unserved(step, current)
        if _blocked_by_namesakes(step) or _waiting_to_retry(step, job) or withdrawing:
            return
        _launch(step, job, current, leftover_marker=marker is MarkerVerdict.OURS)
        return

    if step.obs.service_missing:
        # Deleted by someone, or by the garbage collector along with a namesake's: without
        # it no worker can resolve its peers.
        step.actions.append(EnsureService(build_service(job), launch=False))

    replacing = _replace_gone(step, job, current)
    if _late_at_barrier(step, job, current):
        replacing = frozenset(replacing) | {m for m in job.members if m.stem in step.status.replacing}
    if _container_restarts(step, job, current):
        return
    ended = reported_ends(job, step.obs.reports, step.status.attempt)
    verdict = judge_failures(job, current, step.status, step.now, replacing, ended)
    step.wake_at(next_unknown_lost(current, step.now))
    if isinstance(verdict, WakeAt):
        step.wake_at(verdict.at)
        return
    if isinstance(verdict, Fail):
        _fail(step, job, verdict)
        return
    if isinstance(verdict, Restart) and verdict.replace:
        _replace(step, job, verdict, current)
    elif isinstance(verdict, Restart):
        _restart(step, job, verdict, current)
        return

    chief = chief_exit(job, current, step.now)
    if isinstance(chief, Fail):
        _fail(step, job, chief)
        return
    if isinstance(chief, WakeAt):
        step.wake_at(chief.at)

    if _queued(step, job, current):
        return
    if _placement(step, job, current):
        return
    if _stalled(step, job, current):
        return
    _set_progress_phase(step, job, current)


def _progress(step: _Step, job: JobSpec) -> None:
    """status.progress follows the chief's document while the job runs, and once more with
    the final figures in the decision that finishes it; never after."""
    if step.obs.status.finished or not job.shared:
        return
    attempt = step.status.attempt
    started = attempt_began(job, step.status, step.obs.pods)
    update = next_progress(
        step.status.progress,
        step.obs.progress,
        job.uid,
        attempt,
        started,
        step.now,
        step.obs.progress_interval,
        final=step.status.finished,
    )
    step.update(progress=update.status)
    step.wake_at(update.due)
    if update.warning:
        step.event("Warning", "ProgressRefused", update.warning)


def _evaluation(step: _Step, job: JobSpec) -> None:
    """status.evaluation follows the evaluator's document while the job runs, and after a
    success while the evaluator evaluates the final checkpoint (its grace: cleanup.after_finish;
    the shell reads the document then: evaluation.reads_evaluation). A finished job's few
    figures are written as they come, not once per interval: nothing wakes it later."""
    if job.evaluator_template is None:
        return
    if step.obs.status.finished and step.status.phase is not Phase.SUCCEEDED:
        return
    update = next_evaluation(
        step.status.evaluation,
        step.obs.evaluation,
        job.uid,
        step.status.start_time,
        step.now,
        0.0 if step.status.finished else step.obs.progress_interval,
    )
    step.update(evaluation=update.status)
    if update.warning:
        step.event("Warning", "EvaluationRefused", update.warning)


def _stragglers(step: _Step, job: JobSpec) -> None:
    """status.stragglers and the Straggler condition follow the training pods' step-times
    documents, read at most once per progress interval while the job runs (straggler.py)."""
    if step.obs.status.finished:
        return
    attempt = step.status.attempt
    reading = step.obs.step_times if step.status.phase is Phase.RUNNING else None
    # A gang restarted in place keeps pods of older attempts, and began at the raise.
    current = _split(step, job)[0]
    started = attempt_began(job, step.status, step.obs.pods)
    verdict = judge_stragglers(job, step.status, reading, current, started, step.now)
    step.update(stragglers=verdict.status)
    if verdict.refused:
        step.event("Warning", "StepTimesRefused", f"step-times document refused: {verdict.refused}")
    for named in verdict.named:
        step.event("Warning", "Straggler", f"{describe(named)}: every step of the gang waits for it")
    for cleared in verdict.cleared:
        step.event("Normal", "StragglerCleared", f"{describe(cleared)}: no longer a straggler")
    named_now = verdict.status.named if verdict.status is not None else ()
    if named_now:
        step.condition(ConditionType.STRAGGLER, True, "SlowCompute", straggler_message(named_now))
    elif verdict.new_attempt:
        step.condition(
            ConditionType.STRAGGLER, False, "NewAttempt", f"attempt {attempt}'s pods are compared afresh"
        )
    elif verdict.cleared:
        step.condition(
            ConditionType.STRAGGLER,
            False,
            "ComputeEven",
            "no training pod's compute is slower than the others'",
        )


def _count_workers(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> None:
    workers = [p for p in current if p.replica_type is ReplicaType.WORKER]
    phases = [p.phase for p in workers]
    counts = WorkerCounts(
        pending=phases.count("Pending"),
        running=phases.count("Running"),
        succeeded=phases.count("Succeeded"),
        failed=phases.count("Failed"),
    )
    ready = sum(1 for p in current if p.ready and p.phase == "Running")
    step.update(
        workers=counts,
        ready_workers=f"{ready}/{len(job.members)}",
        replicas=_replica_counts(job, current, step.status.replicas),
    )
    # Said only of a pass the operator counts (claim_checks: its own pod, its own image).
    checked = next(
        (p for p in current if p.folder_checked and p.folder_check_image == job.folder_check_image), None
    )
    if (
        job.folder_check_image
        and checked
        and step.obs.claim_reached is not None
        and not step.status.condition_is_true(ConditionType.SHARED_VOLUME_CHECKED)
    ):
        message = (
            f"{checked.replica_type} {checked.index}'s {FOLDER_CHECK_CONTAINER} found the job's folder "
            f"through claim {job.claim_name}; later attempts are not checked again"
        )
        step.condition(ConditionType.SHARED_VOLUME_CHECKED, True, "FolderReached", message)


def _replica_counts(
    job: JobSpec, current: Sequence[ObservedPod], recorded: Sequence[ReplicaCounts], pending: int = 0
) -> tuple[ReplicaCounts, ...]:
    """`status.replicas`: per replica set, for a job with more sets than workers; `pending`
    more of each set's pods counted Pending (a launch, before their watch events)."""
    sets = job.replica_sets
    if len(sets) == 1:
        return ()
    restarts = {r.type: r.restarts for r in recorded}
    counted = []
    for replica_set in sets:
        pods = [p for p in current if p.replica_type is replica_set.type]
        phases = [p.phase for p in pods]
        counted.append(
            ReplicaCounts(
                type=str(replica_set.type),
                pending=phases.count("Pending") + (replica_set.replicas if pending else 0),
                running=phases.count("Running"),
                succeeded=phases.count("Succeeded"),
                failed=phases.count("Failed"),
                ready=sum(1 for p in pods if p.ready and p.phase == "Running"),
                restarts=restarts.get(str(replica_set.type), 0),
            )
        )
    return tuple(counted)


def _supervision(step: _Step, job: JobSpec) -> None:
    """The RestartInPlace condition: whether gang restarts keep the pods that run, and why not."""
    said = supervision_of(job)
    was = step.status.condition(ConditionType.RESTART_IN_PLACE)
    if was is None or (was.true, was.reason, was.message) != (said.keeps_pods, said.reason, said.message):
        step.condition(
            ConditionType.RESTART_IN_PLACE, said.keeps_pods, said.reason, said.message, listed=True
        )


def _late_at_barrier(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    """Survivors of a restart in place that did not reach the barrier in time are made again
    within the attempt, as a pod restarted alone is (status.replacing); True if any."""
    late = late_at_barrier(job, step.status, current, step.now, _restart_grace(job))
    step.wake_at(late.wake_at)
    if not late.pods:
        return False
    stems = {p.member.stem for p in late.pods}
    step.update(replacing=tuple(sorted(set(step.status.replacing) | stems)))
    _note_recreated(step, stems)
    names = ", ".join(p.name for p in late.pods)
    step.event(
        "Warning",
        "PodRestarted",
        f"{names} did not report waiting for attempt {step.status.attempt} in time (its command would not "
        "stop, or its supervisor cannot reach the job's folder): made again",
    )
    step.delete(late.pods, grace_seconds=0)
    return True


def _note_recreated(step: _Step, stems: set[str]) -> None:
    """history[0] of a restart in place lists the pods made again for the next attempt."""
    history = step.status.history
    record = history[0] if history else None
    if record is None or record.restart != IN_PLACE or record.attempt != step.status.attempt - 1:
        return
    recreated = tuple(sorted(set(record.recreated) | stems))
    if recreated != record.recreated:
        step.update(history=(evolve(record, recreated=recreated), *history[1:]))


def _tenancy(step: _Step, job: JobSpec) -> None:
    """The wall between tenants (core/tenancy): a namespace that does not enforce Pod
    Security baseline, and a claim that is not bound, named on the job with a shared volume:
    a condition, and a Warning when it turns bad. Said True only once it was said False."""
    if not job.shared or job.claim_name is None:
        return
    findings = (
        (ConditionType.POD_SECURITY_ENFORCED, pod_security_finding(job.namespace, step.obs.pod_security)),
        (
            ConditionType.SHARED_VOLUME_BOUND,
            claim_finding(job.claim_name, step.obs.claim, step.obs.claim_known),
        ),
    )
    for kind, finding in findings:
        if finding is None:
            continue
        said = step.status.condition(kind)
        if finding.ok and said is None:
            continue
        if not finding.ok and (said is None or said.true or said.reason != finding.reason):
            step.event("Warning", finding.reason, finding.message)
        step.condition(kind, finding.ok, finding.reason, finding.message, listed=True)


def _storage(step: _Step) -> None:
    """The StorageError condition follows what the last read of the shared storage met."""
    error = step.obs.storage_error
    if error is None:
        step.condition(
            ConditionType.STORAGE_ERROR, False, "StorageReadable", "the shared storage is readable"
        )
        return
    message = f"cannot read the job's folder on the shared storage: {error}"
    if not step.status.condition_is_true(ConditionType.STORAGE_ERROR):
        step.event("Warning", "StorageError", message)
    step.condition(ConditionType.STORAGE_ERROR, True, "StorageError", message)


def _blocked_by_namesakes(step: _Step) -> bool:
    """Objects with this job's names still belong to another: launching now would record
    pods that are not ours, and the garbage collector would take the Service away."""
    if not step.obs.namesakes:
        return False
    shown = ", ".join(step.obs.namesakes[:4]) + (" ..." if len(step.obs.namesakes) > 4 else "")
    message = (
        f"waiting for {shown} to go: they have this job's names but belong to another object "
        "(an earlier job of the same name is still being deleted, or they are someone else's)"
    )
    if not step.status.condition_is_true(ConditionType.STALLED):
        step.event("Warning", "NameInUse", message)
    step.condition(ConditionType.STALLED, True, "NameInUse", message)
    step.update(phase=step.status.phase or Phase.PENDING)
    step.wake_at(step.now + timedelta(seconds=NAMESAKE_RECHECK_SECONDS))
    return True


def _withdraw_unserved(step: _Step, current: Sequence[ObservedPod]) -> bool:
    """A first launch sends its Service and its first pod together (shell/creation.py): while
    the Service was refused (or its creation failed) and is not there, or is someone else's,
    that pod is deleted at once, so none holds a node or runs without its peers' names. True
    while the launch must wait: such pods are there, or any pod of the never-launched attempt
    is still going (counted as present, it would be a failure of the attempt just launched)."""
    if step.status.launched_attempt is not None or not current:
        return False
    error = step.obs.create_error
    refused = error is not None and error.refused is CreatedObject.SERVICE and step.obs.service_missing
    foreign = any(n.startswith("Service ") for n in step.obs.namesakes)
    if refused or foreign:
        # Never part of a launch: no grace, no log worth keeping, and before the status write.
        step.delete(current, grace_seconds=0, keep_logs=False, withdrawn=True)
        return True
    going = [p for p in current if p.deleting]
    if going:
        step.delete(going)  # only what a stuck deletion needs: forced once overdue
    return bool(going)


def _waiting_to_retry(step: _Step, job: JobSpec) -> bool:
    """True while the launch waits: a refused creation backs off (or fails the job), and a
    gang restart after the first backs off too."""
    error = step.obs.create_error
    if error is None:
        backoff = judge_restart_backoff(step.status, step.now)
        if backoff is not None:
            step.wake_at(backoff.at)
        return backoff is not None
    if error.kind is not CreateErrorKind.INVALID and not job.queue_name:
        # The job's clock runs while it may yet be created: activeDeadlineSeconds too.
        step.update(start_time=step.status.start_time or step.now)
    if _placement(step, job, _split(step, job)[0], refused=True):
        return True
    verdict = judge_refusal(job, error, step.now)
    if isinstance(verdict, Fail):
        _fail(step, job, verdict)
        return True
    step.wake_at(verdict.give_up_at)
    if not step.status.condition_is_true(ConditionType.STALLED):
        step.event("Warning", verdict.reason, verdict.message)
    step.condition(ConditionType.STALLED, True, verdict.reason, verdict.message)
    step.update(phase=step.status.phase or Phase.PENDING)
    if step.now < verdict.retry_at:
        step.wake_at(verdict.retry_at)
        return True
    return False


def _restart_grace(job: JobSpec) -> int:
    own = job.template.get("spec", {}).get("terminationGracePeriodSeconds")
    setting = job.run_policy.restart_grace_seconds
    return min(setting, own) if isinstance(own, int) and own >= 0 else setting


def _launch(step: _Step, job: JobSpec, current: Sequence[ObservedPod], leftover_marker: bool) -> None:
    attempt = step.status.attempt
    first = step.status.launched_attempt is None
    if leftover_marker and not current and first:
        # Nothing of this job ever ran, so the marker is an earlier namesake's.
        step.actions.append(RemoveMarker(job.marker_relpath))
    present = {p.member for p in current}
    missing = tuple(m for m in job.members if m not in present)
    if job.shared:
        step.actions.append(EnsureJobDirectory(job.directory, job.uid))
    if missing and in_place(job) and step.obs.reports is None:
        # Supervised pods run the supervisor placed beside the reports right before them
        # (storage/control.py place_supervisor), and the barrier is judged from the reports:
        # no pod is created while they cannot be read.
        step.wake_at(step.now + timedelta(seconds=SUPERVISOR_RECHECK_SECONDS))
        return
    if step.obs.service_missing:  # a restart's is there already: asking again costs two calls
        # A first launch gains a round trip by sending its Service and first pod together;
        # once either was refused, or a pod is there already, the Service goes first: at
        # most one pod is ever made and withdrawn.
        # Never for a queued job: a gated pod gains nothing by going early, and Kueue would
        # admit a one-pod group at once and hold the withdrawn pod by its finalizer.
        beside = first and step.obs.create_error is None and not current and not job.queue_name
        step.actions.append(EnsureService(build_service(job), beside_first_pod=beside))
    if missing:
        # The claim reaches the folder (sharedVolume is immutable): no init container to start
        # again. Known only from a check this operator made (claim_checks), never from the
        # job's status: whoever may write the status could have set SharedVolumeChecked.
        reached = step.obs.claim_reached if job.folder_check_image else None
        if reached is not None and not step.status.condition_is_true(ConditionType.SHARED_VOLUME_CHECKED):
            message = reached.message(job.claim_name or "")
            step.condition(ConditionType.SHARED_VOLUME_CHECKED, True, "ClaimReached", message)
        built = dataclasses.replace(job, folder_check_image="") if reached is not None else job
        built = dataclasses.replace(built, avoid_nodes=_avoiding(step))
        group = pod_group(job, current)
        hosts = cluster_hosts(job, attempt, current)
        step.actions.append(
            CreatePods(built, attempt, missing, proven=not first, pod_group=group, hosts=hosts)
        )
        _note_recreated(step, {m.stem for m in missing})
    if first:
        step.milestones.add(Milestone.LAUNCHED)
    phase = step.status.phase
    # The status is written once the pods exist, and a new pod is Pending: counted now,
    # the launch needs no second status write when their watch events come back.
    workers = step.status.workers or WorkerCounts()
    new_workers = sum(1 for m in missing if m.type is ReplicaType.WORKER)
    step.update(
        workers=evolve(workers, pending=workers.pending + new_workers),
        replicas=_replica_counts(job, current, step.status.replicas, pending=len(missing)),
        launched_attempt=attempt,
        # A queued job's clock starts when Kueue admits it (see _queued).
        start_time=step.status.start_time or (None if job.queue_name else step.now),
        phase=Phase.PENDING if phase in (None, Phase.SUSPENDED) else phase,
    )
    message = f"created {_pods_of(job)} for attempt {attempt}"
    kept = len(current) if in_place(job) else 0
    if kept:
        message = _restarted_in_place(attempt, kept, len(missing))
    if not job.shared:
        message += f"; {NO_SHARED_VOLUME}"
    step.condition(ConditionType.CREATED, True, "PodsCreated", message)
    if step.status.phase is Phase.PENDING:
        step.condition(ConditionType.SUSPENDED, False, "Resumed", "the job is not suspended")
    created = f"{len(missing)} worker pods" if len(job.replica_sets) == 1 else f"{len(missing)} pods"
    if missing or not kept:
        said = f"created {created} for attempt {attempt}"
        if first and job.conversion_notes:
            # Once, in the Event the launch posts anyway: what a TFJob's user would otherwise
            # find out only from `tfmw convert`.
            said = _with_notes(f"{said}; run as Kubeflow's controller would, except: ", job.conversion_notes)
        step.event("Normal", "PodsCreated", said)


def _with_notes(said: str, notes: Sequence[str]) -> str:
    """`said` followed by as many whole notes as an Event's message holds, then how many more."""
    room = EVENT_MESSAGE_LIMIT - len(said) - len("; and 999 more (tfmw convert prints them)")
    kept: list[str] = []
    for note in notes:
        room -= len(note) + (2 if kept else 0)  # "; " between notes
        if room < 0:
            break
        kept.append(note)
    more = len(notes) - len(kept)
    return said + "; ".join([*kept, f"and {more} more (tfmw convert prints them)"] if more else kept)


# What a job without spec.sharedVolume lacks (the exit-code completion policies allow one):
# said in its Created condition, where `kubectl describe` shows it from the first launch.
NO_SHARED_VOLUME = (
    "no shared volume: no progress, evaluation or checkpoint is recorded, "
    "and pods' logs are not kept once the pods are deleted"
)


def _restarted_in_place(attempt: int, kept: int, made: int) -> str:
    """The Created condition's message for an attempt whose gang restarted in place."""
    return f"attempt {attempt} restarted in place: {kept} pods run on, {made} created again"


def _pods_of(job: JobSpec) -> str:
    """ "2 worker pods", or "a chief, 2 workers and 1 parameter server" for a job of roles."""
    if len(job.replica_sets) == 1:
        return f"{job.workers} worker pods"
    parts = [_counted(s.type, s.replicas) for s in job.replica_sets]
    return ", ".join(parts[:-1]) + " and " + parts[-1] + " (pods)"


def _counted(kind: ReplicaType, replicas: int) -> str:
    if kind is ReplicaType.CHIEF:
        return "a chief"
    if kind is ReplicaType.EVALUATOR:
        return "an evaluator"
    noun = "worker" if kind is ReplicaType.WORKER else "parameter server"
    return f"{replicas} {noun}{'s' if replicas > 1 else ''}"


def _replace_gone(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> frozenset[Member]:
    """Pods being restarted alone (`status.replacing`): once the old one is gone, the new
    one is created, in the same attempt; until then neither counts as a failure. The
    members still being replaced."""
    if not step.status.replacing:
        return frozenset()
    by_stem = {m.stem: m for m in job.members}
    replacing = {by_stem[stem] for stem in step.status.replacing if stem in by_stem}
    # The old pod was asked to go once; one its node never lets go (silent, or lost) is
    # forced like any other, or its replacement would wait for it forever.
    step.delete([p for p in current if p.member in replacing and p.deleting])
    present = {p.member for p in current}
    gone = tuple(sorted((m for m in replacing if m not in present), key=lambda m: m.order))
    # A pod that keeps failing alone waits out its back-off before it is made again.
    waits = {m: wait for m in gone if (wait := judge_replacement_backoff(step.status.history, m, step.now))}
    for wait in waits.values():
        step.wake_at(wait.at)
    gone = tuple(m for m in gone if m not in waits)
    if gone and in_place(job) and step.obs.reports is None:
        # As _launch: a supervised pod is made only while the reports (and the supervisor
        # beside them) can be read.
        step.wake_at(step.now + timedelta(seconds=SUPERVISOR_RECHECK_SECONDS))
        gone = ()
    if gone:
        hosts = cluster_hosts(job, step.status.attempt, current)
        step.actions.append(
            CreatePods(_checked(step, job), step.status.attempt, gone, proven=True, hosts=hosts)
        )
        step.event(
            "Normal",
            "PodsCreated",
            f"created {', '.join(_name_of(job, m) for m in gone)} again for attempt {step.status.attempt}",
        )
    still = frozenset(replacing) - set(gone)
    step.update(replacing=tuple(m.stem for m in sorted(still, key=lambda m: m.order)))
    return frozenset(replacing)


def _name_of(job: JobSpec, member: Member) -> str:
    return f"pod {member_pod_name(job, member)}"


def _checked(step: _Step, job: JobSpec) -> JobSpec:
    """The job as its pods are built now: without the folder check once one this operator
    made passed on its claim (claim_checks; the status condition is not believed), and off
    the nodes the attempt avoids."""
    avoid = tuple(e.node for e in step.status.excluded_nodes)
    if job.folder_check_image and step.obs.claim_reached is not None:
        job = dataclasses.replace(job, folder_check_image="")
    return dataclasses.replace(job, avoid_nodes=avoid) if avoid else job


def _avoiding(step: _Step) -> tuple[str, ...]:
    """The nodes an attempt launched now avoids (runPolicy.nodeExclusion): those whose time
    is not up; the others leave status.excludedNodes now."""
    excluded = step.status.excluded_nodes
    active = still_excluded(excluded, step.now)
    if active != excluded:
        step.update(excluded_nodes=active)
        if active:
            step.condition(ConditionType.NODES_EXCLUDED, True, "NodeFault", excluded_message(active))
        else:
            message = "the time of every node kept out is up: attempts may run anywhere again"
            step.condition(ConditionType.NODES_EXCLUDED, False, "ExclusionEnded", message)
    return tuple(e.node for e in active)


def _exclude(
    step: _Step, job: JobSpec, cause: Cause | None, attempt: int, node_fault: bool = False, rule: str = ""
) -> None:
    """runPolicy.nodeExclusion: the node `attempt`'s end points at is kept out of the next attempts."""
    found = exclude(job, step.status.excluded_nodes, cause, attempt, step.now, node_fault, rule)
    if found is None:
        return
    step.update(excluded_nodes=found.excluded)
    step.condition(ConditionType.NODES_EXCLUDED, True, "NodeFault", excluded_message(found.excluded))
    until = format_time(found.node.until) if found.node.until is not None else "later"
    why = f"{found.node.cause} in attempt {attempt}" + (f" ({rule}: nodeFault)" if rule else "")
    pushed = "".join(f"; node {e.node} is allowed again (maxNodes)" for e in found.pushed_out)
    step.event(
        "Warning",
        "NodeExcluded",
        f"node {found.node.node} is kept out of this job's next attempts until {until}: {why}{pushed}",
    )


def _placement(step: _Step, job: JobSpec, current: Sequence[ObservedPod], refused: bool = False) -> bool:
    """A gang that cannot be placed goes on with fewer workers, or gets a node kept out back
    (placement.py); True when the attempt ends for it."""
    error = step.obs.create_error if refused else None
    ended = step.status.history[0].end_time if step.status.history else None
    if error is not None and ended is not None:
        if error.at < ended:
            return False  # refused before the previous attempt ended: this one was not tried yet
        # The refusals of this attempt count from its start, not from the last one's.
        error = dataclasses.replace(error, since=max(error.since or error.at, ended))
    if refused and error is None:
        return False
    verdict = judge_placement(job, step.status, current, step.now, error)
    if isinstance(verdict, WakeAt):
        step.wake_at(verdict.at)
        return False
    if verdict is None:
        return False
    _replan(step, job, verdict, current)
    return True


def _replan(step: _Step, job: JobSpec, verdict: Shrink | Readmit, current: Sequence[ObservedPod]) -> None:
    """End the attempt and start the next one smaller, or allowed on a node kept out; not counted."""
    over = step.status.attempt
    if not step.status.launched:  # creating its pods was refused: some of them were made
        step.update(launched_attempt=over)
    record = _record_attempt(step, job, "Restarted", verdict.cause)
    message = verdict.message + resumes_from(record)
    size = step.status.attempt_workers
    excluded = step.status.excluded_nodes
    if isinstance(verdict, Shrink):
        size = verdict.workers if verdict.workers < job.requested_workers else None
        reason = "GangResized"
    else:
        excluded = tuple(e for e in excluded if e.node != verdict.node.node)
        reason = "NodeReadmitted"
    step.update(
        attempt=over + 1,
        attempt_workers=size,
        excluded_nodes=excluded,
        replacing=(),
        phase=Phase.RESTARTING,
        message=message,
    )
    step.condition(ConditionType.RESTARTING, True, UNPLACEABLE, message)
    step.condition(ConditionType.RUNNING, False, UNPLACEABLE, message)
    if isinstance(verdict, Readmit):
        if excluded:
            step.condition(ConditionType.NODES_EXCLUDED, True, "NodeFault", excluded_message(excluded))
        else:
            step.condition(ConditionType.NODES_EXCLUDED, False, "GangUnplaceable", message, listed=True)
    _end_workloads(step, _attempt_workloads(job, over, current))
    step.event("Warning", reason, message)
    # Nothing trained in a gang that never was whole: no checkpoint to give it time for.
    step.delete(current, grace_seconds=0)


def _replace(step: _Step, job: JobSpec, verdict: Restart, current: Sequence[ObservedPod]) -> None:
    """Restart the pods of `verdict.replace` alone: the rest of the attempt runs on."""
    _record_attempt(step, job, REPLACED, verdict.cause or Cause(verdict.reason))
    _exclude(step, job, verdict.cause, step.status.attempt, verdict.node_fault, verdict.rule)
    counts = {r.type: r for r in step.status.replicas}
    replicas = tuple(
        evolve(r, restarts=r.restarts + 1) if any(str(m.type) == r.type for m in verdict.replace) else r
        for r in counts.values()
    )
    stems = {m.stem for m in verdict.replace}
    message = verdict.message + _replacement_wait(step, verdict.replace)
    step.update(
        restarts=step.status.restarts + (1 if verdict.counted else 0),
        restarts_not_counted=step.status.restarts_not_counted + (0 if verdict.counted else 1),
        replacing=tuple(sorted(set(step.status.replacing) | stems)),
        replicas=replicas,
        message=message,
    )
    step.event("Warning", "PodRestarted", message)
    step.delete([p for p in current if p.member in verdict.replace], grace_seconds=0)


def _replacement_wait(step: _Step, members: Sequence[Member]) -> str:
    """What the restart back-off makes the replacement wait, said where the restart is."""
    in_a_row = replacements_in_a_row(step.status.history, step.now)[0]
    seconds = replacement_backoff_seconds(in_a_row)
    if not seconds or not any(judge_replacement_backoff(step.status.history, m, step.now) for m in members):
        return ""
    return f"; made again in {seconds:g} s (restart back-off: {in_a_row} pods restarted alone in a row)"


def _container_restarts(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    """The kubelet restarted gang containers in their pods (policies/container_restarts.py):
    each one a `status.history` entry, a Warning and a restart counted; True if the job failed."""
    counted = judge_container_restarts(job, step.status, current)
    if counted is None:
        return False
    for restart in counted.restarts:
        _record_attempt(step, job, CONTAINER_RESTARTED, restart.cause)
        step.event("Warning", "ContainerRestarted", restart.message)
    replicas = tuple(
        evolve(r, restarts=r.restarts + added)
        if (added := sum(c.ends for c in counted.restarts if c.replica_type == r.type))
        else r
        for r in step.status.replicas
    )
    step.update(
        restarts=counted.total,
        restarts_not_counted=counted.not_counted,
        container_restarts=counted.recorded,
        replicas=replicas,
    )
    if counted.restarts:
        step.update(message=counted.restarts[-1].message)
    if counted.fail is not None:
        _fail(step, job, counted.fail)
        return True
    return False


def _progress_deadline(step: _Step, job: JobSpec) -> None:
    """runPolicy.progressDeadlineSeconds on a Running gang: what the Stalled condition says,
    and, once progress stopped for that long, what progressDeadlinePolicy does."""
    verdict = judge_progress(job, step.status, step.now)
    if verdict is None:
        return
    if not verdict.stalled:
        step.condition(ConditionType.STALLED, False, verdict.reason, verdict.message, listed=True)
        step.wake_at(verdict.wake_at)
        return
    was = step.status.condition(ConditionType.STALLED)
    if was is None or not was.true or was.reason != PROGRESS_STALLED:
        step.event("Warning", "ProgressStalled", verdict.message)
    step.condition(ConditionType.STALLED, True, PROGRESS_STALLED, verdict.message)
    # A rule of the job's own on ProgressStalled says more than progressDeadlinePolicy.
    stall = Failure(job.role(job.chief), PROGRESS_STALLED, None, disrupted=False)
    ruling = own_ruling(job, stall, naming_its_cause=True)
    policy = job.run_policy.progress_deadline_policy
    if ruling is None and policy is ProgressDeadlinePolicy.REPORT:
        return
    stacks = _take_stacks(step, job)
    if stacks is None:
        return  # asked for every pod's stacks; the gang is stopped once they came, or in a while
    message = verdict.message + stacks.said
    cause = Cause(PROGRESS_STALLED, message=message, stacks=stacks.path)
    if (ruling is not None and ruling.action is RuleAction.FAIL) or (
        ruling is None and policy is ProgressDeadlinePolicy.FAIL
    ):
        said = f" ({ruling.rule}: Fail)" if ruling is not None else ""
        _fail(step, job, Fail(PROGRESS_STALLED, message + said, cause=cause))
        return
    # A hung gang cannot save: its collectives never return.
    outcome = restart_or_give_up(
        job,
        step.status,
        message,
        cause,
        PROGRESS_STALLED,
        survivors_can_save=False,
        counted=ruling is None or ruling.action is RuleAction.RESTART,
        rule=ruling.rule if ruling is not None else "",
    )
    if isinstance(outcome, Fail):
        _fail(step, job, outcome)
    else:
        _restart(step, job, outcome, _split(step, job)[0])


def _take_stacks(step: _Step, job: JobSpec) -> StacksTaken | None:
    """Before a stalled supervised gang is stopped: every pod's stacks (policies/stacks.py).
    None while they are being asked for and awaited; then where they are, and what they say."""
    if not in_place(job) or step.obs.reports is None:
        return StacksTaken()
    current, _ = _split(step, job)
    said = judge_stacks(job, step.status, current, step.obs.stacks, step.now)
    if isinstance(said, AskStacks):
        step.update(stacks_request=StacksRequest(said.id, step.status.attempt, step.now))
        step.wake_at(said.wake_at)
        return None
    if isinstance(said, AwaitStacks):
        step.wake_at(said.wake_at)
        return None
    return said


def _record_attempt(step: _Step, job: JobSpec, outcome: str, cause: Cause) -> AttemptRecord | None:
    """The current attempt ended: how, in status.history (history.py)."""
    began = attempt_began(job, step.status, step.obs.pods)
    record = attempt_record(
        step.status, job, step.obs.pods, step.obs.progress, outcome, cause, step.now, started=began
    )
    if record is not None:
        step.update(history=with_record(step.status.history, record))
    return record


def _find_root_cause(step: _Step, job: JobSpec, going: Sequence[ObservedPod]) -> None:
    """A second look at the attempt history[0] records, while its pods are being deleted.
    A peer notices a lost node at once (its all-reduce breaks) and the gang restarts on its
    exit; the control plane reports the node not ready only some 50 s later. Then the record
    names the lost node's worker as the cause, and the worker that noticed in its message."""
    history = step.status.history
    cause = lost_node_behind(history[0], going, step.now) if history else None
    if cause is None:
        return
    record = history[0]
    found = with_root_cause(record, cause, job)
    step.update(history=(found, *history[1:]))
    _retell_restart(step, job, found)
    _exclude(step, job, cause, record.attempt)
    step.event(
        "Warning",
        "RootCauseFound",
        f"attempt {record.attempt} ended because {cause.message}; status.history records it as "
        f"{cause.reason}, no longer {record.cause}",
    )


def _retell_restart(step: _Step, job: JobSpec, found: AttemptRecord) -> None:
    """While the gang restart is under way, its Restarting condition and the job's message
    tell the root cause found too: `kubectl describe` shows them beside the history."""
    restarting = step.status.condition(ConditionType.RESTARTING)
    if step.status.phase is not Phase.RESTARTING or restarting is None or not restarting.true:
        return
    told = restarting.message
    limit = job.run_policy.backoff_limit
    message = restart_message(step.status.restarts, limit, found.message or "") + resumes_from(found)
    if step.status.message == told:
        step.update(message=message)
    step.condition(ConditionType.RESTARTING, True, restarting.reason, message)
    running = step.status.condition(ConditionType.RUNNING)
    if running is not None and not running.true and running.message == told:
        step.condition(ConditionType.RUNNING, False, running.reason, message)


def _restart(step: _Step, job: JobSpec, verdict: Restart, current: Sequence[ObservedPod]) -> None:
    over = step.status.attempt
    # A gang that ran smaller (spec.minWorkers) restarts whole: its pods' TF_CONFIG names the
    # smaller gang, so none of them can restart in place into the larger one.
    resized = step.status.attempt_workers is not None
    record = _record_attempt(step, job, "Restarted", verdict.cause or Cause(verdict.reason))
    message = verdict.message + resumes_from(record)
    _exclude(step, job, verdict.cause, over, verdict.node_fault, verdict.rule)
    step.update(
        attempt=over + 1,
        # A restart tries the whole gang again: it grows back if the room has returned.
        attempt_workers=None,
        restarts=step.status.restarts + (1 if verdict.counted else 0),
        evictions=step.status.evictions + (1 if verdict.kueue else 0),
        restarts_not_counted=step.status.restarts_not_counted
        + (0 if verdict.counted or verdict.kueue else 1),
        replacing=(),
        phase=Phase.RESTARTING,
        message=message,
    )
    reason = verdict.reason
    step.condition(ConditionType.RESTARTING, True, reason, message)
    step.condition(ConditionType.RUNNING, False, reason, message)
    grace = _restart_grace(job) if verdict.survivors_can_save else 0
    if in_place(job) and not verdict.kueue and not verdict.remake and not resized:
        # The control file raises the attempt (WriteControl, _finish): every supervisor stops its
        # command and waits; only the pods that are gone are deleted, and made again. The pods
        # keep their Kueue group, and so their admission. A pod on a node kept out now
        # (runPolicy.nodeExclusion) is made again too, off that node.
        if step.status.history and step.status.history[0].attempt == over:
            step.update(history=(evolve(step.status.history[0], restart=IN_PLACE), *step.status.history[1:]))
        step.event(*verdict.event, message)
        kept_out = {e.node for e in step.status.excluded_nodes}
        gone = gone_at_raise(current, step.now)
        off = [p for p in current if p.node in kept_out and not p.deleting and p not in gone]
        step.delete([*gone, *off], grace_seconds=grace)
        kept = [p for p in current if not p.gone and not p.deleting]
        every_pod_kept = not gone and not off and {p.member for p in kept} >= set(job.members)
        # Launched now unless the launch would wait (a restart's backoff, another object's
        # names): the next decision's _launch waits and launches as ever.
        if every_pod_kept and not step.obs.namesakes and judge_restart_backoff(step.status, step.now) is None:
            # Every pod runs on and none is to be made: the new attempt is launched in this
            # same decision, one status write where _launch's would be a second.
            if job.shared:
                step.actions.append(EnsureJobDirectory(job.directory, job.uid))
            step.update(launched_attempt=over + 1)
            message = _restarted_in_place(over + 1, len(current), 0)
            step.condition(ConditionType.CREATED, True, "PodsCreated", message)
            step.milestones.add(Milestone.RESTARTED)
            # Counted as the new attempt has them (every pod's command waits to start), not as
            # the ended one did: else a barrier longer than COUNTS_WRITE_SECONDS costs a write.
            _count_workers(step, job, with_reports(step.unfolded, step.obs.reports, over + 1))
        return
    # Named by the pods (the queue label may be gone from the job) and by the attempt
    # (Kueue may have deleted the pods already).
    _end_workloads(step, _attempt_workloads(job, over, current))
    step.event(*verdict.event, message)
    step.delete(current, grace_seconds=grace)


def _queued(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    """True while Kueue holds the gang; the job's clock (activeDeadlineSeconds and
    pendingTimeoutSeconds) starts once it is admitted."""
    if not job.queue_name:
        return False
    queued = judge_queue(job, current, step.obs.workload)
    if queued is None:
        if step.status.condition_is_true(ConditionType.QUEUED) or step.status.start_time is None:
            step.condition(ConditionType.QUEUED, False, "Admitted", f"admitted by queue {job.queue_name}")
            step.update(start_time=step.status.start_time or step.now)
        return False
    _record_queued(step, queued)
    return True


def _record_queued(step: _Step, queued: Queued) -> None:
    if not step.status.condition_is_true(ConditionType.QUEUED):
        step.event("Normal", "Queued", queued.message)
    step.condition(ConditionType.QUEUED, True, queued.reason, queued.message)
    step.condition(ConditionType.STALLED, False, "Queued", "the workers wait for Kueue, not for a node")
    if step.status.phase is not Phase.RESTARTING:
        step.update(phase=Phase.PENDING)


def _end_workloads(step: _Step, names: Sequence[str]) -> None:
    if names:
        step.actions.append(DeleteWorkloads(tuple(names)))


def _judge_pending(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> Pending:
    # A queued gang's workers count as Pending only from its admission.
    return judge_pending(job, current, step.now, since=step.status.start_time if job.queue_name else None)


def _stalled(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> bool:
    """Record the Stalled condition; True if a stuck worker ended the job."""
    pending = _judge_pending(step, job, current)
    if pending.stalled is None:
        if job.run_policy.progress_deadline_seconds is None or not _all_started(job, current):
            step.condition(ConditionType.STALLED, False, "WorkersStarted", "no worker is stuck")
        # else the progress deadline (_progress_deadline) says what Stalled is, in this decision
    else:
        message = pending.stall_message
        if not step.status.condition_is_true(ConditionType.STALLED):
            step.event("Warning", "Stalled", message)
        step.condition(ConditionType.STALLED, True, pending.stalled.stall_reason, message)
    if pending.fail is not None:
        _fail(step, job, pending.fail)
        return True
    step.wake_at(pending.wake_at)
    return False


def _all_started(job: JobSpec, current: Sequence[ObservedPod], replacing: Sequence[str] = ()) -> bool:
    """Every pod of the attempt runs its program (the evaluator aside: training goes on
    without it, as a parameter server job goes on while a worker is replaced); a supervised
    pod once its command of the attempt has started (ObservedPod.started)."""
    training = [m for m in job.members if m.type is not ReplicaType.EVALUATOR and m.stem not in replacing]
    started = {p.member for p in current if p.started}
    return all(m in started for m in training)


def _set_progress_phase(step: _Step, job: JobSpec, current: Sequence[ObservedPod]) -> None:
    if _all_started(job, current, step.status.replacing):
        if job.shared and step.obs.status.phase is not Phase.RUNNING and step.obs.unread_progress:
            # Only a Running job's documents are read (the shell reads them before deciding):
            # one written while it was still Pending is read at once, not at its next change.
            step.wake_at(step.now)
        step.update(phase=Phase.RUNNING, message=None)
        running = (
            f"{job.workers} workers running" if len(job.replica_sets) == 1 else f"{_pods_of(job)} running"
        )
        step.condition(ConditionType.RUNNING, True, "AllWorkersRunning", running)
        step.condition(ConditionType.RESTARTING, False, "AllWorkersRunning", "the gang is running again")
    elif step.status.phase is not Phase.RESTARTING:
        step.update(phase=Phase.PENDING)


def _attempt_workloads(job: JobSpec, attempt: int, pods: Sequence[ObservedPod]) -> list[str]:
    named = {pod_group_name(job, attempt)} if job.queue_name else set()
    return sorted(named | set(workloads_of(pods)))


def _suspend(step: _Step, job: JobSpec) -> None:
    step.delete(step.obs.pods)
    # A suspended job gives its quota back: others may be admitted while it waits.
    _end_workloads(step, _attempt_workloads(job, step.status.attempt, step.obs.pods))
    if step.status.phase is not Phase.SUSPENDED:
        record = _record_attempt(step, job, "Suspended", Cause("Suspended"))
        said = resumes_from(record).replace("resumes", "will resume")
        step.event("Normal", "Suspended", f"runPolicy.suspend is true: worker pods deleted{said}")
    step.update(phase=Phase.SUSPENDED)
    step.condition(ConditionType.SUSPENDED, True, "Suspended", "runPolicy.suspend is true")
    step.condition(ConditionType.RUNNING, False, "Suspended", "runPolicy.suspend is true")


def _resume(step: _Step) -> None:
    attempt = step.status.attempt + 1 if step.status.launched else step.status.attempt
    step.update(attempt=attempt, start_time=None, phase=Phase.PENDING, attempt_workers=None)
    step.condition(ConditionType.SUSPENDED, False, "Resumed", "runPolicy.suspend is false: a fresh attempt")
    step.event("Normal", "Resumed", f"starting attempt {attempt}")


def _succeed(step: _Step, job: JobSpec, reason: str, message: str) -> None:
    written_by = step.obs.marker.attempt if reason == "MarkerWritten" else None
    status = step.status
    if written_by is not None and written_by < status.attempt and not status.launched:
        # The chief of an attempt already given up finished training before its gang was
        # stopped: the run is complete, and the restart that never ran is not counted.
        unrun = status.attempt - written_by
        step.update(attempt=written_by, launched_attempt=written_by, restarts=max(0, status.restarts - unrun))
        message += f" in attempt {written_by}, before that gang was stopped; the restart did not run"
    step.update(
        phase=Phase.SUCCEEDED,
        completion_time=step.now,
        marker=MarkerRecord(job.marker_relpath, step.now) if reason == "MarkerWritten" else None,
        message=None,
        replacing=(),
    )
    step.condition(ConditionType.SUCCEEDED, True, reason, message)
    for kind in (ConditionType.RUNNING, ConditionType.RESTARTING, ConditionType.STALLED):
        step.condition(kind, False, "Succeeded", message)
    step.event("Normal", "Succeeded", message)
    step.milestones.add(Milestone.SUCCEEDED)
    _clean_up(step, job)


def _fail(step: _Step, job: JobSpec | None, verdict: Fail) -> None:
    """The one place a job fails. Its pods go as the verdict says: all of them, or those of
    the current attempt that cleanPodPolicy removes (_clean_up takes the rest per policy)."""
    if verdict.stop_all or job is None:
        delete: Sequence[ObservedPod] = step.obs.pods
    else:
        delete = doomed_by_policy(job, _split(step, job)[0])
    if job is not None:
        _record_attempt(step, job, "Failed", verdict.cause or Cause(verdict.reason, message=verdict.message))
    step.update(phase=Phase.FAILED, reason=verdict.reason, message=verdict.message, completion_time=step.now)
    step.condition(ConditionType.FAILED, True, verdict.reason, verdict.message)
    for kind in (ConditionType.RUNNING, ConditionType.RESTARTING):
        step.condition(kind, False, verdict.reason, verdict.message)
    step.event("Warning", verdict.reason, verdict.message)
    step.milestones.add(Milestone.FAILED)
    step.delete(delete)
    if job is not None:
        _clean_up(step, job, deleted=delete)


def _clean_up(step: _Step, job: JobSpec, deleted: Sequence[ObservedPod] = ()) -> None:
    """A finished job: clean its pods per policy and delete it when its TTL ends."""
    completed = step.status.completion_time or step.now
    current, stale = _split(step, job)
    # Its quota goes back to the queue now: Kueue would hold a group whose pods were
    # deleted unfinished (cleanPodPolicy) waiting for replacements that never come.
    _end_workloads(step, workloads_of(step.obs.pods))
    cleanup = after_finish(job, step.status.phase is Phase.SUCCEEDED, completed, current, stale, step.now)
    already = {p.name for p in deleted}
    step.delete([p for p in cleanup.delete if p.name not in already])
    if cleanup.delete_job:
        step.actions.append(DeleteJob())
    step.wake_at(cleanup.wake_at)


def _hold_counts(step: _Step) -> None:
    """A change of the worker counts alone is written at most once per COUNTS_WRITE_SECONDS:
    a gang's pods come up one by one, and each would cost a status write of its own, while
    the phase that follows (Running) is written at once."""
    old, new = step.obs.status, step.status
    written = step.obs.status_written_at
    if written is None or new == old:
        return
    unchanged = evolve(new, workers=old.workers, ready_workers=old.ready_workers)
    due = later(written, COUNTS_WRITE_SECONDS)
    if unchanged == old and step.now < due:
        step.status = unchanged
        step.wake_at(due)


def _finish(step: _Step, job: JobSpec | None) -> Decision:
    """The decision, with the phase-transition event."""
    _hold_counts(step)
    old, new = step.obs.status, step.status
    if _restart_settled(old, new):
        step.milestones.add(Milestone.RESTARTED)
    events = list(step.events)
    if new.phase != old.phase and new.phase in (Phase.RUNNING, Phase.PENDING):
        old_name = old.phase.value if old.phase else "-"
        events.append(Event("Normal", new.phase.value, f"phase {old_name} -> {new.phase.value}"))
    requeue = None
    if step.due:
        requeue = max(0.0, (min(step.due) - step.obs.now).total_seconds())
    watch = progress = reports = None
    if job is not None and job.shared and not new.finished and new.launched_attempt is not None:
        watch = job.marker_relpath if job.completion_policy is CompletionPolicy.MARKER else None
        last = new.progress.last_update if new.progress else None
        not_before = later(last, step.obs.progress_interval) if last else None
        progress = ProgressWatch(job.progress_relpath, not_before)
    if job is not None:
        reports = _control(step, job, old)
    return Decision.of(
        old, new, step.actions, events, requeue, watch, step.milestones, progress, watch_reports=reports
    )


def _control(step: _Step, job: JobSpec, old: JobStatus) -> str | None:
    """The control file as this decision leaves the job (in_place.control), and the reports'
    folder to watch while there are supervisors to hear from; nothing is written while their
    reports cannot be read (the barrier would be judged blind)."""
    if step.obs.reports is None:
        return None
    current, _ = split(job, step.status, step.obs.pods, step.now)
    said = control(job, step.status, current, step.obs.pods, _restart_grace(job))
    if said is None:
        return None
    step.actions.append(
        WriteControl(
            job.directory,
            job.uid,
            said.attempt,
            said.start,
            said.stop_seconds,
            said.stacks,
            said.exit,
            raises=step.status.attempt > old.attempt,
            hosts=said.hosts,
        )
    )
    return f"{job.directory}/{reports_folder()}"


def _restart_settled(old: JobStatus, new: JobStatus) -> bool:
    """The gang restart history[0] records is over in this decision: the next attempt was
    launched, or the job finished first. It is counted then, not when decided: its record is
    final only once the old pods are gone (_find_root_cause may amend its cause till then)."""
    if not old.history or old.launched or old.finished:
        return False
    record = old.history[0]
    if record.outcome != "Restarted" or record.attempt != old.launched_attempt:
        return False
    # A marker of the ended attempt makes the restart one that did not run (_succeed).
    return (new.launched or new.finished) and record.attempt < new.attempt
