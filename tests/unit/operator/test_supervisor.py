"""The in-pod supervisor, run as it runs in a pod: a real process with real children and signals,
a temporary folder as the job's folder, and (for PID 1's rules) a PID namespace of its own.

SUPERVISOR_TEST_PYTHON=<python3.9> runs the supervisor under another interpreter than the
tests' own: it runs under whatever python3 a worker's image has.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tfmw_operator import contract, supervisor


def _sealed_copy() -> Path:
    """The supervisor as the operator writes it into a job's folder (sealed), which is what the
    bootstrap runs; a folder of the session's, removed at its end."""
    folder = Path(tempfile.mkdtemp(prefix="tfmw-supervisor-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "supervisor.py"
    path.write_bytes(contract.sealed_supervisor(Path(supervisor.__file__).read_bytes()))
    return path


SUPERVISOR = _sealed_copy()
PYTHON = os.environ.get("SUPERVISOR_TEST_PYTHON", sys.executable)
UID = "2b5c7d0e-1111-4222-8333-944445555666"
STEM = "worker-1"
T = TypeVar("T")


def wait_for(what: Callable[[], T | None], timeout: float = 10.0, why: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {why}")
        time.sleep(0.005)


@dataclass
class Run:
    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    def code(self, timeout: float = 10.0) -> int:
        return self.process.wait(timeout)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


@dataclass
class Job:
    folder: Path
    scratch: Path
    env: dict[str, str] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)

    def control(self, **fields: Any) -> float:
        """Write the control file as the operator does (atomically); the time it appeared."""
        doc = {"jobUid": UID, **fields}
        (self.folder / ".tfmw").mkdir(exist_ok=True)
        partial = self.folder / ".tfmw" / ".control.json.partial"
        partial.write_text(json.dumps(doc))
        os.replace(partial, self.folder / ".tfmw" / "control.json")
        return time.time()

    def report(self, stem: str = STEM) -> dict[str, Any] | None:
        try:
            doc = json.loads((self.folder / ".tfmw" / "pods" / f"{stem}.json").read_text())
        except FileNotFoundError:
            return None
        assert isinstance(doc, dict)
        return doc

    def wait_report(self, timeout: float = 10.0, stem: str = STEM, **expected: Any) -> dict[str, Any]:
        def matching() -> dict[str, Any] | None:
            doc = self.report(stem)
            if doc is not None and all(doc.get(key) == value for key, value in expected.items()):
                return doc
            return None

        return wait_for(matching, timeout, f"a report with {expected}; the last: {self.report(stem)}")

    def said(self, attempt: int, line: str, stem: str = STEM) -> bool:
        """Whether the command printed `line` (a whole line: the log also holds its command line)."""
        return line in self.log(attempt, stem).splitlines()

    def log(self, attempt: int, stem: str = STEM) -> str:
        path = self.folder / "logs" / f"attempt-{attempt}" / f"{stem}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, *command: str, options: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Run:
        index = len(self.runs)
        out, err = self.scratch / f"out-{index}", self.scratch / f"err-{index}"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                supervisor.wrapped_command(command, options, str(SUPERVISOR), PYTHON),
                env=self.env if env is None else env,
                stdout=stdout,
                stderr=stderr,
                cwd=self.scratch,
            )
        run = Run(process, out, err)
        self.runs.append(run)
        return run


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Job]:
    folder, scratch = tmp_path / "job", tmp_path / "scratch"
    folder.mkdir()
    scratch.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TFMW_SHARED_DIR": str(folder),
        "TFMW_JOB_UID": UID,
        "TFMW_JOB_NAME": "mnist",
        "TFMW_REPLICA_TYPE": "worker",
        "TFMW_REPLICA_INDEX": "1",
        "TFMW_ATTEMPT": "0",
    }
    made = Job(folder, scratch, env)
    yield made
    for run in made.runs:  # a failed test leaves no supervisor or command behind
        if run.alive():
            commands = _children(run.process.pid)  # in process groups of their own
            run.process.send_signal(signal.SIGKILL)
            run.process.wait()
            for pid in commands:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)


def sh(script: str) -> tuple[str, ...]:
    return ("sh", "-c", script)


# A child that ends at SIGTERM, saying so, with 143 as a shell's default would.
TERM_ENDS = sh('trap "echo got-term; exit 143" TERM; echo ready; while :; do sleep 0.02; done')


# ---- pure: what is read ----


def test_a_control_is_trusted_only_well_formed_and_naming_this_job() -> None:
    good = {"jobUid": UID, "attempt": 3, "start": True, "stacks": "r-1"}
    assert supervisor.parse_control(json.dumps(good).encode(), UID) == supervisor.Control(
        3, True, "r-1", False
    )
    assert supervisor.parse_control(
        json.dumps({"jobUid": UID, "attempt": 0}).encode(), UID
    ) == supervisor.Control(0, False, None, False)
    assert supervisor.parse_control(json.dumps({**good, "exit": True}).encode(), UID) == supervisor.Control(
        3, True, "r-1", True
    )
    refused: list[object] = [
        {**good, "jobUid": "another job"},
        {k: v for k, v in good.items() if k != "jobUid"},
        {**good, "attempt": True},
        {**good, "attempt": -1},
        {**good, "attempt": 3.0},
        {**good, "attempt": "3"},
        {**good, "attempt": 10**7},
        {**good, "start": "yes"},
        {**good, "start": 1},
        {**good, "stacks": 7},
        {**good, "stacks": ""},
        {**good, "stacks": "x" * 300},
        {**good, "exit": "true"},
        {**good, "stopSeconds": -1},
        {**good, "stopSeconds": "5"},
        {**good, "stopSeconds": True},
        {**good, "stopSeconds": 10**6},
        [good],
        "just a string",
    ]
    for doc in refused:
        assert supervisor.parse_control(json.dumps(doc).encode(), UID) is None, doc
    for stop in (0, 2.5):
        parsed = supervisor.parse_control(json.dumps({**good, "stopSeconds": stop}).encode(), UID)
        assert parsed is not None and parsed.stop_seconds == stop
    infinite = json.dumps(good)[:-1] + ', "stopSeconds": 1e999}'
    assert supervisor.parse_control(infinite.encode(), UID) is None
    for raw in (b"", b"{", b"\xff\xfe", b"[" * 100_000, b'{"attempt": 1e999}', b"null"):
        assert supervisor.parse_control(raw, UID) is None, raw[:20]


def test_a_controls_hosts_are_dns_labels_by_stem_or_the_whole_control_is_ignored() -> None:
    good = {"jobUid": UID, "attempt": 1, "start": True, "hosts": {"worker-1": "worker-1-a1"}}
    parsed = supervisor.parse_control(json.dumps(good).encode(), UID)
    assert parsed is not None and parsed.hosts == (("worker-1", "worker-1-a1"),)
    for hosts in (
        ["worker-1"],
        {"worker-1": 7},
        {"worker-1": "Worker-1-A1"},
        {"worker-1": "a.b"},
        {"../x": "worker-1-a1"},
        {"worker-1": "x" * 64},
        {f"worker-{i}": "h" for i in range(supervisor.MAX_HOSTS + 1)},
    ):
        assert supervisor.parse_control(json.dumps({**good, "hosts": hosts}).encode(), UID) is None, hosts


def test_with_hosts_names_each_member_as_the_control_says_and_others_by_their_pods() -> None:
    written = json.dumps(
        {
            "cluster": {
                "chief": ["j-chief-0.j.ns.svc:2222"],
                "worker": ["j-worker-0.j.ns.svc:2222", "worker-1-a2.j.ns.svc:2222"],
            },
            "task": {"type": "worker", "index": 0},
        }
    )
    rewritten = json.loads(supervisor.with_hosts(written, {"worker-0": "worker-0-a3"}, "j"))
    assert rewritten == {
        "cluster": {
            "chief": ["j-chief-0.j.ns.svc:2222"],
            "worker": ["worker-0-a3.j.ns.svc:2222", "j-worker-1.j.ns.svc:2222"],
        },
        "task": {"type": "worker", "index": 0},
    }
    for foreign in ("not json", "[1]", '{"cluster": 3}', '{"cluster": {"worker": "x"}}', "[" * 10_000):
        assert supervisor.with_hosts(foreign, {"worker-0": "w"}, "j") == foreign
    # A template's own TF_CONFIG (addresses not of the operator's form) is never rewritten.
    for addresses in (
        ["10.0.0.5:2222", "10.0.0.6:2222"],
        ["other-worker-0.other.ns.svc:2222", "x.j.ns.svc:2222"],
        ["j-worker-0.jx.ns.svc:2222", "worker-1-a1.other:2222"],
        [7, None],
    ):
        own = json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": 0}})
        assert supervisor.with_hosts(own, {"worker-0": "worker-0-a1", "worker-1": "worker-1-a2"}, "j") == own


def test_the_pod_stem_comes_from_the_replica_set_or_else_the_hostname() -> None:
    env = {"TFMW_JOB_NAME": "mnist", "TFMW_REPLICA_TYPE": "ps", "TFMW_REPLICA_INDEX": "2"}
    assert supervisor.pod_stem(env, "anything") == "ps-2"
    assert supervisor.pod_stem({**env, "TFMW_REPLICA_INDEX": "007"}, "x") == "ps-7"
    assert supervisor.pod_stem({"TFMW_JOB_NAME": "mnist"}, "mnist-evaluator-0") == "evaluator-0"
    assert supervisor.pod_stem({**env, "TFMW_REPLICA_TYPE": "../x"}, "mnist-worker-3") == "worker-3"
    assert supervisor.pod_stem({**env, "TFMW_REPLICA_INDEX": "1/.."}, "mnist-chief-0") == "chief-0"
    assert supervisor.pod_stem({**env, "TFMW_REPLICA_INDEX": "²"}, "other-worker-1") is None
    assert supervisor.pod_stem({"TFMW_JOB_NAME": "mnist"}, "mnist-") is None
    assert supervisor.pod_stem({"TFMW_JOB_NAME": "mnist"}, "mnist-../../etc") is None
    assert supervisor.pod_stem({}, "mnist-worker-0") is None


def test_the_attempt_from_the_environment_is_a_small_number_or_zero() -> None:
    assert supervisor.attempt_from_env({"TFMW_ATTEMPT": "4"}) == 4
    for raw in ("", "-1", "x", "1e3", "99999999999"):
        assert supervisor.attempt_from_env({"TFMW_ATTEMPT": raw}) == 0


def test_oom_kills_are_counted_from_cgroup_v2_and_v1_files() -> None:
    v2 = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"
    v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"
    assert supervisor.oom_kill_count(v2) == 2
    assert supervisor.oom_kill_count(v1) == 5
    assert supervisor.oom_kill_count("oom 3\n") is None
    assert supervisor.oom_kill_count("oom_kill lots\n") is None


def test_the_oom_counter_is_looked_for_in_this_process_cgroup_v2_first() -> None:
    namespaced_v2 = "0::/\n"
    assert supervisor.oom_counter_candidates(namespaced_v2, "/c") == ["/c/memory.events"]
    host_view_v2 = "0::/kubepods.slice/pod1/cri-abc.scope\n"
    assert supervisor.oom_counter_candidates(host_view_v2, "/c") == [
        "/c/kubepods.slice/pod1/cri-abc.scope/memory.events",
        "/c/memory.events",
    ]
    hybrid = "12:cpu,cpuacct:/x\n4:memory:/kubepods/pod1/abc\n0::/\n"
    assert supervisor.oom_counter_candidates(hybrid, "/c") == [
        "/c/memory.events",
        "/c/memory/kubepods/pod1/abc/memory.oom_control",
        "/c/memory/memory.oom_control",
    ]
    assert supervisor.oom_counter_candidates("garbage\n1:cpu:/\n", "/c") == []


def test_the_wire_names_are_the_contracts() -> None:
    """The supervisor stands alone in a worker's image, so it repeats contract.py's names."""
    shared = [name for name in dir(supervisor) if name.endswith("_ENV") and hasattr(contract, name)]
    assert {"JOB_NAME_ENV", "JOB_UID_ENV", "ATTEMPT_ENV", "SHARED_DIR_ENV"} <= set(shared)
    for name in shared:
        assert getattr(supervisor, name) == getattr(contract, name), name
    control = [name for name in dir(supervisor) if name.startswith("CONTROL_") and hasattr(contract, name)]
    assert {"CONTROL_ATTEMPT", "CONTROL_START", "CONTROL_EXIT", "CONTROL_HOSTS"} <= set(control)
    for name in [*control, "TF_CONFIG", "MODULE_NAME_PATTERN", "MAX_MODULE_NAME_CHARS", "MAX_WARM_MODULES"]:
        assert getattr(supervisor, name) == getattr(contract, name), name
    for name in dir(supervisor):
        if name.endswith("_ENV"):
            assert getattr(supervisor, name).startswith(contract.RESERVED_ENV_PREFIX), name


def test_the_operator_wraps_a_command_as_the_supervisor_itself_would() -> None:
    """contract.py repeats the bootstrap (the supervisor stands alone in a worker's image)."""
    command, options = ["python", "-m", "x"], ["--grace-seconds", "30"]
    for path in ("/tfmw/supervisor.py", "/ckpt/.tfmw/supervisor.py", "/it's/here.py"):
        assert contract.supervised_command(command, path, options) == supervisor.wrapped_command(
            command, options, path
        )
        assert contract.is_supervised_command(contract.supervised_command(command, path, options))
    assert contract.supervisor_path("/ckpt/") == "/ckpt/.tfmw/supervisor.py"
    assert not contract.is_supervised_command(["python3", "-I", "-S", "-c"])
    assert not contract.is_supervised_command("python3 -I -S -c")


@pytest.mark.parametrize(
    "plant", ["absent", "empty", "cut short", "changed", "a directory", "a FIFO", "a link"]
)
def test_the_bootstrap_refuses_a_supervisor_that_is_not_whole_with_its_own_exit_code(
    plant: str, tmp_path: Path
) -> None:
    """A supervisor the operator did not write whole never runs, and never passes for the
    program's end: exit 199 (restarted by the ExitCode preset) and a line naming the file, at
    once, even for a FIFO no one writes to."""
    sealed = SUPERVISOR.read_bytes()
    path = tmp_path / "supervisor.py"
    if plant == "empty":
        path.write_bytes(b"")
    elif plant == "no seal":  # the sha256 of nothing, alone: no code, and it would exit 0
        path.write_bytes(hashlib.sha256(b"").hexdigest().encode() + b"\n")
    elif plant == "cut short":
        path.write_bytes(sealed[: len(sealed) // 2])
    elif plant == "changed":
        path.write_bytes(sealed.replace(b"def main(", b"def main_(", 1))
    elif plant == "a directory":
        path.mkdir()
    elif plant == "a FIFO":
        os.mkfifo(path)
    elif plant == "a link":
        path.symlink_to(SUPERVISOR)
    started = time.monotonic()
    ended = subprocess.run(
        supervisor.wrapped_command(["sh", "-c", "echo ran; exit 0"], (), str(path), PYTHON),
        capture_output=True,
        timeout=10,
        check=False,
    )
    assert ended.returncode == contract.SUPERVISOR_UNUSABLE_EXIT_CODE == 199
    assert time.monotonic() - started < 5
    assert b"ran" not in ended.stdout
    said = ended.stderr.decode()
    assert f"tfmw: the supervisor {path} cannot be run:" in said, said
    assert "the operator writes it again before the next pod" in said


def test_the_bootstrap_runs_the_sealed_file_it_checked(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.py"
    path.write_bytes(SUPERVISOR.read_bytes())
    ended = subprocess.run(
        supervisor.wrapped_command(["sh", "-c", "echo ran; exit 3"], (), str(path), PYTHON),
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "TFMW_JOB_UID": ""},
    )
    assert b"ran" in ended.stdout, ended.stderr
    assert ended.returncode == 3


def test_the_bootstrap_runs_the_file_as_a_script_with_the_command_after_the_options() -> None:
    wrapped = supervisor.wrapped_command(
        ["python", "-m", "x", "--flag"], ["--grace-seconds", "60"], "/opt/s.py"
    )
    assert wrapped[:4] == ["python3", "-I", "-S", "-c"]
    assert "'/opt/s.py'" in wrapped[4] and "/tfmw" not in wrapped[4]
    assert wrapped[5:] == ["--grace-seconds", "60", "--", "python", "-m", "x", "--flag"]
    assert supervisor.parse_args(wrapped[5:]).command == ("python", "-m", "x", "--flag")
    assert supervisor.parse_args(wrapped[5:]).grace_seconds == 60


def test_the_users_python_settings_do_not_reach_the_supervisor_but_do_reach_the_command(job: Job) -> None:
    shadow = job.scratch / "shadow"
    shadow.mkdir()
    for module in ("json", "selectors", "argparse", "dataclasses"):
        (shadow / f"{module}.py").write_text(
            "raise SystemExit('the user's module, not the standard library')"
        )
    (job.scratch / "json.py").write_text("raise SystemExit('a json.py in the working directory')")
    run = job.start(*sh('echo "PYTHONPATH=$PYTHONPATH"'), env={**job.env, "PYTHONPATH": str(shadow)})
    assert job.wait_report(state="exited")["exitCode"] == 0
    assert f"PYTHONPATH={shadow}" in run.stdout()


def test_the_file_is_python_3_9_and_imports_only_the_standard_library() -> None:
    source = SUPERVISOR.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)
    # Used at run time, these would fail on 3.9 (annotations are strings: `from __future__`).
    for newer in (
        "match ",
        "kw_only=",
        "slots=True",
        "zip(strict",
        "removeprefix",
        "ExceptionGroup",
        "TaskGroup",
    ):
        assert newer not in source, newer


# ---- alone: without a shared folder ----


def test_without_a_shared_folder_it_only_runs_the_command_and_exits_with_its_code(job: Job) -> None:
    env = {k: v for k, v in job.env.items() if k != "TFMW_SHARED_DIR"}
    run = job.start(*sh("echo out; echo err >&2; exit 7"), env=env)
    assert run.code() == 7
    assert run.stdout() == "out\n"
    assert run.stderr() == "err\n"
    assert list(job.folder.iterdir()) == []
    killed = job.start(*sh("kill -KILL $$"), env=env)
    assert killed.code() == 128 + signal.SIGKILL


def test_alone_a_sigterm_is_forwarded_and_the_supervisor_ends_when_the_command_does(job: Job) -> None:
    env = {k: v for k, v in job.env.items() if k != "TFMW_SHARED_DIR"}
    run = job.start(*TERM_ENDS, env=env)
    wait_for(lambda: "ready" in run.stdout(), why="the command started")
    began = time.monotonic()
    run.process.send_signal(signal.SIGTERM)
    assert run.code() == 143
    assert time.monotonic() - began < 1.0
    assert "got-term" in run.stdout()


def test_a_command_that_cannot_run_ends_as_a_shell_says(job: Job) -> None:
    run = job.start("/nonexistent/program", options=("--exited-wait-seconds", "0.2"))
    report = job.wait_report(state="exited")
    assert report["exitCode"] == 127
    assert run.code() == 127
    assert "cannot run '/nonexistent/program'" in run.stderr()


# ---- with the job's folder: reports, logs, the operator's word ----


def test_a_child_end_is_reported_and_the_next_attempt_waits_for_the_barrier(job: Job) -> None:
    script = 'echo "attempt=$TFMW_ATTEMPT stacks=$TFMW_STACKS_PATH"; echo to-stderr >&2; exit 170'
    run = job.start(*sh(script))
    first = job.wait_report(state="exited", attempt=0)
    assert first["exitCode"] == 170 and first["signal"] is None and first["jobUid"] == UID
    assert first["readsHosts"] is True  # the operator may rename this pod's peers
    assert first["startedAt"] <= first["finishedAt"]
    assert first["oomKilled"] in (False, None)  # None where this machine has no counter
    assert "attempt=0 " in job.log(0) and "to-stderr" in job.log(0)
    assert "attempt=0 " in run.stdout() and "to-stderr" in run.stderr()  # kubectl logs still works
    time.sleep(0.3)
    assert run.alive(), "a supervisor whose child ended waits for the operator"

    job.control(attempt=1, start=False)
    waiting = job.wait_report(state="waiting", attempt=1)
    assert waiting["previous"]["exitCode"] == 170 and waiting["previous"]["attempt"] == 0
    time.sleep(0.3)
    assert job.log(1) == "", "no child before the operator raises start"

    job.control(attempt=1, start=True)
    second = job.wait_report(state="exited", attempt=1)
    assert second["exitCode"] == 170 and "previous" not in second  # its own end is the report
    stacks = job.folder / "logs" / "attempt-1" / f"{STEM}.stacks"
    assert f"attempt=1 stacks={stacks}" in job.log(1)
    assert run.alive()
    run.process.send_signal(signal.SIGTERM)
    assert run.code(2) == 170, "a pod deleted after its child's end exits with the child's code"


def test_each_attempts_command_has_the_tf_config_of_the_hosts_the_control_names(job: Job) -> None:
    """A peer made again in a later attempt has a new hostname (builders.member_host); this
    pod's TF_CONFIG, written when it was made, learns it from the control file."""
    written = {
        "cluster": {"worker": ["mnist-worker-0.mnist.ns.svc:2222", "mnist-worker-1.mnist.ns.svc:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    run = job.start(*sh('echo "tf=$TF_CONFIG"; exit 170'), env={**job.env, "TF_CONFIG": json.dumps(written)})
    job.wait_report(state="exited", attempt=0)
    assert f"tf={json.dumps(written)}" in job.log(0), "no hosts in the control: TF_CONFIG as the pod has it"
    job.control(attempt=1, start=True, hosts={"worker-0": "worker-0-a1"})
    job.wait_report(state="exited", attempt=1)
    told = json.loads(job.log(1).split("tf=", 1)[1].splitlines()[0])
    assert told == {
        **written,
        "cluster": {"worker": ["worker-0-a1.mnist.ns.svc:2222", "mnist-worker-1.mnist.ns.svc:2222"]},
    }
    assert run.alive()


def test_a_higher_attempt_stops_a_running_child_and_reports_it_waiting(job: Job) -> None:
    run = job.start(*TERM_ENDS)
    job.wait_report(state="running", attempt=0)
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    job.control(attempt=1, start=False)
    waiting = job.wait_report(state="waiting", attempt=1)
    assert waiting["previous"]["exitCode"] == 143 and waiting["previous"]["signal"] is None
    assert "got-term" in job.log(0)
    assert "attempt 1 begins: stopping attempt 0" in job.log(0)
    job.control(attempt=1, start=True)
    job.wait_report(state="running", attempt=1)
    wait_for(lambda: job.said(1, "ready"), why="the next attempt's command started")
    assert run.alive()


def test_a_child_that_ignores_sigterm_is_killed_with_its_group_after_the_stop_bound(job: Job) -> None:
    pidfile = job.scratch / "grandchild"
    script = f'trap "" TERM; sleep 1000 & echo $! > {pidfile}; echo ready; wait'
    job.start(*sh(script), options=("--stop-seconds", "0.5"))
    wait_for(lambda: job.said(0, "ready") and pidfile.exists() and pidfile.read_text().strip(), why="started")
    grandchild = int(pidfile.read_text())
    asked = job.control(attempt=1, start=False)
    waiting = job.wait_report(state="waiting", attempt=1)
    stopped_after = time.time() - asked
    assert waiting["previous"]["signal"] == signal.SIGKILL
    assert waiting["previous"]["exitCode"] == 128 + signal.SIGKILL
    assert 0.4 < stopped_after < 2.0, stopped_after
    assert wait_for(lambda: not _running(grandchild), 2.0, "the grandchild killed with its group")


def test_a_stop_with_nothing_to_save_kills_at_once(job: Job) -> None:
    """stopSeconds 0: a peer died on its own, the survivors hang in a collective: no SIGTERM."""
    job.start(*sh('trap "" TERM; echo ready; while :; do sleep 0.02; done'))
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    asked = job.control(attempt=1, start=False, stopSeconds=0)
    waiting = job.wait_report(state="waiting", attempt=1)
    assert time.time() - asked < 0.5
    assert waiting["previous"]["signal"] == signal.SIGKILL
    assert "stopping attempt 0: SIGKILL" in job.log(0)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_pod_deletion_forwards_sigterm_and_exits_as_soon_as_the_child_ends(job: Job) -> None:
    run = job.start(*TERM_ENDS)
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    began = time.monotonic()
    run.process.send_signal(signal.SIGTERM)
    assert run.code() == 143
    assert time.monotonic() - began < 1.0
    report = job.wait_report(state="exited", attempt=0)
    assert report["exitCode"] == 143


def test_pod_deletion_kills_a_child_that_ignores_sigterm_within_the_grace(job: Job) -> None:
    run = job.start(
        *sh('trap "" TERM; echo ready; while :; do sleep 0.02; done'), options=("--grace-seconds", "2")
    )
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    began = time.monotonic()
    run.process.send_signal(signal.SIGTERM)
    assert run.code() == 128 + signal.SIGKILL
    took = time.monotonic() - began
    assert 0.9 < took < 1.9, f"killed at grace - min(2 s, grace/2) = 1 s, not at the grace's end: {took}"
    report = job.wait_report(state="exited")
    assert report["signal"] == signal.SIGKILL


def test_pod_deletion_while_waiting_exits_at_once(job: Job) -> None:
    job.control(attempt=0, start=False)
    run = job.start(*sh("echo never"))
    job.wait_report(state="waiting", attempt=0)
    began = time.monotonic()
    run.process.send_signal(signal.SIGTERM)
    assert run.code() == 128 + signal.SIGTERM
    assert time.monotonic() - began < 0.5
    assert "never" not in run.stdout()


@pytest.mark.parametrize(
    ("control", "env_attempt", "starts_at_once", "runs_attempt"),
    [
        (None, 0, True, 0),  # a first attempt: no control yet
        ({"attempt": 0, "start": True}, 0, True, 0),
        ({"attempt": 0, "start": False}, 0, False, 0),  # the operator holds it at the barrier
        ({"attempt": 2, "start": False}, 1, False, 2),  # the gang went on while this pod was made
        ({"attempt": 0, "start": False}, 1, True, 1),  # no word for this attempt: a re-created gang
        ({"attempt": 5, "start": False, "jobUid": "an earlier job"}, 0, True, 0),  # not this job's
    ],
)
def test_at_start_up_the_control_file_decides_whether_the_child_starts_at_once(
    job: Job, control: dict[str, Any] | None, env_attempt: int, starts_at_once: bool, runs_attempt: int
) -> None:
    if control is not None:
        job.control(**control)
    run = job.start(
        *sh('echo "attempt=$TFMW_ATTEMPT"; exit 3'), env={**job.env, "TFMW_ATTEMPT": str(env_attempt)}
    )
    if starts_at_once:
        report = job.wait_report(state="exited")
    else:
        job.wait_report(state="waiting", attempt=runs_attempt)
        time.sleep(0.3)
        assert "attempt=" not in run.stdout()
        job.control(attempt=runs_attempt, start=True)
        report = job.wait_report(state="exited")
    assert report["attempt"] == runs_attempt
    assert f"attempt={runs_attempt}\n" in run.stdout()


def test_a_control_file_that_is_not_a_plain_file_for_this_job_is_ignored(job: Job) -> None:
    """While it waits at the barrier, none of these may start the child, or block the supervisor."""
    job.control(attempt=1, start=False)
    run = job.start(*sh("echo started; sleep 100"), env={**job.env, "TFMW_ATTEMPT": "1"})
    job.wait_report(state="waiting", attempt=1)
    control_dir = job.folder / ".tfmw"
    control = control_dir / "control.json"
    elsewhere = job.scratch / "elsewhere"
    elsewhere.mkdir()
    good = json.dumps({"jobUid": UID, "attempt": 1, "start": True})
    (elsewhere / "control.json").write_text(good)

    def symlink() -> None:
        control.unlink()
        control.symlink_to(elsewhere / "control.json")

    def fifo() -> None:
        control.unlink(missing_ok=True)
        os.mkfifo(control)

    def huge() -> None:
        control.unlink()
        control.write_text(good + " " * (supervisor.CONTROL_MAX_BYTES + 1))

    def linked_folder() -> None:
        shutil.rmtree(control_dir)
        control_dir.symlink_to(elsewhere)

    def unlinked_folder() -> None:
        control_dir.unlink()
        control_dir.mkdir()
        (control_dir / "pods").mkdir()

    hostile: list[Callable[[], object]] = [
        symlink,
        fifo,
        huge,
        lambda: job.control(attempt=1, start=True, jobUid="another job"),
        lambda: job.control(attempt=True, start=True),
        lambda: control.write_text('{"jobUid": "' + UID + '", "attempt": 1, "start": true'),
        lambda: control.write_bytes(b"\x00" * 100),
        linked_folder,
        unlinked_folder,
    ]
    for make in hostile:
        make()
        time.sleep(0.35)
        assert "started" not in run.stdout(), make
        assert run.alive(), make
    fifo()
    time.sleep(0.3)
    job.control(attempt=1, start=True)  # replaces the FIFO: the supervisor never blocked on it
    job.wait_report(state="running", attempt=1)
    wait_for(lambda: "started" in run.stdout(), why="the child started on a good control file")


STACKS_PROGRAM = """
import faulthandler, os, signal, sys, time
dump = open(os.environ["TFMW_STACKS_PATH"], "w")
faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
def waiting_in_a_known_frame():
    print("ready", flush=True)
    time.sleep(100)
waiting_in_a_known_frame()
"""


def test_a_stacks_request_reaches_a_program_that_handles_sigusr1(job: Job) -> None:
    run = job.start(PYTHON, "-c", STACKS_PROGRAM)
    job.wait_report(state="running", attempt=0)
    wait_for(lambda: job.said(0, "ready"), why="the program handles SIGUSR1")
    job.control(attempt=0, start=True, stacks="request-1")
    report = job.wait_report(stacks="request-1")
    assert report["stacksDelivered"] is True and report["state"] == "running"
    stacks = job.folder / "logs" / "attempt-0" / f"{STEM}.stacks"
    dumped = wait_for(lambda: stacks.read_text() if stacks.exists() else None, why="the stacks dumped")
    assert "waiting_in_a_known_frame" in dumped
    assert run.alive()


def test_a_stacks_request_never_kills_a_program_that_does_not_handle_sigusr1(job: Job) -> None:
    run = job.start(*sh("echo ready; exec sleep 100"))
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    job.control(attempt=0, start=True, stacks="request-2")
    report = job.wait_report(stacks="request-2")
    assert report["stacksDelivered"] is False
    time.sleep(0.3)
    assert job.report() is not None and job.report()["state"] == "running"  # type: ignore[index]
    assert run.alive()


def test_a_stacks_request_older_than_the_pod_is_not_served(job: Job) -> None:
    job.control(attempt=0, start=True, stacks="before-this-pod")
    job.start(PYTHON, "-c", STACKS_PROGRAM)
    report = job.wait_report(state="running")
    assert report["stacks"] == "before-this-pod" and report["stacksDelivered"] is False
    wait_for(lambda: job.said(0, "ready"), why="the program started")
    assert not (job.folder / "logs" / "attempt-0" / f"{STEM}.stacks").read_text()


def test_exit_in_the_control_stops_the_child_and_ends_the_supervisor(job: Job) -> None:
    run = job.start(*TERM_ENDS, options=("--stop-seconds", "5"))
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    job.control(attempt=0, exit=True)
    assert run.code() == 143
    assert job.wait_report(state="exited")["exitCode"] == 143

    for index, attempt in (("2", "0"), ("3", "5")):  # a pod made after the end: nothing starts
        late = job.start(
            *sh("echo never"), env={**job.env, "TFMW_REPLICA_INDEX": index, "TFMW_ATTEMPT": attempt}
        )
        assert late.code() == 0
        assert "never" not in late.stdout()


def test_the_log_is_capped_its_end_kept_and_it_says_where_the_rest_went(job: Job) -> None:
    lines = 60_000  # 3.3 MB through a 1 MiB cap
    program = f"import sys\nfor i in range({lines}): sys.stdout.write(f'line {{i:08d}} ' + 'x' * 40 + '\\n')"
    run = job.start(PYTHON, "-c", program, options=("--log-max-bytes", str(1 << 20)))
    job.wait_report(state="exited", exitCode=0)
    assert run.stdout().count("\n") == lines, "stdout gets everything"
    current = job.folder / "logs" / "attempt-0" / f"{STEM}.log"
    previous = current.with_name(current.name + ".1")
    assert previous.stat().st_size <= (1 << 20) + supervisor.READ_CHUNK
    assert current.stat().st_size <= (1 << 20) + supervisor.READ_CHUNK + 1000
    text = current.read_text()
    assert text.startswith("tfmw-supervisor: ") and f"are in {previous.name}" in text.splitlines()[0]
    assert f"line {lines - 1:08d} " in text
    assert "the command ended: exit code 0" in text.splitlines()[-1]
    assert "line 00000000 " not in previous.read_text() + text


def test_the_supervisors_lines_in_the_log_are_lines_of_their_own(job: Job) -> None:
    job.start("printf", "no newline at the end")
    job.wait_report(state="exited")
    started, output, ended = job.log(0).splitlines()
    assert started.startswith("tfmw-supervisor: attempt 0: started printf (pid ")
    assert output == "no newline at the end"
    assert ended == "tfmw-supervisor: attempt 0: the command ended: exit code 0"


def test_a_pod_that_cannot_report_its_child_end_exits_with_the_child_code(job: Job) -> None:
    (job.folder / ".tfmw").mkdir()
    (job.folder / ".tfmw" / "pods").write_text("a file where the reports' folder should be")
    run = job.start(*sh("exit 5"))
    assert run.code() == 5
    assert "cannot see this pod's end" in run.stderr()


def test_a_report_that_could_not_be_written_is_written_again(job: Job) -> None:
    job.control(attempt=0, start=False)
    blocker = job.folder / ".tfmw" / "pods"
    blocker.write_text("a file where the reports' folder should be")
    run = job.start(*sh("echo never"))
    wait_for(lambda: "could not be written" in run.stderr(), why="the waiting report failed")
    time.sleep(2.2)  # two more tries
    assert run.stderr().count("could not be written") == 1, "said once, not at every try"
    blocker.unlink()
    job.wait_report(timeout=3.0, state="waiting", attempt=0)
    assert run.alive()


def test_with_nothing_asked_after_the_child_end_it_exits_after_a_bound(job: Job) -> None:
    run = job.start(*sh("exit 9"), options=("--exited-wait-seconds", "0.5"))
    job.wait_report(state="exited")
    began = time.monotonic()
    assert run.code() == 9
    assert 0.2 < time.monotonic() - began < 2.0


# ---- as PID 1, in a PID namespace of its own ----


def _pid1(
    job: Job, *command: str, bootstrap: bool = True, own_proc: bool = False
) -> tuple[subprocess.Popen[bytes], int]:
    """The supervisor as PID 1 of a new PID namespace; its PID as this test sees it. `own_proc`:
    with a /proc of that namespace, as a container has (without, /proc is this test's)."""
    if bootstrap:
        supervised = supervisor.wrapped_command(command, (), str(SUPERVISOR), PYTHON)
    else:
        supervised = [PYTHON, str(SUPERVISOR), "--", *command]
    index = len(job.runs)
    out, err = job.scratch / f"out-{index}", job.scratch / f"err-{index}"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                *(["--mount-proc"] if own_proc else []),
                *supervised,
            ],
            env=job.env,
            stdout=stdout,
            stderr=stderr,
        )
    job.runs.append(Run(process, out, err))  # killed by the fixture if the test fails: its namespace with it
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    pid = int(wait_for(lambda: children.read_text().split(), 5.0, "unshare's child")[0])
    return process, pid


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _signal_mask(pid: int, mask: str, signum: int) -> bool:
    """Whether `signum` is in /proc/<pid>/status's `mask` (SigCgt: caught, SigBlk: blocked)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{mask}:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def _catches(pid: int, signum: int) -> bool:
    return _signal_mask(pid, "SigCgt", signum)


def test_as_pid_1_a_sigterm_while_python_starts_is_kept_by_the_bootstrap(job: Job) -> None:
    """PID 1's signals without a handler are dropped, blocked ones are kept pending: the
    bootstrap blocks them before the file is read and compiled."""
    process, pid = _pid1(job, "sleep", "100")
    wait_for(lambda: _signal_mask(pid, "SigBlk", signal.SIGTERM), 5.0, "SIGTERM blocked")
    os.kill(pid, signal.SIGTERM)
    began = time.monotonic()
    assert process.wait(5) == 128 + signal.SIGTERM
    assert time.monotonic() - began < 2.0


def test_as_pid_1_a_sigterm_during_start_up_is_not_lost(job: Job) -> None:
    """Run as `python3 supervisor.py`, the handler is in place before the imports."""
    process, pid = _pid1(job, "sleep", "100", bootstrap=False)
    wait_for(lambda: _catches(pid, signal.SIGTERM), 5.0, "the SIGTERM handler")
    os.kill(pid, signal.SIGSTOP)  # held right after the handler was installed, before the loop runs
    spawned_before = bool(_children(pid))
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGCONT)
    began = time.monotonic()
    assert process.wait(5) == 128 + signal.SIGTERM, f"child spawned before the SIGTERM: {spawned_before}"
    assert time.monotonic() - began < 2.0


def test_as_pid_1_it_reaps_the_orphans_it_inherits(job: Job) -> None:
    process, pid = _pid1(job, *sh("setsid sleep 0.3 & echo ready; sleep 100"))
    job.wait_report(state="running")
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    child = wait_for(lambda: _children(pid), why="the command's process")[0]
    os.kill(child, signal.SIGKILL)  # the sleep it left behind is now PID 1's
    job.wait_report(state="exited")
    time.sleep(0.6)
    assert _children(pid) == [], "no zombie left: the orphan was reaped"
    os.kill(pid, signal.SIGTERM)
    assert process.wait(5) == 128 + signal.SIGKILL


# ---- what an attempt leaves behind; a log pipe or a volume that stalls ----


def _freezer_base() -> Path | None:
    """This process's cgroup-v1 freezer cgroup, where it may make others; None without one."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            base = Path("/sys/fs/cgroup/freezer") / path.lstrip("/")
            if base.is_dir() and os.access(base, os.W_OK):
                return base
    return None


_FROZEN = itertools.count()


@contextlib.contextmanager
def _frozen(
    tasks: Sequence[int], threads: bool = False, ready: Callable[[], bool] | None = None
) -> Iterator[None]:
    """`tasks` (processes, or threads by their ids) frozen by the cgroup-v1 freezer: a process
    that no signal ends before it thaws, as one in D state (an NFS server gone, a GPU's
    teardown). Frozen again until `ready()` holds (at most 20 tries); thawed, moved back and the
    cgroup removed at the end."""
    base = _freezer_base()
    if base is None:
        pytest.skip("needs the cgroup-v1 freezer, writable (root)")
    folder = base / f"tfmw-supervisor-test-{os.getpid()}-{next(_FROZEN)}"
    folder.mkdir()
    state = folder / "freezer.state"
    try:
        for task in tasks:
            (folder / ("tasks" if threads else "cgroup.procs")).write_text(str(task))
        for _ in range(20):
            state.write_text("FROZEN")
            wait_for(lambda: state.read_text().strip() == "FROZEN", 5.0, "the freezer's FROZEN")
            if ready is None or ready():
                break
            state.write_text("THAWED")
            time.sleep(0.02)
        else:
            raise AssertionError("never frozen where it should be")
        yield
    finally:
        state.write_text("THAWED")
        for left in (folder / "tasks").read_text().split():
            with contextlib.suppress(OSError):  # ended meanwhile
                (base / "tasks").write_text(left)

        def removed() -> bool:
            try:
                folder.rmdir()
            except OSError:
                return False
            return True

        wait_for(removed, 5.0, "the freezer cgroup removed")


def _host_pid(root: int, ns_pid: int) -> int | None:
    """The PID, as this test sees it, of a descendant of `root` whose own PID namespace calls it `ns_pid`."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        if any(line.startswith("NSpid:") and int(line.split()[-1]) == ns_pid for line in status):
            return pid
        todo += _children(pid)
    return None


def test_no_waiting_nor_next_attempt_while_a_process_of_the_last_one_lives(job: Job) -> None:
    """A process of the attempt's group that a SIGKILL does not end at once (frozen here, as in
    D state): no `waiting` while it lives, so the barrier cannot open beside it; after the bound
    its attempt's end is reported `exited` saying what did not end, and even a `start` starts
    nothing; once it is gone, the next attempt comes."""
    pidfile = job.scratch / "grandchild"
    # Its output elsewhere: the command's pipes close with the command, nothing else holds them.
    script = (
        f'trap "exit 143" TERM; sleep 1000 >/dev/null 2>&1 & echo $! > {pidfile}; echo ready; '
        "while :; do sleep 0.02; done"
    )
    run = job.start(*sh(script), options=("--stop-seconds", "0.2"))
    wait_for(lambda: job.said(0, "ready") and pidfile.exists() and pidfile.read_text().strip(), why="started")
    grandchild = int(pidfile.read_text())
    try:
        with _frozen([grandchild]):
            job.control(attempt=1, start=False)
            time.sleep(0.4)  # the command ends on SIGTERM at once; its group's sleep does not
            report = job.report()
            assert report is not None and (report["state"], report["attempt"]) == ("running", 0), report
            held = job.wait_report(timeout=3.0, state="exited", attempt=0)  # after GONE_MIN_SECONDS
            assert held["exitCode"] == 143
            assert held["notEnded"].startswith(f"pid {grandchild} (sleep, state "), held
            assert f"pid {grandchild} (sleep" in job.log(0)
            job.control(attempt=1, start=True)
            time.sleep(0.3)
            assert job.log(1) == "", "an attempt started beside a process of the last one"
        running = job.wait_report(state="running", attempt=1)  # thawed: its SIGKILL ends it
        assert not _running(grandchild)
        assert "notEnded" not in running and running["previous"]["exitCode"] == 143
        assert "attempt 0: its last process has ended" in run.stderr()
    finally:
        if _running(grandchild):
            os.kill(grandchild, signal.SIGKILL)


@pytest.mark.parametrize("pid1", [True, False], ids=["as PID 1", "not PID 1, a subreaper"])
def test_a_process_that_left_the_attempts_group_ends_before_the_next_attempt(job: Job, pid1: bool) -> None:
    """`setsid` (subprocess's start_new_session) takes a process out of its attempt's group. As
    PID 1 of the pod's PID namespace every process but its own is killed at an attempt's end;
    not PID 1, the supervisor adopts such orphans (a subreaper) and kills them."""
    pidfile = job.scratch / "escaped"
    script = f'trap "exit 143" TERM; setsid sleep 1000 & echo $! > {pidfile}; echo ready; while :; do sleep 0.02; done'
    if pid1:
        _, supervising = _pid1(job, *sh(script), own_proc=True)
    else:
        supervising = job.start(*sh(script)).process.pid
    wait_for(lambda: job.said(0, "ready") and pidfile.exists() and pidfile.read_text().strip(), why="started")
    escaped = wait_for(lambda: _host_pid(supervising, int(pidfile.read_text())), why="the escaped sleep")
    try:
        wait_for(lambda: os.getsid(escaped) == escaped, 2.0, "it left the attempt's session and group")
        job.control(attempt=1, start=False)
        job.wait_report(state="waiting", attempt=1)
        assert not _running(escaped), "a process of attempt 0 outlived its end's report"
    finally:
        if _running(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_as_pid_1_an_exec_session_is_no_attempts_and_neither_killed_nor_waited_for(job: Job) -> None:
    """`kubectl exec`, `kubectl debug --target` and exec probes enter the container's PID
    namespace from outside (their parent is not in it): no attempt's process. Taken for one, it
    was killed at every restart, and one the supervisor may not signal (a root debug shell)
    held every next attempt back (a hostile read of 085da3e)."""
    script = 'trap "exit 143" TERM; echo ready; while :; do sleep 0.02; done'
    _, supervising = _pid1(job, *sh(script), own_proc=True)
    wait_for(lambda: job.said(0, "ready"), why="started")
    entered = subprocess.Popen(["nsenter", "-t", str(supervising), "-p", "-m", "sleep", "1000"])
    try:
        time.sleep(0.3)  # nsenter forks into the namespace, then its child execs sleep
        job.control(attempt=1, start=False)
        waiting = job.wait_report(state="waiting", attempt=1)
        assert "notEnded" not in waiting
        assert entered.poll() is None, "an exec session was killed as an attempt's process"
        job.control(attempt=1, start=True)
        job.wait_report(state="running", attempt=1)
    finally:
        entered.kill()
        entered.wait()


@pytest.mark.parametrize("fd", [1, 2], ids=["stdout", "stderr"])
def test_a_log_pipe_no_one_reads_never_stops_the_supervisor(job: Job, fd: int) -> None:
    """The container runtime stops reading the pod's stdout or stderr: the command's output
    still reaches the log on the volume, the pod's SIGTERM is forwarded, and the supervisor ends
    within its grace. What waits for the pipe is bounded; beyond, dropped and counted there."""
    total = 5_000_000  # more than the pipe and supervisor.STREAM_BUFFER_MAX_BYTES take
    script = (
        f"exec >&{fd}; trap 'echo got-term; exit 143' TERM; head -c {total} /dev/zero | tr '\\0' x; "
        "echo; echo ready; while :; do sleep 0.02; done"
    )
    stalled, pipe = os.pipe()
    out, err = job.scratch / "out", job.scratch / "err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            supervisor.wrapped_command(sh(script), (), str(SUPERVISOR), PYTHON),
            env=job.env,
            stdout=pipe if fd == 1 else stdout,
            stderr=pipe if fd == 2 else stderr,
            cwd=job.scratch,
        )
    os.close(pipe)
    job.runs.append(Run(process, out, err))
    received = bytearray()

    def read_again() -> None:
        while chunk := os.read(stalled, 1 << 16):
            received.extend(chunk)

    reader = threading.Thread(target=read_again, daemon=True)
    try:
        wait_for(lambda: job.said(0, "ready"), 5.0, "the output on to the log while the pipe is full")
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: job.said(0, "got-term"), 2.0, "the SIGTERM forwarded while the pipe is full")
        if fd == 1:  # the runtime reads again: what waited, then how much was dropped
            reader.start()
        assert process.wait(5) == 143
        took = time.monotonic() - began
        if reader.ident is not None:
            reader.join(5)
    finally:
        os.close(stalled)
    assert took < 1.0 + supervisor.STREAM_FLUSH_SECONDS, took
    if fd == 1:  # every byte is out, or counted where it was dropped
        notes = list(
            re.finditer(
                rb"\ntfmw-supervisor: (\d+) bytes of output dropped here: stdout was not read\n", received
            )
        )
        assert notes, received[-300:]
        out_bytes = len(received) - sum(len(note[0]) for note in notes)
        assert out_bytes + sum(int(note[1]) for note in notes) == total + len("\nready\ngot-term\n")


def test_with_the_volume_hung_and_no_child_a_sigterm_exits_at_once(job: Job) -> None:
    """The volume's thread stuck (frozen here, as in a stat on an NFS server gone) with nothing
    asked of it: a pod's SIGTERM with no child running ends the supervisor at once."""
    job.control(attempt=0, start=False)
    run = job.start(*sh("echo never"), options=("--grace-seconds", "4"))
    job.wait_report(state="waiting", attempt=0)
    pid = run.process.pid
    volume_thread = next(int(task) for task in os.listdir(f"/proc/{pid}/task") if int(task) != pid)

    def waiting_not_running() -> bool:  # frozen in a wait: it holds no lock the exit needs
        return "futex" in Path(f"/proc/{pid}/task/{volume_thread}/wchan").read_text()

    def main_thread_ended() -> bool:
        return Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"

    with _frozen([volume_thread], threads=True, ready=waiting_not_running):
        began = time.monotonic()
        run.process.send_signal(signal.SIGTERM)
        wait_for(main_thread_ended, 5.0, "the supervisor's exit")  # the frozen thread holds up the rest
        took = time.monotonic() - began
    assert run.code() == 128 + signal.SIGTERM
    assert took < 1.0, f"with no command pending, the volume is not waited for: {took:.1f} s"


def test_a_log_rotation_that_fails_leaks_no_descriptor(job: Job) -> None:
    """A directory where the rotated log goes: the rename fails and the log stops (said once);
    the log's fd and its attempt folder's are closed, each once."""
    (job.folder / "logs" / "attempt-0" / f"{STEM}.log.1" / "x").mkdir(parents=True)
    program = "import sys; sys.stdout.write('y' * 20000 + '\\n')"
    run = job.start(PYTHON, "-c", program, options=("--log-max-bytes", "4096"))
    job.wait_report(state="exited", attempt=0)
    assert run.stderr().count("the log on the volume stopped: [Errno 21] Is a directory") == 1

    def held() -> list[str]:
        found = []
        for fd in os.listdir(f"/proc/{run.process.pid}/fd"):
            with contextlib.suppress(OSError):  # closed meanwhile
                found.append(os.readlink(f"/proc/{run.process.pid}/fd/{fd}"))
        return [path for path in found if f"{job.folder}/logs/" in path]

    wait_for(lambda: not held(), 2.0, f"the attempt's log and folder closed: {held()}")
    assert run.alive()


def test_after_the_kill_deadline_a_command_not_yet_dead_costs_no_cpu(job: Job) -> None:
    """Killed at the grace's end less the margin, a command in D state (frozen here) is not
    reaped until it leaves it: the supervisor waits for it idle, not spinning."""
    script = 'trap "" TERM; echo ready; while :; do sleep 0.02; done'
    run = job.start(*sh(script), options=("--grace-seconds", "1"))
    wait_for(lambda: job.said(0, "ready"), why="the command started")
    command = wait_for(lambda: _children(run.process.pid), why="the command's process")[0]
    with _frozen([command]):
        run.process.send_signal(signal.SIGTERM)
        time.sleep(0.8)  # its SIGKILL was due 0.5 s after the SIGTERM
        before = _cpu_seconds(run.process.pid)
        time.sleep(0.5)
        spent = _cpu_seconds(run.process.pid) - before
        assert run.alive()
    assert run.code(5) == 128 + signal.SIGKILL
    assert spent < 0.05, f"{spent:.2f} s of CPU in 0.5 s after the kill deadline"


# ---- OOM, in a memory cgroup of the test's own ----


def _memory_cgroup(name: str, limit: int) -> tuple[Path, Path] | None:
    """A child of this process's memory cgroup, limited to `limit` bytes without swap: (its
    folder, the file a process joins it through); None where cgroups are not writable here."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" and controllers == "":
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            settings = {"memory.max": str(limit), "memory.swap.max": "0"}
        elif "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            settings = {"memory.limit_in_bytes": str(limit), "memory.memsw.limit_in_bytes": str(limit)}
        else:
            continue
        folder = base / name
        try:
            folder.mkdir()
        except OSError:
            continue
        try:
            for setting, value in settings.items():
                if (folder / setting).exists():
                    (folder / setting).write_text(value)
        except OSError:
            folder.rmdir()
            continue
        if (folder / "memory.events").exists() or (folder / "memory.oom_control").exists():
            return folder, folder / "cgroup.procs"
        folder.rmdir()
    return None


def test_an_oom_kill_is_told_from_the_cgroup_counter(job: Job) -> None:
    cgroup = _memory_cgroup(f"tfmw-supervisor-test-{os.getpid()}", 96 << 20)
    if cgroup is None:
        pytest.skip("needs a writable memory cgroup (root, cgroup v1 or v2 with the memory controller)")
    folder, procs = cgroup
    try:
        hog = "chunks = []\nwhile True: chunks.append(b'x' * (16 << 20))"
        join = f'echo $$ > {procs} && exec "$@"'
        command = ("sh", "-c", join, "sh", PYTHON, str(SUPERVISOR), "--exited-wait-seconds", "0.5", "--")
        with (job.scratch / "oom-out").open("wb") as out:
            oom = subprocess.run(
                [*command, PYTHON, "-c", hog], env=job.env, stdout=out, stderr=out, timeout=30
            )
        report = job.report()
        assert report is not None, (job.scratch / "oom-out").read_text()
        assert report["oomKilled"] is True and report["signal"] == signal.SIGKILL
        assert oom.returncode == 128 + signal.SIGKILL
        subprocess.run([*command, "true"], env=job.env, timeout=30, check=True)
        report = job.report()
        assert report is not None and report["oomKilled"] is False and report["exitCode"] == 0
    finally:
        wait_for(lambda: not procs.read_text().split(), 5.0, "the cgroup emptied")
        folder.rmdir()


# ---- what it costs ----


def _cpu_seconds(pid: int) -> float:
    """CPU time of all the process's threads, in nanoseconds' precision (not clock ticks)."""
    tasks = Path(f"/proc/{pid}/task")
    return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir()) / 1e9


def _seen(job: Job, stem: str, **expected: Any) -> tuple[dict[str, Any], float]:
    """The report once it matches, and when it was first seen: looked for every millisecond (a
    file's mtime is no finer than the kernel's tick)."""
    path = job.folder / ".tfmw" / "pods" / f"{stem}.json"
    deadline = time.monotonic() + 10.0
    # Not the inode alone: ext4 hands a freed inode to the next file, so a report renamed into
    # place can carry the number of the one it replaced.
    seen_version = None
    while time.monotonic() < deadline:
        try:
            status = path.stat()
            version: tuple[int, int, int, int] | None = (
                status.st_ino,
                status.st_size,
                status.st_mtime_ns,
                status.st_ctime_ns,
            )
        except FileNotFoundError:
            version = None
        if version is not None and version != seen_version:
            when = time.time()
            seen_version = version
            doc = job.report(stem)
            if doc is not None and all(doc.get(key) == value for key, value in expected.items()):
                return doc, when
        time.sleep(0.001)
    raise AssertionError(f"no report with {expected} within 10 s: {job.report(stem)}")


def test_latencies_and_idle_cost(job: Job) -> None:
    """Control start -> the child's exec; a child's exit -> its report on disk; a higher attempt
    -> the survivor's `waiting` on disk; idle CPU and memory.

    Printed with -s (docs/benchmarks.md has the figures); bounded loosely here so that a
    regression by an order of magnitude fails.
    """
    phases = random.Random(39)  # the operator's word comes at any moment of a polling cycle

    stamps = job.scratch / "stamps"
    script = f"date +%s.%N >> {stamps}.start; date +%s.%N > {stamps}.end; exit 7"
    ending = job.start(*sh(script))
    job.wait_report(state="exited", attempt=0)
    start_latency: list[float] = []
    report_latency: list[float] = []
    for attempt in range(1, 21):
        time.sleep(phases.uniform(0, 0.2))
        asked = job.control(attempt=attempt, start=True)
        report, seen = _seen(job, STEM, state="exited", attempt=attempt)
        child_began = float(Path(f"{stamps}.start").read_text().split()[-1])
        child_ended = float(Path(f"{stamps}.end").read_text())
        start_latency.append(child_began - asked)
        report_latency.append(seen - child_ended)
        assert report["exitCode"] == 7

    # A second pod of the gang, whose child ends at once on SIGTERM: how long a survivor takes
    # to be at the barrier once the operator raises the attempt.
    survivor = job.start(
        *sh('trap "exit 143" TERM; echo ready; sleep 100 & wait'),
        env={**job.env, "TFMW_REPLICA_INDEX": "2", "TFMW_ATTEMPT": "21"},
    )
    stop_latency: list[float] = []
    for attempt in range(21, 31):
        job.wait_report(stem="worker-2", state="running", attempt=attempt)
        wait_for(partial(job.said, attempt, "ready", "worker-2"), why="the survivor's child started")
        time.sleep(phases.uniform(0, 0.2))
        asked = job.control(attempt=attempt + 1, start=False)
        _, seen = _seen(job, "worker-2", state="waiting", attempt=attempt + 1)
        stop_latency.append(seen - asked)
        job.wait_report(state="waiting", attempt=attempt + 1)  # the other pod is at the barrier too
        job.control(attempt=attempt + 1, start=True)
    job.wait_report(stem="worker-2", state="running", attempt=31)
    job.wait_report(state="exited", attempt=31)

    idle_seconds = 10.0
    before = (_cpu_seconds(ending.process.pid), _cpu_seconds(survivor.process.pid))
    time.sleep(idle_seconds)
    exited_cpu = (_cpu_seconds(ending.process.pid) - before[0]) / idle_seconds
    running_cpu = (_cpu_seconds(survivor.process.pid) - before[1]) / idle_seconds
    status = Path(f"/proc/{survivor.process.pid}/status").read_text().splitlines()
    rss = next(line for line in status if line.startswith("VmRSS:")).split(":")[1].strip()

    for values in (start_latency, report_latency, stop_latency):
        values.sort()

    def summary(values: list[float]) -> str:
        return f"median {values[len(values) // 2] * 1000:.1f} ms, max {values[-1] * 1000:.1f} ms"

    print(f"\ncontrol start -> the child's first instruction (sh + date): {summary(start_latency)}")
    print(f"a child's exit -> its exited report renamed into place: {summary(report_latency)}")
    print(
        f"a higher attempt -> the survivor's waiting report (SIGTERM, exit, report): {summary(stop_latency)}"
    )
    print(
        f"idle CPU: {exited_cpu * 100:.3f} % after its child's end, {running_cpu * 100:.3f} % beside a quiet child"
    )
    print(f"the supervisor's memory (VmRSS): {rss}")
    assert start_latency[len(start_latency) // 2] < 0.5
    assert report_latency[len(report_latency) // 2] < 0.5  # medians: the unit stage runs on every core
    assert stop_latency[len(stop_latency) // 2] < 0.5
    assert exited_cpu < 0.02 and running_cpu < 0.02


# ---- a measurement, not a test: `PYTHONPATH=operator:tests .venv/bin/python -m unit.operator.test_supervisor`


def measure_sigterm_during_start_up(
    rounds: int = 10, delays: tuple[float, ...] = (0.005, 0.01, 0.02, 0.03, 0.05, 0.1)
) -> None:
    """SIGTERM to the supervisor as PID 1 of a PID namespace a given time after the start: how
    many ended within 3 s (a lost one never ends) of those sent, run directly and by BOOTSTRAP.
    The time counts from before `unshare` is started, as in docs/benchmarks.md's trainer row; a
    round where `unshare` had not forked PID 1 yet sends nothing."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "TFMW_SHARED_DIR": folder,
            "TFMW_JOB_UID": UID,
            "TFMW_REPLICA_TYPE": "worker",
            "TFMW_REPLICA_INDEX": "0",
        }
        ways = {
            "python3 supervisor.py -- sleep 100": [PYTHON, str(SUPERVISOR), "--", "sleep", "100"],
            "python3 -I -S -c BOOTSTRAP -- sleep 100": supervisor.wrapped_command(
                ["sleep", "100"], (), str(SUPERVISOR), PYTHON
            ),
        }
        print(f"{PYTHON}; load average {os.getloadavg()[0]:.1f}")
        print("| command | " + " | ".join(f"{delay * 1000:g} ms" for delay in delays) + " |")
        for name, command in ways.items():
            ended: list[str] = []
            for delay in delays:
                count = sent = 0
                for _ in range(rounds):
                    began = time.monotonic()
                    process = subprocess.Popen(
                        ["unshare", "--pid", "--fork", "--kill-child", *command],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
                    time.sleep(max(0.0, began + delay - time.monotonic()))
                    pids = children.read_text().split() if children.exists() else []
                    if pids:  # not yet forked: unshare itself would take the signal
                        sent += 1
                        os.kill(int(pids[0]), signal.SIGTERM)
                        try:
                            process.wait(3)
                            count += 1
                        except subprocess.TimeoutExpired:
                            pass
                    process.kill()
                    process.wait()
                ended.append(f"{count}/{sent}")
            print(f"| `{name}` | " + " | ".join(ended) + " |")


if __name__ == "__main__":
    measure_sigterm_during_start_up()


# ---- a warm start ----


def test_only_a_plain_python_module_or_script_command_can_start_warm() -> None:
    assert supervisor.python_invocation(["python3", "-m", "tfmw_trainer", "--epochs=3"]) == (
        "-m",
        "tfmw_trainer",
        ["--epochs=3"],
    )
    assert supervisor.python_invocation(["/usr/bin/python3.11", "train.py"]) == ("-", "train.py", [])
    for command in (
        ["python3"],
        ["python3", "-u", "-m", "x"],
        ["python3", "-c", "print(1)"],
        ["python3", "-m", "not a module"],
        ["bash", "-c", "python3 -m x"],
        ["pythonista", "x.py"],
        ["python3", ""],
    ):
        assert supervisor.python_invocation(command) is None, command
    assert supervisor.warm_modules("tensorflow,numpy.linalg") == ("tensorflow", "numpy.linalg")
    for bad in ("", "a b", "os;rm", ",".join(["m"] * 17), "x" * 129):
        with pytest.raises(ValueError):
            supervisor.warm_modules(bad)


def _warm_job(job: Job, import_seconds: float = 0.0) -> tuple[str, ...]:
    """`python -m prog a b` (prints what it sees, exits 170), with `heavy` to import ahead:
    heavy notes the pid that imported it, after `import_seconds`."""
    (job.scratch / "heavy.py").write_text(
        f"import os, time\ntime.sleep({import_seconds})\n"
        "print('heavy says hello', flush=True)\n"
        f"open({str(job.scratch / 'imported')!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
    )
    (job.scratch / "prog.py").write_text(
        "import os, sys\n"
        "print(f\"pid={os.getpid()} warm={'heavy' in sys.modules} argv={sys.argv[1:]} "
        "attempt={os.environ['TFMW_ATTEMPT']} main={__name__}\", flush=True)\n"
        "sys.exit(170)\n"
    )
    return (PYTHON, "-m", "prog", "a", "b")


def _imported(job: Job) -> list[str]:
    path = job.scratch / "imported"
    return path.read_text().split() if path.exists() else []


def test_with_warm_start_the_next_attempt_runs_in_a_process_that_imported_ahead(job: Job) -> None:
    options = ("--warm-start", "heavy", "--warm-start-delay", "0.1")
    run = job.start(*_warm_job(job), options=options)
    job.wait_report(state="exited", attempt=0)
    assert "warm=False argv=['a', 'b'] attempt=0 main=__main__" in job.log(0)
    standby = wait_for(lambda: _imported(job), why="the standby imported heavy")[0]
    wait_for(
        lambda: f"warm standby (pid {standby}) ready: heavy imported in" in run.stderr(), why="said ready"
    )
    job.control(attempt=1, start=True)
    job.wait_report(state="exited", attempt=1)
    assert f"pid={standby} warm=True argv=['a', 'b'] attempt=1 main=__main__" in job.log(1)
    assert "warm: imported ahead" in job.log(1)
    # What it printed while it imported is its attempt's, in order; the OOM killer takes it first.
    assert job.log(1).index("heavy says hello") < job.log(1).index(f"pid={standby}")
    # Each attempt has its standby ready for the next.
    second = wait_for(lambda: _imported(job)[1:], why="a second standby")[0]
    job.control(attempt=2, start=True)
    job.wait_report(state="exited", attempt=2)
    assert f"pid={second} warm=True" in job.log(2)
    run.process.send_signal(signal.SIGTERM)
    assert run.code(2) == 170


def test_a_standby_is_the_oom_killers_first_choice_and_imports_as_the_script_would(job: Job) -> None:
    """`python3 /app/train.py` from another folder: the script's folder is first on sys.path
    before anything is imported, as the interpreter has it."""
    app = job.scratch / "app"
    app.mkdir()
    (app / "helper.py").write_text(f"open({str(job.scratch / 'imported')!r}, 'a').write('app\\n')\n")
    (job.scratch / "helper.py").write_text(f"open({str(job.scratch / 'imported')!r}, 'a').write('cwd\\n')\n")
    (app / "train.py").write_text(
        "import sys\nprint('warm', 'helper' in sys.modules, sys.path[0], flush=True)\n"
    )
    run = job.start(
        PYTHON, str(app / "train.py"), options=("--warm-start", "helper", "--warm-start-delay", "0")
    )
    job.wait_report(state="exited", attempt=0)
    wait_for(lambda: "ready: helper imported" in run.stderr(), why="the standby ready")
    assert _imported(job) == ["app"]
    pid = int(run.stderr().split("warm standby (pid ")[1].split(")")[0])
    assert Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "1000"
    job.control(attempt=1, start=True)
    job.wait_report(state="exited", attempt=1)
    assert job.said(1, f"warm True {app}")


def test_a_standby_still_importing_gives_way_to_a_cold_start(job: Job) -> None:
    options = ("--warm-start", "heavy", "--warm-start-delay", "0")
    run = job.start(*_warm_job(job, import_seconds=30), options=options)
    job.wait_report(state="exited", attempt=0)
    time.sleep(0.3)  # the standby runs, still importing
    job.control(attempt=1, start=True)
    job.wait_report(state="exited", attempt=1)
    assert "warm=False" in job.log(1) and "warm: imported ahead" not in job.log(1)
    assert "has not finished its imports" in run.stderr()
    assert run.alive()


def test_pod_deletion_ends_the_standby_with_the_supervisor(job: Job) -> None:
    options = ("--warm-start", "heavy", "--warm-start-delay", "0")
    run = job.start(*_warm_job(job), options=options)
    job.wait_report(state="exited", attempt=0)
    standby = int(wait_for(lambda: _imported(job), why="the standby imported heavy")[0])
    run.process.send_signal(signal.SIGTERM)
    assert run.code(2) == 170
    wait_for(lambda: not Path(f"/proc/{standby}").exists(), timeout=2, why="the standby gone")


def test_alone_without_a_job_folder_there_is_no_next_attempt_and_no_standby(job: Job) -> None:
    env = {k: v for k, v in job.env.items() if k != "TFMW_SHARED_DIR"}
    run = job.start(*_warm_job(job), options=("--warm-start", "heavy", "--warm-start-delay", "0"), env=env)
    assert run.code(10) == 170
    assert "warm standby" not in run.stderr() and _imported(job) == []


def test_a_command_that_cannot_start_warm_runs_as_ever_and_says_why(job: Job) -> None:
    run = job.start(*sh("echo ran; exit 3"), options=("--warm-start", "heavy", "--warm-start-delay", "0"))
    job.wait_report(state="exited", attempt=0)
    assert job.said(0, "ran")
    assert "--warm-start: the command is not" in run.stderr()
