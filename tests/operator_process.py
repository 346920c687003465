"""The operator as a separate process (killed -9 and started again by tests, measured by
the bench), or in this process on a thread of its own."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from kube import wait_for
from tfmw_operator.handlers import operate
from tfmw_operator.runtime.settings import Settings


class OperatorProcess:
    def __init__(
        self,
        namespace: str,
        shared_root: Path,
        kubeconfig: str | None = None,
        ports: tuple[int, int] | None = None,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.namespace = namespace
        self.args = args  # more command-line arguments
        self.ports = ports  # (metrics, liveness); None: neither is served
        self.shared_root = shared_root
        self.env = {**os.environ, "KUBECONFIG": kubeconfig or os.environ["KUBECONFIG"], **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = shared_root / f"operator-{namespace}.log"
        self.starts = 0

    def start(self) -> OperatorProcess:
        metrics, liveness = self.ports or (0, 0)
        command = [
            sys.executable, "-m", "tfmw_operator", "--shared-root", str(self.shared_root),
            "--namespace", self.namespace, "--metrics-port", str(metrics),
            "--liveness", f"http://127.0.0.1:{liveness}/healthz" if liveness else "", *self.args,
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1
        return self

    def wait_started(self, timeout: float = 30) -> None:
        """Until this start of the operator has logged that it runs."""
        starts = self.starts
        wait_for("the operator to start", lambda: self._logged_starts() >= starts, timeout=timeout)

    def _logged_starts(self) -> int:
        return self.log.read_text(errors="replace").count("tfmw operator started")

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self._pid()}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self._pid()}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _pid(self) -> int:
        if self.process is None:
            raise RuntimeError("the operator was not started")
        return self.process.pid


class OperatorThread:
    """The operator in this process, in a thread with an event loop of its own, as
    `python -m tfmw_operator` runs it; stopped, and its failure raised, on exit."""

    def __init__(self, settings: Settings, timeout: float = 60) -> None:
        self.settings = settings
        self.timeout = timeout
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tfmw-operator", daemon=True)

    def __enter__(self) -> OperatorThread:
        self._thread.start()
        if not self._ready.wait(self.timeout) or self._error is not None:
            raise RuntimeError(f"the operator did not start within {self.timeout}s") from self._error
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(self.timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the operator did not stop within {self.timeout}s")
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop, ready = asyncio.Event(), asyncio.Event()
            operating = asyncio.create_task(operate(self.settings, stop_flag=self._stop, ready_flag=ready))
            started = asyncio.create_task(ready.wait())
            await asyncio.wait([operating, started], return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            self._ready.set()
            await operating

        try:
            asyncio.run(run())
        except BaseException as error:  # told to the test on exit
            self._error = error
        finally:
            self._ready.set()
