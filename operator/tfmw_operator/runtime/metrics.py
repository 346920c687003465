"""Prometheus metrics of the operator."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from tfmw_operator.runtime.version import revision, version

BUILD_INFO = Gauge(
    "tfmw_build_info", "The running operator's version and source revision; always 1", ["version", "revision"]
)
BUILD_INFO.labels(version=version(), revision=revision()).set(1)

JOBS_CREATED = Counter("tfmw_jobs_created_total", "Jobs whose first attempt was launched")
JOBS_SUCCEEDED = Counter("tfmw_jobs_succeeded_total", "Jobs that reached phase Succeeded")
JOBS_FAILED = Counter("tfmw_jobs_failed_total", "Jobs that reached phase Failed", ["reason"])
GANG_RESTARTS = Counter(
    "tfmw_gang_restarts_total",
    "Gang restarts of any job, by the cause of the attempt's end (status.history[].cause)",
    ["cause"],
)
ACTIVE_JOBS = Gauge("tfmw_active_jobs", "Jobs known to the operator that have not finished")
RECONCILE_SECONDS = Histogram(
    "tfmw_reconcile_duration_seconds",
    "Time to observe, decide and apply one reconcile of one job",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
MARKER_LATENCY_SECONDS = Histogram(
    "tfmw_marker_detection_latency_seconds",
    "From the marker's modification time to the job's Succeeded status",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
JOB_PROGRESS_RATIO = Gauge(
    "tfmw_job_progress_ratio", "Training progress of a running job, 0 to 1", ["namespace", "job"]
)
JOB_EXAMPLES_PER_SECOND = Gauge(
    "tfmw_job_examples_per_second", "Training throughput a running job's chief reports", ["namespace", "job"]
)


JOB_STALLED = Gauge(
    "tfmw_job_stalled",
    "1 while a running job's progress has not advanced for its progressDeadlineSeconds, else 0",
    ["namespace", "job"],
)


JOB_STRAGGLERS = Gauge(
    "tfmw_job_stragglers",
    "Training pods of a running job named stragglers (status.stragglers): their own compute per step "
    "is persistently slower than the other pods'",
    ["namespace", "job"],
)


@dataclass(frozen=True)
class JobSeries:
    """A running job's own series, as its status says them: None leaves a series out."""

    progress_ratio: float | None = None
    examples_per_second: float | None = None
    stalled: bool | None = None  # None: the job has no progress deadline
    stragglers: int = 0


def publish_job(namespace: str, job: str, series: JobSeries | None) -> None:
    """Set the job's series (None: a finished or deleted job's go, as label sets must not grow
    without bound). The controller calls this only when they change: a remove or a labels()
    takes a lock each, and a launch reconciles each job a dozen times."""
    shown = series or JobSeries()
    values: tuple[tuple[Gauge, float | None], ...] = (
        (JOB_PROGRESS_RATIO, shown.progress_ratio),
        (JOB_EXAMPLES_PER_SECOND, shown.examples_per_second),
        (JOB_STALLED, None if shown.stalled is None else float(shown.stalled)),
        (JOB_STRAGGLERS, None if series is None else float(shown.stragglers)),
    )
    for gauge, value in values:
        if value is None:
            with contextlib.suppress(KeyError):  # never set, or already gone
                gauge.remove(namespace, job)
        else:
            gauge.labels(namespace, job).set(value)
