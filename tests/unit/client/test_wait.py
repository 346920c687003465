"""tfmw wait's decisions, its exit codes and its views, on a scripted sequence of reads."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from tfmw_client import wait
from tfmw_client.errors import EXIT_TIMEOUT, ApiError, TfmwError
from unit.client.jobs import failed, job, running

Json = dict[str, Any]


def succeeded() -> Json:
    done = running()
    done["status"]["phase"] = "Succeeded"
    return done


@pytest.mark.parametrize(
    ("phase", "target", "done", "ok"),
    [
        ("Pending", "Succeeded", False, False),
        ("Running", "Succeeded", False, False),
        ("Restarting", "Succeeded", False, False),
        ("Succeeded", "Succeeded", True, True),
        ("Failed", "Succeeded", True, False),
        ("Running", "Running", True, True),
        ("Succeeded", "Running", True, True),
        ("Failed", "Running", True, False),
        ("Failed", "Failed", True, True),
        ("Succeeded", "Failed", True, False),
        ("Running", "Finished", False, True),
        ("Failed", "Finished", True, True),
        ("Succeeded", "Finished", True, True),
    ],
)
def test_every_wait_ends_on_failure_too(phase: str, target: str, done: bool, ok: bool) -> None:
    verdict = wait.judge(job(phase=phase, reason="WorkerFailed", message="exit 1"), target)
    assert (verdict.done, verdict.done and verdict.ok) == (done, done and ok)


def test_a_failure_names_the_reason_and_message() -> None:
    assert wait.judge(failed(), "Succeeded").summary == (
        "broken Failed: WorkerFailed: worker 0 (pod broken-worker-0) exited with code 1 (Error): cannot open the training data"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def reads(*answers: Json | BaseException | None) -> Any:
    sequence: Iterator[Json | BaseException | None] = iter(answers)

    def read() -> Json | None:
        answer = next(sequence)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return read


def test_it_returns_once_the_job_gets_there() -> None:
    clock = Clock()
    out = io.StringIO()
    final, verdict = wait.wait_for(
        reads(job(phase="Pending"), running(), succeeded()),
        "Succeeded",
        60,
        wait.LineView(out, clock),
        clock=clock,
        sleep=clock.sleep,
    )
    assert verdict.ok and final["status"]["phase"] == "Succeeded" and clock.now == 2.0
    assert [line.split()[1] for line in out.getvalue().splitlines()] == ["Pending", "Running", "Succeeded"]


def test_it_ends_at_once_on_failure_not_at_the_timeout() -> None:
    clock = Clock()
    _, verdict = wait.wait_for(
        reads(running(), failed()), "Succeeded", 600, wait.NullView(), clock=clock, sleep=clock.sleep
    )
    assert (verdict.done, verdict.ok, clock.now) == (True, False, 1.0)


def test_the_timeout_raises_with_exit_code_2_and_where_the_job_was() -> None:
    clock = Clock()
    with pytest.raises(wait.WaitTimeout) as raised:
        wait.wait_for(
            reads(*[running()] * 10), "Succeeded", 3, wait.NullView(), clock=clock, sleep=clock.sleep
        )
    assert raised.value.exit_code == EXIT_TIMEOUT and isinstance(raised.value, TimeoutError)
    assert " ".join(raised.value.message.split()).startswith(
        "timed out after 3s waiting for Succeeded: mnist Running attempt 1 2/2 ready"
    )


def test_a_missing_job_is_an_error_and_a_deleted_one_a_failure() -> None:
    clock = Clock()
    with pytest.raises(TfmwError, match="job not found"):
        wait.wait_for(reads(None), "Succeeded", 10, wait.NullView(), clock=clock, sleep=clock.sleep)
    with pytest.raises(wait.JobFailed, match="deleted while waiting"):
        wait.wait_for(
            reads(running(), None), "Succeeded", 10, wait.NullView(), clock=clock, sleep=clock.sleep
        )


def test_an_unreachable_or_busy_api_server_is_waited_out_within_the_timeout() -> None:
    clock = Clock()
    answers = (
        running(),
        TfmwError("cannot reach the API server"),
        ApiError(503, "ServiceUnavailable", "busy"),
        succeeded(),
    )
    _, verdict = wait.wait_for(
        reads(*answers), "Succeeded", 60, wait.NullView(), clock=clock, sleep=clock.sleep
    )
    assert verdict.ok
    with pytest.raises(ApiError):  # but not a refusal
        wait.wait_for(
            reads(running(), ApiError(403, "Forbidden", "no")),
            "Succeeded",
            60,
            wait.NullView(),
            clock=clock,
            sleep=clock.sleep,
        )


def test_quiet_lines_print_changes_and_progress_at_most_every_30_seconds() -> None:
    clock = Clock()
    out = io.StringIO()
    view = wait.LineView(out, clock)
    first = running()
    view.show(first, 0)
    later = running()
    later["status"]["progress"]["epochs"] = "8/10"
    clock.now = 10
    view.show(later, 10)  # progress alone, too soon
    clock.now = 31
    view.show(later, 31)
    restarted = running()
    restarted["status"]["phase"] = "Restarting"
    clock.now = 32
    view.show(restarted, 32)  # a phase change, at once
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "8/10" in lines[1] and "Restarting" in lines[2]
    assert all("\r" not in line and "\x1b" not in line for line in lines)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    encoding = "utf-8"


def test_the_terminal_view_redraws_one_line_in_place_cut_to_the_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    screen = Terminal()
    view = wait.choose_view(screen, notebook=False)
    assert isinstance(view, wait.TerminalView)
    view.show(running(), 5)
    view.show(succeeded(), 6)
    view.close()
    drawn = screen.getvalue()
    assert drawn.count("\r\x1b[2K") == 2 and drawn.endswith("\n") and drawn.count("\n") == 1
    assert all(len(frame) <= 39 for frame in drawn.strip("\n").split("\r\x1b[2K")[1:])


def test_the_status_line_has_the_bar_and_what_holds_a_job() -> None:
    stalled = job(
        phase="Pending",
        readyWorkers="0/2",
        conditions=[{"type": "Stalled", "status": "True", "reason": "Unschedulable"}],
    )
    assert wait.status_line(stalled, 75) == "mnist  Pending  0/2 ready  Stalled: Unschedulable  75s"
    assert wait.status_line(running(), 5, ascii_only=True, bar_width=10) == (
        "mnist  Running  attempt 1  2/2 ready  [#######---]   70%  7/10 epochs  ETA 4s  loss=0.0412 accuracy=0.9871  5s"
    )


def test_a_failure_s_reason_is_escaped() -> None:
    broken = failed()
    broken["status"]["reason"] = "Worker\x1b]0;owned\x07Failed"
    summary = wait.judge(broken, "Succeeded").summary
    assert "\x1b" not in summary and "\x07" not in summary and "Worker^[]0;owned\\x07Failed" in summary
