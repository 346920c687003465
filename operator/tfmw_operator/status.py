"""The job's status, typed: read from the API object in one place, rendered in one place.

Whatever is in `status` may have been written by an older operator or edited by hand,
so reading never fails: a field of the wrong type counts as absent.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from tfmw_operator.api import Json, Phase, format_precise_time, format_time, parse_time

Frozen = TypeVar("Frozen")
_FIELD_NAMES: dict[type, frozenset[str]] = {}


def evolve(record: Frozen, **changes: Any) -> Frozen:
    """`dataclasses.replace` for these frozen records, without its per-call field walk and
    `__init__` (11 us a call, six calls a decision: half the time a launch was decided in)."""
    kind = type(record)
    names = _FIELD_NAMES.get(kind)
    if names is None:
        if hasattr(kind, "__post_init__"):  # it would be skipped: use dataclasses.replace there
            raise TypeError(f"{kind.__name__} has a __post_init__, which evolve does not run")
        names = _FIELD_NAMES.setdefault(kind, frozenset(f.name for f in fields(kind)))  # type: ignore[arg-type]
    if not names.issuperset(changes):
        raise TypeError(f"{kind.__name__} has no field {sorted(set(changes) - names)}")
    copied: Frozen = object.__new__(kind)
    copied.__dict__.update(record.__dict__, **changes)
    return copied


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


@dataclass(frozen=True)
class Condition:
    type: str
    true: bool
    reason: str
    message: str
    last_transition_time: str

    def to_json(self) -> Json:
        return {
            "type": self.type,
            "status": "True" if self.true else "False",
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }


@dataclass(frozen=True)
class WorkerCounts:
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True)
class MarkerRecord:
    path: str
    observed_time: datetime


@dataclass(frozen=True)
class ProgressRate:
    """Where the rate behind the ETA is measured from: the attempt's first progress report."""

    percent: float
    time: datetime


@dataclass(frozen=True)
class Checkpoint:
    """The last checkpoint the chief reported complete: its epoch or step, and where it is."""

    epoch: int | None = None
    step: int | None = None
    path: str | None = None

    @classmethod
    def from_json(cls, raw: object) -> Checkpoint | None:
        if not isinstance(raw, dict):
            return None
        found = cls(_int(raw.get("epoch")), _int(raw.get("step")), _str(raw.get("path")))
        return found if found != cls() else None

    def to_json(self) -> Json:
        rendered = {"epoch": self.epoch, "step": self.step, "path": self.path}
        return {key: value for key, value in rendered.items() if value is not None}

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
class ProgressStatus:
    """`status.progress`: the chief's latest figures, and what the operator made of them."""

    attempt: int = 0
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: tuple[tuple[str, float], ...] = ()
    examples_per_second: float | None = None
    updated_at: datetime | None = None  # when the chief wrote them
    percent: float | None = None
    eta: str | None = None  # time left, as of updated_at
    eta_time: datetime | None = None
    last_update: datetime | None = None  # when the operator recorded them: the throttle's clock
    epochs: str | None = None  # "3/10", for the PROGRESS column
    summary: str | None = None  # "loss=0.12 accuracy=0.97", for the METRICS column
    since: ProgressRate | None = None
    error: str | None = None  # why the latest document was refused
    # When the operator first recorded the current epoch/step: the progress deadline's clock.
    advanced_at: datetime | None = None
    checkpoint: Checkpoint | None = None  # the last completed checkpoint, kept across attempts

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

    @classmethod
    def from_json(cls, raw: object) -> ProgressStatus | None:
        if not isinstance(raw, dict):
            return None
        metrics = raw.get("metrics")
        since = raw.get("since")
        since_time = parse_time(since.get("time")) if isinstance(since, dict) else None
        since_percent = _float(since.get("percent")) if isinstance(since, dict) else None
        return cls(
            attempt=_int(raw.get("attempt")) or 0,
            epoch=_int(raw.get("epoch")),
            total_epochs=_int(raw.get("totalEpochs")),
            step=_int(raw.get("step")),
            total_steps=_int(raw.get("totalSteps")),
            metrics=tuple(
                (name, value)
                for name, figure in (metrics.items() if isinstance(metrics, dict) else ())
                if isinstance(name, str) and (value := _float(figure)) is not None
            ),
            examples_per_second=_float(raw.get("examplesPerSecond")),
            updated_at=parse_time(raw.get("updatedAt")),
            percent=_float(raw.get("percent")),
            eta=_str(raw.get("eta")),
            eta_time=parse_time(raw.get("etaTime")),
            last_update=parse_time(raw.get("lastUpdate")),
            epochs=_str(raw.get("epochs")),
            summary=_str(raw.get("summary")),
            since=ProgressRate(since_percent, since_time)
            if since_percent is not None and since_time is not None
            else None,
            error=_str(raw.get("error")),
            advanced_at=parse_time(raw.get("advancedAt")),
            checkpoint=Checkpoint.from_json(raw.get("checkpoint")),
        )

    def to_json(self) -> Json:
        rendered: Json = {
            "attempt": self.attempt,
            "epoch": self.epoch,
            "totalEpochs": self.total_epochs,
            "step": self.step,
            "totalSteps": self.total_steps,
            "metrics": dict(self.metrics) if self.metrics else None,
            "examplesPerSecond": self.examples_per_second,
            "updatedAt": format_precise_time(self.updated_at) if self.updated_at else None,
            "percent": self.percent,
            "eta": self.eta,
            "etaTime": format_time(self.eta_time) if self.eta_time else None,
            "lastUpdate": format_precise_time(self.last_update) if self.last_update else None,
            "epochs": self.epochs,
            "summary": self.summary,
            "since": {"percent": self.since.percent, "time": format_precise_time(self.since.time)}
            if self.since
            else None,
            "error": self.error,
            "advancedAt": format_precise_time(self.advanced_at) if self.advanced_at else None,
            "checkpoint": self.checkpoint.to_json() if self.checkpoint else None,
        }
        return {key: value for key, value in rendered.items() if value is not None}


MAX_HISTORY = 10  # attempts kept in status.history, the newest first
MAX_HISTORY_MESSAGE = 1024  # characters of the end of the failing worker's log


@dataclass(frozen=True)
class AttemptRecord:
    """How one attempt ended: an entry of `status.history`."""

    attempt: int
    outcome: str  # Restarted | Failed | Suspended
    cause: str  # in Kubernetes' words: OOMKilled, Evicted, Preempted, NodeLost, Stalled ...
    end_time: datetime
    start_time: datetime | None = None
    worker: int | None = None  # the worker that failed first
    pod: str | None = None
    node: str | None = None
    container: str | None = None
    exit_code: int | None = None
    message: str | None = None  # the last lines of its log (or termination message)
    logs: str | None = None  # where its full logs are, relative to the shared root
    epoch: int | None = None  # the last epoch the attempt reported
    checkpoint: Checkpoint | None = None  # the checkpoint the next attempt resumes from
    epochs_lost: int | None = None  # epochs reported done since that checkpoint: redone

    @classmethod
    def from_json(cls, raw: object) -> AttemptRecord | None:
        if not isinstance(raw, dict):
            return None
        attempt, end = _int(raw.get("attempt")), parse_time(raw.get("endTime"))
        if attempt is None or end is None:
            return None
        return cls(
            attempt=attempt,
            outcome=_str(raw.get("outcome")) or "",
            cause=_str(raw.get("cause")) or "",
            end_time=end,
            start_time=parse_time(raw.get("startTime")),
            worker=_int(raw.get("worker")),
            pod=_str(raw.get("pod")),
            node=_str(raw.get("node")),
            container=_str(raw.get("container")),
            exit_code=_int(raw.get("exitCode")),
            message=_str(raw.get("message")),
            logs=_str(raw.get("logs")),
            epoch=_int(raw.get("epoch")),
            checkpoint=Checkpoint.from_json(raw.get("checkpoint")),
            epochs_lost=_int(raw.get("epochsLost")),
        )

    def to_json(self) -> Json:
        rendered: Json = {
            "attempt": self.attempt,
            "outcome": self.outcome,
            "cause": self.cause,
            "startTime": format_time(self.start_time) if self.start_time else None,
            "endTime": format_time(self.end_time),
            "worker": self.worker,
            "pod": self.pod,
            "node": self.node,
            "container": self.container,
            "exitCode": self.exit_code,
            "message": self.message,
            "logs": self.logs,
            "epoch": self.epoch,
            "checkpoint": self.checkpoint.to_json() if self.checkpoint else None,
            "epochsLost": self.epochs_lost,
        }
        return {key: value for key, value in rendered.items() if value is not None}


@dataclass(frozen=True)
class JobStatus:
    phase: Phase | None = None
    attempt: int = 0
    launched_attempt: int | None = None  # the attempt whose pods were all created
    restarts: int = 0
    evictions: int = 0  # gang restarts because Kueue took the quota back: not against backoffLimit
    workers: WorkerCounts | None = None
    ready_workers: str | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    marker: MarkerRecord | None = None
    observed_generation: int | None = None
    reason: str | None = None
    message: str | None = None
    conditions: tuple[Condition, ...] = ()
    progress: ProgressStatus | None = None
    history: tuple[AttemptRecord, ...] = ()  # how the last attempts ended, the newest first

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
        others = tuple(c for c in self.conditions if c.type != kind)
        return evolve(self, conditions=(*others, updated))

    @classmethod
    def from_json(cls, raw: object) -> JobStatus:
        status = raw if isinstance(raw, dict) else {}
        marker = status.get("marker")
        marker_time = parse_time(marker.get("observedTime")) if isinstance(marker, dict) else None
        marker_path = marker.get("path") if isinstance(marker, dict) else None
        return cls(
            phase=_phase(status.get("phase")),
            attempt=_int(status.get("attempt")) or 0,
            launched_attempt=_int(status.get("launchedAttempt")),
            restarts=_int(status.get("restarts")) or 0,
            evictions=_int(status.get("evictions")) or 0,
            workers=_workers(status.get("workers")),
            ready_workers=_str(status.get("readyWorkers")),
            start_time=parse_time(status.get("startTime")),
            completion_time=parse_time(status.get("completionTime")),
            marker=MarkerRecord(marker_path, marker_time)
            if isinstance(marker_path, str) and marker_time
            else None,
            observed_generation=_int(status.get("observedGeneration")),
            reason=_str(status.get("reason")),
            message=_str(status.get("message")),
            conditions=tuple(_conditions(status.get("conditions"))),
            progress=ProgressStatus.from_json(status.get("progress")),
            history=tuple(_history(status.get("history"))),
        )

    def to_json(self) -> Json:
        rendered: Json = {
            "phase": self.phase.value if self.phase else None,
            "attempt": self.attempt,
            "launchedAttempt": self.launched_attempt,
            "restarts": self.restarts,
            "evictions": self.evictions or None,
            "workers": vars(self.workers) if self.workers else None,
            "readyWorkers": self.ready_workers,
            "startTime": format_time(self.start_time) if self.start_time else None,
            "completionTime": format_time(self.completion_time) if self.completion_time else None,
            "marker": {"path": self.marker.path, "observedTime": format_time(self.marker.observed_time)}
            if self.marker
            else None,
            "observedGeneration": self.observed_generation,
            "reason": self.reason,
            "message": self.message,
            "conditions": [c.to_json() for c in self.conditions],
            "progress": self.progress.to_json() if self.progress else None,
            "history": [h.to_json() for h in self.history] or None,
        }
        return {key: value for key, value in rendered.items() if value is not None}


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


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _phase(value: object) -> Phase | None:
    return Phase(value) if isinstance(value, str) and value in set(Phase) else None


def _workers(value: object) -> WorkerCounts | None:
    if not isinstance(value, dict):
        return None
    return WorkerCounts(**{k: _int(value.get(k)) or 0 for k in ("pending", "running", "succeeded", "failed")})


def _history(value: object) -> list[AttemptRecord]:
    if not isinstance(value, list):
        return []
    records = (AttemptRecord.from_json(item) for item in value[:MAX_HISTORY])
    return [r for r in records if r is not None]


def _conditions(value: object) -> list[Condition]:
    if not isinstance(value, list):
        return []
    return [
        Condition(
            type=item["type"],
            true=item.get("status") == "True",
            reason=_str(item.get("reason")) or "",
            message=_str(item.get("message")) or "",
            last_transition_time=_str(item.get("lastTransitionTime")) or "",
        )
        for item in value
        if isinstance(item, dict) and isinstance(item.get("type"), str)
    ]
