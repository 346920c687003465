"""Where the operator writes its version for `tfmw version`, and what it writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import kopf
import pytest
from aiohttp import web
from tfmw_operator.runtime.published_version import default_target, parse_target, patch, publish


def test_the_configmap_is_the_operators_own_namespaces() -> None:
    assert default_target({"POD_NAMESPACE": "ops"}) == "ops/tfmw-version"
    assert default_target({}) == "tfmw-system/tfmw-version"
    assert default_target({"POD_NAMESPACE": ""}) == "tfmw-system/tfmw-version"


def test_a_target_is_namespace_slash_name() -> None:
    assert parse_target("ops/tfmw-version") == ("ops", "tfmw-version")


@pytest.mark.parametrize("target", ["tfmw-version", "/tfmw-version", "ops/", "ops/a/b", ""])
def test_anything_else_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="is not NAMESPACE/NAME"):
        parse_target(target)


def test_the_patch_sets_the_version_and_revision_and_leaves_the_rest() -> None:
    # A merge patch: the install's trainerImage, not named, stays as it is.
    assert patch("0.2.0", "abc123") == {"data": {"version": "0.2.0", "revision": "abc123"}}


@pytest.mark.parametrize("ca", [b"not a certificate", None], ids=["bad CA", "refused"])
def test_a_write_that_cannot_be_made_is_a_reason_the_operator_logs_not_an_exception(ca: bytes | None) -> None:
    """A CA that is not one (the TLS context cannot be built) or a server that refuses: the
    operator logs why and runs on (port 1 refuses at once)."""
    credentials = kopf.ConnectionInfo(server="https://127.0.0.1:1", ca_data=ca)
    reason = asyncio.run(publish(credentials, "ops", delays=(0.0, 0.0)))
    assert reason is not None and reason.startswith("ConfigMap ops/tfmw-version: ")


@asynccontextmanager
async def api_server(answers: list[int]) -> AsyncIterator[tuple[int, list[int]]]:
    """A real HTTP server answering the ConfigMap's PATCHes with `answers` in turn (the last
    one again once they run out): its port, and the statuses it has answered."""
    answered: list[int] = []

    async def answer(request: web.Request) -> web.Response:
        status = answers[min(len(answered), len(answers) - 1)]
        answered.append(status)
        return web.json_response({"kind": "ConfigMap"} if status == 200 else {"message": "no"}, status=status)

    app = web.Application()
    app.router.add_patch("/api/v1/namespaces/ops/configmaps/tfmw-version", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1], answered
    finally:
        await runner.cleanup()


def publish_to(answers: list[int]) -> tuple[str | None, list[int]]:
    """publish() against a server answering `answers`, no delay between tries: its reason and
    the statuses the server answered."""

    async def run() -> tuple[str | None, list[int]]:
        async with api_server(answers) as (port, answered):
            credentials = kopf.ConnectionInfo(server=f"http://127.0.0.1:{port}")
            return await publish(credentials, "ops", delays=(0.0, 0.0)), answered

    return asyncio.run(run())


def test_a_server_busy_or_failing_for_a_moment_is_tried_again() -> None:
    assert publish_to([503, 429, 200]) == (None, [503, 429, 200])


def test_three_tries_then_the_reason() -> None:
    reason, answered = publish_to([500])
    assert answered == [500, 500, 500]
    assert reason is not None and reason.startswith("ConfigMap ops/tfmw-version: 500")


@pytest.mark.parametrize("status", [403, 404, 422])
def test_a_refusal_is_not_tried_again(status: int) -> None:
    reason, answered = publish_to([status, 200])
    assert answered == [status]
    assert reason is not None and reason.startswith("ConfigMap ops/tfmw-version")
