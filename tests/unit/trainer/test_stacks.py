"""Stacks on SIGUSR1, with real processes: PID 1 forwards the signal, the training process
dumps every thread's stack with faulthandler while it is stuck in a blocking call, and the
chain from the pod's supervisor (operator/tfmw_operator/supervisor.py, run as in a pod)
through the trainer's PID 1 to the training process delivers it."""

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

from kube import REPO

# A training process hung in a system call that never returns (a read of a pipe no one
# writes), with a second thread waiting too: both must be in the dump.
HUNG_CHILD = """
import os, threading
from tfmw_trainer.cli import run_as_child

def background_wait():
    threading.Event().wait()

def hang_here():
    never = os.pipe()[0]
    print("ready", flush=True)
    os.read(never, 1)

def work():
    threading.Thread(target=background_wait, daemon=True).start()
    hang_here()

run_as_child(work, 0)
"""

HEADER = re.compile(r"^--- tfmw-trainer stacks: \S+ pid=(\d+) main_thread=(0x[0-9a-f]{16}) ---$", re.M)


def thread_blocks(dump: str) -> dict[str, str]:
    """faulthandler's dump, one block per thread, by thread id."""
    blocks: dict[str, str] = {}
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump):
        found = re.match(r"(?:Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):", block)
        if found:
            blocks[found.group(1)] = block
    return blocks


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def env_with_path(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **extra}


def test_sigusr1_to_pid1_dumps_every_thread_of_the_hung_training_process(tmp_path: Path) -> None:
    stacks = tmp_path / "logs" / "attempt-0" / "worker-0.stacks"  # its folder is made if missing
    parent = subprocess.Popen(
        [sys.executable, "-c", HUNG_CHILD],
        stdout=subprocess.PIPE,
        text=True,
        env=env_with_path(TFMW_STACKS_PATH=str(stacks)),
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        assert stacks.read_text() == "", "opened at start, empty until asked"
        for request in (1, 2):  # each request appends a dump
            parent.send_signal(signal.SIGUSR1)
            wait_for(lambda n=request: stacks.read_text().count("in hang_here") == n, 10, f"dump {request}")
        text = stacks.read_text()
        headers = HEADER.findall(text)
        assert len(headers) == 2 and headers[0][0] != str(parent.pid), "the training process's pid"
        main_thread = headers[1][1]
        last = thread_blocks(text[text.rindex("--- tfmw-trainer stacks") :])
        assert "in hang_here" in last[main_thread] and "in work" in last[main_thread], last
        assert any("in background_wait" in block for tid, block in last.items() if tid != main_thread)
        assert parent.poll() is None, "the dump does not end the process"
        parent.send_signal(signal.SIGTERM)  # not ready to save (run by hand): ends at once
        assert parent.wait(timeout=10) == 143
    finally:
        parent.kill()
        parent.wait()


def test_without_a_stacks_path_the_dump_goes_to_stderr(tmp_path: Path) -> None:
    env = env_with_path()
    env.pop("TFMW_STACKS_PATH", None)
    parent = subprocess.Popen(
        [sys.executable, "-c", HUNG_CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
    parent.send_signal(signal.SIGUSR1)
    time.sleep(1)
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=10)
    assert HEADER.search(err) and "in hang_here" in err, err


def test_the_supervisor_s_stacks_request_reaches_the_training_process(tmp_path: Path) -> None:
    """supervisor (PID 1 of the pod) -> the trainer's PID 1 -> the training process."""
    shared = tmp_path / "job"
    shared.mkdir()
    control = shared / ".tfmw" / "control.json"
    env = env_with_path(
        TFMW_SHARED_DIR=str(shared),
        TFMW_JOB_UID="uid-stacks",
        TFMW_JOB_NAME="hung",
        TFMW_REPLICA_TYPE="worker",
        TFMW_REPLICA_INDEX="1",
        TFMW_ATTEMPT="0",
    )
    supervisor = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "operator" / "tfmw_operator" / "supervisor.py"),
            "--",
            sys.executable,
            "-c",
            HUNG_CHILD,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    stacks = shared / "logs" / "attempt-0" / "worker-1.stacks"
    report = shared / ".tfmw" / "pods" / "worker-1.json"
    try:
        assert supervisor.stdout is not None
        for line in supervisor.stdout:
            if line.strip() == "ready":
                break
        else:
            raise AssertionError("the supervised trainer never started")
        write_control(control, {"jobUid": "uid-stacks", "attempt": 0, "start": True, "stacks": "req-1"})
        wait_for(
            lambda: stacks.exists() and "in hang_here" in stacks.read_text(),
            15,
            "no stacks via the supervisor",
        )
        main_thread = HEADER.findall(stacks.read_text())[-1][1]
        assert "in hang_here" in thread_blocks(stacks.read_text())[main_thread]

        def served() -> bool:
            try:
                state = json.loads(report.read_text())
            except (OSError, ValueError):
                return False
            return bool(state.get("stacks") == "req-1" and state.get("stacksDelivered") is True)

        wait_for(served, 10, "the supervisor did not report the request served")
        trainer = children(supervisor.pid)
        assert len(trainer) == 1 and len(children(trainer[0])) == 1, "PID 1 and its training process"
        # The operator's clean-up: the supervisor stops its command (SIGTERM; training never
        # began, so the trainer ends at once) and exits.
        write_control(
            control, {"jobUid": "uid-stacks", "attempt": 0, "start": True, "stacks": "req-1", "exit": True}
        )
        assert supervisor.wait(timeout=20) == 143
        assert not any(Path(f"/proc/{pid}").exists() for pid in trainer), (
            "the trainer outlived its supervisor"
        )
    finally:
        # Whatever is left: the supervisor's group, and the command's own group (the supervisor
        # puts its command in a process group of its own).
        for pid in children(supervisor.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(supervisor.pid, signal.SIGKILL)
        supervisor.wait()


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def write_control(control: Path, content: dict[str, object]) -> None:
    partial = control.with_name("control.json.partial")
    partial.write_text(json.dumps(content))
    os.replace(partial, control)
