"""The operator's health, served from the first moment, by a standby replica too.

`/healthz` (liveness) fails once anything the operator cannot work without has died: the
lease elector, a pod or Service watch, the marker watcher, an Event poster, the job
audit. The kubelet then replaces the pod. `/readyz` also waits for the operator to have
started and its watches to have listed everything, or for a standby to be waiting for
the lease.
"""

from __future__ import annotations

import collections
import contextlib
import http.server
import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

# A check returns None while all is well, else what is wrong.
Check = Callable[[], str | None]
# Each connection has a thread of its own. A probe sends its request at once and is answered
# in milliseconds: a connection silent this long (on any read or write) is closed, and its
# thread ends. Without it, an idle or half-sent request held a thread for ever.
HANDLER_TIMEOUT_SECONDS = 5.0
# Connections served at once. Beyond it the oldest is closed, not the newest refused: a
# flood of idle connections then costs the flood its own, while a probe, whose request comes
# with its connection, is still answered (refusing new ones would fail the kubelet's probes,
# and have it restart the operator for as long as the flood lasts).
MAX_HANDLERS = 32


class _HealthServer(http.server.ThreadingHTTPServer):
    """A thread per connection, at most `max_handlers` of them: one more closes the oldest."""

    daemon_threads = True
    # Connections the kernel completes before they are accepted: socketserver's 5 let a burst
    # of connections have the next ones' SYNs dropped, and a probe's retried a second later
    # is a probe failed (the kubelet's timeoutSeconds defaults to 1).
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.max_handlers = MAX_HANDLERS
        self._open: collections.OrderedDict[Any, None] = collections.OrderedDict()  # oldest first
        self._open_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open[request] = None
            while len(self._open) > self.max_handlers:
                oldest, _ = self._open.popitem(last=False)
                # Its thread, blocked reading, reads the end at once and returns.
                with contextlib.suppress(OSError):
                    oldest.shutdown(socket.SHUT_RDWR)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A connection closed here (too old, too slow) or by its client fails its handler's
        # read or write: the client's loss, not the operator's, and no traceback on stderr.
        logger.debug("health connection from %s ended: %s", client_address, sys.exc_info()[1])


class Health:
    def __init__(self) -> None:
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._lock = threading.Lock()

    def live_while(self, name: str, check: Check) -> None:
        with self._lock:
            self._liveness[name] = check

    def ready_when(self, name: str, check: Check) -> None:
        with self._lock:
            self._readiness[name] = check

    def problems(self, ready: bool = False) -> list[str]:
        with self._lock:
            checks = list(self._liveness.items()) + (list(self._readiness.items()) if ready else [])
        found = []
        for name, check in checks:
            try:
                problem = check()
            except Exception as error:  # a check that breaks is a problem, not a crash
                problem = f"the check failed: {error}"
            if problem is not None:
                found.append(f"{name}: {problem}")
        return found

    def serve(self, url: str) -> http.server.ThreadingHTTPServer:
        """Serve /healthz and /readyz at `url`'s host and port, on a thread of their own."""
        where = urlsplit(url)
        health = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = HANDLER_TIMEOUT_SECONDS  # the socket's, on every read and write

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path not in ("/healthz", "/readyz"):
                    self.send_error(404)
                    return
                problems = health.problems(ready=path == "/readyz")
                body = ("\n".join(problems) if problems else "ok").encode() + b"\n"
                self.send_response(503 if problems else 200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if problems:
                    logger.warning("%s: %s", path, "; ".join(problems))

            def log_message(self, format: str, *args: object) -> None:  # probes every few seconds
                pass

        server = _HealthServer((where.hostname or "0.0.0.0", where.port or 8081), Handler)
        threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
        return server
