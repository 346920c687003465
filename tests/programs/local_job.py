"""A tfmw job as local processes: each task of a TensorFlow cluster started as a process on
127.0.0.1, with the TF_CONFIG and TFMW_* environment the operator gives its pod
(/work/notes/contract-additions.md, docs/training-program.md) and a temp folder as the
job's shared folder.

The addresses are fixed when the job is made, so a task started again (a replaced pod)
comes back at the address its peers know. Every line a process prints is kept with the
time it arrived, and also written to `logs/attempt-<a>/<stem>.log` in the shared folder,
as the operator keeps a pod's log.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ports import free_ports

Json = dict[str, Any]
PROGRAMS = Path(__file__).resolve().parents[2] / "deploy" / "samples" / "programs"
MARKER_FILE = "multiworker-complete.txt"  # spec.completion.markerFile's default
JOB_NAME = "local"
NAMESPACE = "default"
JOB_UID = "0b5e4c1e-7f6a-4f00-9a7e-000000000035"

CHIEF, WORKER, PS, EVALUATOR = "chief", "worker", "ps", "evaluator"


@dataclass(frozen=True)
class Task:
    """One task of the job: a pod, under the operator."""

    type: str  # chief, worker, ps or evaluator: the replica set
    index: int = 0

    @property
    def stem(self) -> str:
        """The pod's name without `<job>-`: what its log and reports are named by."""
        return f"{self.type}-{self.index}"


@dataclass
class Running:
    """A started process and every line it printed so far, with when each arrived."""

    task: Task
    attempt: int
    process: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def output(self) -> str:
        return "".join(f"{line}\n" for _, line in list(self.lines))


class ProgramTimeout(AssertionError):
    """What a test waited for did not happen in time; the message holds the output so far."""


class LocalJob:
    """The tasks of one job. Use as a context manager: every process still running at the
    end is killed (by its own process id) and reaped."""

    def __init__(
        self,
        program: Path,
        shared_dir: Path,
        *,
        workers: int,
        chief: bool = False,
        parameter_servers: int = 0,
        evaluator: bool = False,
        shared_volume: bool = True,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """`shared_dir` holds the processes' logs in any case; with `shared_volume` it is also
        the job's shared folder (TFMW_SHARED_DIR and the paths in it), as a job with a
        `sharedVolume` has it. Without one (allowed under the exit-code completion policies)
        those variables are not set at all."""
        self.program = program
        self.shared_dir = shared_dir
        self.workers = workers
        self.has_chief = chief
        self.parameter_servers = parameter_servers
        self.has_evaluator = evaluator
        self.shared_volume = shared_volume
        self.extra_env = dict(extra_env or {})
        members = [Task(CHIEF)] if chief else []
        members += [Task(WORKER, i) for i in range(workers)]
        members += [Task(PS, i) for i in range(parameter_servers)]
        ports = free_ports(len(members))
        self.addresses = {task: f"127.0.0.1:{port}" for task, port in zip(members, ports, strict=True)}
        self.running: dict[Task, Running] = {}
        self.ended: list[Running] = []  # earlier processes of a task that was started again

    # ---- what the operator gives each pod ----

    @property
    def tasks(self) -> list[Task]:
        """Every task, the evaluator (never in the cluster) last."""
        return [*self.addresses, *([Task(EVALUATOR)] if self.has_evaluator else [])]

    @property
    def cluster(self) -> dict[str, list[str]]:
        """TF_CONFIG's cluster: chief, worker, ps, in TensorFlow's order; never the evaluator."""
        cluster: dict[str, list[str]] = {}
        for task, address in self.addresses.items():
            cluster.setdefault(task.type, []).append(address)
        return cluster

    @property
    def chief(self) -> Task:
        """The task that writes the marker: the chief, else worker 0 (TensorFlow's rule)."""
        return Task(CHIEF) if self.has_chief else Task(WORKER, 0)

    def role(self, task: Task) -> str:
        return CHIEF if task == self.chief else task.type

    def environment(self, task: Task, attempt: int) -> dict[str, str]:
        """The environment of the task's pod (contract-additions.md), over this process's own
        environment without any TF_CONFIG or TFMW_* it had."""
        shared = self.shared_dir
        base = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("TFMW_")}
        env = {
            **base,
            "PYTHONUNBUFFERED": "1",
            "TF_CONFIG": json.dumps(
                {"cluster": self.cluster, "task": {"type": task.type, "index": task.index}}
            ),
            "TFMW_JOB_NAME": JOB_NAME,
            "TFMW_JOB_UID": JOB_UID,
            "TFMW_NAMESPACE": NAMESPACE,
            "TFMW_ROLE": self.role(task),
            "TFMW_REPLICA_TYPE": task.type,
            "TFMW_REPLICA_INDEX": str(task.index),
            "TFMW_NUM_WORKERS": str(self.workers),
            "TFMW_ATTEMPT": str(attempt),
        }
        if task.type == WORKER:
            env["TFMW_WORKER_INDEX"] = str(task.index)
        if self.shared_volume:
            env |= {
                "TFMW_SHARED_DIR": str(shared),
                "TFMW_MARKER_PATH": str(shared / MARKER_FILE),
                "TFMW_PROGRESS_PATH": str(shared / "progress.json"),
                "TFMW_EVALUATION_PATH": str(shared / "evaluation.json"),
                "TFMW_STEP_TIMES_PATH": str(shared / "steps" / f"{task.stem}.json"),
                "TFMW_STACKS_PATH": str(shared / "logs" / f"attempt-{attempt}" / f"{task.stem}.stacks"),
            }
        return env | self.extra_env

    # ---- starting, stopping, watching ----

    def start(self, task: Task, attempt: int = 0) -> Running:
        """Start the task's process (again, at the same address, if it ran before)."""
        previous = self.running.pop(task, None)
        if previous is not None:
            assert previous.process.poll() is not None, f"{task.stem} is still running"
            self.ended.append(previous)
        log_dir = self.shared_dir / "logs" / f"attempt-{attempt}"
        log_dir.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [sys.executable, str(self.program)],
            env=self.environment(task, attempt),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a signal meant for pytest's terminal never reaches it
        )
        running = Running(task, attempt, process)
        running.reader = threading.Thread(
            target=_read_lines, args=(running, log_dir / f"{task.stem}.log"), daemon=True
        )
        running.reader.start()
        self.running[task] = running
        return running

    def start_all(self, attempt: int = 0) -> None:
        for task in self.tasks:
            self.start(task, attempt)

    def signal(self, task: Task, signum: signal.Signals) -> None:
        self.running[task].process.send_signal(signum)

    def wait_exit(self, task: Task, timeout: float) -> int:
        """The task's exit code (a negative one: the signal that ended it)."""
        running = self.running[task]
        try:
            code = running.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ProgramTimeout(f"{task.stem} still running after {timeout} s\n{self.outputs()}") from None
        if running.reader is not None:
            running.reader.join(10)
        return code

    def wait_line(self, task: Task, pattern: str, timeout: float) -> re.Match[str]:
        """The first line of the task's current process that matches `pattern`."""
        compiled = re.compile(pattern)
        running = self.running[task]

        def found() -> re.Match[str] | None:
            for _, line in list(running.lines):
                if match := compiled.search(line):
                    return match
            return None

        match: re.Match[str] = self.wait_for(f"{task.stem}: a line matching {pattern!r}", found, timeout)
        return match

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if result := check():
                return result
            time.sleep(0.05)
        raise ProgramTimeout(f"{what}: not within {timeout} s\n{self.outputs()}")

    def stop_all(self) -> None:
        """SIGKILL every process still running, and reap it."""
        for running in self.running.values():
            if running.process.poll() is None:
                running.process.kill()
            running.process.wait()
            if running.reader is not None:
                running.reader.join(10)

    def lines(self, task: Task, pattern: str, attempt: int | None = None) -> list[re.Match[str]]:
        """The lines of the task's processes so far (of one attempt, or all), matching `pattern`."""
        compiled = re.compile(pattern)
        processes = [r for r in [*self.ended, *self.running.values()] if r.task == task]
        return [
            match
            for running in processes
            if attempt is None or running.attempt == attempt
            for _, line in list(running.lines)
            if (match := compiled.search(line))
        ]

    def outputs(self, last: int = 4000) -> str:
        """The end of each process's output, for a failed assertion's message."""
        parts = []
        for running in [*self.ended, *self.running.values()]:
            parts.append(
                f"--- {running.task.stem} attempt {running.attempt} (exit {running.process.poll()})\n"
                f"{running.output[-last:]}"
            )
        return "\n".join(parts)

    def read_json(self, name: str) -> Json | None:
        """A document in the shared folder, or None while there is none."""
        try:
            document: Json = json.loads((self.shared_dir / name).read_text())
        except FileNotFoundError:
            return None
        return document

    def __enter__(self) -> LocalJob:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_all()


def _read_lines(running: Running, log: Path) -> None:
    assert running.process.stdout is not None
    with log.open("a") as file:
        for line in running.process.stdout:
            running.lines.append((time.monotonic(), line.rstrip("\n")))
            file.write(line)
            file.flush()
