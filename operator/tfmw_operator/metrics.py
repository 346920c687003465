"""Prometheus metrics of the operator."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

JOBS_CREATED = Counter("tfmw_jobs_created_total", "Jobs whose first attempt was launched")
JOBS_SUCCEEDED = Counter("tfmw_jobs_succeeded_total", "Jobs that reached phase Succeeded")
JOBS_FAILED = Counter("tfmw_jobs_failed_total", "Jobs that reached phase Failed", ["reason"])
GANG_RESTARTS = Counter("tfmw_gang_restarts_total", "Gang restarts of any job")
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
