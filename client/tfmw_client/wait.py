"""`tfmw wait` and `Client().wait`: until the job gets where it was asked to, or cannot.

Every wait ends on failure too, with the reason: a `Failed` job ends a wait for `Succeeded`
at once (exit 1), where `kubectl wait --for=jsonpath='{.status.phase}'=Succeeded` would sit
out its whole timeout. The view is a bar redrawn in place on a terminal, one quiet line per
change elsewhere (a CI log), and an HTML bar updated in place in a notebook.
"""

from __future__ import annotations

import html
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

from tfmw_client import render
from tfmw_client.errors import EXIT_TIMEOUT, ApiError, TfmwError

Json = dict[str, Any]
TARGETS = ("Succeeded", "Running", "Failed", "Finished")
FINAL = frozenset({"Succeeded", "Failed"})
QUIET_PROGRESS_SECONDS = 30.0  # in quiet lines, progress alone prints at most this often


class JobFailed(TfmwError):
    """The job ended (or was deleted) where the wait could not be met."""

    def __init__(self, message: str, fix: str = "", job: Json | None = None) -> None:
        super().__init__(message, fix)
        self.job = job


class WaitTimeout(TfmwError, TimeoutError):
    def __init__(self, message: str, fix: str = "", job: Json | None = None) -> None:
        TfmwError.__init__(self, message, fix, EXIT_TIMEOUT)
        self.job = job


@dataclass(frozen=True)
class Verdict:
    done: bool
    ok: bool
    summary: str


def phase_of(job: Json) -> str:
    return render.as_str(render.as_dict(job.get("status")).get("phase")) or "Pending"


def failure_summary(job: Json) -> str:
    status = render.as_dict(job.get("status"))
    # The message keeps its lines (a log's last lines), each made printable; the reason is one word.
    reason = render.escape_controls(render.as_str(status.get("reason"))) or "no reason given"
    message = render.as_str(status.get("message"))
    return f"{reason}: {render.printable(message)}" if message else reason


def judge(job: Json, target: str) -> Verdict:
    """Whether a wait for `target` is over, and how it went."""
    name = render.as_str(render.as_dict(job.get("metadata")).get("name"))
    phase = phase_of(job)
    if target == "Finished":
        return Verdict(phase in FINAL, True, f"{name} {phase}")
    if phase == target or (target == "Running" and phase == "Succeeded"):
        return Verdict(True, True, f"{name} {phase}")
    if phase == "Failed":
        return Verdict(True, False, f"{name} Failed: {failure_summary(job)}")
    if phase == "Succeeded":  # waiting for Failed
        return Verdict(True, False, f"{name} Succeeded, not {target}")
    return Verdict(False, False, f"{name} {phase}")


def _stalled(status: Json) -> str:
    for condition in render.conditions_that_matter(render.as_list(status.get("conditions"))):
        if condition.get("type") in ("Stalled", "Queued", "StorageError", "ReconcileError"):
            return f"{condition.get('type')}: {render.as_str(condition.get('reason'))}"
    return ""


def status_line(
    job: Json, elapsed: float, ascii_only: bool = False, bar_width: int = render.BAR_WIDTH
) -> str:
    """mnist  Running  2/2 ready  [█████░░░░░]  50%  5/10 epochs  ETA 12s  loss=0.31  1m05s"""
    meta, status = render.as_dict(job.get("metadata")), render.as_dict(job.get("status"))
    parts = [render.as_str(meta.get("name")), phase_of(job)]
    attempt = render.as_int(status.get("attempt"))
    if attempt:
        parts.append(f"attempt {attempt}")
    ready = render.as_str(status.get("readyWorkers"))
    if ready:
        parts.append(f"{ready} ready")
    stalled = _stalled(status)
    if stalled:
        parts.append(stalled)
    progress = render.progress_line(render.as_dict(status.get("progress")), bar_width, ascii_only)
    if progress:
        parts.append(progress)
    parts.append(render.human_duration(elapsed))
    return render.one_line("  ".join(parts), 1000)


def quiet_key(job: Json) -> tuple[str, ...]:
    status = render.as_dict(job.get("status"))
    return (
        phase_of(job),
        str(status.get("attempt")),
        render.as_str(status.get("readyWorkers")),
        _stalled(status),
    )


class View(Protocol):
    def show(self, job: Json, elapsed: float) -> None: ...

    def close(self) -> None: ...


class TerminalView:
    """One line, redrawn in place (carriage return, erase line), cut to the terminal's width
    so that it never wraps (a wrapped line cannot be redrawn)."""

    def __init__(self, out: TextIO, ascii_only: bool = False) -> None:
        self.out, self.ascii_only, self.drawn = out, ascii_only, False

    def show(self, job: Json, elapsed: float) -> None:
        width = shutil.get_terminal_size((100, 24)).columns
        line = status_line(job, elapsed, self.ascii_only)
        if len(line) > width - 1:
            line = line[: max(0, width - 2)] + "…"
        self.out.write(f"\r\x1b[2K{line}")
        self.out.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.out.write("\n")
            self.out.flush()


class LineView:
    """A line when the phase, attempt, readiness or a condition changes; progress alone at
    most every QUIET_PROGRESS_SECONDS."""

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.clock = out, clock
        self.key: tuple[str, ...] | None = None
        self.progress = ""
        self.printed_at = -1e9

    def show(self, job: Json, elapsed: float) -> None:
        key = quiet_key(job)
        progress = render.as_str(
            render.as_dict(render.as_dict(job.get("status")).get("progress")).get("epochs")
        )
        now = self.clock()
        moved = progress != self.progress and now - self.printed_at >= QUIET_PROGRESS_SECONDS
        if key != self.key or moved:
            self.out.write(status_line(job, elapsed, ascii_only=True, bar_width=10) + "\n")
            self.out.flush()
            self.key, self.progress, self.printed_at = key, progress, now

    def close(self) -> None:
        pass


class NullView:
    def show(self, job: Json, elapsed: float) -> None:
        pass

    def close(self) -> None:
        pass


class NotebookView:
    """An HTML progress bar, updated in place through IPython's display handles."""

    def __init__(self) -> None:
        from IPython.display import HTML, display

        self._html = HTML
        self._handle = display(HTML("<code>waiting…</code>"), display_id=True)

    def show(self, job: Json, elapsed: float) -> None:
        status = render.as_dict(job.get("status"))
        progress = render.as_dict(status.get("progress"))
        percent = render.percent_of(progress)
        bar = (
            f'<progress value="{percent:.1f}" max="100" style="width:16em"></progress> '
            if percent is not None
            else ""
        )
        text = html.escape(status_line({**job, "status": {**status, "progress": {}}}, elapsed))
        detail = " ".join(
            html.escape(p)
            for p in (
                f"{percent:.0f}%" if percent is not None else "",
                render.epochs_text(progress),
                f"ETA {render.as_str(progress.get('eta'))}" if progress.get("eta") else "",
                render.metrics_text(progress),
            )
            if p
        )
        if self._handle is not None:
            self._handle.update(self._html(f"<div>{bar}<code>{text}</code> {detail}</div>"))

    def close(self) -> None:
        pass


def in_notebook() -> bool:
    """True in a Jupyter kernel (IPython with a kernel), not in a terminal IPython."""
    shell_module = sys.modules.get("IPython")
    if shell_module is None:
        return False
    get_ipython = getattr(shell_module, "get_ipython", None)
    shell = get_ipython() if get_ipython else None
    return shell is not None and hasattr(shell, "kernel")


def choose_view(out: TextIO, notebook: bool | None = None, ascii_only: bool | None = None) -> View:
    if notebook if notebook is not None else in_notebook():
        try:
            return NotebookView()
        except ImportError:
            pass
    if out.isatty():
        encoding = (getattr(out, "encoding", "") or "").lower()
        return TerminalView(out, ascii_only if ascii_only is not None else "utf" not in encoding)
    return LineView(out)


_TRANSIENT = frozenset({429, 500, 502, 503, 504})


def wait_for(
    read: Callable[[], Json | None],
    target: str,
    timeout: float,
    view: View,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Json, Verdict]:
    """Reads the job until `judge` says the wait is over; raises WaitTimeout past `timeout`.
    The API server being briefly unreachable (or 429/5xx) is waited out within the timeout."""
    if target not in TARGETS:
        raise TfmwError(f"--for {target}: not one of {', '.join(TARGETS)}")
    start = clock()
    job: Json | None = None
    seen = False
    try:
        while True:
            try:
                job = read()
            except ApiError as error:
                if error.status not in _TRANSIENT:
                    raise
            except TfmwError:  # unreachable: the connection's error
                if clock() - start >= timeout:
                    raise
            else:
                if job is None:
                    if not seen:
                        raise TfmwError("job not found", "check the name and the namespace (tfmw get -A)")
                    raise JobFailed("the job was deleted while waiting")
                seen = True
                view.show(job, clock() - start)
                verdict = judge(job, target)
                if verdict.done:
                    return job, verdict
            elapsed = clock() - start
            if elapsed >= timeout:
                last = status_line(job, elapsed, ascii_only=True) if job else "never read"
                raise WaitTimeout(
                    f"timed out after {render.human_duration(timeout)} waiting for {target}: {last}",
                    "raise --timeout, or see what holds it with `tfmw describe`",
                    job,
                )
            sleep(min(interval, max(0.0, timeout - elapsed)))
    finally:
        view.close()


def now_utc() -> datetime:
    return datetime.now(UTC)
