"""A supervisor's report is taken only when it is well formed and names this job and a pod."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from tfmw_operator.core.reports import (
    MAX_ATTEMPT,
    MAX_ID_CHARS,
    MAX_REPORT_BYTES,
    ChildEnd,
    is_stem,
    log_tail_text,
    parse_report,
)

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


def test_a_supervisor_that_reads_hosts_says_so_in_true_and_nothing_else_counts() -> None:
    """Only then may a peer made again get a new hostname (builders.cluster_hosts)."""
    for said, reads in ((True, True), (None, False), ("true", False), (1, False), ({}, False)):
        report = parse_report(raw(readsHosts=said), JOB_UID, "worker-1")
        assert report is not None and report.reads_hosts is reads, said
    report = parse_report(raw(), JOB_UID, "worker-1")
    assert report is not None and report.reads_hosts is False  # an older supervisor's


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


T1 = datetime(2026, 1, 1, 12, 0, 1, tzinfo=UTC)
T2 = datetime(2026, 1, 1, 12, 0, 9, tzinfo=UTC)


def test_an_exited_report_at_its_bounds_is_read() -> None:
    """Attempt 0 and MAX_ATTEMPT, exit code 0 and 255, signal 1 and 64 are all in range."""
    low = parse_report(raw(state="exited", attempt=0, exitCode=0, signal=1), JOB_UID, "worker-0")
    assert low is not None and low.end is not None
    assert (low.attempt, low.end.attempt, low.end.exit_code, low.end.signal) == (0, 0, 0, 1)
    high = parse_report(
        raw(state="exited", attempt=MAX_ATTEMPT, exitCode=255, signal=64), JOB_UID, "worker-0"
    )
    assert high is not None and high.end is not None
    assert (high.attempt, high.end.exit_code, high.end.signal) == (MAX_ATTEMPT, 255, 64)


@pytest.mark.parametrize("signal", [0, 65, True, "9"])
def test_a_signal_out_of_range_is_dropped_and_the_end_kept(signal: object) -> None:
    report = parse_report(raw(state="exited", exitCode=1, signal=signal), JOB_UID, "worker-0")
    assert report is not None and report.end is not None
    assert report.end.exit_code == 1 and report.end.signal is None


@pytest.mark.parametrize(("oom", "seen"), [(True, True), (False, False), ("yes", None), (1, None)])
def test_an_oom_flag_is_taken_only_as_a_bool(oom: object, seen: bool | None) -> None:
    report = parse_report(raw(state="exited", exitCode=137, oomKilled=oom), JOB_UID, "worker-0")
    assert report is not None and report.end is not None and report.end.oom_killed is seen


def test_an_exited_report_carries_when_its_command_started_and_finished() -> None:
    report = parse_report(
        raw(
            state="exited",
            exitCode=1,
            startedAt="2026-01-01T12:00:01Z",
            finishedAt="2026-01-01T12:00:09Z",
            updatedAt="2026-01-01T12:00:09Z",
        ),
        JOB_UID,
        "worker-0",
    )
    assert report is not None and report.end is not None
    assert (report.end.started_at, report.end.finished_at) == (T1, T2)
    assert report.started_at is None  # only a running child has a start of its own
    assert report.updated_at == T2


def test_a_running_or_waiting_report_carries_the_last_childs_end() -> None:
    previous = {
        "attempt": 1,
        "exitCode": 143,
        "signal": 15,
        "oomKilled": False,
        "startedAt": "2026-01-01T12:00:01Z",
        "finishedAt": "2026-01-01T12:00:09Z",
    }
    for state in ("running", "waiting"):
        report = parse_report(raw(state=state, previous=previous), JOB_UID, "worker-0")
        assert report is not None
        assert report.previous == ChildEnd(
            attempt=1, exit_code=143, signal=15, oom_killed=False, started_at=T1, finished_at=T2
        )


def test_an_exited_report_has_no_previous_end_of_its_own() -> None:
    previous = {"attempt": 1, "exitCode": 1}
    report = parse_report(raw(state="exited", exitCode=2, previous=previous), JOB_UID, "worker-0")
    assert report is not None and report.end is not None and report.end.exit_code == 2
    assert report.previous is None


def test_a_malformed_previous_end_is_dropped_and_the_report_kept() -> None:
    report = parse_report(raw(previous={"attempt": 1}), JOB_UID, "worker-0")
    assert report is not None and report.previous is None


def test_only_a_running_report_has_a_start_time() -> None:
    running = parse_report(raw(startedAt="2026-01-01T12:00:01Z"), JOB_UID, "worker-0")
    waiting = parse_report(raw(state="waiting", startedAt="2026-01-01T12:00:01Z"), JOB_UID, "worker-0")
    assert running is not None and running.started_at == T1
    assert waiting is not None and waiting.started_at is None


def test_a_report_names_when_it_was_written() -> None:
    report = parse_report(raw(updatedAt="2026-01-01T12:00:09Z"), JOB_UID, "worker-0")
    assert report is not None and report.updated_at == T2
    unsaid = parse_report(raw(), JOB_UID, "worker-0")
    assert unsaid is not None and unsaid.updated_at is None


def test_a_report_of_exactly_the_size_bound_is_read() -> None:
    content = raw()
    padded = content[:-1] + b" " * (MAX_REPORT_BYTES - len(content)) + b"}"
    assert len(padded) == MAX_REPORT_BYTES
    assert parse_report(padded, JOB_UID, "worker-0") is not None
    assert parse_report(padded + b" ", JOB_UID, "worker-0") is None


@pytest.mark.parametrize("length", [1, MAX_ID_CHARS])
def test_ids_at_their_length_bounds_are_kept(length: int) -> None:
    report = parse_report(raw(podUid="p" * length, stacks="s" * length), JOB_UID, "worker-0")
    assert report is not None
    assert report.pod_uid == "p" * length and report.stacks == "s" * length


def test_an_empty_stacks_id_is_no_request() -> None:
    report = parse_report(raw(stacks=""), JOB_UID, "worker-0")
    assert report is not None and report.stacks is None


def test_a_log_tail_keeps_what_the_log_says() -> None:
    # A single line read from the middle of a file is all there is: it is kept.
    assert log_tail_text(b"only line\n", 5, whole=False) == "only line"
    # Two lines read from the middle: the first may be cut and is dropped.
    assert log_tail_text(b"cut\nwhole\n", 5, whole=False) == "whole"
    # Read from the start: every line is whole, the first one too.
    assert log_tail_text(b"first\nsecond\n", 5, whole=True) == "first\nsecond"
    # Only the trailing newlines go: trailing spaces and blank lines before the text stay.
    assert log_tail_text(b"\n\nerror:  \n\n", 5, whole=True) == "\n\nerror:  "
    assert log_tail_text(b"exit X\n", 5, whole=True) == "exit X"
    # Bytes that are not UTF-8 are replaced, never raise.
    assert log_tail_text(b"bad \xff byte\n", 5, whole=True) == "bad \ufffd byte"
