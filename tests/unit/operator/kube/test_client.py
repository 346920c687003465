"""Watch lines and followed logs, against a real HTTP server on loopback (no mocked client)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from loopback import kube_serving
from tfmw_operator.kube import client as kube_module
from tfmw_operator.kube.client import Kube, LineSplitter, LineTooLong

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def split_all(chunks: list[bytes], limit: int = 1 << 30) -> list[bytes]:
    splitter = LineSplitter(limit)
    return [line for chunk in chunks for line in splitter.feed(chunk)]


# ---- the splitter: a pure function of the chunks ----


def test_lines_come_whole_however_the_chunks_cut_them() -> None:
    text = b'{"a":1}\n{"b":2}\n\n{"c":3}\n'
    expected = [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    for size in range(1, len(text) + 1):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert split_all(chunks) == expected, size


def test_a_line_not_ended_is_held_not_given() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b"one\ntw") == [b"one"]
    assert splitter.pending == 2
    assert splitter.feed(b"o") == []
    assert splitter.feed(b"\n") == [b"two"]
    assert splitter.pending == 0


def test_a_line_at_the_limit_passes_and_one_byte_more_is_refused_before_it_is_whole() -> None:
    assert split_all([b"x" * 5, b"x" * 5, b"\n"], limit=10) == [b"x" * 10]
    splitter = LineSplitter(10)
    splitter.feed(b"x" * 6)
    with pytest.raises(LineTooLong, match="above the limit of 10"):
        splitter.feed(b"x" * 5)  # no newline yet: refused as soon as it cannot fit
    assert splitter.pending == 0  # and nothing of it is kept
    with pytest.raises(LineTooLong):
        LineSplitter(10).feed(b"y" * 11 + b"\n")  # a whole line in one chunk too
    assert issubclass(LineTooLong, ValueError)  # the informer lists again on a ValueError


def test_a_large_line_in_small_chunks_costs_linear_time() -> None:
    """8 MiB in 1 KiB chunks: appending to one buffer copies ~32 GiB; joining once, 8 MiB."""
    line = json.dumps({"metadata": {"name": "big"}, "data": "x" * (8 << 20)}).encode()
    chunks = [line[i : i + 1024] for i in range(0, len(line), 1024)] + [b"\n"]
    started = time.monotonic()
    lines = split_all(chunks)
    elapsed = time.monotonic() - started
    assert lines == [line]
    assert elapsed < 2.0, f"{elapsed:.1f}s for one 8 MiB line"


# ---- the Kube client against a server on loopback ----


@asynccontextmanager
async def serving(path: str, handler: Handler) -> AsyncIterator[Kube]:
    app = web.Application()
    app.router.add_get(path, handler)
    async with kube_serving(app) as kube:
        yield kube


def chunked_stream(body: bytes, chunk: int, pause: float = 0.0) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            for i in range(0, len(body), chunk):
                await response.write(body[i : i + chunk])
                if pause:
                    await asyncio.sleep(pause)
            await response.write_eof()
        except ConnectionError:  # the client hung up, as it may
            pass
        return response

    return handler


def test_watch_events_arrive_whole_from_a_chunked_stream() -> None:
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}, "pad": "z" * (i * 997)}}
        for i in range(60)
    ]
    body = b"".join(json.dumps(e).encode() + b"\n" for e in events)

    async def scenario() -> list[bytes]:
        async with serving("/api/v1/pods", chunked_stream(body, 1000)) as kube:
            return [line async for line in kube.stream_lines("/api/v1/pods", {"watch": "true"})]

    lines = asyncio.run(scenario())
    assert [json.loads(line) for line in lines] == events


def test_a_watch_line_above_the_cap_ends_the_watch_with_a_clear_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    small = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "ok"}}}).encode() + b"\n"
    endless = b"{" + b'"x":"' + b"y" * (4 << 20)  # 4 MiB and no newline: never held whole
    seen: list[bytes] = []

    async def scenario() -> None:
        async with serving("/api/v1/pods", chunked_stream(small + endless, 64 * 1024)) as kube:
            async for line in kube.stream_lines("/api/v1/pods", {}, max_line_bytes=1 << 20):
                seen.append(line)

    with pytest.raises(LineTooLong):
        asyncio.run(scenario())
    assert seen == [small.rstrip(b"\n")]
    assert "watch of /api/v1/pods" in caplog.text and "above the limit of 1048576" in caplog.text


# ---- following a log: bounded by the grace period, not by a fixed minute ----

LOG_PATH = "/api/v1/namespaces/ns/pods/p/log"


def test_a_followed_log_is_read_to_its_end_within_the_grace_period(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scaled down: a 1 s floor (today's 60 s), a 1 s margin, a 3 s grace period; the
    container prints for about 2.5 s after the deletion and its last line is kept."""
    monkeypatch.setattr(kube_module, "LOG_TIMEOUT", aiohttp.ClientTimeout(total=1, sock_connect=5))
    monkeypatch.setattr(kube_module, "LOG_FOLLOW_MARGIN_SECONDS", 1)
    body = b"".join(f"line {i}\n".encode() for i in range(25))

    async def scenario() -> bytes:
        async with serving(LOG_PATH, chunked_stream(body, 7, pause=0.1)) as kube:
            return await kube.container_log("ns", "p", "tf", 1 << 20, follow=True, grace_seconds=3)

    text = asyncio.run(scenario())
    assert text.endswith(b"line 24\n"), text[-40:]


def test_a_followed_log_stops_at_grace_plus_margin_and_keeps_what_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kube_module, "LOG_TIMEOUT", aiohttp.ClientTimeout(total=1, sock_connect=5))
    monkeypatch.setattr(kube_module, "LOG_FOLLOW_MARGIN_SECONDS", 1)
    body = b"".join(f"line {i}\n".encode() for i in range(1000))  # would take 100 s

    async def scenario() -> tuple[bytes, float]:
        async with serving(LOG_PATH, chunked_stream(body, 8, pause=0.1)) as kube:
            started = time.monotonic()
            text = await kube.container_log("ns", "p", "tf", 1 << 20, follow=True, grace_seconds=1)
            return text, time.monotonic() - started

    text, elapsed = asyncio.run(scenario())
    assert 1.5 < elapsed < 4, elapsed  # grace 1 s + margin 1 s
    assert text.startswith(b"line 0\n")


def test_without_a_grace_period_the_follow_keeps_todays_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_module, "LOG_TIMEOUT", aiohttp.ClientTimeout(total=1, sock_connect=5))
    body = b"".join(f"line {i}\n".encode() for i in range(1000))

    async def scenario() -> float:
        async with serving(LOG_PATH, chunked_stream(body, 8, pause=0.1)) as kube:
            started = time.monotonic()
            await kube.container_log("ns", "p", "tf", 1 << 20, follow=True)
            return time.monotonic() - started

    assert asyncio.run(scenario()) < 2.5


def test_the_byte_limit_still_keeps_only_the_tail() -> None:
    body = b"".join(f"line {i:04}\n".encode() for i in range(2000))

    async def scenario() -> bytes:
        async with serving(LOG_PATH, chunked_stream(body, 4096)) as kube:
            return await kube.container_log("ns", "p", "tf", 100, follow=True, grace_seconds=5)

    text = asyncio.run(scenario())
    assert len(text) == 100 and text.endswith(b"line 1999\n")


def test_a_log_that_is_not_utf8_is_kept_byte_for_byte() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, most of it not UTF-8

    async def scenario() -> bytes:
        async with serving(LOG_PATH, chunked_stream(body, 65536)) as kube:
            return await kube.container_log("ns", "p", "tf", 4 << 20)

    assert asyncio.run(scenario()) == body


def test_a_job_past_its_ttl_is_deleted_only_if_it_is_still_the_one_observed() -> None:
    """A newer job of the same name, made while the view lagged, must survive: the deletion
    carries the observed UID, and the server's 409 for another UID means that job is gone."""
    bodies: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        if body["preconditions"]["uid"] != "new":
            return web.json_response({"kind": "Status", "code": 409, "reason": "Conflict"}, status=409)
        return web.json_response({"kind": "Status", "status": "Success"})

    async def scenario() -> None:
        app = web.Application()
        app.router.add_delete("/apis/tfmw.dev/v1alpha1/namespaces/ns/tfmwjobs/job", handler)
        async with kube_serving(app) as kube:
            await kube.delete_job("ns", "job", "old")  # the newer one is spared, and no error
            await kube.delete_job("ns", "job", "new")

    asyncio.run(scenario())
    assert [b["preconditions"] for b in bodies] == [{"uid": "old"}, {"uid": "new"}]
    assert all(b["propagationPolicy"] == "Background" for b in bodies)
