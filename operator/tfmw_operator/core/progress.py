"""Training progress: the chief's progress document, read with suspicion, and what of it
goes into `status.progress` and when. Pure.

The document is whatever a worker wrote, so parsing refuses anything but a small JSON
object of the documented fields (README, "Training progress") with sane values, and says
which field is wrong. A refused document never harms the job: the last good figures stay.
Status writes are throttled per job to one per interval, except the last one, made when
the job finishes, which carries the final figures.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from tfmw_operator.api.records import evolve
from tfmw_operator.api.status import Checkpoint, ProgressRate, ProgressStatus
from tfmw_operator.api.times import NEVER, format_precise_time, later, parse_time
from tfmw_operator.contract import (
    PROGRESS_ATTEMPT,
    PROGRESS_CHECKPOINT_EPOCH,
    PROGRESS_CHECKPOINT_PATH,
    PROGRESS_CHECKPOINT_STEP,
    PROGRESS_EPOCH,
    PROGRESS_EXAMPLES_PER_SECOND,
    PROGRESS_JOB_UID,
    PROGRESS_METRICS,
    PROGRESS_STEP,
    PROGRESS_TOTAL_EPOCHS,
    PROGRESS_TOTAL_STEPS,
    PROGRESS_UPDATED_AT,
)

MAX_PROGRESS_BYTES = 16 * 1024
MAX_METRICS = 16
MAX_COUNT = 10**12
DEFAULT_PROGRESS_INTERVAL_SECONDS = 10.0
# Clocks of nodes differ; a document dated further ahead than this is refused.
MAX_CLOCK_AHEAD_SECONDS = 300
MAX_CHECKPOINT_PATH = 1024
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,62}")  # fullmatch: "$" lets "\n" end
SUMMARY_METRICS = 3


class ProgressError(ValueError):
    """A progress document that cannot be used; the message names the field."""


@dataclass(frozen=True)
class ProgressReport:
    """A progress document as the chief wrote it, checked."""

    updated_at: datetime  # its updatedAt, else the file's modification time
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: tuple[tuple[str, float], ...] = ()
    examples_per_second: float | None = None
    job_uid: str | None = None
    attempt: int | None = None
    checkpoint: Checkpoint | None = None

    @property
    def percent(self) -> float | None:
        if self.step is not None and self.total_steps:
            return round(min(100.0, 100.0 * self.step / self.total_steps), 1)
        if self.epoch is not None and self.total_epochs:
            return round(min(100.0, 100.0 * self.epoch / self.total_epochs), 1)
        return None


@dataclass(frozen=True)
class ProgressProblem:
    """The document was there but could not be used: unreadable or refused."""

    message: str


ProgressReading = ProgressReport | ProgressProblem


def _reject_constant(name: str) -> float:
    raise ProgressError(f"{name} is not a number JSON allows")


def json_object(content: bytes, limit: int, hint: str = "") -> dict[str, object]:
    """A document a pod wrote (progress, step times): a JSON object of at most `limit`
    bytes, with no NaN or Infinity, or ProgressError saying why not (`hint` after the size)."""
    if len(content) > limit:
        raise ProgressError(f"larger than {limit // 1024} KiB{hint}")
    try:
        document = json.loads(content.decode("utf-8"), parse_constant=_reject_constant)
    except ProgressError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ProgressError(f"not JSON: {str(error)[:80]}") from None
    if not isinstance(document, dict):
        raise ProgressError("must be a JSON object")
    return document


def _count(document: dict[str, object], key: str, minimum: int) -> int | None:
    value = document.get(key)
    if value is None:
        return None
    if type(value) is not int or not minimum <= value <= MAX_COUNT:
        raise ProgressError(f"{key} must be an integer in {minimum}..{MAX_COUNT}, got {_shown(value)}")
    return value


def _number(value: object, field: str) -> float:
    number = _finite(value)
    if number is None:
        raise ProgressError(f"{field} must be a finite number, got {_shown(value)}")
    return number


def _finite(value: object) -> float | None:
    """The value as a finite float; None for anything else (an integer too big for a float too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _shown(value: object) -> str:
    return json.dumps(value)[:40]


def _metrics(value: object) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ProgressError(f"metrics must be an object of name: number, got {_shown(value)}")
    if len(value) > MAX_METRICS:
        raise ProgressError(f"metrics has {len(value)} entries; at most {MAX_METRICS}")
    checked = []
    for name, figure in value.items():
        if not METRIC_NAME.fullmatch(name):
            raise ProgressError(
                f"metrics: {_shown(name)} is not a metric name (letters, digits, _ . / -; 63 at most)"
            )
        checked.append((name, _number(figure, f"metrics.{name}")))
    return tuple(checked)


def _unix_time(value: float) -> datetime | None:
    """Seconds since the epoch (time.time()), as a program may write it by hand."""
    seconds = _finite(value)
    if seconds is None or not 0 <= seconds < 2**33:
        return None
    return datetime.fromtimestamp(seconds, UTC)


def _checkpoint(document: dict[str, object]) -> Checkpoint | None:
    epoch = _count(document, PROGRESS_CHECKPOINT_EPOCH, 0)
    step = _count(document, PROGRESS_CHECKPOINT_STEP, 0)
    path = document.get(PROGRESS_CHECKPOINT_PATH)
    if path is not None and (
        not isinstance(path, str)
        or not 0 < len(path) <= MAX_CHECKPOINT_PATH
        or any(ord(c) < 32 or ord(c) == 127 for c in path)
    ):
        raise ProgressError(
            f"{PROGRESS_CHECKPOINT_PATH} must be a path or URI of 1..{MAX_CHECKPOINT_PATH} printable "
            f"characters, got {_shown(path)}"
        )
    if epoch is None and step is None and path is None:
        return None
    return Checkpoint(epoch, step, path)


def parse_progress(content: bytes, modified: datetime) -> ProgressReport:
    """The document in `content` (at most MAX_PROGRESS_BYTES), or ProgressError saying why not."""
    document = json_object(content, MAX_PROGRESS_BYTES, "; write a few figures, not a log")
    epoch, total_epochs = _count(document, PROGRESS_EPOCH, 0), _count(document, PROGRESS_TOTAL_EPOCHS, 1)
    step, total_steps = _count(document, PROGRESS_STEP, 0), _count(document, PROGRESS_TOTAL_STEPS, 1)
    if epoch is not None and total_epochs is not None and epoch > total_epochs:
        raise ProgressError(f"epoch {epoch} is beyond totalEpochs {total_epochs}")
    if step is not None and total_steps is not None and step > total_steps:
        raise ProgressError(f"step {step} is beyond totalSteps {total_steps}")
    rate = document.get(PROGRESS_EXAMPLES_PER_SECOND)
    examples_per_second = None if rate is None else _number(rate, PROGRESS_EXAMPLES_PER_SECOND)
    if examples_per_second is not None and examples_per_second < 0:
        raise ProgressError("examplesPerSecond must not be negative")
    updated_at = modified
    stamp = document.get(PROGRESS_UPDATED_AT)
    if stamp is not None:
        parsed = _unix_time(stamp) if isinstance(stamp, int | float) else parse_time(stamp)
        if parsed is None:
            raise ProgressError(f"updatedAt must be an RFC 3339 time or Unix seconds, got {_shown(stamp)}")
        updated_at = parsed
    # Milliseconds, as the status records it: the same document then compares equal.
    updated_at = updated_at.replace(microsecond=updated_at.microsecond // 1000 * 1000)
    job_uid = document.get(PROGRESS_JOB_UID)
    if job_uid is not None and (not isinstance(job_uid, str) or len(job_uid) > 64):
        raise ProgressError("jobUid must be the job's UID (TFMW_JOB_UID)")
    return ProgressReport(
        updated_at=updated_at,
        epoch=epoch,
        total_epochs=total_epochs,
        step=step,
        total_steps=total_steps,
        metrics=_metrics(document.get(PROGRESS_METRICS)),
        examples_per_second=examples_per_second,
        job_uid=job_uid,
        attempt=_count(document, PROGRESS_ATTEMPT, 0),
        checkpoint=_checkpoint(document),
    )


def is_current(report: ProgressReport, job_uid: str, attempt: int, attempt_started: datetime | None) -> bool:
    """Written by this job's current attempt: not by an earlier job of the same name, nor by
    an attempt before a gang restart. A document that names its job and attempt is judged by
    those; one that does not, by its time against the attempt's first pod."""
    if report.job_uid is not None and report.job_uid != job_uid:
        return False
    if report.attempt is not None:
        return report.attempt == attempt and report.job_uid == job_uid
    return attempt_started is not None and report.updated_at >= attempt_started


def ahead_of_clock(report: ProgressReport, now: datetime) -> bool:
    """A document dated too far ahead of the operator's clock is refused: its dates say nothing."""
    return report.updated_at > later(now, MAX_CLOCK_AHEAD_SECONDS)


def newer_report(
    reading: ProgressReading | None,
    recorded: ProgressStatus | None,
    job_uid: str,
    attempt: int,
    attempt_started: datetime | None,
    now: datetime,
) -> ProgressReport | None:
    """The document read now, if it is usable and newer than what `status.progress` recorded
    (which follows the document at most once per interval): an attempt's end is told by it."""
    if not isinstance(reading, ProgressReport) or ahead_of_clock(reading, now):
        return None
    if not is_current(reading, job_uid, attempt, attempt_started):
        return None
    if recorded is not None and recorded.updated_at is not None and reading.updated_at <= recorded.updated_at:
        return None
    return reading


def format_duration(seconds: float) -> str:
    """A short human duration, as kubectl prints ages: 45s, 3m20s, 2h5m, 3d4h."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def eta_seconds(since: ProgressRate | None, percent: float | None, at: datetime) -> float | None:
    """Time left at the rate seen from `since` to (`percent`, `at`); None before there is a rate."""
    if percent is None:
        return None
    if percent >= 100.0:
        return 0.0
    if since is None or percent <= since.percent or at <= since.time:
        return None
    rate = (percent - since.percent) / (at - since.time).total_seconds()
    return (100.0 - percent) / rate


def summary(metrics: tuple[tuple[str, float], ...]) -> str | None:
    shown = [f"{name}={value:.4g}" for name, value in metrics[:SUMMARY_METRICS]]
    return " ".join(shown) or None


def _epochs(report: ProgressReport) -> str | None:
    if report.total_epochs is not None:
        return f"{report.epoch or 0}/{report.total_epochs}"
    percent = report.percent
    return f"{percent:.0f}%" if percent is not None else None


def progress_status(
    report: ProgressReport, attempt: int, old: ProgressStatus | None, now: datetime
) -> ProgressStatus:
    """`status.progress` for `report`; the rate is measured from the attempt's first report."""
    percent = report.percent
    since = old.since if old is not None and old.attempt == attempt else None
    if since is None and percent is not None:
        since = ProgressRate(percent, report.updated_at)
    left = eta_seconds(since, percent, report.updated_at)
    eta_time = None if left is None else later(report.updated_at, left)
    if eta_time is not None and eta_time >= NEVER:  # a rate so slow it never ends: no estimate
        left = eta_time = None
    same_attempt = old is not None and old.attempt == attempt
    advanced_at = old.advanced_at if old is not None and same_attempt else None
    if advanced_at is None or not _same_place(old, report):
        advanced_at = now
    return ProgressStatus(
        attempt=attempt,
        epoch=report.epoch,
        total_epochs=report.total_epochs,
        step=report.step,
        total_steps=report.total_steps,
        metrics=report.metrics,
        examples_per_second=report.examples_per_second,
        updated_at=report.updated_at,
        percent=percent,
        eta=format_duration(left) if left is not None else None,
        eta_time=eta_time,
        last_update=now,
        epochs=_epochs(report),
        summary=summary(report.metrics),
        since=since,
        advanced_at=advanced_at,
        # A checkpoint stays on the storage: an attempt that has not saved one yet resumed from it.
        checkpoint=report.checkpoint or (old.checkpoint if old is not None else None),
    )


def _same_place(old: ProgressStatus | None, report: ProgressReport) -> bool:
    """Training has not moved since `old`: the same epoch and step; for a document that
    reports neither, the same document."""
    if old is None:
        return False
    if report.epoch is None and report.step is None:
        return old.epoch is None and old.step is None and old.updated_at == report.updated_at
    return (old.epoch, old.step) == (report.epoch, report.step)


@dataclass(frozen=True)
class ProgressUpdate:
    status: ProgressStatus | None  # what status.progress becomes
    due: datetime | None = None  # a newer document waits for the interval to pass until then
    warning: str | None = None  # a newly refused document: say so once


def next_progress(
    old: ProgressStatus | None,
    reading: ProgressReading | None,
    job_uid: str,
    attempt: int,
    attempt_started: datetime | None,
    now: datetime,
    interval: float,
    final: bool,
) -> ProgressUpdate:
    """What `status.progress` becomes now; `final` when the job finishes in this decision."""
    if reading is None:
        return ProgressUpdate(old)
    if isinstance(reading, ProgressReport) and ahead_of_clock(reading, now):
        reading = ProgressProblem(
            f"updatedAt (else the file's modification time) {format_precise_time(reading.updated_at)} "
            f"is more than {MAX_CLOCK_AHEAD_SECONDS}s ahead of the operator's clock; write the current time"
        )
    if isinstance(reading, ProgressProblem):
        if old is not None and old.error == reading.message:
            return ProgressUpdate(old)
        wanted = evolve(old or ProgressStatus(attempt=attempt), error=reading.message, last_update=now)
        warning = f"progress document refused: {reading.message}"
    else:
        if not is_current(reading, job_uid, attempt, attempt_started):
            return ProgressUpdate(old)
        if (
            old is not None
            and old.attempt == attempt
            and old.updated_at == reading.updated_at
            and not old.error
        ):
            return ProgressUpdate(old)
        wanted, warning = progress_status(reading, attempt, old, now), None
    if old is not None and old.last_update is not None and not final:
        due = later(old.last_update, interval)
        if now < due:
            return ProgressUpdate(old, due=due)
    return ProgressUpdate(wanted, warning=warning)
