"""The job's status, typed: read from the API object in one place, rendered in one place.

Each record declares its JSON once, field by field (records.py): a status written by an
older operator or edited by hand reads as far as it makes sense, never failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from tfmw_operator.api.objects import Json
from tfmw_operator.api.records import (
    FLOAT,
    INT,
    METRICS,
    PRECISE_TIME,
    STR,
    TIME,
    TRUE_FALSE,
    Record,
    enum,
    evolve,
    keyed,
    record,
    records,
    strings,
    wire,
)
from tfmw_operator.api.times import format_time

__all__ = ["evolve"]  # status records are changed with it


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class ConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STALLED = "Stalled"
    STORAGE_ERROR = "StorageError"
    QUEUED = "Queued"
    RECONCILE_ERROR = "ReconcileError"
    SHARED_VOLUME_CHECKED = "SharedVolumeChecked"
    # Whether gang restarts keep the pods that run (the in-pod supervisor), and why not.
    RESTART_IN_PLACE = "RestartInPlace"
    STRAGGLER = "Straggler"  # a training pod's own compute is persistently slower than the others'
    NODES_EXCLUDED = "NodesExcluded"  # runPolicy.nodeExclusion keeps nodes out of the attempts
    POD_SECURITY_ENFORCED = "PodSecurityEnforced"
    SHARED_VOLUME_BOUND = "SharedVolumeBound"


@dataclass(frozen=True)
class Condition(Record):
    type: str = field(metadata=wire("type", STR, required=True))
    true: bool = field(metadata=wire("status", TRUE_FALSE))
    reason: str = field(default="", metadata=wire("reason", STR))
    message: str = field(default="", metadata=wire("message", STR))
    last_transition_time: str = field(default="", metadata=wire("lastTransitionTime", STR))


@dataclass(frozen=True)
class WorkerCounts(Record):
    pending: int = field(default=0, metadata=wire("pending", INT))
    running: int = field(default=0, metadata=wire("running", INT))
    succeeded: int = field(default=0, metadata=wire("succeeded", INT))
    failed: int = field(default=0, metadata=wire("failed", INT))


@dataclass(frozen=True)
class ReplicaCounts(Record):
    """One replica set's pods in the current attempt: `status.replicas.<set>`."""

    type: str = field(metadata=wire("type", STR, required=True))
    pending: int = field(default=0, metadata=wire("pending", INT))
    running: int = field(default=0, metadata=wire("running", INT))
    succeeded: int = field(default=0, metadata=wire("succeeded", INT))
    failed: int = field(default=0, metadata=wire("failed", INT))
    ready: int = field(default=0, metadata=wire("ready", INT))
    restarts: int = field(default=0, metadata=wire("restarts", INT, omit_empty=True))  # replaced alone


@dataclass(frozen=True)
class ContainerRestarts(Record):
    """How many times the kubelet restarted one pod's containers (main and init), as recorded in
    `status.history` and counted in `restarts`: an entry of `status.containerRestarts`. It
    counts for the pod of that UID only: a pod made again starts from none."""

    pod: str = field(metadata=wire("pod", STR, required=True))
    uid: str = field(default="", metadata=wire("uid", STR))
    restarts: int = field(default=0, metadata=wire("restarts", INT))


@dataclass(frozen=True)
class MarkerRecord(Record):
    path: str = field(metadata=wire("path", STR, required=True))
    observed_time: datetime = field(metadata=wire("observedTime", TIME, required=True))


@dataclass(frozen=True)
class ProgressRate(Record):
    """Where the rate behind the ETA is measured from: the attempt's first progress report."""

    percent: float = field(metadata=wire("percent", FLOAT, required=True))
    time: datetime = field(metadata=wire("time", PRECISE_TIME, required=True))


@dataclass(frozen=True)
class Checkpoint(Record):
    """The last checkpoint the chief reported complete: its epoch or step, and where it is."""

    EMPTY_IS_NONE = True

    epoch: int | None = field(default=None, metadata=wire("epoch", INT))
    step: int | None = field(default=None, metadata=wire("step", INT))
    path: str | None = field(default=None, metadata=wire("path", STR))

    def describe(self) -> str:
        where = " ".join(
            part
            for part in (
                f"epoch {self.epoch}" if self.epoch is not None else "",
                f"step {self.step}" if self.step is not None else "",
                f"at {self.path}" if self.path else "",
            )
            if part
        )
        return f"the checkpoint of {where}"


@dataclass(frozen=True)
class ProgressStatus(Record):
    """`status.progress`: the chief's latest figures, and what the operator made of them."""

    attempt: int = field(default=0, metadata=wire("attempt", INT))
    epoch: int | None = field(default=None, metadata=wire("epoch", INT))
    total_epochs: int | None = field(default=None, metadata=wire("totalEpochs", INT))
    step: int | None = field(default=None, metadata=wire("step", INT))
    total_steps: int | None = field(default=None, metadata=wire("totalSteps", INT))
    metrics: tuple[tuple[str, float], ...] = field(
        default=(), metadata=wire("metrics", METRICS, omit_empty=True)
    )
    examples_per_second: float | None = field(default=None, metadata=wire("examplesPerSecond", FLOAT))
    # When the chief wrote them.
    updated_at: datetime | None = field(default=None, metadata=wire("updatedAt", PRECISE_TIME))
    percent: float | None = field(default=None, metadata=wire("percent", FLOAT))
    eta: str | None = field(default=None, metadata=wire("eta", STR))  # time left, as of updated_at
    eta_time: datetime | None = field(default=None, metadata=wire("etaTime", TIME))
    # When the operator recorded them: the throttle's clock.
    last_update: datetime | None = field(default=None, metadata=wire("lastUpdate", PRECISE_TIME))
    epochs: str | None = field(default=None, metadata=wire("epochs", STR))  # "3/10": the PROGRESS column
    # "loss=0.12 accuracy=0.97", for the METRICS column.
    summary: str | None = field(default=None, metadata=wire("summary", STR))
    since: ProgressRate | None = field(default=None, metadata=wire("since", record(ProgressRate)))
    # Why the latest document was refused.
    error: str | None = field(default=None, metadata=wire("error", STR))
    # When the operator first recorded the current epoch/step: the progress deadline's clock.
    advanced_at: datetime | None = field(default=None, metadata=wire("advancedAt", PRECISE_TIME))
    # The last completed checkpoint, kept across attempts.
    checkpoint: Checkpoint | None = field(default=None, metadata=wire("checkpoint", record(Checkpoint)))

    def describe(self) -> str:
        """The figures for a person: "epoch 3/10, step 600/2000 (loss=0.12), written at ..."."""
        parts = []
        if self.epoch is not None:
            parts.append(f"epoch {self.epoch}" + (f"/{self.total_epochs}" if self.total_epochs else ""))
        if self.step is not None:
            parts.append(f"step {self.step}" + (f"/{self.total_steps}" if self.total_steps else ""))
        what = ", ".join(parts) or "a progress document"
        if self.summary:
            what += f" ({self.summary})"
        if self.updated_at is not None:
            what += f", written at {format_time(self.updated_at)}"
        return f"{what} in attempt {self.attempt}"


@dataclass(frozen=True)
class EvaluationStatus(Record):
    """`status.evaluation`: the side-car evaluator's latest figures (evaluation.json)."""

    checkpoint: str | None = field(default=None, metadata=wire("checkpoint", STR))
    epoch: int | None = field(default=None, metadata=wire("epoch", INT))
    step: int | None = field(default=None, metadata=wire("step", INT))
    metrics: tuple[tuple[str, float], ...] = field(
        default=(), metadata=wire("metrics", METRICS, omit_empty=True)
    )
    summary: str | None = field(default=None, metadata=wire("summary", STR))  # the EVALUATION column
    updated_at: datetime | None = field(default=None, metadata=wire("updatedAt", PRECISE_TIME))
    error: str | None = field(
        default=None, metadata=wire("error", STR)
    )  # why the latest document was refused


@dataclass(frozen=True)
class StragglerRecord(Record):
    """A training pod whose own compute per step is slower than the others' (policies/straggler.py):
    an entry of `status.stragglers.workers`, named once `slowReadings` reached the policy's
    count (`since`), dropped once it has been even that many readings in a row."""

    pod: str = field(metadata=wire("pod", STR, required=True))
    worker: int = field(metadata=wire("worker", INT, required=True))  # its index in its set
    replica_type: str | None = field(default=None, metadata=wire("replicaType", STR))  # chief; else a worker
    node: str | None = field(default=None, metadata=wire("node", STR))
    # Its median compute time per step over its document's window, and the median of the
    # other pods' medians, in seconds; their ratio.
    median_seconds: float = field(default=0.0, metadata=wire("medianSeconds", FLOAT))
    others_seconds: float = field(default=0.0, metadata=wire("othersSeconds", FLOAT))
    ratio: float = field(default=0.0, metadata=wire("ratio", FLOAT))
    steps: int = field(default=0, metadata=wire("steps", INT))  # in the window
    slow_readings: int = field(default=0, metadata=wire("slowReadings", INT))  # in a row
    even_readings: int = field(
        default=0, metadata=wire("evenReadings", INT, omit_empty=True)
    )  # in a row, once named
    since: datetime | None = field(default=None, metadata=wire("since", TIME))  # named then
    # Its document's updatedAt at the last reading counted: a document unchanged counts once.
    observed_at: datetime | None = field(default=None, metadata=wire("observedAt", PRECISE_TIME))

    @property
    def named(self) -> bool:
        return self.since is not None


@dataclass(frozen=True)
class StragglerStatus(Record):
    """`status.stragglers`: the training pods suspected or named slow in the current attempt,
    and why the latest step-times document was refused; absent while there is neither."""

    attempt: int = field(default=0, metadata=wire("attempt", INT))
    workers: tuple[StragglerRecord, ...] = field(
        default=(), metadata=wire("workers", records(StragglerRecord, 32), omit_empty=True)
    )
    error: str | None = field(default=None, metadata=wire("error", STR))

    @property
    def named(self) -> tuple[StragglerRecord, ...]:
        return tuple(w for w in self.workers if w.named)


@dataclass(frozen=True)
class ExcludedNode(Record):
    """A node the job's next attempts avoid (runPolicy.nodeExclusion): `status.excludedNodes`."""

    node: str = field(metadata=wire("node", STR, required=True))
    cause: str = field(default="", metadata=wire("cause", STR))  # NodeLost, or the cause a rule blamed
    attempt: int | None = field(default=None, metadata=wire("attempt", INT))  # that ended there
    pod: str | None = field(default=None, metadata=wire("pod", STR))  # the pod that failed on it
    rule: str | None = field(default=None, metadata=wire("rule", STR))  # the failure rule that said nodeFault
    since: datetime | None = field(default=None, metadata=wire("since", TIME))
    until: datetime | None = field(default=None, metadata=wire("until", TIME))

    def describe(self) -> str:
        why = f"{self.cause} in attempt {self.attempt}" if self.attempt is not None else self.cause
        if self.rule:
            why += f", {self.rule}"
        until = f" until {format_time(self.until)}" if self.until is not None else ""
        return f"{self.node} ({why}){until}"


MAX_TRACKED_PODS = 2048  # a gang's pods: at most 1,024 workers and a chief (api/spec.py)
MAX_HISTORY = 10  # attempts kept in status.history, the newest first
# The outcomes of status.history: a gang restart, and a pod restarted alone (an attempt also
# ends Failed or Suspended).
RESTARTED = "Restarted"
REPLACED = "Replaced"
# A container the kubelet restarted inside its pod (a TFJob replica's restartPolicy OnFailure:
# JobSpec.restart_containers): an entry of its own within the attempt, as REPLACED is.
CONTAINER_RESTARTED = "ContainerRestarted"
WITHIN_ATTEMPT = frozenset({REPLACED, CONTAINER_RESTARTED})  # the attempt goes on
MAX_HISTORY_MESSAGE = 1024  # characters of the end of the failing worker's log


@dataclass(frozen=True)
class AttemptRecord(Record):
    """How one attempt ended: an entry of `status.history`."""

    attempt: int = field(metadata=wire("attempt", INT, required=True))
    outcome: str = field(metadata=wire("outcome", STR))  # Restarted | Failed | Suspended
    # In Kubernetes' words: OOMKilled, Evicted, Preempted, NodeLost, Stalled ...
    cause: str = field(metadata=wire("cause", STR))
    end_time: datetime = field(metadata=wire("endTime", TIME, required=True))
    start_time: datetime | None = field(default=None, metadata=wire("startTime", TIME))
    # The pod that failed first: its index, and its set where that is not the worker set.
    worker: int | None = field(default=None, metadata=wire("worker", INT))
    pod: str | None = field(default=None, metadata=wire("pod", STR))
    node: str | None = field(default=None, metadata=wire("node", STR))
    container: str | None = field(default=None, metadata=wire("container", STR))
    exit_code: int | None = field(default=None, metadata=wire("exitCode", INT))
    # The last lines of its log (or termination message).
    message: str | None = field(default=None, metadata=wire("message", STR))
    # Its full logs, relative to the shared root.
    logs: str | None = field(default=None, metadata=wire("logs", STR))
    # The last epoch the attempt reported.
    epoch: int | None = field(default=None, metadata=wire("epoch", INT))
    # The checkpoint the next attempt resumes from.
    checkpoint: Checkpoint | None = field(default=None, metadata=wire("checkpoint", record(Checkpoint)))
    # Epochs reported done since that checkpoint: redone.
    epochs_lost: int | None = field(default=None, metadata=wire("epochsLost", INT))
    # The set of `worker` where it is not the worker set: chief, ps, evaluator.
    replica_type: str | None = field(default=None, metadata=wire("replicaType", STR))
    # How the next attempt was started: InPlace (the pods that ran restarted their command;
    # only those in `recreated` were made again), or absent (every pod was made again).
    restart: str | None = field(default=None, metadata=wire("restart", STR))
    recreated: tuple[str, ...] = field(default=(), metadata=wire("recreated", strings(64), omit_empty=True))
    # The chief's stacks, taken before a stalled gang was stopped (the others' are beside it),
    # relative to the shared root.
    stacks: str | None = field(default=None, metadata=wire("stacks", STR))
    # The attempt's worker pods (a job with spec.minWorkers: attempts may differ in size).
    workers: int | None = field(default=None, metadata=wire("workers", INT))


@dataclass(frozen=True)
class StacksRequest(Record):
    """Every supervised pod of `attempt` was asked for its stacks (a stalled gang, before it
    is restarted or failed): the control file's `stacks` id, and when."""

    id: str = field(metadata=wire("id", STR, required=True))
    attempt: int = field(metadata=wire("attempt", INT, required=True))
    requested_at: datetime = field(metadata=wire("requestedAt", PRECISE_TIME, required=True))


@dataclass(frozen=True)
class JobStatus(Record):
    phase: Phase | None = field(default=None, metadata=wire("phase", enum(Phase)))
    attempt: int = field(default=0, metadata=wire("attempt", INT))
    # The attempt whose pods were all created.
    launched_attempt: int | None = field(default=None, metadata=wire("launchedAttempt", INT))
    restarts: int = field(default=0, metadata=wire("restarts", INT))
    # Gang restarts because Kueue took the quota back: not against backoffLimit.
    evictions: int = field(default=0, metadata=wire("evictions", INT, omit_empty=True))
    # Restarts a failure rule said not to count (RestartNotCounted).
    restarts_not_counted: int = field(default=0, metadata=wire("restartsNotCounted", INT, omit_empty=True))
    # Pods restarted alone (a ParameterServerStrategy worker, the evaluator), by stem
    # ("worker-1"): deleted, and made again once gone.
    replacing: tuple[str, ...] = field(default=(), metadata=wire("replacing", strings(64), omit_empty=True))
    workers: WorkerCounts | None = field(default=None, metadata=wire("workers", record(WorkerCounts)))
    # Per replica set, for a job with more than workers.
    replicas: tuple[ReplicaCounts, ...] = field(
        default=(), metadata=wire("replicas", keyed(ReplicaCounts, "type"), omit_empty=True)
    )
    ready_workers: str | None = field(default=None, metadata=wire("readyWorkers", STR))
    start_time: datetime | None = field(default=None, metadata=wire("startTime", TIME))
    completion_time: datetime | None = field(default=None, metadata=wire("completionTime", TIME))
    marker: MarkerRecord | None = field(default=None, metadata=wire("marker", record(MarkerRecord)))
    observed_generation: int | None = field(default=None, metadata=wire("observedGeneration", INT))
    reason: str | None = field(default=None, metadata=wire("reason", STR))
    message: str | None = field(default=None, metadata=wire("message", STR))
    conditions: tuple[Condition, ...] = field(default=(), metadata=wire("conditions", records(Condition)))
    progress: ProgressStatus | None = field(default=None, metadata=wire("progress", record(ProgressStatus)))
    evaluation: EvaluationStatus | None = field(
        default=None, metadata=wire("evaluation", record(EvaluationStatus))
    )
    # How the last attempts ended, the newest first.
    history: tuple[AttemptRecord, ...] = field(
        default=(), metadata=wire("history", records(AttemptRecord, MAX_HISTORY), omit_empty=True)
    )
    # The last stacks request (the control file carries its id while the job's pods run).
    stacks_request: StacksRequest | None = field(
        default=None, metadata=wire("stacksRequest", record(StacksRequest))
    )
    # Pods whose containers (main and init) the kubelet restarted (JobSpec.restart_containers).
    container_restarts: tuple[ContainerRestarts, ...] = field(
        default=(),
        metadata=wire("containerRestarts", records(ContainerRestarts, MAX_TRACKED_PODS), omit_empty=True),
    )
    # Worker pods of the current attempt when fewer than spec.workers (spec.minWorkers).
    attempt_workers: int | None = field(default=None, metadata=wire("attemptWorkers", INT))
    stragglers: StragglerStatus | None = field(
        default=None, metadata=wire("stragglers", record(StragglerStatus))
    )
    # The nodes the current attempt's pods avoid (runPolicy.nodeExclusion), the oldest first.
    excluded_nodes: tuple[ExcludedNode, ...] = field(
        default=(), metadata=wire("excludedNodes", records(ExcludedNode, 64), omit_empty=True)
    )

    @property
    def finished(self) -> bool:
        return self.phase is not None and self.phase.finished

    @property
    def launched(self) -> bool:
        """The current attempt's pods were all created."""
        return self.launched_attempt == self.attempt

    def condition(self, kind: ConditionType) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def condition_is_true(self, kind: ConditionType) -> bool:
        found = self.condition(kind)
        return found is not None and found.true

    def with_condition(
        self, kind: ConditionType, true: bool, reason: str, message: str, now: datetime, listed: bool = False
    ) -> JobStatus:
        """`kind` set; lastTransitionTime moves only when the status flips.

        A condition that was never true is left out rather than listed as False, unless
        `listed`: its False says something the user should see.
        """
        existing = self.condition(kind)
        if existing is None and not true and not listed:
            return self
        if existing is not None and existing.true == true:
            transition = existing.last_transition_time
        else:
            transition = format_time(now)
        updated = Condition(kind.value, true, reason, message, transition)
        # A condition keeps its place in the list (a duplicate of its type, from a status
        # written by hand, is dropped): moved to the end, a condition said again unchanged
        # would reorder the list, and a reordered list is a status write of its own.
        if existing is None:
            conditions = (*self.conditions, updated)
        else:
            kept, placed = [], False
            for c in self.conditions:
                if c.type != kind:
                    kept.append(c)
                elif not placed:
                    kept.append(updated)
                    placed = True
            conditions = tuple(kept)
        return self if conditions == self.conditions else evolve(self, conditions=conditions)

    @classmethod
    def from_json(cls, raw: object) -> JobStatus:
        """The status as recorded; an absent or unreadable one is an empty status."""
        return super().from_json(raw) or cls()


def merge_patch(old: Json, new: Json) -> Json:
    """A JSON merge patch from `old` to `new`: keys that disappeared are set to null, at
    every depth (a merge patch merges objects, so a key left out would be kept)."""
    patch: Json = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value:
            continue
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = merge_patch(before, value)
        else:
            patch[key] = value
    patch.update({key: None for key in old if key not in new})
    return patch
