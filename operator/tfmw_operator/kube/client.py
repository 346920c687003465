"""Asynchronous access to the API server: plain JSON over one aiohttp session.

No client library models and no threads: a request is a coroutine on the event loop,
and a response is the API server's JSON as dicts. Every request carries a timeout, so
a half-open connection costs one reconcile a retry, never a job for ever.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import AsyncIterator, Callable

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
JOB_UIDS_PAGE = 500  # jobs' metadata per page of list_job_uids
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
Login = Callable[[], kopf.ConnectionInfo]


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


def _jobs(kind: JobKind) -> str:
    return f"/apis/{kind.group}/{kind.version}"


def _path(namespace: str, resource: str, name: str = "", prefix: str = "/api/v1") -> str:
    path = f"{prefix}/namespaces/{namespace}/{resource}"
    return f"{path}/{name}" if name else path


class Kube:
    """The calls the operator makes, each a coroutine with a deadline."""

    def __init__(self, credentials: kopf.ConnectionInfo, relogin: Login = connection_info) -> None:
        self._relogin = relogin
        self._slots = FairSlots(REQUESTS_AT_ONCE)
        self._connect(credentials)

    def _connect(self, credentials: kopf.ConnectionInfo) -> None:
        self.server = credentials.server.rstrip("/")
        ssl = credentials.as_ssl_context()
        headers = {**credentials.as_http_headers(), "Accept": "application/json", "User-Agent": "tfmw"}
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTION_POOL_SIZE, ssl=ssl), headers=headers
        )
        unlimited = aiohttp.TCPConnector(limit=0, ssl=ssl)
        self.streams = aiohttp.ClientSession(connector=unlimited, headers=headers)

    async def close(self) -> None:
        await self.session.close()
        await self.streams.close()

    async def _renew_credentials(self) -> None:
        """A 401: the service account token was rotated; read it again, once."""
        credentials = await asyncio.to_thread(self._relogin)
        old = (self.session, self.streams)
        self._connect(credentials)
        for session in old:
            await session.close()

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
        namespace = namespace_of_path(path)
        for attempt in (1, 2):
            data = None if body is None else json.dumps(body, separators=(",", ":"))
            headers = {"Content-Type": content_type} if data is not None else {}
            if accept is not None:
                headers["Accept"] = accept
            async with (
                self._slots.held(namespace),
                self.session.request(
                    method, self.server + path, params=params, data=data, headers=headers, timeout=timeout
                ) as response,
            ):
                raw = await response.read()
                if response.status == 401 and attempt == 1:
                    await self._renew_credentials()
                    continue
                if response.status >= 400:
                    raise ApiError(response.status, response.reason or "", raw)
                decoded: Json = json.loads(raw) if raw else {}
                return decoded
        raise AssertionError("unreachable")

    async def stream_lines(
        self, path: str, params: dict[str, str], max_line_bytes: int = MAX_WATCH_LINE_BYTES
    ) -> AsyncIterator[bytes]:
        """The lines of a watch; ends when the server closes it.

        Raises LineTooLong (a ValueError), and drops the connection, on a line above
        `max_line_bytes`: it is never held whole.
        """
        async with self.streams.get(self.server + path, params=params, timeout=WATCH_TIMEOUT) as response:
            if response.status == 401:
                await self._renew_credentials()
            if response.status >= 400:
                raise ApiError(response.status, response.reason or "", await response.read())
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
        params = {"limit": str(page)}
        while True:
            listed = await self.request("GET", path, params=params, accept=METADATA_LIST)
            for item in listed.get("items") or []:
                meta = item.get("metadata") or {}
                found[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = str(
                    meta.get("uid") or ""
                )
            token = (listed.get("metadata") or {}).get("continue")
            if not token:
                return found
            params = {"limit": str(page), "continue": str(token)}

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
        listed = await self._get(_path(namespace, WORKLOADS, prefix=f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}"))
        return [item["metadata"]["name"] for item in (listed or {}).get("items") or []]

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
        url = self.server + _path(namespace, "pods", pod) + "/log"
        try:
            async with self.streams.get(url, params=params, timeout=timeout) as response:
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


class LogUnavailable(Exception):
    """A container's log could not be read: `status` the API server's (0: no answer)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.tries = 1  # how many times it was asked, by whoever asked again


__all__ = ["ApiError", "Kube", "LineSplitter", "LineTooLong", "LogUnavailable", "connection_info"]
