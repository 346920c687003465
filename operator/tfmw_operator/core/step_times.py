"""Each training pod's own compute time per step: its step-times document
(`steps/<pod stem>.json`), read with the same suspicion as the progress document. Pure.

A worker writes whatever it likes, so parsing refuses anything but a small JSON object of
the documented keys (docs/training-program.md, "Compute time per step") with sane values,
and says which key is wrong. A refused document only leaves its pod out of the comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.times import later, parse_time
from tfmw_operator.contract import (
    STEP_TIMES_ATTEMPT,
    STEP_TIMES_COMPUTE_SECONDS,
    STEP_TIMES_INDEX,
    STEP_TIMES_JOB_UID,
    STEP_TIMES_MAX_SAMPLES,
    STEP_TIMES_ROLE,
    STEP_TIMES_STEP,
    STEP_TIMES_UPDATED_AT,
)
from tfmw_operator.core.progress import (
    MAX_CLOCK_AHEAD_SECONDS,
    MAX_COUNT,
    ProgressError,
    ProgressProblem,
    json_object,
)

# 50 figures of a few digits each and five short keys fit in 2 KiB; the bound leaves room for
# any spelling of them (exponents, many digits) and none for a log.
MAX_STEP_TIMES_BYTES = 8 * 1024
# The window the trainer keeps; a document may hold more (another program's), and only the
# newest of them are judged.
MAX_SAMPLES = STEP_TIMES_MAX_SAMPLES
MAX_LISTED = 4 * STEP_TIMES_MAX_SAMPLES
MAX_COMPUTE_SECONDS = 24 * 3600.0  # a figure beyond a day is nonsense, not a slow step


@dataclass(frozen=True)
class StepTimesReport:
    """One pod's document, checked: its window of compute times, newest last."""

    updated_at: datetime  # its updatedAt, else the file's modification time
    compute_seconds: tuple[float, ...]
    job_uid: str | None = None
    attempt: int | None = None
    role: str | None = None
    index: int | None = None
    step: int | None = None

    def is_current(self, job_uid: str, attempt: int, attempt_started: datetime | None) -> bool:
        """Written by this job's current attempt (as progress.is_current judges the chief's)."""
        if self.job_uid is not None and self.job_uid != job_uid:
            return False
        if self.attempt is not None:
            return self.attempt == attempt and self.job_uid == job_uid
        return attempt_started is not None and self.updated_at >= attempt_started


StepTimesReading = StepTimesReport | ProgressProblem


@dataclass(frozen=True)
class StepTimesSnapshot:
    """The step-times documents of a job's training pods read at one moment, by pod stem
    (`worker-2`); a pod that has written none is not listed."""

    documents: tuple[tuple[str, StepTimesReading], ...] = ()
    error: str | None = None  # the folder itself could not be read (a link, a file, the storage)
    # There is no steps folder at all: no training pod of the job has written a document yet.
    no_folder: bool = False

    def of(self, stem: str) -> StepTimesReading | None:
        return next((reading for name, reading in self.documents if name == stem), None)


def _count(document: dict[str, object], key: str) -> int | None:
    value = document.get(key)
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise ProgressError(f"{key} must be an integer in 0..{MAX_COUNT}")
    return value


def _seconds(value: object) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise ProgressError(f"{STEP_TIMES_COMPUTE_SECONDS} must be a list of seconds, newest last")
    if len(value) > MAX_LISTED:
        raise ProgressError(f"{STEP_TIMES_COMPUTE_SECONDS} has {len(value)} figures; at most {MAX_LISTED}")
    figures = []
    for item in value[-MAX_SAMPLES:]:
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise ProgressError(f"{STEP_TIMES_COMPUTE_SECONDS} must hold numbers of seconds only")
        try:
            figure = float(item)
        except OverflowError:
            figure = math.inf
        if not 0.0 <= figure <= MAX_COMPUTE_SECONDS:
            raise ProgressError(
                f"{STEP_TIMES_COMPUTE_SECONDS} must hold seconds in 0..{MAX_COMPUTE_SECONDS:.0f}"
            )
        figures.append(figure)
    return tuple(figures)


def parse_step_times(content: bytes, modified: datetime) -> StepTimesReport:
    """The document in `content` (at most MAX_STEP_TIMES_BYTES), or ProgressError saying why not."""
    document = json_object(content, MAX_STEP_TIMES_BYTES)
    updated_at = modified
    stamp = document.get(STEP_TIMES_UPDATED_AT)
    if stamp is not None:
        parsed = parse_time(stamp)
        if parsed is None:
            raise ProgressError(f"{STEP_TIMES_UPDATED_AT} must be an RFC 3339 time")
        updated_at = parsed
    # Milliseconds, as the status records times: the same document then compares equal.
    updated_at = updated_at.replace(microsecond=updated_at.microsecond // 1000 * 1000)
    job_uid, role = document.get(STEP_TIMES_JOB_UID), document.get(STEP_TIMES_ROLE)
    if job_uid is not None and (not isinstance(job_uid, str) or len(job_uid) > 64):
        raise ProgressError(f"{STEP_TIMES_JOB_UID} must be the job's UID (TFMW_JOB_UID)")
    if role is not None and (not isinstance(role, str) or len(role) > 16):
        raise ProgressError(f"{STEP_TIMES_ROLE} must be the pod's role (TFMW_ROLE)")
    return StepTimesReport(
        updated_at=updated_at,
        compute_seconds=_seconds(document.get(STEP_TIMES_COMPUTE_SECONDS, [])),
        job_uid=job_uid,
        attempt=_count(document, STEP_TIMES_ATTEMPT),
        role=role,
        index=_count(document, STEP_TIMES_INDEX),
        step=_count(document, STEP_TIMES_STEP),
    )


def ahead_of_clock(report: StepTimesReport, now: datetime) -> bool:
    """Dated further ahead of the operator's clock than node clocks differ: it says nothing of now."""
    return report.updated_at > later(now, MAX_CLOCK_AHEAD_SECONDS)
