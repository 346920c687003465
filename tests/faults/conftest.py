"""The fault suite: the deployed operator (two replicas) on the local cluster with its real
node, under faults a shared cluster meets. Each test adds a row to the summary table:
fault, expected end, observed end, seconds until the status said so.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from e2e.conftest import fresh_name, kube, shared_dir  # noqa: F401  (fixtures shared with e2e)
from kube import CLUSTER_DIR, REPO

RESULTS = REPO / "bench" / "results" / "faults.json"


@dataclass
class Row:
    fault: str
    expected: str
    observed: str
    seconds: float


ROWS: list[Row] = []


@pytest.fixture
def report() -> Callable[[str, str, str, float], None]:
    def add(fault: str, expected: str, observed: str, seconds: float) -> None:
        ROWS.append(Row(fault, expected, observed, round(seconds, 1)))

    return add


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ROWS:
        return
    width = max(len(r.fault) for r in ROWS)
    lines = [f"{'fault':<{width}}  {'expected end':<34} {'observed end':<34} seconds to a clear status"]
    lines += [f"{r.fault:<{width}}  {r.expected:<34} {r.observed:<34} {r.seconds:>6.1f}" for r in ROWS]
    terminalreporter.write_sep("=", "faults")
    for line in lines:
        terminalreporter.write_line(line)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps([asdict(r) for r in ROWS], indent=2) + "\n")


def component_pid(name: str) -> int:
    return int((CLUSTER_DIR / "run" / f"{name}.pid").read_text())


def kill_component(name: str) -> None:
    """SIGKILL a cluster component, as a crash would."""
    os.killpg(component_pid(name), signal.SIGKILL)
    time.sleep(0.5)


def stop_component(name: str, timeout: float = 10) -> None:
    """SIGTERM a cluster component, as a stop would, and wait until it is gone (SIGKILL after
    `timeout`): one still stopping would be taken for running when the cluster is restored."""
    pid = component_pid(name)
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):  # gone (its pid may name a thread by now)
        if Path(f"/proc/{pid}").exists():
            os.killpg(pid, signal.SIGKILL)
    time.sleep(1)


@pytest.fixture
def restore_cluster() -> Iterator[Callable[[], None]]:
    """Starts whatever is not running; the test calls it, and so does the teardown."""

    def up() -> None:
        done = subprocess.run(
            [str(REPO / "hack" / "cluster.sh"), "up"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (
            f"hack/cluster.sh up failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )

    yield up
    up()


def processes_with(*env: str) -> list[int]:
    """Processes on this machine whose environment holds all of `env` (KEY=value)."""
    found = []
    for path in Path("/proc").glob("[0-9]*/environ"):
        try:
            environ = path.read_bytes().split(b"\0")
        except OSError:
            continue
        if all(e.encode() in environ for e in env):
            found.append(int(path.parent.name))
    return found
