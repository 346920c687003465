"""HTTP to the API server with the standard library alone, for a connection with no proxy.

Why not the official REST client here: its import (urllib3 and with it `email`'s parser,
`importlib.metadata`, `typing_extensions`, `dataclasses`) took longer than all of
`kubectl get`, so `tfmw get` could not start as fast as kubectl (docs/benchmarks.md, "The
CLI's start time"). `http.client` over `ssl` does what tfmw asks of it: a request with a
timeout, TLS verified as urllib3 verifies it (the kubeconfig's CA or the system's, the host
name or `tls-server-name`, a client certificate), kept-alive connections, a response read
whole or as it comes. A connection through a proxy, an `exec` plugin's or auth provider's
Configuration keep the official REST client (tfmw_client.kube.Kube chooses);
tests/unit/client/test_transport.py runs the same requests through both.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Generator, Mapping
from typing import Any
from urllib.parse import urlsplit

Timeout = float | tuple[float, float | None] | None
# A kept-alive connection the server closed while idle fails at once with one of these,
# before any answer: the request is sent again once, on a new connection (urllib3 retries too).
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class TransportError(Exception):
    """The server could not be reached or did not answer (no HTTP status)."""


class Response:
    """An answer's status and body, read whole (`data`) or as it comes (`chunks`)."""

    def __init__(
        self, status: int, reader: Any, release: Any = None, errors: tuple[type[Exception], ...] = ()
    ) -> None:
        self.status = status
        self._reader = reader  # read() and read1(n), as http.client's and urllib3's responses
        self._release = release
        self._errors: tuple[type[Exception], ...] = (OSError, http.client.HTTPException, *errors)
        self._data: bytes | None = None

    @property
    def data(self) -> bytes:
        if self._data is None:
            try:
                self._data = bytes(self._reader.read())
            except self._errors as error:
                raise TransportError(f"the answer was cut off: {error}") from None
            finally:
                self.close()
        return self._data

    def chunks(self, size: int = 4096) -> Generator[bytes, None, None]:
        """The body as it arrives, `size` bytes at most at a time, until it ends."""
        try:
            while True:
                try:
                    chunk = self._reader.read1(size)
                except self._errors as error:
                    raise TransportError(f"the answer was cut off: {error}") from None
                if not chunk:
                    return
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class _Connection(http.client.HTTPSConnection):
    """HTTPS whose certificate is checked against `server_name` (a kubeconfig's
    tls-server-name) rather than the host connected to, as urllib3's `server_hostname`."""

    def __init__(self, host: str, port: int | None, context: ssl.SSLContext, server_name: str) -> None:
        super().__init__(host, port, context=context)
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)  # type: ignore[attr-defined]


def tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS of a connection as the official REST client sets urllib3's: the CA given (as
    data or a file) or the system's, the host name checked unless verification is off, and
    the client certificate and key."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None, cadata=configuration.ca_cert_data or None
    )
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


class Transport:
    """Requests to one server, on kept-alive connections: one per request at a time (a
    thread following a log holds its own), kept for the next when the answer was read."""

    def __init__(self, configuration: Any) -> None:
        parts = urlsplit(configuration.host)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError(f"the server {configuration.host!r} is not an http or https URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")  # a server below a path (a proxying gateway)
        self._server_name = configuration.tls_server_name or parts.hostname
        self._context = tls_context(configuration) if self._https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return _Connection(self._host, self._port, self._context, self._server_name)
        return http.client.HTTPConnection(self._host, self._port)

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _keep(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
        if response.will_close or not response.isclosed():
            connection.close()
            return
        with self._lock:
            self._idle.append(connection)

    def request(
        self, method: str, target: str, headers: Mapping[str, str], body: Any, timeout: Timeout
    ) -> Response:
        """`target`: the path and query; `body`: sent as JSON unless None. `timeout`: seconds
        for the connection and each read, or (connect, read) where a read of None waits as
        long as the answer takes."""
        data = None if body is None else json.dumps(body).encode()
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        for attempt in (0, 1):
            connection, reused = self._take()
            try:
                connection.timeout = connect
                if connection.sock is None:
                    connection.connect()
                connection.sock.settimeout(read)
                connection.request(method, self._prefix + target, body=data, headers=dict(headers))
                response = connection.getresponse()
            except _STALE as error:
                connection.close()
                if reused and attempt == 0:
                    continue
                raise TransportError(str(error) or type(error).__name__) from None
            except (OSError, http.client.HTTPException, ssl.SSLError) as error:
                connection.close()
                if isinstance(error, socket.timeout):
                    raise TransportError(f"no answer within {read or connect} s") from None
                raise TransportError(str(error) or type(error).__name__) from None
            return Response(response.status, response, lambda c=connection, r=response: self._keep(c, r))
        raise AssertionError("unreachable")  # the loop returns or raises

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
