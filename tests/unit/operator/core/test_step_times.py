"""Each training pod's step-times document, parsed with suspicion (core/step_times.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from tfmw_operator.core.progress import MAX_COUNT, ProgressError
from tfmw_operator.core.step_times import (
    MAX_COMPUTE_SECONDS,
    MAX_LISTED,
    MAX_SAMPLES,
    MAX_STEP_TIMES_BYTES,
    StepTimesReport,
    StepTimesSnapshot,
    ahead_of_clock,
    parse_step_times,
)
from wrappers import at

MODIFIED = at(30)


def document(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "jobUid": "uid-mnist",
        "attempt": 0,
        "role": "worker",
        "index": 1,
        "step": 240,
        "computeSeconds": [0.0123, 0.0119, 0.0121],
        "updatedAt": "2026-01-01T12:00:20.123456Z",
    }
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None}).encode()


def test_the_trainers_document_is_read_whole() -> None:
    report = parse_step_times(document(), MODIFIED)
    assert report == StepTimesReport(
        updated_at=datetime(2026, 1, 1, 12, 0, 20, 123000, tzinfo=UTC),  # milliseconds, as the status keeps
        compute_seconds=(0.0123, 0.0119, 0.0121),
        job_uid="uid-mnist",
        attempt=0,
        role="worker",
        index=1,
        step=240,
    )


def test_without_updated_at_the_files_time_counts_and_every_other_key_may_be_missing() -> None:
    report = parse_step_times(b"{}", MODIFIED)
    assert report.updated_at == MODIFIED and report.compute_seconds == ()
    assert (report.job_uid, report.attempt, report.role, report.index, report.step) == (None,) * 5


def test_only_the_newest_figures_of_a_long_window_are_kept() -> None:
    figures = [float(i) for i in range(120)]
    report = parse_step_times(document(computeSeconds=figures), MODIFIED)
    assert report.compute_seconds == tuple(figures[-MAX_SAMPLES:])


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"x" * (MAX_STEP_TIMES_BYTES + 1), "larger than"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"computeSeconds": [NaN]}', "not a number JSON allows"),
        (document(computeSeconds="fast"), "list of seconds"),
        (document(computeSeconds=[0.1, "0.2"]), "numbers of seconds"),
        (document(computeSeconds=[True]), "numbers of seconds"),
        (document(computeSeconds=[-0.1]), "seconds in 0.."),
        (document(computeSeconds=[10**400]), "seconds in 0.."),
        (document(computeSeconds=[0.1] * 201), "at most 200"),
        (document(attempt=-1), "attempt must be an integer"),
        (document(step="240"), "step must be an integer"),
        (document(updatedAt="yesterday"), "updatedAt"),
        (document(jobUid=7), "jobUid"),
        (document(role="x" * 17), "role"),
        (b"[" * 5000, "not JSON"),  # deeper than the parser goes
    ],
)
def test_a_document_that_cannot_be_used_says_which_key_is_wrong(content: bytes, says: str) -> None:
    with pytest.raises(ProgressError, match=says):
        parse_step_times(content, MODIFIED)


@pytest.mark.parametrize(
    ("job_uid", "attempt", "written", "current"),
    [
        ("uid-mnist", 1, 5, True),
        ("uid-mnist", 0, 5, False),  # the attempt before a restart
        ("uid-other", 1, 5, False),  # an earlier job of the same name
        (None, 1, 5, False),  # an attempt without a job is nobody's
        (None, None, 5, True),  # neither: by time, against the attempt's first pod
        (None, None, -5, False),
        ("uid-mnist", None, 5, True),
    ],
)
def test_a_document_counts_only_for_the_job_and_attempt_that_wrote_it(
    job_uid: str | None, attempt: int | None, written: float, current: bool
) -> None:
    report = StepTimesReport(updated_at=at(written), compute_seconds=(0.1,), job_uid=job_uid, attempt=attempt)
    assert report.is_current("uid-mnist", 1, attempt_started=at(0)) is current


def test_a_document_dated_far_ahead_says_nothing_of_now() -> None:
    assert ahead_of_clock(StepTimesReport(updated_at=at(301), compute_seconds=()), at(0))
    assert not ahead_of_clock(StepTimesReport(updated_at=at(299), compute_seconds=()), at(0))


def test_a_snapshot_finds_a_pods_document_by_its_stem() -> None:
    report = StepTimesReport(updated_at=at(0), compute_seconds=(0.1,))
    snapshot = StepTimesSnapshot((("worker-1", report),))
    assert snapshot.of("worker-1") is report and snapshot.of("worker-0") is None


def test_values_at_their_bounds_are_read() -> None:
    figures = [0.0] * (MAX_LISTED - 1) + [MAX_COMPUTE_SECONDS]
    report = parse_step_times(
        document(jobUid="u" * 64, role="r" * 16, step=MAX_COUNT, computeSeconds=figures), MODIFIED
    )
    assert (report.job_uid, report.role, report.step) == ("u" * 64, "r" * 16, MAX_COUNT)
    assert report.compute_seconds == tuple(figures[-MAX_SAMPLES:])
    assert report.compute_seconds[-1] == MAX_COMPUTE_SECONDS and report.compute_seconds[0] == 0.0


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"jobUid": "u" * 65}, "jobUid"),
        ({"step": MAX_COUNT + 1}, "step must be an integer"),
        ({"computeSeconds": [MAX_COMPUTE_SECONDS + 1]}, "seconds in 0.."),
    ],
)
def test_values_just_past_their_bounds_are_refused(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ProgressError, match=says):
        parse_step_times(document(**fields), MODIFIED)


def test_the_time_is_cut_to_whole_milliseconds() -> None:
    for written in ("2026-01-01T12:00:20.5009Z", "2026-01-01T12:00:20.5004Z", "2026-01-01T12:00:20.500Z"):
        report = parse_step_times(document(updatedAt=written), MODIFIED)
        assert report.updated_at == datetime(2026, 1, 1, 12, 0, 20, 500000, tzinfo=UTC), written


def test_a_document_written_as_the_attempt_started_is_of_it() -> None:
    report = StepTimesReport(updated_at=at(0), compute_seconds=(0.1,))
    assert report.is_current("uid-mnist", 1, attempt_started=at(0))


def test_a_document_dated_exactly_the_bound_ahead_is_still_taken() -> None:
    assert not ahead_of_clock(StepTimesReport(updated_at=at(300), compute_seconds=()), at(0))
