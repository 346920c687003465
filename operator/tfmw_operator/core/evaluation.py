"""The side-car evaluator's figures: its document (`evaluation.json`), read with the same
suspicion as the chief's progress document, and what of it goes into `status.evaluation`.
Pure.

The document is the progress document's shape (metrics, epoch, step, updatedAt, jobUid)
with `checkpoint`, the name or path of the checkpoint the figures are of. It is the
evaluator's across attempts: it evaluates whatever checkpoint is newest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.records import evolve
from tfmw_operator.api.spec import JobSpec, ReplicaType
from tfmw_operator.api.status import EvaluationStatus, Phase
from tfmw_operator.api.times import format_precise_time, later
from tfmw_operator.contract import EVALUATION_CHECKPOINT
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.progress import (
    MAX_CHECKPOINT_PATH,
    ProgressError,
    ProgressProblem,
    ProgressReport,
    ahead_of_clock,
    parse_progress,
    summary,
)


@dataclass(frozen=True)
class EvaluationReport:
    figures: ProgressReport
    checkpoint: str | None = None


EvaluationReading = EvaluationReport | ProgressProblem


def parse_evaluation(content: bytes, modified: datetime) -> EvaluationReport:
    """The document in `content`, or ProgressError saying which field is wrong."""
    figures = parse_progress(content, modified)
    checkpoint = json.loads(content.decode("utf-8")).get(EVALUATION_CHECKPOINT)
    if checkpoint is not None and (not isinstance(checkpoint, str) or len(checkpoint) > MAX_CHECKPOINT_PATH):
        raise ProgressError(
            f"checkpoint must be a checkpoint's name or path of at most {MAX_CHECKPOINT_PATH} characters"
        )
    return EvaluationReport(figures, checkpoint)


@dataclass(frozen=True)
class EvaluationUpdate:
    status: EvaluationStatus | None
    warning: str | None = None  # a refused document: say why, once


def next_evaluation(
    old: EvaluationStatus | None,
    reading: EvaluationReading | None,
    job_uid: str,
    job_started: datetime | None,
    now: datetime,
    interval: float,
) -> EvaluationUpdate:
    """What `status.evaluation` becomes: at most one write per `interval`."""
    if reading is None:
        return EvaluationUpdate(old)
    if isinstance(reading, EvaluationReport) and ahead_of_clock(reading.figures, now):
        reading = ProgressProblem(
            f"updatedAt {format_precise_time(reading.figures.updated_at)} is ahead of the operator's clock"
        )
    if isinstance(reading, ProgressProblem):
        if old is not None and old.error == reading.message:
            return EvaluationUpdate(old)
        return EvaluationUpdate(
            evolve(old or EvaluationStatus(), error=reading.message),
            warning=f"evaluation document refused: {reading.message}",
        )
    figures = reading.figures
    if figures.job_uid is not None and figures.job_uid != job_uid:
        return EvaluationUpdate(old)  # an earlier job's of the same name
    if figures.job_uid is None and (job_started is None or figures.updated_at < job_started):
        return EvaluationUpdate(old)
    if old is not None and old.updated_at == figures.updated_at and not old.error:
        return EvaluationUpdate(old)
    if old is not None and old.updated_at is not None and now < later(old.updated_at, interval):
        return EvaluationUpdate(old)
    return EvaluationUpdate(
        EvaluationStatus(
            checkpoint=reading.checkpoint,
            epoch=figures.epoch,
            step=figures.step,
            metrics=figures.metrics,
            summary=summary(figures.metrics),
            updated_at=figures.updated_at,
        )
    )


def reads_evaluation(job: JobSpec, phase: Phase | None, pods: Iterable[ObservedPod | None]) -> bool:
    """Whether the evaluator's document is read for this reconcile: while the job runs, and
    after a success while an evaluator pod of the job's is there and not being deleted. It
    may be evaluating the final checkpoint in its grace, or have written those figures and
    exited: its exit is the reconcile that must read them. A job being launched or
    restarted, or one that failed, costs no read."""
    if not job.shared or job.evaluator_template is None:
        return False
    if phase is Phase.RUNNING:
        return True
    return phase is Phase.SUCCEEDED and any(
        p is not None and p.replica_type is ReplicaType.EVALUATOR and not p.deleting for p in pods
    )
