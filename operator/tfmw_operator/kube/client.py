"""Asynchronous access to the API server: plain JSON over one aiohttp session.

No client library models and no threads: a request is a coroutine on the event loop,
and a response is the API server's JSON as dicts. Every request carries a timeout, so
a half-open connection costs one reconcile a retry, never a job for ever.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import aiohttp
import kopf

from tfmw_operator.api.kinds import TFMW_JOBS, JobKind
from tfmw_operator.api.objects import Json
from tfmw_operator.kube.fair import FairSlots, namespace_of_path

MERGE_PATCH = "application/merge-patch+json"
logger = logging.getLogger(__name__)
# Few connections, kept busy: more only make the API server juggle, and each TLS connection
# costs memory (docs/benchmarks.md, "The measurements behind the code"). Watches and log streams, which
# hold a connection for minutes, have a session of their own with no limit.
CONNECTION_POOL_SIZE = 8
# Requests beyond this wait for a slot before aiohttp builds them: each request waiting inside
# aiohttp for a connection holds memory, and a large cleanup sends thousands at once
# (docs/benchmarks.md, "The measurements behind the code"). Twice the pool keeps it fed. The
# slots go to namespaces in turn (fair.py): one tenant's thousand jobs never queue another's
# requests behind theirs.
REQUESTS_AT_ONCE = 2 * CONNECTION_POOL_SIZE
JOB_UIDS_PAGE = 500  # jobs' metadata (and Workloads) per page of list_job_uids (list_workload_names)
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=5)
LOG_TIMEOUT = aiohttp.ClientTimeout(total=60, sock_connect=5)
# A followed log lasts as long as the container: the grace period of its deletion, then
# the kubelet kills it. The margin covers the kubelet seeing the deletion and the stream's
# end reaching us; LOG_TIMEOUT stays the floor.
LOG_FOLLOW_MARGIN_SECONDS = 30
# A watch line is one event: one object as JSON. etcd stores no object above 1.5 MiB (its
# --max-request-bytes), so no real event comes near this cap; a line that does is refused,
# not buffered, so no object (any user can label a pod tfmw.dev/job-name) takes the memory.
MAX_WATCH_LINE_BYTES = 16 * 1024 * 1024
# A watch ends on the server's side after WATCH_SECONDS; a silent one is given up sooner
# than it could be alive (bookmarks come about once a minute).
WATCH_SECONDS = 300
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=WATCH_SECONDS + 30)
KUEUE_GROUP, KUEUE_VERSION, WORKLOADS = "kueue.x-k8s.io", "v1beta2", "workloads"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
# A LIST page is read up to this many bytes; one above it is given up as it comes and asked
# for again with fewer items (Kube.list_pages), down to one. The claims view lists every
# claim in the cluster, and any tenant can label a pod tfmw.dev/job-name: objects of up to
# etcd's 1.5 MiB, 500 to a page. One LIST of 500 claims with 256 KiB of annotations each
# took the operator from 61 to 437 MiB of the chart's 512Mi (of 1.4 MiB each, to 2,117);
# with this cap, to 69 (docs/benchmarks.md, "The measurements behind the code"). A page is
# held as text while it is decoded, joined once: 8 MiB (32 for text beyond Latin-1), a few
# ms of the loop to join. 500 pods as tfmw makes them are far below (8,000 pods at 2.8 KiB
# each: 1.4 MiB a page); a large job's pods (TF_CONFIG up to 128 KiB) come ~30 to a page.
MAX_LIST_PAGE_BYTES = 8 * 1024 * 1024
# A list whose pages never end (a server that hands out a new continue token every page) is
# cut off; 10,000 pages of 500 is far beyond any cluster (the CLI's bound too).
MAX_LIST_PAGES = 10_000
# A page is decoded one item at a time, and the loop gets control back this often: decoding
# a 22 MiB page whole blocked it 326 ms. A thread would not help: json's decoder holds the
# GIL throughout (asyncio.to_thread(json.loads) of an 11 MiB page blocked the loop 142 ms of
# its 150). Item by item, 8,000 pods list in half the CPU (most of the saving the
# collector's passes over a whole page decoded at once).
DECODE_SLICE_SECONDS = 0.005
ERROR_BODY_BYTES = 64 * 1024  # of an error answer kept for its message; a Status is far smaller
Login = Callable[[], kopf.ConnectionInfo]
T = TypeVar("T")


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, body: bytes | str = b"") -> None:
        self.status = status
        self.reason = reason
        self.body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        super().__init__(f"{status} {reason}: {self.message}")

    @property
    def message(self) -> str:
        """The API server's own words, e.g. which field it refused."""
        try:
            parsed = json.loads(self.body)
        except ValueError:
            return self.body[:500] or self.reason
        message = parsed.get("message") if isinstance(parsed, dict) else None
        return str(message) if message else self.reason

    @property
    def namespace_terminating(self) -> bool:
        """Creating in a namespace being deleted is pointless, not an error: the job goes too
        (a 404 on a create says the same of a namespace already gone)."""
        return self.status == 403 and "NamespaceTerminating" in self.body


class LineTooLong(ValueError):
    """A watch line above the cap. A ValueError like any malformed event: the informer
    gives the watch up and lists again."""


class PageTooLarge(ValueError):
    """A LIST page above the byte cap, given up as soon as that was known; `size` its
    Content-Length when the server said it."""

    def __init__(self, message: str, size: int | None = None) -> None:
        super().__init__(message)
        self.size = size


class ListFailed(ValueError):
    """A LIST that cannot be completed as answered: pages that never end, or a page of one
    item above the byte cap. The informer tries again later."""


class LineSplitter:
    """A byte stream cut into its non-empty lines, each byte copied at most twice.

    Chunks of a line not yet ended are kept as a list and joined once, when its newline
    comes: linear in the line's size (appending chunk by chunk to one buffer is quadratic).
    A line longer than `max_line_bytes` raises LineTooLong as soon as it is known to be.
    """

    def __init__(self, max_line_bytes: int = MAX_WATCH_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._parts: list[bytes] = []
        self.pending = 0  # bytes of the line not yet ended

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._check(end - start)
            if self._parts:
                self._parts.append(chunk[start:end])
                line = b"".join(self._parts)
                self._parts, self.pending = [], 0
            else:
                line = chunk[start:end]
            if line:
                lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._check(len(chunk) - start)
            self._parts.append(chunk[start:])
            self.pending += len(chunk) - start
        return lines

    def _check(self, more: int) -> None:
        size = self.pending + more
        if size > self.max_line_bytes:
            self._parts, self.pending = [], 0
            raise LineTooLong(
                f"a line of more than {size} bytes, above the limit of {self.max_line_bytes}: refused"
            )


def connection_info() -> kopf.ConnectionInfo:
    """In a pod its service account, elsewhere $KUBECONFIG as it is now."""
    settings = kopf.OperatorSettings()
    credentials = kopf.login_with_service_account(
        logger=logger, settings=settings
    ) or kopf.login_with_kubeconfig(logger=logger, settings=settings)
    if credentials is None:
        raise RuntimeError("no credentials: not in a pod, and no usable $KUBECONFIG")
    return credentials


def _metadata(obj: Json) -> Json:
    """An object's metadata; {} when it has none, or what it has is not an object."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _jobs(kind: JobKind) -> str:
    return f"/apis/{kind.group}/{kind.version}"


def _path(namespace: str, resource: str, name: str = "", prefix: str = "/api/v1") -> str:
    path = f"{prefix}/namespaces/{namespace}/{resource}"
    return f"{path}/{name}" if name else path


_WHITESPACE = re.compile(r"[ \t\n\r]*")
# json's C scanner: the JSON value starting at an index, and the index after it (what
# json.loads runs on the whole text; set in JSONDecoder.__init__, unknown to typeshed).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _skip(text: str, at: int) -> int:
    """The index of the first character at or after `at` that is not JSON whitespace."""
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at


def _scan(text: str, at: int) -> tuple[Any, int]:
    """The JSON value at `at`, and the index after it."""
    try:
        return _SCAN(text, at)
    except StopIteration as stop:  # the scanner's way of saying no value starts there
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None


def _expect(text: str, at: int, char: str) -> int:
    """The index after `char` at `at` (and the whitespace after it)."""
    if text[at : at + 1] != char:
        raise json.JSONDecodeError(f"Expecting {char!r}", text, at)
    return _skip(text, at + 1)


def list_members(text: str) -> Iterator[tuple[str, Any]]:
    """The members of a JSON object (a LIST's answer) in order, its "items" array given one
    element at a time as ("items", element): the page is never decoded whole, so whoever
    reads it can give the loop back between items. A ValueError where it is not JSON."""
    at = _expect(text, _skip(text, 0), "{")
    if text[at : at + 1] == "}":
        at += 1
    else:
        while True:
            if text[at : at + 1] != '"':
                raise json.JSONDecodeError("Expecting a member's name", text, at)
            key, at = _scan(text, at)
            at = _expect(text, _skip(text, at), ":")
            if key == "items" and text[at : at + 1] == "[":
                at = _skip(text, at + 1)
                if text[at : at + 1] == "]":
                    at += 1
                else:
                    while True:
                        item, at = _scan(text, at)
                        yield key, item
                        at = _skip(text, at)
                        if text[at : at + 1] == "]":
                            at += 1
                            break
                        at = _expect(text, at, ",")
            else:
                value, at = _scan(text, at)
                yield key, value
            at = _skip(text, at)
            if text[at : at + 1] == "}":
                at += 1
                break
            at = _expect(text, at, ",")
    if _skip(text, at) != len(text):
        raise json.JSONDecodeError("Extra data", text, at)


async def decode_list(text: str, each: Callable[[Json], None]) -> Json:
    """Each item of a LIST's answer given to `each` as it is decoded, the event loop given
    back every DECODE_SLICE_SECONDS; returns the list's metadata. Items that are not objects
    are left out."""
    meta: Json = {}
    slice_ends = time.perf_counter() + DECODE_SLICE_SECONDS
    for key, value in list_members(text):
        if key == "items":
            if isinstance(value, dict):
                each(value)
        elif key == "metadata" and isinstance(value, dict):
            meta = value
        if time.perf_counter() >= slice_ends:
            await asyncio.sleep(0)
            slice_ends = time.perf_counter() + DECODE_SLICE_SECONDS
    return meta


async def _error_body(response: aiohttp.ClientResponse) -> bytes:
    """The start of an error answer: enough for its message, never a body of any size."""
    parts: list[bytes] = []
    kept = 0
    async for chunk in response.content.iter_any():
        parts.append(chunk)
        kept += len(chunk)
        if kept >= ERROR_BODY_BYTES:
            break
    return b"".join(parts)[:ERROR_BODY_BYTES]


async def _raise_for_status(response: aiohttp.ClientResponse) -> None:
    if response.status >= 400:
        raise ApiError(response.status, response.reason or "", await _error_body(response))


async def _read_text(response: aiohttp.ClientResponse, max_bytes: int) -> str:
    """The whole body as text, read and decoded a chunk at a time as it comes (decoding or
    joining it as bytes at the end blocked the loop 25 ms for 16 MiB); PageTooLarge, and the
    connection dropped, as soon as it is known to be above `max_bytes` (by its Content-Length,
    or as it comes)."""
    await _raise_for_status(response)
    size = response.content_length
    if size is not None and size > max_bytes:
        response.close()
        raise PageTooLarge(f"its {size} bytes are above the limit of {max_bytes} bytes", size)
    utf8 = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    kept = 0
    async for chunk in response.content.iter_any():
        kept += len(chunk)
        if kept > max_bytes:
            response.close()
            raise PageTooLarge(f"more came than the limit of {max_bytes} bytes")
        parts.append(utf8.decode(chunk))
    parts.append(utf8.decode(b"", final=True))
    return "".join(parts)


def _fewer(limit: int, size: int | None, max_bytes: int) -> int:
    """How many items to ask for after a page of `limit` was above `max_bytes`: as many as
    fill half of it at the size per item the server said (Content-Length), else a quarter
    (a page of 500 comes down to one in four tries, not nine)."""
    if size:
        return max(1, min(limit // 2, limit * max_bytes // (2 * size)))
    return max(1, limit // 4)


class _Sessions:
    """The HTTP sessions of one set of credentials: requests and, apart, the streams (watches,
    logs), which hold a connection for minutes. Sessions replaced by newer credentials are
    closed only once nothing uses them: a watch open on them runs to its end."""

    def __init__(self, credentials: kopf.ConnectionInfo, generation: int) -> None:
        self.generation = generation
        self.server = credentials.server.rstrip("/")
        ssl = credentials.as_ssl_context()
        headers = {**credentials.as_http_headers(), "Accept": "application/json", "User-Agent": "tfmw"}
        self.requests = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTION_POOL_SIZE, ssl=ssl), headers=headers
        )
        unlimited = aiohttp.TCPConnector(limit=0, ssl=ssl)
        self.streams = aiohttp.ClientSession(connector=unlimited, headers=headers)
        self.users = 0  # requests and streams under way on these sessions
        self.retired = False

    async def close(self) -> None:
        await self.requests.close()
        await self.streams.close()


class Kube:
    """The calls the operator makes, each a coroutine with a deadline."""

    def __init__(self, credentials: kopf.ConnectionInfo, relogin: Login = connection_info) -> None:
        self._relogin = relogin
        self._slots = FairSlots(REQUESTS_AT_ONCE)
        self._renewing = asyncio.Lock()
        self._retired: set[_Sessions] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._sessions: _Sessions | None = None
        self._connect(credentials)

    @property
    def server(self) -> str:
        return self._current.server

    @property
    def _current(self) -> _Sessions:
        assert self._sessions is not None  # set in __init__
        return self._sessions

    def _connect(self, credentials: kopf.ConnectionInfo) -> None:
        """Use these credentials from now on; the sessions of the old ones are retired."""
        old = self._sessions
        self._sessions = _Sessions(credentials, 0 if old is None else old.generation + 1)
        if old is not None:
            old.retired = True
            self._retired.add(old)
            if not old.users:
                self._close_later(old)

    def _close_later(self, sessions: _Sessions) -> None:
        self._retired.discard(sessions)
        task = asyncio.get_running_loop().create_task(sessions.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @contextlib.asynccontextmanager
    async def _using(self) -> AsyncIterator[_Sessions]:
        """The current sessions, kept open (even once retired) until the block ends."""
        sessions = self._current
        sessions.users += 1
        try:
            yield sessions
        finally:
            sessions.users -= 1
            if sessions.retired and not sessions.users:
                self._close_later(sessions)

    async def close(self) -> None:
        for sessions in [self._current, *self._retired]:
            await sessions.close()
        self._retired.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _renew_credentials(self, refused: int) -> None:
        """A 401 on the sessions of generation `refused`: the service account token was rotated;
        read it again, once for every request refused with it. The old sessions stay open for
        whatever still uses them (a watch: till its end), then close (_using)."""
        async with self._renewing:
            if self._current.generation != refused:
                return  # renewed already, after another request's 401
            credentials = await asyncio.to_thread(self._relogin)  # reads files: not on the loop
            self._connect(credentials)
            logger.info("credentials read again after a 401")

    async def _exchange(
        self,
        method: str,
        path: str,
        read: Callable[[aiohttp.ClientResponse], Awaitable[T]],
        params: dict[str, str] | None = None,
        data: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: aiohttp.ClientTimeout = REQUEST_TIMEOUT,
    ) -> T:
        """One request, `read` making what is returned of its answer; sent again once after a
        401 with the credentials read again."""
        namespace = namespace_of_path(path)
        for attempt in (1, 2):
            async with (
                self._slots.held(namespace),
                self._using() as sessions,
                sessions.requests.request(
                    method, sessions.server + path, params=params, data=data, headers=headers, timeout=timeout
                ) as response,
            ):
                if response.status != 401 or attempt == 2:
                    return await read(response)
            await self._renew_credentials(sessions.generation)
        raise AssertionError("unreachable")

    async def request(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        body: Json | None = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout = REQUEST_TIMEOUT,
        accept: str | None = None,
    ) -> Json:
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        headers = {"Content-Type": content_type} if data is not None else {}
        if accept is not None:
            headers["Accept"] = accept

        async def read(response: aiohttp.ClientResponse) -> Json:
            await _raise_for_status(response)
            raw = await response.read()
            try:
                decoded = json.loads(raw) if raw else {}
            except (ValueError, RecursionError) as error:
                # A proxy's page, a cut answer: an ApiError, which every caller handles.
                raise ApiError(
                    response.status, f"the answer to {method} {path} is not JSON ({error})", raw[:500]
                ) from None
            if not isinstance(decoded, dict):
                raise ApiError(
                    response.status, f"the answer to {method} {path} is not a JSON object", raw[:500]
                )
            return decoded

        return await self._exchange(method, path, read, params, data, headers, timeout)

    async def list_pages(
        self,
        path: str,
        params: dict[str, str],
        each: Callable[[Json], None],
        page: int,
        accept: str | None = None,
        max_bytes: int | None = None,
    ) -> Json:
        """Every item of a LIST, `page` at a time, each given to `each` as it is decoded (no page
        is held decoded whole); returns the list's metadata (its resourceVersion).

        A page above `max_bytes` (MAX_LIST_PAGE_BYTES) is given up as it comes and asked for
        again with fewer items, down to one; after a page that came, as many as fill half of
        it at that page's size per item (at most `page`). ListFailed when one item is above it,
        when the answer is not JSON, or when the pages never end: a continue token repeated,
        or more than MAX_LIST_PAGES.
        """
        headers = {"Accept": accept} if accept is not None else None
        cap = max_bytes or MAX_LIST_PAGE_BYTES
        limit, token, seen, pages = page, "", set(), 0
        while True:
            query = {**params, "limit": str(limit), **({"continue": token} if token else {})}
            # One item alone is read up to what a watch line may be: the API server escapes `<`
            # and control characters six bytes each, so an object stored at etcd's 1.5 MB can
            # come as 9 MB, and any tenant can label a pod into the view (a hostile read of
            # b7ee25b: such a pod stopped every relist).
            room = cap if limit > 1 else max(cap, MAX_WATCH_LINE_BYTES)
            try:
                text = await self._exchange(
                    "GET", path, functools.partial(_read_text, max_bytes=room), query, headers=headers
                )
            except PageTooLarge as error:
                if limit == 1:
                    raise ListFailed(f"LIST of {path}: one item is above the limit of {room} bytes") from None
                fewer = _fewer(limit, error.size, cap)
                logger.warning(
                    "LIST of %s: a page of %d items is too large to hold: %s; asking for %d at a time",
                    path,
                    limit,
                    error,
                    fewer,
                )
                limit = fewer
                continue
            items = 0

            def counted(item: Json) -> None:
                nonlocal items
                items += 1
                each(item)

            try:
                meta = await decode_list(text, counted)
            except (ValueError, RecursionError) as error:
                raise ListFailed(f"LIST of {path}: the answer is not JSON ({error})") from None
            size = len(text)
            del text
            pages += 1
            token = meta.get("continue") or ""
            if not token:
                return meta
            if not isinstance(token, str) or token in seen:
                raise ListFailed(f"LIST of {path} repeats a page (its continue token): it would never end")
            if pages >= MAX_LIST_PAGES:
                raise ListFailed(f"LIST of {path} did not end after {MAX_LIST_PAGES} pages")
            seen.add(token)
            limit = max(1, min(page, items * cap // (2 * size))) if items else page

    async def stream_lines(
        self, path: str, params: dict[str, str], max_line_bytes: int = MAX_WATCH_LINE_BYTES
    ) -> AsyncIterator[bytes]:
        """The lines of a watch; ends when the server closes it. Opened again once after a 401,
        with the credentials read again.

        Raises LineTooLong (a ValueError), and drops the connection, on a line above
        `max_line_bytes`: it is never held whole.
        """
        for attempt in (1, 2):
            async with (
                self._using() as sessions,
                sessions.streams.get(
                    sessions.server + path, params=params, timeout=WATCH_TIMEOUT
                ) as response,
            ):
                if response.status != 401 or attempt == 2:
                    await _raise_for_status(response)
                    # Objects are larger than aiohttp's default line limit (a pod easily tops 64 KiB).
                    splitter = LineSplitter(max_line_bytes)
                    async for chunk in response.content.iter_any():
                        try:
                            lines = splitter.feed(chunk)
                        except LineTooLong as error:
                            logger.error("watch of %s: %s; giving the watch up", path, error)
                            raise
                        for line in lines:
                            yield line
                    return
            await self._renew_credentials(sessions.generation)

    async def _get(self, path: str) -> Json | None:
        """An object; None when it (or its resource type) does not exist."""
        try:
            return await self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def _delete(self, path: str, options: Json | None = None) -> Json | None:
        """The deleted object as the API server returned it; None when it was gone already."""
        try:
            return await self.request("DELETE", path, body=options)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def _create(self, path: str, body: Json, params: dict[str, str] | None = None) -> Json | None:
        """The created object; None when the namespace is being deleted or is gone."""
        try:
            return await self.request("POST", path, params=params, body=body)
        except ApiError as error:
            if error.namespace_terminating or error.status == 404:
                return None
            raise

    async def create_pod(self, namespace: str, pod: Json) -> Json | None:
        """Create a pod exactly as built; a field the API server does not know is refused.

        Returns the pod created, None when it existed already (created by an earlier
        reconcile that did not record it) or the namespace is going.
        """
        return await self._create_new(_path(namespace, "pods"), pod, {"fieldValidation": "Strict"})

    async def create_service(self, namespace: str, service: Json) -> Json | None:
        """The Service created; None when one of that name exists (ours or a namesake)."""
        return await self._create_new(_path(namespace, "services"), service)

    async def _create_new(self, path: str, body: Json, params: dict[str, str] | None = None) -> Json | None:
        """Create; None when one of that name exists already (or the namespace is going)."""
        try:
            return await self._create(path, body, params)
        except ApiError as error:
            if error.status == 409:
                return None
            raise

    async def get_service(self, namespace: str, name: str) -> Json | None:
        return await self._get(_path(namespace, "services", name))

    async def delete_pod(
        self, namespace: str, name: str, uid: str, grace_seconds: int | None = None
    ) -> Json | None:
        """Delete exactly the pod observed: a newer pod of the same name must survive.

        Returns the pod as the deletion left it (terminating), None once it is gone.
        """
        options: Json = {"preconditions": {"uid": uid}} if uid else {}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            deleted = await self._delete(_path(namespace, "pods", name), options or None)
        except ApiError as error:
            if error.status == 409:  # the precondition failed: that pod is already gone
                return None
            raise
        # A deletion may also come back as a Status, not as a pod.
        return deleted if deleted is not None and deleted.get("kind") == "Pod" else None

    async def patch_job_status(
        self, namespace: str, name: str, status: Json, resource_version: str, kind: JobKind = TFMW_JOBS
    ) -> Json:
        """Patch the status only if the job is still as read: a stale writer gets a 409.
        Returns the job as patched."""
        body = {"metadata": {"resourceVersion": resource_version}, "status": status}
        path = _path(namespace, kind.plural, name, _jobs(kind)) + "/status"
        return await self.request("PATCH", path, body=body, content_type=MERGE_PATCH)

    async def patch_job_metadata(
        self, namespace: str, name: str, metadata: Json, resource_version: str, kind: JobKind
    ) -> Json:
        """Merge `metadata` into the job's (an annotation), only if the job is still as read."""
        body = {"metadata": {**metadata, "resourceVersion": resource_version}}
        return await self.request(
            "PATCH", _path(namespace, kind.plural, name, _jobs(kind)), body=body, content_type=MERGE_PATCH
        )

    async def get_job(self, namespace: str, name: str, kind: JobKind = TFMW_JOBS) -> Json | None:
        """The job as it is now, None when there is none; by a LIST, which the operator may
        do (it watches jobs), where it has no need to GET."""
        found = await self.request(
            "GET",
            _path(namespace, kind.plural, "", _jobs(kind)),
            params={"fieldSelector": f"metadata.name={name}"},
        )
        items = found.get("items") or []
        if not items:
            return None
        job: Json = items[0]
        job.setdefault("apiVersion", f"{kind.group}/{kind.version}")
        job.setdefault("kind", kind.kind)
        return job

    async def list_job_uids(
        self, namespace: str = "", kind: JobKind = TFMW_JOBS, page: int = JOB_UIDS_PAGE
    ) -> dict[tuple[str, str], str]:
        """Every job's UID by (namespace, name), in one namespace or all: metadata only, a page
        at a time (a job's annotations may be 256 KiB each: one answer of them all could
        outlast its timeout, and be held whole)."""
        jobs = _jobs(kind)
        path = _path(namespace, kind.plural, "", jobs) if namespace else f"{jobs}/{kind.plural}"
        found = {}

        def each(item: Json) -> None:
            meta = _metadata(item)
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            found[key] = str(meta.get("uid") or "")

        await self.list_pages(path, {}, each, page, accept=METADATA_LIST)
        return found

    async def count_jobs(self, namespace: str = "", kind: JobKind = TFMW_JOBS) -> int | None:
        """How many jobs there are, in one namespace or all, from a list of one (its
        remainingItemCount); None when the server does not say."""
        jobs = _jobs(kind)
        path = _path(namespace, kind.plural, "", jobs) if namespace else f"{jobs}/{kind.plural}"
        listed = await self.request("GET", path, params={"limit": "1"}, accept=METADATA_LIST)
        meta = listed.get("metadata") or {}
        remaining = meta.get("remainingItemCount")
        if meta.get("continue") and not isinstance(remaining, int):
            return None
        return len(listed.get("items") or []) + (remaining if isinstance(remaining, int) else 0)

    async def delete_job(self, namespace: str, name: str, uid: str, kind: JobKind = TFMW_JOBS) -> None:
        """Delete exactly the job observed (its TTL passed): a newer job of the same name, made
        while the view lagged, must survive. A failed precondition means that job is gone."""
        options: Json = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        try:
            await self._delete(_path(namespace, kind.plural, name, _jobs(kind)), options)
        except ApiError as error:
            if error.status != 409:
                raise

    async def get_workload(self, namespace: str, name: str) -> Json | None:
        """A Kueue Workload; None when there is none (or Kueue is not installed)."""
        return await self._get(_path(namespace, WORKLOADS, name, f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}"))

    async def list_workload_names(self, namespace: str) -> list[str]:
        """The names of a namespace's Workloads; none when Kueue is not installed (404)."""
        names: list[str] = []

        def each(item: Json) -> None:
            name = _metadata(item).get("name")
            if isinstance(name, str) and name:
                names.append(name)

        path = _path(namespace, WORKLOADS, prefix=f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}")
        try:
            await self.list_pages(path, {}, each, JOB_UIDS_PAGE)
        except ApiError as error:
            if error.status == 404:
                return []
            raise
        return names

    async def delete_workload(self, namespace: str, name: str) -> None:
        path = _path(namespace, WORKLOADS, name, f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}")
        await self._delete(path, {"propagationPolicy": "Background"})

    async def post_event(self, namespace: str, event: Json) -> None:
        try:
            await self._create(_path(namespace, "events"), event)
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            # An Event is worth a log line, not a failed reconcile.
            logger.warning("could not post event %s in %s: %s", event.get("reason"), namespace, error)

    async def container_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        limit_bytes: int,
        follow: bool = False,
        grace_seconds: float | None = None,
    ) -> bytes:
        """The last `limit_bytes` of a container's log, as the bytes it printed (b"" when none);
        LogUnavailable when it cannot be read (the API server's refusal, or no answer at all:
        a kubelet restarting is not reached).

        With `follow`, reading goes on until the container ends, so a worker being stopped
        is read to its last line: for at most `grace_seconds` (the grace period the pod is
        being deleted with) plus LOG_FOLLOW_MARGIN_SECONDS, and never less than
        LOG_TIMEOUT's 60 s (all there is when `grace_seconds` is not given).
        """
        timeout = LOG_TIMEOUT
        if follow and grace_seconds is not None and LOG_TIMEOUT.total is not None:
            total = max(LOG_TIMEOUT.total, max(grace_seconds, 0) + LOG_FOLLOW_MARGIN_SECONDS)
            timeout = aiohttp.ClientTimeout(total=total, sock_connect=LOG_TIMEOUT.sock_connect)
        tail: collections.deque[bytes] = collections.deque()
        kept = 0
        params = {"container": container, "follow": "true" if follow else "false"}
        try:
            async with (
                self._using() as sessions,
                sessions.streams.get(
                    sessions.server + _path(namespace, "pods", pod) + "/log", params=params, timeout=timeout
                ) as response,
            ):
                if response.status >= 400:
                    error = ApiError(
                        response.status, response.reason or "", await response.content.read(4096)
                    )
                    raise LogUnavailable(error.status, str(error))
                async for chunk in response.content.iter_chunked(64 * 1024):
                    tail.append(chunk)
                    kept += len(chunk)
                    while kept - len(tail[0]) >= limit_bytes:
                        kept -= len(tail.popleft())
        except (aiohttp.ClientError, TimeoutError) as error:  # a dropped stream: keep what came
            if not tail:
                raise LogUnavailable(0, f"{type(error).__name__}: {error}") from error
            logger.warning("log of %s/%s [%s] cut short: %s", namespace, pod, container, error)
        # Kept as bytes: a byte limit may split a UTF-8 character, programs print any bytes
        # at all, and decoding them leniently would triple a log of non-UTF-8 output.
        return b"".join(tail)[-limit_bytes:]

    async def delete_exact_workload(self, namespace: str, name: str, uid: str) -> None:
        """Delete exactly the Workload read (its UID): one made since under that name, by
        someone else, must survive. A failed precondition means that Workload is gone."""
        path = _path(namespace, WORKLOADS, name, f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}")
        options: Json = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        try:
            await self._delete(path, options)
        except ApiError as error:
            if error.status != 409:
                raise


class LogUnavailable(Exception):
    """A container's log could not be read: `status` the API server's (0: no answer)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.tries = 1  # how many times it was asked, by whoever asked again


__all__ = [
    "ApiError",
    "Kube",
    "LineSplitter",
    "LineTooLong",
    "ListFailed",
    "LogUnavailable",
    "PageTooLarge",
    "connection_info",
    "decode_list",
    "list_members",
]
