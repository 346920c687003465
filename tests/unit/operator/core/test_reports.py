"""A supervisor's report is taken only when it is well formed and names this job and a pod."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tfmw_operator.core.reports import MAX_REPORT_BYTES, is_stem, log_tail_text, parse_report

JOB_UID = "job-uid-1"


def raw(**fields: Any) -> bytes:
    doc = {"jobUid": JOB_UID, "podUid": "pod-uid-1", "attempt": 2, "state": "running"} | fields
    return json.dumps(doc).encode()


def test_a_running_report_is_read_with_its_fields() -> None:
    report = parse_report(
        raw(startedAt="2026-01-01T12:00:01Z", stacks="req-1", stacksDelivered=True), JOB_UID, "worker-1"
    )
    assert report is not None
    assert (report.stem, report.pod_uid, report.attempt, report.state) == (
        "worker-1",
        "pod-uid-1",
        2,
        "running",
    )
    assert report.started_at is not None and report.stacks == "req-1" and report.stacks_delivered
    assert report.end is None


def test_an_exited_report_carries_how_its_command_ended() -> None:
    report = parse_report(raw(state="exited", exitCode=137, signal=9, oomKilled=False), JOB_UID, "chief-0")
    assert report is not None and report.end is not None
    assert (report.end.attempt, report.end.exit_code, report.end.signal, report.end.oom_killed) == (
        2,
        137,
        9,
        False,
    )


@pytest.mark.parametrize(
    ("content", "stem"),
    [
        (b"not json", "worker-0"),
        (raw(jobUid="another-job"), "worker-0"),  # another job's
        (raw(podUid=""), "worker-0"),
        (raw(podUid="x" * 257), "worker-0"),
        (raw(state="dancing"), "worker-0"),
        (raw(attempt=True), "worker-0"),  # a bool is no attempt
        (raw(attempt=-1), "worker-0"),
        (raw(attempt=1_000_001), "worker-0"),
        (raw(state="exited"), "worker-0"),  # an end without its code
        (raw(state="exited", exitCode=256), "worker-0"),
        (raw(), "../worker-0"),  # not a stem
        (raw(), "worker-0/x"),
        (json.dumps([1, 2]).encode(), "worker-0"),
        (b"\xff\xfe", "worker-0"),
        (b"[" * 100_000, "worker-0"),  # too deep to parse
        (raw(padding="x" * MAX_REPORT_BYTES), "worker-0"),  # too big to be one
    ],
)
def test_what_is_no_report_of_this_job_is_none(content: bytes, stem: str) -> None:
    assert parse_report(content, JOB_UID, stem) is None


def test_no_job_uid_takes_no_report() -> None:
    assert parse_report(raw(jobUid=""), "", "worker-0") is None


def test_a_stacks_id_out_of_bounds_is_dropped_and_the_report_kept() -> None:
    report = parse_report(raw(stacks="x" * 257, stacksDelivered="yes"), JOB_UID, "worker-0")
    assert report is not None and report.stacks is None and not report.stacks_delivered


def test_stems() -> None:
    assert is_stem("worker-0") and is_stem("chief-0") and is_stem("evaluator-0") and is_stem("ps-12")
    assert not is_stem("worker-") and not is_stem("worker-12345") and not is_stem("master-0")


def test_a_log_tail_drops_a_first_line_cut_by_the_read() -> None:
    assert log_tail_text(b"cut line\nwhole 1\nwhole 2\n", 5, whole=False) == "whole 1\nwhole 2"
    assert log_tail_text(b"first\nsecond\nthird\n", 2, whole=True) == "second\nthird"
    assert log_tail_text(b"a\0b\n", 5, whole=True) == "ab"
