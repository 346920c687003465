"""SIGTERM as a notice, not a death: PID 1 tells the training process through a pipe.

The training process (a child of PID 1, see `__main__.run_as_child`) keeps SIGTERM's default
action: no signal handler ever runs inside TensorFlow's process, so none can be replaced by
TensorFlow's own or wait for the main thread to leave C++. PID 1 writes one byte into a pipe
instead, and the training loop looks at it between steps (a non-blocking read: no system
call blocks, nothing runs on a thread of its own). A PID 1 gone (the pipe closed) counts as
a notice too.

Every worker of a MultiWorkerMirroredStrategy gang must stop at the same step, or the ones
that go on wait for the others in the next all-reduce: the loop adds each worker's notice to
the step's own all-reduce (`vote`) and all of them save at the step where the sum first is
not zero, whether one worker was told (its pod deleted) or all of them (a gang restart, a
suspension, a preemption).

Before training begins there is nothing to save: the training process says when it has begun
(`ready`, one byte into a second pipe), and until then PID 1 ends it at once on SIGTERM rather
than granting it the save budget (a worker still importing TensorFlow, or waiting in the
strategy's start-up for a peer that never comes, would otherwise hold its pod that long).
"""

from __future__ import annotations

import contextlib
import os
import time

NOTICE = b"T"
READY = b"R"
SIGTERM_EXIT_CODE = 143  # 128 + SIGTERM
# TensorFlow lost a peer: not this program's fault, so from 128 up (restartPolicy ExitCode
# retries it with a gang restart), and no signal's.
PEER_LOST_EXIT_CODE = 170
# PID 1 waits this long for the save after SIGTERM, then kills the training process: the
# older checkpoint is kept (a checkpoint is complete only once its index is written).
DEFAULT_SAVE_SECONDS = 20.0
# A worker that saved because a peer was told waits this long for its own SIGTERM (the gang
# restart the peer's end brings), then exits anyway.
PEER_WAIT_SECONDS = 120.0
POLL_SECONDS = 0.1


class TerminationNotice:
    """The reading end, in the training process; `fd` None: never told (run by hand)."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = fd
        self._told = False
        if fd is not None:
            os.set_blocking(fd, False)

    def requested(self) -> bool:
        """True once PID 1 forwarded a SIGTERM (or went away); never blocks."""
        if self._told or self.fd is None:
            return self._told
        try:
            os.read(self.fd, 1)  # a byte, or b"" (end of file: PID 1 is gone): both a notice
        except BlockingIOError:
            return False
        except OSError:
            pass
        self._told = True
        return True

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds` for the notice; whether it came."""
        deadline = time.monotonic() + seconds
        while not self.requested():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            # Never past the deadline: --step-pause waits 10 ms, not a whole poll.
            time.sleep(min(POLL_SECONDS, left))
        return True


_notice = TerminationNotice()
_ready_fd: int | None = None


def install(fd: int | None, ready_fd: int | None = None) -> None:
    """Called once in the training process, before training starts: `fd` the notice's reading
    end, `ready_fd` where to say that training has begun."""
    global _notice, _ready_fd
    _notice = TerminationNotice(fd)
    _ready_fd = ready_fd


def ready() -> None:
    """Training has begun, and the notice is read from now on: PID 1 now lets this process save
    for TFMW_SAVE_SECONDS after SIGTERM, rather than ending it at once. Idempotent."""
    global _ready_fd
    if _ready_fd is None:
        return
    fd, _ready_fd = _ready_fd, None
    try:
        os.write(fd, READY)
        os.close(fd)
    except OSError:
        pass  # PID 1 is gone: its notice (end of file) is read at the next step


class TrainingStarted:
    """PID 1's side of `ready`: whether the training process said training has begun."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._started = False
        os.set_blocking(fd, False)

    def __call__(self) -> bool:
        if not self._started:
            with contextlib.suppress(OSError):  # BlockingIOError: nothing said yet
                self._started = os.read(self.fd, 1) == READY
        return self._started


def notice() -> TerminationNotice:
    return _notice


def save_seconds(environ: dict[str, str] | os._Environ[str] | None = None) -> float:
    """How long PID 1 lets the training process save after SIGTERM (TFMW_SAVE_SECONDS)."""
    env = os.environ if environ is None else environ
    raw = env.get("TFMW_SAVE_SECONDS", "")
    try:
        value = float(raw) if raw else DEFAULT_SAVE_SECONDS
    except ValueError:
        raise ValueError(f"TFMW_SAVE_SECONDS must be a number of seconds, got {raw[:40]!r}") from None
    if not 0 <= value <= 3600:
        raise ValueError(f"TFMW_SAVE_SECONDS must be 0 to 3600 seconds, got {raw[:40]!r}")
    return value


class Stopped(Exception):
    """Training stopped at a step the gang agreed on, after saving; exit with `exit_code`."""

    def __init__(self, exit_code: int, why: str) -> None:
        super().__init__(why)
        self.exit_code = exit_code


def stop_after_save(told: bool) -> Stopped:
    """What a worker does once the gang saved: exit 143 (as a SIGTERM would) if it was told
    itself, else first wait for its own SIGTERM, which the gang restart brings, so that the
    worker that was told stays the first to end (the cause in status.history); exit 170 (a
    peer lost) if none comes."""
    if told or notice().wait(PEER_WAIT_SECONDS):
        return Stopped(SIGTERM_EXIT_CODE, "SIGTERM: checkpoint saved")
    return Stopped(
        PEER_LOST_EXIT_CODE, f"a peer was told to stop; no SIGTERM here in {PEER_WAIT_SECONDS:g} s"
    )
