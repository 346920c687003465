"""HTTP to the API server with the standard library alone, for a connection with no proxy.

Why not the official REST client here: its import (urllib3 and with it `email`'s parser,
`importlib.metadata`, `typing_extensions`, `dataclasses`) took longer than all of
`kubectl get`, so `tfmw get` could not start as fast as kubectl (docs/benchmarks.md, "The
CLI's start time"). `http.client` over `ssl` does what tfmw asks of it: a request with a
timeout, TLS verified as urllib3 verifies it (the kubeconfig's CA or the system's, the host
name or `tls-server-name`, a client certificate), kept-alive connections, a response read
whole or as it comes. A connection through a proxy keeps the official REST client
(tfmw_client.kube.Kube chooses); an `exec` plugin's, an auth provider's or a pod's service
account's official Configuration comes here as tfmw's own does.
tests/unit/client/test_transport.py runs the same requests through both.

Where it differs from urllib3: a redirect is not followed (the caller names its Location);
a number as the timeout bounds the connection and each read, not their sum.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import ssl
import threading
from collections.abc import Generator, Mapping
from typing import Any
from urllib.parse import urlsplit

Timeout = float | tuple[float, float | None] | None
# A kept-alive connection the server closed fails with one of these before any answer. An
# idle connection found closed is never used (`_take`); one closed while the request went
# out leaves unknown whether the server acted on it: sent again on a new connection only
# when doing it twice is harmless (GET, HEAD), as urllib3 does.
_DROPPED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
_IDEMPOTENT = frozenset({"GET", "HEAD"})


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

    def header(self, name: str) -> str:
        """A header of the answer ("" when absent)."""
        return str(self._reader.headers.get(name) or "")

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


def no_passphrase() -> str:
    raise TransportError(
        "the client key is encrypted: a kubeconfig's client-key must be unencrypted, as for kubectl"
    )


def tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS of a connection as the official REST client sets urllib3's: the CA given (as
    data or a file) or the system's, the host name checked unless verification is off, and
    the client certificate and key (an encrypted key is refused, never asked for on the
    terminal)."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None, cadata=configuration.ca_cert_data or None
    )
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None, no_passphrase)
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
        # A name ending in a dot is the same name (urllib3 strips it too).
        self._server_name = (configuration.tls_server_name or parts.hostname).rstrip(".")
        self._context = tls_context(configuration) if self._https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return _Connection(self._host, self._port, self._context, self._server_name)
        return http.client.HTTPConnection(self._host, self._port)

    def _take(self) -> http.client.HTTPConnection:
        """An idle connection still open, else a new one. An idle connection the server
        closed (its idle timeout, a load balancer's) reads as ready: it is dropped."""
        while True:
            with self._lock:
                if not self._idle:
                    return self._new()
                connection = self._idle.pop()
            sock = connection.sock
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return connection
            connection.close()

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
        connection = self._take()
        for attempt in (0, 1):
            reused = connection.sock is not None
            try:
                connection.timeout = connect
                if not reused:
                    connection.connect()
                connection.sock.settimeout(read)
                connection.request(method, self._prefix + target, body=data, headers=dict(headers))
                response = connection.getresponse()
            except _DROPPED as error:
                connection.close()
                if reused and attempt == 0 and method in _IDEMPOTENT:
                    connection = self._new()
                    continue
                why = str(error) or type(error).__name__
                if method not in _IDEMPOTENT:  # it went out: the server may have acted on it
                    why += f" (the {method} may have been carried out: look before trying again)"
                raise TransportError(why) from None
            except (OSError, http.client.HTTPException) as error:  # ssl.SSLError is an OSError
                connection.close()
                if isinstance(error, socket.timeout):
                    raise TransportError(f"no answer within {read or connect} s") from None
                raise TransportError(str(error) or type(error).__name__) from None
            except ValueError as error:  # a header that cannot be sent (a token with a newline)
                connection.close()
                raise TransportError(f"the request cannot be sent: {error}") from None
            return Response(response.status, response, lambda c=connection, r=response: self._keep(c, r))
        raise AssertionError("unreachable")  # the loop returns or raises

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
