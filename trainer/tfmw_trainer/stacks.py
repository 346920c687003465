"""Every thread's Python stack on SIGUSR1: where a hung job hung.

The operator asks for stacks before it restarts (or fails) a gang whose training stopped
moving; the pod's supervisor then sends SIGUSR1 to its command, here the trainer's PID 1,
which forwards it to the training process. There `faulthandler` writes every thread's stack to
TFMW_STACKS_PATH (`$TFMW_SHARED_DIR/logs/attempt-<a>/<pod stem>.stacks`). faulthandler does
it from the signal handler itself, in C, without waiting for the interpreter: it works while
the training thread sits in TensorFlow's C++ for ever (a collective whose peer hung), which a
Python signal handler, run only between bytecodes, never would.

The file is opened once, when the trainer starts (appending, never following a link, never
blocking on a FIFO), and each request appends one dump after a header line written by PID 1:

    --- tfmw-trainer stacks: 2026-12-01T07:00:00.000Z pid=42 main_thread=0x00007f3a5c2e1740 ---
    Thread 0x00007f3a1bfff640 (most recent call first):
      File ".../threading.py", line 324 in wait
      ...
    Current thread 0x00007f3a5c2e1740 (most recent call first):
      File ".../tensorflow/python/eager/execute.py", line 53 in quick_execute
      ...
      File ".../tfmw_trainer/train.py", line 402 in _train_loop

`main_thread` is spelled as faulthandler spells thread ids: the block that starts with
`Thread <id>` or `Current thread <id>` is the training loop's thread. Without
TFMW_STACKS_PATH (or when it cannot be opened) the dumps go to standard error, the pod's log.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import stat
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from tfmw_operator import contract

from tfmw_trainer.progress import utc_now

STDERR = 2


def open_output(env: Mapping[str, str] | None = None) -> int:
    """The file descriptor the dumps go to: TFMW_STACKS_PATH, opened to append (made with its
    folder if missing), else standard error."""
    env = os.environ if env is None else env
    where = env.get(contract.STACKS_PATH_ENV, "")
    if not where:
        return STDERR
    path = Path(where)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # No link followed, no FIFO to block on: the job's folder is writable by all its pods.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path, flags, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{path} is not a regular file")
    except OSError as error:
        print(f"tfmw-trainer: cannot open {path} for stacks ({error}); they go to stderr", file=sys.stderr)
        return STDERR
    return fd


def thread_id(ident: int) -> str:
    """A thread's id as faulthandler writes it (`Thread 0x00007f3a5c2e1740`)."""
    return f"0x{ident:016x}"


def header(pid: int, main_thread: int) -> bytes:
    line = f"--- tfmw-trainer stacks: {utc_now()} pid={pid} main_thread={thread_id(main_thread)} ---\n"
    return line.encode()


def dump_on_signal(fd: int) -> None:
    """In the training process: SIGUSR1 dumps every thread's stack to `fd`."""
    faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True, chain=False)


def request(fd: int, child: int | None) -> None:
    """In PID 1, on SIGUSR1: the header, then the signal to the training process (forked from
    this thread, so its main thread has this thread's id). With no training process yet, PID
    1's own stacks."""
    with contextlib.suppress(OSError):
        os.write(fd, header(child or os.getpid(), threading.get_ident()))
    if child is None:
        with contextlib.suppress(OSError):
            faulthandler.dump_traceback(file=fd, all_threads=True)
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, signal.SIGUSR1)
