"""The operator's health, served from the first moment, by a standby replica too.

`/healthz` (liveness) fails once anything the operator cannot work without has died: the
lease elector, a pod or Service watch, the marker watcher, an Event poster, the job
audit. The kubelet then replaces the pod. `/readyz` also waits for the operator to have
started and its watches to have listed everything, or for a standby to be waiting for
the lease.
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

# A check returns None while all is well, else what is wrong.
Check = Callable[[], str | None]


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

        server = http.server.ThreadingHTTPServer((where.hostname or "0.0.0.0", where.port or 8081), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
        return server
