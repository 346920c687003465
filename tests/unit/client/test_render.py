"""What get, describe and wait print, from the API's JSON."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tfmw_client import render
from unit.client.jobs import NOW, ago, failed, job, pod, running


def squash(text: str) -> str:
    """Runs of spaces as one: the assertions are about content, not column widths."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (200, "3m20s"),
        (300, "5m"),
        (65 * 60, "65m"),
        (3 * 3600 + 300, "3h5m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (100 * 86400, "100d"),
    ],
)
def test_durations_read_as_kubectl_prints_them(seconds: float, shown: str) -> None:
    assert render.human_duration(seconds) == shown


def test_the_bar_fills_with_the_percentage() -> None:
    assert render.bar(0, 10, ascii_only=True) == "[----------]"
    assert render.bar(70, 10, ascii_only=True) == "[#######---]"
    assert render.bar(100, 10) == "[" + "█" * 10 + "]"
    assert render.bar(None, 4) == "[....]"


def test_percent_comes_from_the_status_else_steps_else_epochs() -> None:
    assert render.percent_of({"percent": 42.0, "step": 1, "totalSteps": 2}) == 42.0
    assert render.percent_of({"step": 30, "totalSteps": 120, "epoch": 9, "totalEpochs": 10}) == 25.0
    assert render.percent_of({"epoch": 3, "totalEpochs": 4}) == 75.0
    assert render.percent_of({"epoch": 3}) is None
    assert render.percent_of({"percent": 250}) == 100.0


def test_the_progress_line_has_bar_percentage_epochs_eta_and_metrics() -> None:
    line = render.progress_line(running()["status"]["progress"], 10, ascii_only=True)
    assert line == "[#######---]   70%  7/10 epochs  ETA 4s  loss=0.0412 accuracy=0.9871"


def test_the_table_lists_jobs_as_kubectl_columns_with_a_bar() -> None:
    table = render.job_table([running("b"), job("a")], NOW, ascii_only=True).splitlines()
    assert table[0].split() == ["NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE"]
    assert table[1].split() == ["a", "Pending", "-", "0", "-", "-", "5m"]
    assert table[2].split() == ["b", "Running", "2/2", "1", "[#######---]", "7/10", "4s", "5m"]


def test_wide_and_all_namespaces_add_their_columns() -> None:
    table = render.job_table([failed()], NOW, wide=True, all_namespaces=True).splitlines()
    assert table[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert " ".join(table[0].split()).endswith("COMPLETED REASON METRICS LAST CAUSE")
    assert table[1].split() == [
        "default",
        "broken",
        "Failed",
        "-",
        "0",
        "-",
        "-",
        "5m",
        "1",
        "10s",
        "WorkerFailed",
        "-",
        "Error",
    ]


def test_pods_are_listed_by_role_chief_first_newest_attempt_first() -> None:
    pods = [
        pod("mnist", "worker-1", 1),
        pod("mnist", "worker-0", 1),
        pod("mnist", "worker-2", 0, phase="Failed"),
    ]
    rows = render.pods_table(pods, NOW).splitlines()
    assert [r.split()[:3] for r in rows[1:]] == [
        ["chief", "0", "mnist-worker-0"],
        ["worker", "1", "mnist-worker-1"],
        ["worker", "2", "mnist-worker-2"],
    ]


def test_a_pods_status_reads_as_kubectls() -> None:
    waiting = pod("j", "worker-0")
    waiting["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ImagePullBackOff"}}
    assert render.pod_state(waiting) == "ImagePullBackOff"
    going = pod("j", "worker-0")
    going["metadata"]["deletionTimestamp"] = ago(1)
    assert render.pod_state(going) == "Terminating"
    oom = pod("j", "worker-0", phase="Failed")
    oom["status"]["containerStatuses"][0]["state"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    assert render.pod_state(oom) == "OOMKilled"
    init = pod("j", "worker-0", phase="Pending")
    init["status"]["initContainerStatuses"] = [{"state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]
    assert render.pod_state(init) == "Init:Error"


def test_only_the_conditions_that_matter_now_are_shown() -> None:
    shown = render.conditions_that_matter(running()["status"]["conditions"])
    assert [c["type"] for c in shown] == ["Running"]  # not Created (done), not Stalled False


def test_history_is_a_table_with_the_log_relative_to_the_jobs_folder() -> None:
    rows = render.history_table(running()).splitlines()
    assert rows[0].split() == [
        "ATTEMPT",
        "OUTCOME",
        "CAUSE",
        "WORKER",
        "NODE",
        "EXIT",
        "CHECKPOINT",
        "EPOCHS",
        "LOST",
        "LOG",
    ]
    assert rows[1].split() == [
        "0",
        "Restarted",
        "OOMKilled",
        "1",
        "tfmw-node",
        "137",
        "epoch",
        "4",
        "(checkpoints/ckpt-4)",
        "1",
        "logs/attempt-0/worker-1.log",
    ]
    assert render.read_log_hint(running()) == "tfmw logs mnist --attempt 0 --worker 1"


def test_describe_shows_phase_progress_pods_conditions_history_and_events() -> None:
    events = [
        {
            "type": "Warning",
            "reason": "GangRestart",
            "message": "worker 1 OOMKilled",
            "lastTimestamp": ago(100),
        }
    ]
    text = squash(
        render.describe(
            running(),
            [pod("mnist", "worker-0", 1), pod("mnist", "worker-1", 1)],
            events,
            NOW,
            ascii_only=True,
        )
    )
    assert "Phase: Running (attempt 1; 1 of 3 gang restarts used)" in text
    assert "Progress: [##############------] 70% 7/10 epochs ETA 4s loss=0.0412 accuracy=0.9871" in text
    assert "Checkpoint: epoch 6 (checkpoints/ckpt-6)" in text
    assert "chief 0 mnist-worker-0 Running 1/1 1 tfmw-node 60s" in text
    assert "AllWorkersRunning" in text and "PodsCreated" not in text
    assert "attempt 0: worker 1 (pod mnist-worker-1) was OOMKilled" in text
    assert "The failed worker's log: tfmw logs mnist --attempt 0 --worker 1" in text
    assert "GangRestart" in text


def test_describe_of_a_new_job_says_what_is_missing() -> None:
    text = squash(render.describe(job(), [], None, NOW))
    assert "Progress: (no progress reported yet)" in text
    assert "(none: no attempt has ended)" in text
    assert "Events:" not in text  # not readable: left out, not shown empty


def test_terminal_escapes_in_messages_are_made_harmless() -> None:
    hostile = failed()
    hostile["status"]["message"] = "boom\x1b[2J\x1b]0;owned\x07 end"
    text = render.describe(hostile, [], [], NOW)
    assert "\x1b" not in text and "\x07" not in text


_anything: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    status=st.dictionaries(
        st.sampled_from(
            [
                "phase",
                "progress",
                "history",
                "conditions",
                "attempt",
                "restarts",
                "readyWorkers",
                "message",
                "reason",
            ]
        ),
        _anything,
    ),
    spec=st.dictionaries(st.sampled_from(["workers", "runPolicy", "sharedVolume"]), _anything),
)
def test_a_malformed_status_never_breaks_the_rendering(status: dict[str, Any], spec: dict[str, Any]) -> None:
    hostile = job()
    hostile["status"], hostile["spec"] = status, spec
    render.describe(hostile, [], [], NOW)
    render.job_table([hostile], NOW, wide=True, all_namespaces=True)


def test_the_programs_last_lines_are_kept_before_the_supervisors_word_on_its_end() -> None:
    said = [f"tfmw-supervisor: line {i}" for i in range(12)]
    lines = ["tfmw-supervisor: attempt 0: started python3", "loading", "cannot open the data", *said]
    assert render.program_tail(lines, 2) == ["loading", "cannot open the data", *said]
    assert render.program_tail(lines, 10) == lines  # fewer program lines than asked: all of it
    plain = [f"line {i}" for i in range(30)]
    assert render.program_tail(plain, 10) == plain[-10:]
    assert render.program_tail([], 10) == []


HOSTILE = "x\x1b[2J\r\x07\x9b\u202e\u2066y"
ESCAPED = "x^[[2J\\r\\x07\\x9b\\u202e\\u2066y"


def test_control_characters_are_escaped_as_kubectl_escapes_them() -> None:
    assert render.escape_controls(HOSTILE) == ESCAPED
    assert render.escape_controls("a\nb\tc é █") == "a\\nb\\tc é █"


def test_every_table_cell_is_escaped_whatever_field_it_came_from() -> None:
    hostile = running()
    hostile["status"].update(phase=HOSTILE, reason=HOSTILE)
    hostile["status"]["progress"]["eta"] = HOSTILE
    hostile["status"]["history"][0]["cause"] = HOSTILE
    broken = pod("mnist", "worker-0", 1)
    broken["status"]["phase"] = HOSTILE
    broken["status"]["containerStatuses"] = []
    conditions = [{"type": HOSTILE, "status": "True", "reason": HOSTILE}]
    events = [{"type": HOSTILE, "reason": HOSTILE, "message": "m", "lastTimestamp": ago(5)}]
    for text in (
        render.job_table([hostile], NOW, wide=True, all_namespaces=True),
        render.pods_table([broken], NOW),
        render.conditions_table(conditions, NOW),
        render.history_table(hostile),
        render.events_table(events, NOW),
    ):
        assert ESCAPED in text
        assert not any(c in text for c in "\x1b\r\x07\x9b\u202e\u2066")


def test_every_describe_field_is_escaped() -> None:
    hostile = running()
    hostile["status"].update(phase=HOSTILE, reason=HOSTILE)
    hostile["status"]["progress"]["epochs"] = HOSTILE
    text = render.describe(hostile, [], [], NOW)
    lines = text.splitlines()
    assert any(line.startswith("Reason:") and line.endswith(ESCAPED) for line in lines)
    assert any(line.startswith("Phase:") and ESCAPED in line for line in lines)
    assert any(line.startswith("Progress:") and ESCAPED in line for line in lines)
    assert not any(c in text for c in "\x1b\r\x07\x9b\u202e\u2066")


def test_future_dated_or_undated_events_do_not_push_real_ones_out() -> None:
    fake = [
        {"type": "Normal", "reason": "Fake", "message": "m", "lastTimestamp": "2999-01-01T00:00:00Z"}
    ] * 15
    undated = [{"type": "Normal", "reason": "Undated", "message": "m", "lastTimestamp": "soon"}] * 3
    real = [{"type": "Warning", "reason": "GangRestart", "message": "m", "lastTimestamp": ago(60)}]
    text = render.events_table([*real, *fake, *undated], NOW)
    assert "GangRestart" in text
    assert "(9 older, undated or future-dated events not shown)" in text
    assert len(render.events_table(real, NOW).splitlines()) == 2  # nothing left out: no note


def test_describe_shows_the_newest_fifty_attempts_and_says_how_many_it_left_out() -> None:
    many = failed()
    entry = many["status"]["history"][0]
    many["status"]["history"] = [{**entry, "attempt": a, "message": f"m{a}"} for a in range(79, -1, -1)]
    table = render.history_table(many)
    assert len(table.splitlines()) == 1 + 50 + 1
    assert "(30 older attempts not shown)" in table
    assert len(render.history_messages(many)) == 50
    assert "attempt 79: m79" in render.describe(many, [], [], NOW)


def test_a_time_with_an_offset_is_shown_in_utc() -> None:
    # 13:30 at +05:30 is 08:00Z, four hours before NOW.
    assert render.when_and_age("2026-12-04T13:30:00+05:30", NOW) == "2026-12-04T08:00:00Z (4h ago)"
    assert render.when_and_age("2026-12-04T06:00:00-02:00", NOW) == "2026-12-04T08:00:00Z (4h ago)"
    assert render.parse_time("0001-01-01T00:00:00+05:00") is None  # before year 1 in UTC


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(-0.5, "0s"), (-1.9, "0s"), (-2, "<invalid>"), (-3600, "<invalid>"), (float("nan"), "<invalid>")],
)
def test_a_time_in_the_future_is_invalid_as_kubectl_says(seconds: float, shown: str) -> None:
    assert render.human_duration(seconds) == shown


def test_a_future_creation_time_is_invalid_not_zero() -> None:
    assert render.age(ago(-3600), NOW) == "<invalid>"
    assert render.when_and_age(ago(-3600), NOW) == "2026-12-04T13:00:00Z (<invalid>)"


@pytest.mark.parametrize("seconds", [1e308, float("inf"), 1e20])
def test_absurd_durations_end_where_go_s_do(seconds: float) -> None:
    assert render.human_duration(seconds) == "292y"
