"""The job's own series: set as its status says them, and gone when it finishes."""

from prometheus_client import REGISTRY
from tfmw_operator.runtime.metrics import JobSeries, publish_job


def sample(name: str) -> float | None:
    value: float | None = REGISTRY.get_sample_value(name, {"namespace": "metrics-ns", "job": "mnist"})
    return value


def test_a_jobs_series_follow_its_status_and_leave_with_it() -> None:
    publish_job("metrics-ns", "mnist", JobSeries(0.25, 120.0, stalled=False, stragglers=1))
    assert sample("tfmw_job_progress_ratio") == 0.25
    assert sample("tfmw_job_examples_per_second") == 120.0
    assert (sample("tfmw_job_stalled"), sample("tfmw_job_stragglers")) == (0.0, 1.0)
    # Its progress no longer read, its deadline gone: those series go, the others stay.
    publish_job("metrics-ns", "mnist", JobSeries(stragglers=0))
    assert sample("tfmw_job_progress_ratio") is None and sample("tfmw_job_stalled") is None
    assert sample("tfmw_job_stragglers") == 0.0
    publish_job("metrics-ns", "mnist", None)
    assert sample("tfmw_job_stragglers") is None
    publish_job("metrics-ns", "mnist", None)  # gone already: nothing to remove, no error
