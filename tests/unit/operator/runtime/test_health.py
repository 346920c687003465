"""The health endpoint, served on loopback: what fails liveness and readiness, and why."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from pathlib import Path

from tfmw_operator.handlers import Operator
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
