"""The health endpoint, served on loopback: what fails liveness and readiness, and why."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from tfmw_operator.handlers import Operator
from tfmw_operator.runtime import health as health_module
from tfmw_operator.runtime.health import Health
from tfmw_operator.runtime.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_liveness_and_readiness_say_what_is_wrong() -> None:
    health, problem = Health(), {"live": None, "ready": "listing /api/v1/pods"}
    health.live_while("elector", lambda: problem["live"])
    health.ready_when("operator", lambda: problem["ready"])
    port = free_port()
    server = health.serve(f"http://127.0.0.1:{port}/healthz")
    try:
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (503, "operator: listing /api/v1/pods\n")
        problem["ready"] = None
        assert get(port, "/readyz") == (200, "ok\n")
        problem["live"] = "the lease elector has stopped"
        assert get(port, "/healthz") == (503, "elector: the lease elector has stopped\n")
        assert get(port, "/metrics")[0] == 404
    finally:
        server.shutdown()


def test_a_check_that_raises_is_a_problem() -> None:
    health = Health()

    def broken() -> str | None:
        raise RuntimeError("boom")

    health.live_while("broken", broken)
    assert health.problems() == ["broken: the check failed: boom"]


def test_a_background_task_that_died_fails_liveness(tmp_path: Path) -> None:
    health = Health()
    operator = Operator(Settings(tmp_path), health)

    async def scenario() -> list[str]:
        async def informer() -> None:
            raise ConnectionError("the watch broke for good")

        task = asyncio.create_task(informer())
        operator._background[task] = "the watch of /api/v1/pods"
        await asyncio.gather(task, return_exceptions=True)
        return health.problems()

    assert health.problems(ready=True) == ["operator: starting"]
    assert asyncio.run(scenario()) == [
        "operator: the watch of /api/v1/pods ended: ConnectionError('the watch broke for good')"
    ]


def test_a_connection_that_sends_no_whole_request_is_closed_in_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A half-sent request no longer holds its thread for ever: it is closed once silent for
    HANDLER_TIMEOUT_SECONDS."""
    monkeypatch.setattr(health_module, "HANDLER_TIMEOUT_SECONDS", 0.3, raising=False)
    port = free_port()
    server = Health().serve(f"http://127.0.0.1:{port}/healthz")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as idle:
            idle.sendall(b"GET /hea")
            started = time.monotonic()
            idle.settimeout(3)
            try:
                closed = idle.recv(1024) == b""
            except TimeoutError:
                closed = False
            assert closed and time.monotonic() - started < 2
    finally:
        server.shutdown()
        server.server_close()


def test_idle_connections_beyond_the_cap_hold_no_thread_and_probes_are_still_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Connections beyond MAX_HANDLERS close the oldest: 20 idle ones hold 4 threads, not 20,
    and a probe that comes after them is answered."""
    monkeypatch.setattr(health_module, "MAX_HANDLERS", 4, raising=False)
    port = free_port()
    before = threading.active_count()
    server = Health().serve(f"http://127.0.0.1:{port}/healthz")
    idle: list[socket.socket] = []
    try:
        for _ in range(20):
            connection = socket.create_connection(("127.0.0.1", port), timeout=5)
            connection.sendall(b"GET /hea")
            idle.append(connection)
        deadline = time.monotonic() + 3
        while threading.active_count() > before + 1 + 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before + 1 + 4  # the server's own, and 4 handlers
        assert get(port, "/healthz") == (200, "ok\n")
    finally:
        for connection in idle:
            connection.close()
        server.shutdown()
        server.server_close()
