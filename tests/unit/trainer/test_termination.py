"""SIGTERM as a notice: PID 1 writes into a pipe, the training loop reads it between steps,
and PID 1 kills a training process that has not saved and exited within its budget."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tfmw_trainer import termination
from tfmw_trainer.termination import TerminationNotice, save_seconds

CHILD = """
import sys, time
from tfmw_trainer import termination
from tfmw_trainer.cli import run_as_child

def work():
    if {started}:
        termination.ready()  # training began: SIGTERM now grants the save budget
    print("ready", flush=True)
    if {saves}:
        while not termination.notice().requested():
            time.sleep(0.01)
        print("saved", flush=True)
        sys.exit(143)
    while True:  # a collective that never returns
        time.sleep(3600)

run_as_child(work, {budget})
"""


def test_no_notice_until_written_then_for_good() -> None:
    read_end, write_end = os.pipe()
    notice = TerminationNotice(read_end)
    assert not notice.requested() and not notice.wait(0.05)
    os.write(write_end, termination.NOTICE)
    assert notice.requested() and notice.requested() and notice.wait(0)
    os.close(write_end)
    os.close(read_end)


def test_a_short_wait_ends_at_its_own_deadline_not_the_next_poll() -> None:
    read_end, write_end = os.pipe()
    notice = TerminationNotice(read_end)
    began = time.monotonic()
    for _ in range(5):
        assert not notice.wait(0.01)
    assert time.monotonic() - began < 5 * termination.POLL_SECONDS, "each wait took a whole poll"
    os.close(write_end)
    os.close(read_end)


def test_the_writer_gone_is_a_notice() -> None:
    read_end, write_end = os.pipe()
    notice = TerminationNotice(read_end)
    os.close(write_end)
    assert notice.requested()
    os.close(read_end)


def test_a_process_run_by_hand_is_never_told() -> None:
    assert not TerminationNotice().requested()


@pytest.mark.parametrize(
    ("raw", "expected"), [("", termination.DEFAULT_SAVE_SECONDS), ("7.5", 7.5), ("0", 0.0)]
)
def test_the_save_budget_comes_from_the_environment(raw: str, expected: float) -> None:
    assert save_seconds({"TFMW_SAVE_SECONDS": raw}) == expected


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "1e9"])
def test_a_bad_save_budget_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="TFMW_SAVE_SECONDS"):
        save_seconds({"TFMW_SAVE_SECONDS": raw})


def run_child(saves: bool, budget: float, started: bool = True) -> tuple[int, str, float]:
    """SIGTERM to the parent once the child is ready: its exit code, output, and seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = CHILD.format(saves=saves, budget=budget, started=started)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    assert parent.stdout.readline().strip() == "ready"
    sent = time.monotonic()
    parent.send_signal(signal.SIGTERM)
    output, _ = parent.communicate(timeout=30)
    return parent.returncode, output, time.monotonic() - sent


def test_sigterm_tells_the_child_which_saves_and_exits_143() -> None:
    code, output, _ = run_child(saves=True, budget=20)
    assert code == 143 and "saved" in output and "saving within 20 s" in output


def test_a_child_that_cannot_save_is_killed_after_the_budget_and_pid1_exits_143() -> None:
    code, output, seconds = run_child(saves=False, budget=0.5)
    assert code == 143 and "saved" not in output
    assert seconds < 20  # killed by the budget, not left to the grace period


def test_before_training_began_sigterm_ends_the_child_at_once_whatever_the_budget() -> None:
    """Nothing to save yet (TensorFlow still importing, the strategy waiting for a peer): the
    save budget is not spent waiting."""
    code, output, seconds = run_child(saves=True, budget=20, started=False)
    assert code == 143 and "saved" not in output
    assert "SIGTERM before training began, nothing to save: exiting with 143" in output
    assert seconds < 5


def test_sigterm_a_moment_after_the_start_of_pid1_ends_it_promptly(tmp_path: Path) -> None:
    """issue 34: a SIGTERM before the handler was installed was lost (PID 1 has no default
    action) and the pod waited out its grace period. The trainer runs as PID 1 of a PID
    namespace of its own (as in a container, `unshare`), by the image's own entrypoint,
    waiting for a peer that never comes; SIGTERM 0.05 s after the start must end it within 2 s."""
    code, seconds = pid1_sigterm(tmp_path, 0.05)
    assert (code, seconds < 2.0) == (143, True), seconds


@pytest.mark.processes
@pytest.mark.parametrize("delay", [0.2, 1.0, 3.0, 6.0])
def test_sigterm_at_any_moment_of_the_start_up_ends_pid1_promptly(tmp_path: Path, delay: float) -> None:
    """Later moments: PID 1 forking, the training process importing TensorFlow, creating the
    strategy, waiting for its peer. Nothing to save before training began: out within 2 s."""
    code, seconds = pid1_sigterm(tmp_path, delay)
    assert (code, seconds < 2.0) == (143, True), seconds


def trainer_entrypoint() -> list[str]:
    """The trainer image's ENTRYPOINT, from the Dockerfile, run by this Python."""
    dockerfile = (Path(__file__).parents[3] / "Dockerfile").read_text()
    stage = dockerfile[dockerfile.index(" AS trainer\n") :]
    found = re.search(r"^ENTRYPOINT (\[.*\])$", stage, re.M)
    assert found, "no ENTRYPOINT in the Dockerfile's trainer stage"
    command: list[str] = json.loads(found.group(1))
    return [sys.executable if part == "python3" else part for part in command]


def pid1_sigterm(shared: Path, delay: float) -> tuple[int | None, float]:
    """Start the trainer as PID 1, SIGTERM it `delay` s after the start: its exit code (None:
    still running 10 s later) and the seconds from the signal to its end."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "TF_CONFIG": json.dumps(
            {"cluster": {"worker": ["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}
        ),
        "TFMW_SHARED_DIR": str(shared),
    }
    command = ["unshare", "--pid", "--fork", "--kill-child", *trainer_entrypoint()]
    began = time.monotonic()
    outer = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        trainer = None
        while trainer is None:  # unshare's child, PID 1 of the new namespace
            with contextlib.suppress(OSError, IndexError):
                trainer = int(Path(f"/proc/{outer.pid}/task/{outer.pid}/children").read_text().split()[0])
            assert time.monotonic() - began < delay + 1, "unshare started nothing"
        time.sleep(max(0.0, began + delay - time.monotonic()))
        os.kill(trainer, signal.SIGTERM)
        sent = time.monotonic()
        try:
            code: int | None = outer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        return code, time.monotonic() - sent
    finally:
        outer.kill()
        outer.wait()


def test_a_worker_told_itself_exits_143_at_once() -> None:
    stopped = termination.stop_after_save(told=True)
    assert stopped.exit_code == termination.SIGTERM_EXIT_CODE


def test_a_peer_that_saved_for_another_waits_for_its_own_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    termination.install(read_end)
    monkeypatch.setattr(termination, "PEER_WAIT_SECONDS", 0.2)
    assert termination.stop_after_save(told=False).exit_code == termination.PEER_LOST_EXIT_CODE
    os.write(write_end, termination.NOTICE)
    assert termination.stop_after_save(told=False).exit_code == termination.SIGTERM_EXIT_CODE
    termination.install(None)
    os.close(write_end)
    os.close(read_end)
