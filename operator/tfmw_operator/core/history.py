"""`status.history`: how each attempt ended, recorded once, and amended while its pods are
still going when its root cause turns up later (a lost node). Pure.

An entry names the cause in Kubernetes' words, the worker that failed first, the end of
its log, where its full log is, and the checkpoint the next attempt resumes from, with the
epochs that will be redone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tfmw_operator.api.records import evolve
from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.status import (
    MAX_HISTORY,
    MAX_HISTORY_MESSAGE,
    WITHIN_ATTEMPT,
    AttemptRecord,
    JobStatus,
)
from tfmw_operator.contract import WORKER, attempt_logs_folder, pod_stem
from tfmw_operator.core.pods import ObservedPod, attempt_started
from tfmw_operator.core.policies.failure import MESSAGE_TAIL_LINES
from tfmw_operator.core.policies.verdicts import Cause
from tfmw_operator.core.progress import ProgressReading, newer_report


def logs_path(job: JobSpec, attempt: int, cause: Cause | None = None) -> str | None:
    """Where the attempt's logs are kept: the failed pod's, or the attempt's folder; None
    for a job with no shared volume (its logs go with its pods)."""
    if not job.shared:
        return None
    folder = f"{job.directory}/{attempt_logs_folder(attempt)}"
    if cause is None or cause.worker is None:
        return f"{folder}/"
    return f"{folder}/{pod_stem(cause.replica_type or WORKER, cause.worker)}.log"


def attempt_record(
    status: JobStatus,
    job: JobSpec,
    pods: Sequence[ObservedPod],
    reading: ProgressReading | None,
    outcome: str,
    cause: Cause,
    now: datetime,
    started: datetime | None = None,
) -> AttemptRecord | None:
    """How the current attempt ended; None when it was never launched or is recorded already.
    `started`: when it began, if not when its first pod was made (a gang restarted in place)."""
    attempt = status.attempt
    if not status.launched:
        return None
    # One ending per attempt; a pod restarted alone within it (Replaced), or a container in its
    # pod (ContainerRestarted), is an entry of its own.
    latest = status.history[0] if status.history else None
    if (
        outcome not in WITHIN_ATTEMPT
        and latest is not None
        and latest.attempt == attempt
        and latest.outcome not in WITHIN_ATTEMPT
    ):
        return None
    started = started or attempt_started(pods, attempt)
    progress = status.progress
    epoch = progress.epoch if progress is not None and progress.attempt == attempt else None
    checkpoint = progress.checkpoint if progress is not None else None
    report = newer_report(reading, progress, job.uid, attempt, started, now)
    if report is not None:
        epoch, checkpoint = report.epoch, report.checkpoint or checkpoint
    lost = None
    if epoch is not None and checkpoint is not None and checkpoint.epoch is not None:
        lost = max(0, epoch - checkpoint.epoch)
    tail = "\n".join(cause.message.strip().splitlines()[-MESSAGE_TAIL_LINES:])[-MAX_HISTORY_MESSAGE:]
    return AttemptRecord(
        attempt=attempt,
        outcome=outcome,
        cause=cause.reason,
        end_time=now,
        start_time=started,
        worker=cause.worker,
        replica_type=cause.replica_type if cause.replica_type not in (None, WORKER) else None,
        pod=cause.pod,
        node=cause.node,
        container=cause.container,
        exit_code=cause.exit_code,
        message=tail or None,
        # A pod restarted alone may have had a namesake earlier in the attempt: the folder.
        logs=logs_path(job, attempt, None if outcome in WITHIN_ATTEMPT else cause),
        epoch=epoch,
        checkpoint=checkpoint,
        epochs_lost=lost,
        stacks=cause.stacks,
        # Attempts of a job with spec.minWorkers may differ in size: each says its own.
        workers=job.workers if job.min_workers is not None else None,
    )


def with_record(history: tuple[AttemptRecord, ...], record: AttemptRecord) -> tuple[AttemptRecord, ...]:
    """The history with `record` first; the oldest beyond MAX_HISTORY go."""
    return (record, *history)[:MAX_HISTORY]


def with_root_cause(record: AttemptRecord, cause: Cause, job: JobSpec) -> AttemptRecord:
    """The record told again with the root cause found behind it: the worker whose node was
    lost, not the one that noticed first (its exit is in the new message)."""
    return evolve(
        record,
        cause=cause.reason,
        worker=cause.worker,
        replica_type=cause.replica_type if cause.replica_type not in (None, WORKER) else None,
        pod=cause.pod,
        node=cause.node,
        container=cause.container,
        exit_code=None,
        message=cause.message,
        # The lost worker's log could not be read from its node; its peers' are in the folder.
        logs=logs_path(job, record.attempt),
    )


def resumes_from(record: AttemptRecord | None) -> str:
    """ "; attempt 3 resumes from the checkpoint of epoch 4 at ...: 1 epoch redone", when known."""
    if record is None or record.checkpoint is None:
        return ""
    said = f"; attempt {record.attempt + 1} resumes from {record.checkpoint.describe()}"
    if record.epochs_lost:
        said += f": {record.epochs_lost} epoch{'s' if record.epochs_lost > 1 else ''} to redo"
    return said
