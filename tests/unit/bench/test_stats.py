"""The benchmarks' arithmetic and what they read from the API server's /metrics."""

from __future__ import annotations

import math

import pytest
from bench.stats import (
    histogram_between,
    histogram_quantile,
    latency_summary,
    percentile,
    ratio,
    request_durations,
    summary,
    write_counts,
    writes_between,
)

METRICS = """\
# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 99
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="0.005"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="0.01"} 30
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="+Inf"} 40
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1",le="+Inf"} 5
"""


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 51 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([3.0], 99) == 3.0


def test_summary_has_the_median_p99_and_max() -> None:
    assert summary([1.0, 2.0, 3.0, 10.0]) == {"n": 4, "median_s": 2.5, "p99_s": 10.0, "max_s": 10.0}


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"), [(1.0, 2.0, 0.5), (3.0, 0.0, None), (None, 1.0, None), (1.0, None, None)]
)
def test_ratio_is_none_where_it_cannot_be_computed(
    ours: float | None, theirs: float | None, expected: float | None
) -> None:
    assert ratio(ours, theirs) == expected


def test_write_counts_sum_the_codes_of_each_write_and_leave_reads_out() -> None:
    assert write_counts(METRICS) == {("POST", "pods", ""): 42, ("PATCH", "pods", "status"): 7}


def test_writes_between_are_the_differences_without_what_is_ignored() -> None:
    before = {("POST", "pods", ""): 2.0, ("PATCH", "pods", "status"): 1.0, ("POST", "leases", ""): 1.0}
    after = {
        ("POST", "pods", ""): 42.0,
        ("PATCH", "pods", "status"): 7.0,
        ("POST", "leases", ""): 5.0,
        ("DELETE", "services", ""): 0.0,
    }
    assert writes_between(before, after, {"pods/status", "leases"}) == {"POST pods": 40}


def test_request_durations_leave_watches_out() -> None:
    assert request_durations(METRICS) == {"POST": {0.005: 10, 0.01: 30, math.inf: 40}}


def test_histogram_quantile_interpolates_in_its_bucket_as_prometheus_does() -> None:
    buckets = {0.005: 10.0, 0.01: 30.0, math.inf: 40.0}
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.005)
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.0075)
    assert histogram_quantile(0.99, buckets) == 0.01  # in +Inf: the last finite bound
    assert histogram_quantile(0.5, {0.005: 0.0, math.inf: 0.0}) is None


def test_latency_summary_of_the_requests_between_two_scrapes() -> None:
    before = {"POST": {0.005: 10.0, 0.01: 10.0, math.inf: 10.0}}
    after = request_durations(METRICS)
    delta = histogram_between(before, after)
    assert delta == {"POST": {0.005: 0.0, 0.01: 20.0, math.inf: 30.0}}
    out = latency_summary(delta)
    assert out["writes_requests"] == 30 and out["reads_requests"] == 0
    assert out["writes_p50_ms"] == pytest.approx(8.8, abs=0.1) and out["reads_p50_ms"] is None
