"""Watch lines and followed logs, against a real HTTP server on loopback (no mocked client)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import kopf
import pytest
from aiohttp import web
from loopback import kube_serving
from tfmw_operator.kube import client as kube_module
from tfmw_operator.kube.client import ApiError, Kube, LineSplitter, LineTooLong

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


# ---- a 401: credentials read again once, and nothing in use is closed ----


@asynccontextmanager
async def serving_as(
    app: web.Application, token: str, relogin: Callable[[], kopf.ConnectionInfo]
) -> AsyncIterator[Kube]:
    """`app` on loopback, and a Kube that first sends `token` and reads `relogin` on a 401."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    kube = Kube(kopf.ConnectionInfo(server=url, token=token), relogin=relogin)
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()


def bookmarks(count: int, pause: float) -> Handler:
    """A watch that sends `count` bookmarks, `pause` apart, whatever its token."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        line = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1"}}}\n'
        try:
            for _ in range(count):
                await response.write(line)
                await asyncio.sleep(pause)
            await response.write_eof()
        except ConnectionError:
            pass
        return response

    return handler


def test_a_token_rotation_reads_the_credentials_once_and_cuts_no_request_or_watch() -> None:
    """Sixteen requests refused at once with the old token, and a watch open on it: one
    re-read, every request answered on its second try, the watch read to its end, and the
    old sessions closed once it ended."""
    relogins = 0
    url = ""

    def relogin() -> kopf.ConnectionInfo:
        nonlocal relogins
        relogins += 1
        time.sleep(0.05)  # reading the token file
        return kopf.ConnectionInfo(server=url, token="new")

    async def answer(request: web.Request) -> web.Response:
        await asyncio.sleep(0.1)  # all sixteen are under way before any is refused
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response({"n": request.match_info["n"]})

    async def scenario() -> tuple[list[Any], int, bool]:
        nonlocal url
        app = web.Application()
        app.router.add_get("/x/{n}", answer)
        app.router.add_get("/api/v1/pods", bookmarks(20, 0.05))
        async with serving_as(app, "old", relogin) as kube:
            url = kube.server
            old = getattr(kube, "_current", None)  # the sessions of the old token

            async def watch() -> int:
                return len([line async for line in kube.stream_lines("/api/v1/pods", {"watch": "true"})])

            watching = asyncio.create_task(watch())
            await asyncio.sleep(0.1)
            answers = await asyncio.gather(
                *(kube.request("GET", f"/x/{n}") for n in range(16)), return_exceptions=True
            )
            lines = await watching
            await asyncio.sleep(0.05)  # the old sessions' closing, once the watch let them go
            return answers, lines, old is not None and old.requests.closed and old.streams.closed

    answers, lines, old_closed = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert answers == [{"n": str(n)} for n in range(16)]
    assert relogins == 1
    assert lines == 20  # not cut by the renewal
    assert old_closed


def test_a_watch_refused_with_an_old_token_is_opened_again_with_the_new_one() -> None:
    tokens: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        tokens.append(request.headers.get("Authorization", ""))
        if tokens[-1] != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return await bookmarks(2, 0)(request)

    url = ""

    async def with_url() -> list[bytes]:
        nonlocal url  # the server's port is known only once it serves: the relogin reads it late
        app = web.Application()
        app.router.add_get("/api/v1/pods", handler)
        async with serving_as(app, "old", lambda: kopf.ConnectionInfo(server=url, token="new")) as kube:
            url = kube.server
            return [line async for line in kube.stream_lines("/api/v1/pods", {})]

    assert len(asyncio.run(with_url())) == 2
    assert tokens == ["Bearer old", "Bearer new"]


# ---- answers that are not what they should be ----


def test_a_2xx_answer_that_is_not_json_is_an_api_error_naming_the_path_and_an_event_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def proxy(request: web.Request) -> web.Response:
        return web.Response(status=201, body=b"<html>a proxy says hi</html>")

    async def scenario() -> None:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/ns/events", proxy)
        async with kube_serving(app) as kube:
            with pytest.raises(ApiError) as refused:
                await kube.request("POST", "/api/v1/namespaces/ns/events", body={})
            assert "/api/v1/namespaces/ns/events is not JSON" in str(refused.value)
            assert refused.value.status == 201
            await kube.post_event("ns", {"reason": "Started"})  # logged, not raised

    asyncio.run(scenario())
    assert "could not post event Started in ns" in caplog.text


# ---- LISTs: bounded pages, decoded without blocking the loop, and an end ----

Item = dict[str, Any]


def paged(items: list[Item], requests: list[dict[str, str]], content_length: bool = True) -> Handler:
    """A LIST as the API server serves it: `limit` items from the `continue` token on."""

    async def handler(request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        requests.append(query)
        limit = int(query.get("limit") or len(items))
        start = int(query.get("continue") or 0)
        meta: Item = {"resourceVersion": "77"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = json.dumps({"kind": "List", "metadata": meta, "items": items[start : start + limit]}).encode()
        if content_length:
            return web.Response(body=body, content_type="application/json")
        return await chunked_stream(body, 4096)(request)  # chunked: its size known only as it comes

    return handler


@pytest.mark.parametrize("content_length", [True, False])
def test_a_list_page_above_the_byte_cap_is_given_up_and_listed_again_smaller(
    content_length: bool, caplog: pytest.LogCaptureFixture
) -> None:
    items = [{"metadata": {"name": f"c{i}"}, "pad": "x" * 20_000} for i in range(40)]
    requests: list[dict[str, str]] = []
    got: list[str] = []

    async def scenario() -> Item:
        async with serving("/api/v1/persistentvolumeclaims", paged(items, requests, content_length)) as kube:
            return await kube.list_pages(
                "/api/v1/persistentvolumeclaims",
                {},
                lambda item: got.append(item["metadata"]["name"]),
                page=500,
                max_bytes=100_000,
            )

    meta = asyncio.run(scenario())
    assert got == [f"c{i}" for i in range(40)] and meta["resourceVersion"] == "77"
    limits = [int(r["limit"]) for r in requests]
    assert limits[0] == 500 and max(limits[-3:]) == 2, limits  # 2 of 20 KB: half the cap
    assert len(limits) < 40, limits
    assert "too large to hold" in caplog.text and "limit of 100000 bytes" in caplog.text


def test_a_list_item_alone_above_the_page_cap_is_read_as_a_watch_line_would_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An object the API server stores at 1.5 MB can come as 9 MB of JSON (`<` escaped six
    bytes each), and any tenant can label a pod into the view: alone, an item is read up to
    a watch line's cap (one such pod stopped every relist), and only beyond it fails."""
    items: list[dict[str, Any]] = [
        {"metadata": {"name": "huge"}, "pad": "x" * 200_000},
        {"metadata": {"name": "small"}},
    ]
    requests: list[dict[str, str]] = []
    listed: list[str] = []

    async def scenario() -> None:
        async with serving("/api/v1/pods", paged(items, requests, content_length=False)) as kube:
            await kube.list_pages(
                "/api/v1/pods",
                {},
                lambda item: listed.append(item["metadata"]["name"]),
                page=500,
                max_bytes=100_000,
            )

    asyncio.run(scenario())
    assert listed == ["huge", "small"]
    assert requests[0]["limit"] == "500" and "1" in [r["limit"] for r in requests]
    monkeypatch.setattr(kube_module, "MAX_WATCH_LINE_BYTES", 150_000)
    requests.clear()
    with pytest.raises(kube_module.ListFailed, match="one item is above the limit of 150000 bytes"):
        asyncio.run(scenario())
    assert requests[-1]["limit"] == "1"


def test_a_list_page_is_decoded_giving_the_loop_back() -> None:
    """Item by item, the loop runs every DECODE_SLICE_SECONDS; json.loads of the page (and
    asyncio.to_thread of it: the GIL) blocked it for the whole decode."""
    text = json.dumps({"metadata": {"resourceVersion": "9"}, "items": [{"a": list(range(50))}] * 40_000})
    seen = 0

    def each(item: Item) -> None:
        nonlocal seen
        seen += 1

    async def scenario() -> tuple[float, float, Item]:
        gaps: list[float] = []

        async def ticker() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        began = time.perf_counter()
        meta = await kube_module.decode_list(text, each)
        took = time.perf_counter() - began
        ticking.cancel()
        return took, max(gaps), meta

    took, longest, meta = asyncio.run(scenario())
    assert seen == 40_000 and meta == {"resourceVersion": "9"}
    assert longest < max(0.05, took / 4), (longest, took)


def test_list_members_reads_what_json_reads_and_refuses_what_it_refuses() -> None:
    for text in ["{}", ' {"items": null} ', '{"a": [1, {"b": 2}], "items": [1, {"c": []}, "s"], "z": {}}\n']:
        decoded = json.loads(text)
        members = list(kube_module.list_members(text))
        items = [value for key, value in members if key == "items"]
        rest = {key: value for key, value in members if key != "items"}
        if isinstance(decoded.get("items"), list):
            rest["items"] = items
        elif "items" in decoded:
            rest["items"] = items[0]
        assert rest == decoded, text
    for bad in [
        "",
        "[]",
        "null",
        '{"items": [1,]}',
        '{"items": [1 2]}',
        '{"a": 1} x',
        '{"a" 1}',
        '{"items": [',
    ]:
        with pytest.raises(ValueError):
            list(kube_module.list_members(bad))


def test_a_list_whose_server_repeats_its_continue_token_ends_with_an_error() -> None:
    requests = 0

    async def endless(request: web.Request) -> web.Response:
        nonlocal requests
        requests += 1
        return web.json_response({"metadata": {"continue": "same"}, "items": [{"metadata": {"name": "x"}}]})

    async def scenario() -> None:
        async with serving("/api/v1/pods", endless) as kube:
            await asyncio.wait_for(kube.list_pages("/api/v1/pods", {}, lambda item: None, page=500), 5)

    with pytest.raises(kube_module.ListFailed, match="repeats a page"):
        asyncio.run(scenario())
    assert requests == 2


def test_a_list_whose_pages_never_end_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_module, "MAX_LIST_PAGES", 5, raising=False)
    requests = 0

    async def endless(request: web.Request) -> web.Response:
        nonlocal requests
        requests += 1
        return web.json_response({"metadata": {"continue": f"t{requests}"}, "items": []})

    async def scenario() -> dict[tuple[str, str], str]:
        app = web.Application()
        app.router.add_get("/apis/tfmw.dev/v1alpha1/tfmwjobs", endless)
        async with kube_serving(app) as kube:
            return await asyncio.wait_for(kube.list_job_uids(), 5)

    with pytest.raises(kube_module.ListFailed, match="did not end after 5 pages"):
        asyncio.run(scenario())
    assert requests == 5
