"""The progress document read with suspicion, its throttle and the ETA, as pure functions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tfmw_operator.api.status import Checkpoint, JobStatus, ProgressRate, ProgressStatus
from tfmw_operator.core.progress import (
    MAX_CLOCK_AHEAD_SECONDS,
    MAX_PROGRESS_BYTES,
    ProgressError,
    ProgressProblem,
    ProgressReport,
    eta_seconds,
    format_duration,
    is_current,
    json_object,
    newer_report,
    next_progress,
    parse_progress,
    progress_status,
)
from wrappers import at

UID = "uid-mnist"
MTIME = at(30)


def document(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "epoch": 3,
        "totalEpochs": 10,
        "step": 240,
        "totalSteps": 800,
        "metrics": {"loss": 0.25, "accuracy": 0.91},
        "examplesPerSecond": 5120.5,
        "updatedAt": "2026-01-01T12:00:30.250Z",
        "jobUid": UID,
        "attempt": 0,
    }
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None}).encode()


def report(seconds: float, step: int, **fields: Any) -> ProgressReport:
    return ProgressReport(
        updated_at=at(seconds), epoch=step // 80, total_epochs=10, step=step, total_steps=800, **fields
    )


def test_a_good_document_is_read_field_by_field() -> None:
    got = parse_progress(document(), MTIME)
    assert (got.epoch, got.total_epochs, got.step, got.total_steps) == (3, 10, 240, 800)
    assert got.metrics == (("loss", 0.25), ("accuracy", 0.91))
    assert got.examples_per_second == 5120.5
    assert got.updated_at == at(30.25) and got.job_uid == UID and got.attempt == 0
    assert got.percent == 30.0


def test_percent_comes_from_steps_else_epochs_else_nothing() -> None:
    assert parse_progress(document(step=None, totalSteps=None), MTIME).percent == 30.0
    assert parse_progress(document(step=1, totalSteps=3), MTIME).percent == 33.3
    bare = parse_progress(b'{"metrics": {"loss": 1}}', MTIME)
    assert bare.percent is None and bare.updated_at == MTIME  # no updatedAt: the file's time


def test_updated_at_may_be_unix_seconds() -> None:
    assert parse_progress(document(updatedAt=at(30).timestamp()), MTIME).updated_at == at(30)
    with pytest.raises(ProgressError, match="updatedAt"):
        parse_progress(document(updatedAt=-5), MTIME)


def test_every_field_is_optional() -> None:
    assert parse_progress(b"{}", MTIME) == ProgressReport(updated_at=MTIME)


@pytest.mark.parametrize(
    ("content", "names"),
    [
        (b"not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"text"', "JSON object"),
        (document(epoch=-1), "epoch"),
        (document(epoch=True), "epoch"),
        (document(epoch=1.5), "epoch"),
        (document(epoch="3"), "epoch"),
        (document(epoch=11), "beyond totalEpochs"),
        (document(totalEpochs=0), "totalEpochs"),
        (document(step=801), "beyond totalSteps"),
        (document(step=10**13), "step"),
        (document(metrics=[1, 2]), "metrics"),
        (document(metrics={"loss": "low"}), "metrics.loss"),
        (document(metrics={"loss": None}), "metrics.loss"),
        (document(metrics={"bad name!": 1}), "metric name"),
        (document(metrics={"loss\n": 1}), "metric name"),  # "$" matched before a final newline
        (document(metrics={f"m{i}": i for i in range(17)}), "at most 16"),
        (document(examplesPerSecond=-5), "examplesPerSecond"),
        (document(examplesPerSecond="fast"), "examplesPerSecond"),
        (document(updatedAt="yesterday"), "updatedAt"),
        (document(jobUid=7), "jobUid"),
        (document(attempt=-1), "attempt"),
        (b'{"metrics": {"loss": NaN}}', "NaN"),
        (b'{"metrics": {"loss": Infinity}}', "Infinity"),
        (b'{"metrics": {"loss": 1e999}}', "metrics.loss"),
        (b'{"epoch": ' + b"9" * 5000 + b"}", "not JSON"),
        (b"[" * 8000 + b"]" * 8000, "not JSON"),
        (b'{"x": "' + b"a" * MAX_PROGRESS_BYTES + b'"}', "larger than 16 KiB"),
    ],
)
def test_garbage_is_refused_naming_the_field(content: bytes, names: str) -> None:
    with pytest.raises(ProgressError, match=names.replace(".", r"\.").replace("!", "")):
        parse_progress(content, MTIME)


def test_unknown_fields_are_ignored() -> None:
    assert parse_progress(document(extra={"a": 1}), MTIME).epoch == 3


def test_a_document_of_another_job_or_attempt_is_stale() -> None:
    ours = parse_progress(document(), MTIME)
    assert is_current(ours, UID, 0, at(10))
    assert not is_current(ours, "uid-other", 0, at(10))
    assert not is_current(ours, UID, 1, at(10))
    # Naming its attempt, it is judged by that, not by the clock.
    assert is_current(ours, UID, 0, at(100))


def test_an_anonymous_document_is_judged_by_its_time_against_the_attempt() -> None:
    anonymous = parse_progress(b'{"epoch": 1}', MTIME)
    assert is_current(anonymous, UID, 2, at(30))
    assert not is_current(anonymous, UID, 2, at(31))  # older than the attempt's first pod
    assert not is_current(anonymous, UID, 2, None)  # no pod of this attempt: nothing is fresh


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (44.6, "45s"),
        (60, "1m"),
        (200, "3m20s"),
        (3600, "1h"),
        (7500, "2h5m"),
        (86400 * 3 + 3600 * 4, "3d4h"),
    ],
)
def test_durations_read_like_kubectl_ages(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_eta_follows_the_rate_seen_since_the_attempt_began() -> None:
    since = ProgressRate(10.0, at(0))
    assert eta_seconds(since, 30.0, at(20)) == pytest.approx(70.0)  # 1 %/s, 70 % to go
    assert eta_seconds(since, 100.0, at(20)) == 0.0
    assert eta_seconds(since, 10.0, at(20)) is None  # no progress yet: no rate
    assert eta_seconds(since, 30.0, at(0)) is None
    assert eta_seconds(None, 30.0, at(20)) is None
    assert eta_seconds(since, None, at(20)) is None


def test_the_status_carries_the_figures_and_what_the_operator_makes_of_them() -> None:
    first = progress_status(report(0, 80, metrics=(("loss", 0.5),)), 0, None, at(1))
    assert first.since == ProgressRate(10.0, at(0)) and first.eta is None
    later = progress_status(report(20, 240, examples_per_second=100.0), 0, first, at(21))
    assert later.percent == 30.0 and later.eta == "1m10s" and later.eta_time == at(90)
    assert later.epochs == "3/10" and later.last_update == at(21) and later.since == first.since
    # A new attempt measures its rate afresh: it resumed from a checkpoint.
    resumed = progress_status(report(40, 400), 1, later, at(41))
    assert resumed.since == ProgressRate(50.0, at(40))


def test_summary_shows_the_first_metrics_briefly() -> None:
    figures = (("loss", 0.123456), ("accuracy", 0.9), ("lr", 0.001), ("extra", 1.0))
    status = progress_status(report(0, 80, metrics=figures), 0, None, at(1))
    assert status.summary == "loss=0.1235 accuracy=0.9 lr=0.001"


def test_status_progress_round_trips_through_json() -> None:
    status = progress_status(
        report(20, 240, metrics=(("loss", 0.5),), examples_per_second=9.5), 0, None, at(21)
    )
    status = progress_status(report(30, 320, metrics=(("loss", 0.4),)), 0, status, at(31.5))
    assert ProgressStatus.from_json(json.loads(json.dumps(status.to_json()))) == status
    whole = JobStatus(progress=status)
    assert JobStatus.from_json(whole.to_json()) == whole


def test_malformed_status_progress_reads_as_absent_fields() -> None:
    assert ProgressStatus.from_json("junk") is None
    odd = ProgressStatus.from_json({"epoch": "3", "metrics": {"loss": "x", "ok": 1}, "since": {"percent": 1}})
    assert odd is not None and odd.epoch is None and odd.metrics == (("ok", 1.0),) and odd.since is None


INTERVAL = 10.0


def decide_progress(
    old: ProgressStatus | None, reading: Any, now: float, final: bool = False, attempt: int = 0
) -> Any:
    return next_progress(old, reading, UID, attempt, at(0), at(now), INTERVAL, final)


def test_the_first_report_is_recorded_at_once() -> None:
    update = decide_progress(None, report(5, 80), 5)
    assert update.status is not None and update.status.step == 80 and update.due is None


def test_a_newer_report_within_the_interval_waits_until_it_is_due() -> None:
    first = decide_progress(None, report(5, 80), 5).status
    waiting = decide_progress(first, report(8, 160), 8)
    assert waiting.status == first and waiting.due == at(15)
    assert decide_progress(first, report(8, 160), 15).status.step == 160


def test_at_most_one_write_per_interval_whatever_the_chief_writes() -> None:
    status, writes = None, 0
    for tick in range(600):  # the chief writes ten times a second for a minute
        update = decide_progress(status, report(tick / 10, min(800, tick)), tick / 10)
        if update.status != status:
            writes += 1
        status = update.status
    assert writes == 6


def test_the_final_figures_are_recorded_whatever_the_throttle() -> None:
    first = decide_progress(None, report(5, 80), 5).status
    final = decide_progress(first, report(6, 800), 6, final=True)
    assert final.status.step == 800 and final.status.eta == "0s"


def test_an_unchanged_document_changes_nothing() -> None:
    first = decide_progress(None, report(5, 80), 5).status
    assert decide_progress(first, report(5, 80), 30) == type(decide_progress(first, None, 30))(first)


def test_a_stale_document_is_ignored() -> None:
    assert decide_progress(None, report(5, 80, attempt=0, job_uid=UID), 20, attempt=1).status is None
    assert decide_progress(None, report(5, 80, job_uid="uid-before"), 20).status is None


def test_a_refused_document_keeps_the_last_figures_and_warns_once() -> None:
    first = decide_progress(None, report(5, 80), 5).status
    refused = decide_progress(first, ProgressProblem("progress.json: not JSON"), 20)
    assert refused.status.step == 80 and refused.status.error == "progress.json: not JSON"
    assert refused.warning and "not JSON" in refused.warning
    again = decide_progress(refused.status, ProgressProblem("progress.json: not JSON"), 40)
    assert again.status == refused.status and again.warning is None
    healed = decide_progress(refused.status, report(35, 160), 40)
    assert healed.status.error is None and healed.status.step == 160


def test_refusals_are_throttled_too() -> None:
    first = decide_progress(None, report(5, 80), 5).status
    assert decide_progress(first, ProgressProblem("a"), 6).due == at(15)


def test_a_refused_first_document_still_says_why() -> None:
    update = decide_progress(None, ProgressProblem("default/mnist/progress.json: ELOOP"), 5)
    assert update.status is not None and update.status.error and update.status.epoch is None


def test_the_window_of_a_throttle_is_measured_from_the_last_write() -> None:
    first = decide_progress(None, report(5, 80), 5).status
    assert first.last_update == at(5)
    assert decide_progress(first, report(14, 90), 14.999).due == at(5) + timedelta(seconds=INTERVAL)


# ---- checkpoints and the progress deadline's clock ----


def test_checkpoint_fields_are_read_and_kept_across_attempts() -> None:
    report = parse_progress(
        document(checkpointEpoch=3, checkpointStep=240, checkpointPath="checkpoints/ckpt-3"), MTIME
    )
    assert report.checkpoint == Checkpoint(3, 240, "checkpoints/ckpt-3")
    first = progress_status(report, 0, None, at(31))
    assert first.checkpoint == Checkpoint(3, 240, "checkpoints/ckpt-3")
    assert first.to_json()["checkpoint"] == {"epoch": 3, "step": 240, "path": "checkpoints/ckpt-3"}
    # The next attempt has saved none yet: the last one on the storage is still where it resumed from.
    later = progress_status(parse_progress(document(attempt=1), MTIME), 1, first, at(60))
    assert later.checkpoint == first.checkpoint
    assert parse_progress(document(), MTIME).checkpoint is None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"checkpointEpoch": -1}, "checkpointEpoch"),
        ({"checkpointStep": "7"}, "checkpointStep"),
        ({"checkpointPath": ""}, "checkpointPath"),
        ({"checkpointPath": "x" * 1025}, "checkpointPath"),
        ({"checkpointPath": "a\nb"}, "checkpointPath"),
        ({"checkpointPath": 3}, "checkpointPath"),
    ],
)
def test_bad_checkpoint_fields_are_refused_by_name(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ProgressError, match=named):
        parse_progress(document(**fields), MTIME)


def test_the_clock_of_the_progress_deadline_moves_only_when_epoch_or_step_moves() -> None:
    first = progress_status(parse_progress(document(), MTIME), 0, None, at(31))
    assert first.advanced_at == at(31)
    same = progress_status(
        parse_progress(document(updatedAt="2026-01-01T12:00:50Z"), MTIME), 0, first, at(51)
    )
    assert same.advanced_at == at(31)
    stepped = progress_status(parse_progress(document(step=241), MTIME), 0, same, at(61))
    assert stepped.advanced_at == at(61)
    next_attempt = progress_status(parse_progress(document(attempt=1), MTIME), 1, stepped, at(90))
    assert next_attempt.advanced_at == at(90)
    bare = parse_progress(b'{"metrics": {"loss": 1.0}}', MTIME)
    seen = progress_status(bare, 0, None, at(31))
    assert progress_status(bare, 0, seen, at(41)).advanced_at == at(31)
    newer = parse_progress(b'{"metrics": {"loss": 0.5}}', at(40))
    assert progress_status(newer, 0, seen, at(41)).advanced_at == at(41)


def test_each_limit_is_accepted_at_its_edge() -> None:
    head = document(metrics=None)
    padded = head[:-1] + b', "pad": "' + b"x" * (MAX_PROGRESS_BYTES - len(head) - 11) + b'"}'
    assert len(padded) == MAX_PROGRESS_BYTES and parse_progress(padded, MTIME).step == 240
    edges = parse_progress(
        document(
            epoch=0,
            totalEpochs=1,
            step=800,
            examplesPerSecond=0,
            updatedAt=0,
            jobUid="u" * 64,
            checkpointEpoch=0,
            checkpointStep=0,
            checkpointPath="c" * 1024,
        ),
        MTIME,
    )
    assert (edges.epoch, edges.total_epochs, edges.step, edges.examples_per_second) == (0, 1, 800, 0)
    assert edges.updated_at == datetime(1970, 1, 1, tzinfo=UTC) and edges.job_uid == "u" * 64
    assert edges.checkpoint == Checkpoint(0, 0, "c" * 1024)
    assert parse_progress(document(epoch=10, step=0), MTIME).epoch == 10  # epoch == totalEpochs
    latest = parse_progress(document(updatedAt=2**33 - 1), MTIME).updated_at
    assert latest == datetime.fromtimestamp(2**33 - 1, UTC)
    assert parse_progress(document(checkpointPath="a/ b~"), MTIME).checkpoint == Checkpoint(
        None, None, "a/ b~"
    )
    assert parse_progress(document(checkpointPath="\x80"), MTIME).checkpoint == Checkpoint(None, None, "\x80")


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"totalEpochs": 0}, "totalEpochs must be an integer in 1..1000000000000, got 0"),
        ({"step": 801}, "step 801 is beyond totalSteps 800"),
        ({"epoch": 11}, "epoch 11 is beyond totalEpochs 10"),
        ({"totalSteps": 0}, "totalSteps must be an integer in 1..1000000000000, got 0"),
        ({"examplesPerSecond": -0.5}, "examplesPerSecond must not be negative"),
        ({"updatedAt": 2**33}, "updatedAt must be an RFC 3339 time or Unix seconds, got 8589934592"),
        ({"updatedAt": -1}, "updatedAt must be an RFC 3339 time or Unix seconds, got -1"),
        ({"jobUid": "u" * 65}, "jobUid must be the job's UID (TFMW_JOB_UID)"),
        (
            {"checkpointPath": ""},
            'checkpointPath must be a path or URI of 1..1024 printable characters, got ""',
        ),
        (
            {"checkpointPath": "c" * 1025},
            "checkpointPath must be a path or URI of 1..1024 printable characters",
        ),
        (
            {"checkpointPath": "a\x1fb"},
            "checkpointPath must be a path or URI of 1..1024 printable characters",
        ),
        (
            {"checkpointPath": "a\x7fb"},
            "checkpointPath must be a path or URI of 1..1024 printable characters",
        ),
        ({"checkpointEpoch": -1}, "checkpointEpoch must be an integer in 0..1000000000000, got -1"),
    ],
)
def test_each_refusal_says_what_is_wrong(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(ProgressError) as refused:
        parse_progress(document(**fields), MTIME)
    assert str(refused.value).startswith(said)


def test_what_is_not_json_is_refused_saying_so() -> None:
    for content, said in [
        (b"[1]", "must be a JSON object"),
        (b'{"epoch": NaN}', "NaN is not a number JSON allows"),
        (b"{", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (b"x" * (MAX_PROGRESS_BYTES + 1), "larger than 16 KiB; write a few figures, not a log"),
    ]:
        with pytest.raises(ProgressError) as refused:
            parse_progress(content, MTIME)
        assert str(refused.value).startswith(said), str(refused.value)


def test_a_long_json_error_is_cut_to_80_characters() -> None:
    content = b"{" + b"\n" * 9999
    with pytest.raises(ValueError) as raw:
        json.loads(content)
    assert len(str(raw.value)) > 80
    with pytest.raises(ProgressError) as refused:
        parse_progress(content, MTIME)
    assert str(refused.value) == f"not JSON: {str(raw.value)[:80]}"


def test_a_document_without_a_hint_says_only_its_size() -> None:
    with pytest.raises(ProgressError) as refused:
        json_object(b"x" * 2049, 2048)
    assert str(refused.value) == "larger than 2 KiB"
    assert json_object('{"é": 1}'.encode(), 2048) == {"é": 1}


def test_the_largest_count_and_the_most_metrics_are_accepted() -> None:
    metrics = {f"m{i}": i for i in range(16)}
    largest = parse_progress(document(step=10**12, totalSteps=10**12, metrics=metrics), MTIME)
    assert largest.step == 10**12 and len(largest.metrics) == 16


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"metrics": [1, 2]}, "metrics must be an object of name: number, got [1, 2]"),
        ({"metrics": {"loss": "low"}}, 'metrics.loss must be a finite number, got "low"'),
        ({"metrics": {"bad name!": 1}}, 'metrics: "bad name!" is not a metric name'),
        (
            {"metrics": {"loss": "a" * 100}},
            'metrics.loss must be a finite number, got "' + "a" * 39 + "\n",
        ),
    ],
)
def test_a_refused_metric_is_shown_as_written_and_cut_to_40_characters(
    fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(ProgressError) as refused:
        parse_progress(document(**fields), MTIME)
    assert (str(refused.value) + "\n").startswith(said)


def test_a_document_dated_at_the_clock_bound_is_still_used() -> None:
    now = at(100)
    edge = report(100 + MAX_CLOCK_AHEAD_SECONDS, 80)
    assert newer_report(edge, None, UID, 0, at(0), now) == edge
    beyond = report(100 + MAX_CLOCK_AHEAD_SECONDS + 1, 80)
    assert newer_report(beyond, None, UID, 0, at(0), now) is None
    assert decide_progress(None, edge, 100).warning is None


def test_only_a_document_newer_than_the_recorded_one_tells_an_attempt_s_end() -> None:
    recorded = progress_status(report(20, 160), 0, None, at(21))
    assert newer_report(report(20, 160), recorded, UID, 0, at(0), at(30)) is None
    assert newer_report(report(10, 240), recorded, UID, 0, at(0), at(30)) is None
    newer = report(25, 240)
    assert newer_report(newer, recorded, UID, 0, at(0), at(30)) == newer
    anonymous = ProgressReport(updated_at=at(25), epoch=3)
    assert newer_report(anonymous, recorded, UID, 0, at(0), at(30)) == anonymous
    assert newer_report(anonymous, recorded, UID, 0, None, at(30)) is None


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(86400, "1d"), (86400 - 1, "23h59m"), (86400 * 2 + 3600 * 23, "2d23h"), (86400 * 3, "3d")],
)
def test_a_day_and_more_reads_in_days(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_a_finished_training_has_no_time_left_even_before_a_rate() -> None:
    assert eta_seconds(None, 100.0, at(20)) == 0.0


def test_epochs_read_as_a_fraction_else_as_a_percentage() -> None:
    no_epoch_yet = ProgressReport(updated_at=at(0), total_epochs=10, step=0, total_steps=800)
    assert progress_status(no_epoch_yet, 0, None, at(1)).epochs == "0/10"
    steps_only = ProgressReport(updated_at=at(0), step=240, total_steps=800)
    assert progress_status(steps_only, 0, None, at(1)).epochs == "30%"
    assert progress_status(ProgressReport(updated_at=at(0), step=5), 0, None, at(1)).epochs is None


def test_a_rate_so_slow_it_would_never_end_gives_no_estimate() -> None:
    first = progress_status(report(0, 80), 0, None, at(1))
    crawl = ProgressReport(updated_at=at(10**9), step=81, total_steps=800)
    slow = progress_status(crawl, 0, first, at(10**9))
    assert slow.percent == 10.1 and slow.eta is None and slow.eta_time is None


def test_a_new_attempt_at_the_same_place_has_just_advanced() -> None:
    """The deadline's clock starts afresh for a new attempt, even where the last one stopped."""
    before = progress_status(report(20, 240), 0, None, at(21))
    resumed = progress_status(report(40, 240), 1, before, at(41))
    assert before.advanced_at == at(21) and resumed.advanced_at == at(41)
