"""tfmw's in-pod supervisor: a worker's program restarted in place, on the operator's word.

The operator writes this one file into the job's control folder on the shared volume
(`$TFMW_SHARED_DIR/.tfmw/supervisor.py`) and runs the template's command under it, as PID 1:

    python3 $TFMW_SHARED_DIR/.tfmw/supervisor.py [--grace-seconds S] ... -- COMMAND [ARG...]

It runs COMMAND as a child in a process group of its own and forwards signals to it; streams
the child's output to its own stdout/stderr (`kubectl logs`) and into
`$TFMW_SHARED_DIR/logs/attempt-<a>/<stem>.log`; reports each child's start and end in
`$TFMW_SHARED_DIR/.tfmw/pods/<stem>.json`; and when a child ends it does not exit but waits for
the operator's `$TFMW_SHARED_DIR/.tfmw/control.json` to start the next attempt's child, only once
the operator says every pod of that attempt is waiting (a barrier: TensorFlow never sees two
incarnations of one gang). Without `TFMW_SHARED_DIR` it only runs the child and exits with its
code. docs/supervisor.md is the protocol for people.

It runs under whatever python3 the worker's image has, not the operator's: the standard library
only, Python 3.9's syntax and library, one file that imports nothing of tfmw. The wire names
below are those of `tfmw_operator.contract`; tests/unit/operator/test_supervisor.py holds them
equal.
"""

from __future__ import annotations

import signal

# The kernel drops a signal sent to PID 1 that PID 1 has no handler for, so a SIGTERM arriving
# while Python imports the rest of this file would be lost, and the pod would wait out its whole
# grace period. The handler is the first thing in place; the main loop acts on what it recorded.
# Before it, while Python starts and compiles this file, only a blocked signal is kept (a blocked
# signal is never dropped: it stays pending): BOOTSTRAP below blocks them first.
FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
_received: list[int] = []


def _record(signum: int, frame: object) -> None:
    _received.append(signum)


if __name__ == "__main__":
    for _signum in FORWARDED_SIGNALS:
        signal.signal(_signum, _record)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED_SIGNALS)  # what BOOTSTRAP held comes now

import argparse  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import errno  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import selectors  # noqa: E402
import socket  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402

# ---- how the operator runs it ----

# `python3 -I -S -c BOOTSTRAP -- COMMAND [ARG...]`: the signals blocked before this file is even
# read and compiled (docs/supervisor.md has the times), then the file run as `python3 <path>`
# would. -I -S: none of the image's or the user's Python settings (PYTHONPATH, a json.py in the
# working directory, site's .pth files) reaches the supervisor; its child gets them all.
# The file must end with its seal (the sha256 of what precedes it): the bootstrap runs the bytes
# it checked, and refuses a file cut short, a directory, a FIFO or a link with exit code 199.
INSTALLED_PATH = "/tfmw/supervisor.py"
SEAL = b"\n# tfmw-sha256: "
BOOTSTRAP = (
    "import signal;"
    "signal.pthread_sigmask(signal.SIG_BLOCK,(signal.SIGTERM,signal.SIGINT,signal.SIGHUP,"
    "signal.SIGQUIT,signal.SIGUSR1,signal.SIGUSR2));"
    "import runpy,sys;"
    f"sys.argv[0]={INSTALLED_PATH!r}\n"
    "import hashlib,os,stat,types\n"
    "p=sys.argv[0]\n"
    "try:\n"
    " f=os.open(p,os.O_RDONLY|os.O_NOFOLLOW|os.O_NONBLOCK|os.O_CLOEXEC)\n"
    " try:\n"
    "  if not stat.S_ISREG(os.fstat(f).st_mode):raise OSError('not a regular file')\n"
    "  d=b''\n"
    "  while len(d)<=4194304:\n"
    "   c=os.read(f,65536)\n"
    "   if not c:break\n"
    "   d+=c\n"
    " finally:os.close(f)\n"
    f" b,_,t=d.rpartition({SEAL!r})\n"
    " if not _ or t.strip()!=hashlib.sha256(b).hexdigest().encode():\n"
    "  raise OSError('cut short or changed: its seal does not match')\n"
    "except OSError as e:\n"
    " sys.stderr.write('tfmw: the supervisor %s cannot be run: %s; '\n"
    "  'the operator writes it again before the next pod\\n'%(p,e))\n"
    " sys.exit(199)\n"
    "m=types.ModuleType('__main__');m.__file__=p;sys.modules['__main__']=m\n"
    "exec(compile(b,p,'exec'),m.__dict__)"
)


def wrapped_command(
    command: Sequence[str],
    options: Sequence[str] = (),
    path: str = INSTALLED_PATH,
    python: str = "python3",
) -> list[str]:
    """A container's command and args, run under the supervisor installed at `path`."""
    bootstrap = BOOTSTRAP.replace(repr(INSTALLED_PATH), repr(path))
    return [python, "-I", "-S", "-c", bootstrap, *options, "--", *command]


# ---- the wire: tfmw_operator.contract's names, repeated so that this file stands alone ----

JOB_NAME_ENV = "TFMW_JOB_NAME"
JOB_UID_ENV = "TFMW_JOB_UID"
REPLICA_TYPE_ENV = "TFMW_REPLICA_TYPE"
REPLICA_INDEX_ENV = "TFMW_REPLICA_INDEX"
ATTEMPT_ENV = "TFMW_ATTEMPT"
SHARED_DIR_ENV = "TFMW_SHARED_DIR"
STACKS_PATH_ENV = "TFMW_STACKS_PATH"
# The pod's own UID, when the operator passes it (the downward API's metadata.uid): reports
# then name the pod incarnation that wrote them.
POD_UID_ENV = "TFMW_POD_UID"
REPLICA_TYPES = ("chief", "worker", "ps", "evaluator")

CONTROL_DIR = ".tfmw"
CONTROL_FILE = "control.json"
REPORTS_DIR = "pods"
LOGS_DIR = "logs"

CONTROL_JOB_UID = "jobUid"
CONTROL_ATTEMPT = "attempt"
CONTROL_START = "start"
CONTROL_STACKS = "stacks"
CONTROL_EXIT = "exit"
CONTROL_STOP_SECONDS = "stopSeconds"
CONTROL_HOSTS = "hosts"
REPORT_READS_HOSTS = "readsHosts"
# In a report while a process of the last child's attempt has outlived the bound on its end
# (docs/supervisor.md): which one, and that no attempt starts beside it. Read by people.
REPORT_NOT_ENDED = "notEnded"
TF_CONFIG = "TF_CONFIG"

# A report's states. "starting" is in the contract but never written here: the report goes from
# "waiting" to "running" right after the child's exec, the earliest moment there is a child.
STATE_RUNNING = "running"
STATE_EXITED = "exited"
STATE_WAITING = "waiting"

# ---- bounds (docs/supervisor.md says why each is what it is) ----

DEFAULT_GRACE_SECONDS = 30.0  # the pod's terminationGracePeriodSeconds, Kubernetes' default
# Kept of the grace for the last report and the exit, before the kubelet's SIGKILL.
REPORT_MARGIN_SECONDS = 2.0
# A child stopped for a gang restart gets this long after SIGTERM before SIGKILL: more than the
# trainer's own save budget (TFMW_SAVE_SECONDS, 20 s by default).
DEFAULT_STOP_SECONDS = 30.0
MAX_STOP_SECONDS = 86400.0
DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024  # per file; one earlier file is kept beside it
# With nothing asked of it after its child's end for this long, the supervisor exits with the
# child's code: an operator that is gone (uninstalled, or an older one that reads no reports)
# then sees the pod end and restarts the gang the old way.
DEFAULT_EXITED_WAIT_SECONDS = 600.0
DEFAULT_POLL_SECONDS = 0.1
# The control file names at most every member's hostname (1,024 at most, the CRD's bound).
CONTROL_MAX_BYTES = 256 * 1024
MAX_HOSTS = 4096
STACKS_ID_MAX_CHARS = 256
MAX_ATTEMPT = 1_000_000
DRAIN_SECONDS = 1.0  # after the child's end, how long its output may still come
SYNC_SECONDS = 1.0  # the log is fdatasync'ed at most this often while output comes
LOG_BUFFER_MAX_BYTES = 8 * 1024 * 1024  # output waiting for a slow volume; beyond, dropped and counted
FLUSH_SECONDS = 5.0  # at an exit not bounded by a grace: how long to wait for the volume
# Output waiting for this container's stdout or stderr (each) when the runtime does not read
# them; beyond, dropped and counted there (the log on the volume has it).
STREAM_BUFFER_MAX_BYTES = 4 * 1024 * 1024
STREAM_FLUSH_SECONDS = 1.0  # at the exit: how long what waits for stdout and stderr may take
REPORT_RETRY_SECONDS = 1.0  # a report that could not be written is written again after this
LOG_OPEN_WAIT_SECONDS = 2.0  # a child starts once its attempt's log folder exists, or after this
READ_CHUNK = 65536
# What an ended child's attempt left (its group; as PID 1 every other process but the standby's;
# as a subreaper the orphans it adopted) is SIGKILLed, then looked at 1 ms later, then twice as
# long after each look, up to 0.1 s: most are gone within a few milliseconds.
GONE_CHECK_FIRST_SECONDS = 0.001
GONE_CHECK_MAX_SECONDS = 0.1
# The least time they get before the child's end is reported with REPORT_NOT_ENDED (a stop bound
# of 0 kills at once; it does not skip the wait for the killed to be gone).
GONE_MIN_SECONDS = 1.0
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>

# Signals a child starts with at their default action: those Python ignores (SIGPIPE, SIGXFSZ)
# as the program would have without us, and those the supervisor handles.
RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, *FORWARDED_SIGNALS)
STEM_PATTERN = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\Z")
UNSIGNED = re.compile(r"[0-9]{1,9}\Z")


def say(message: str) -> None:
    """The supervisor's own lines, on its stderr (kubectl logs)."""
    STREAMS[2].put(f"tfmw-supervisor: {message}\n".encode(errors="replace"))


class Stream:
    """fd 1 or 2 (kubectl logs) as the supervisor writes it: queued, bounded, never blocking.

    A container runtime that stops reading its log pipe must not stop the supervisor: blocked in
    a write, it would neither forward the pod's SIGTERM nor kill the command at the grace's end.
    What the fd cannot take now waits here (the main loop writes it when its selector says the
    fd is writable); beyond STREAM_BUFFER_MAX_BYTES it is dropped and counted, as the volume's
    log drops what a slow volume cannot take (the log on the volume still has it). Any thread
    may put (the volume thread's say()); a lock keeps the order.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._dropped = 0
        self._broken = False
        # Until own(): the fd may be shared (alone, the command writes to it too), so it stays
        # blocking and is written PIPE_BUF bytes at a time once select says it is writable,
        # which a pipe takes without blocking.
        self._owned = False
        self.notify: Callable[[], None] | None = None  # wakes the main loop (another thread's put)
        self.registered = False  # in the main loop's selector, for EVENT_WRITE

    def own(self) -> None:
        """Make the fd non-blocking: only where no other process writes to it (each child has
        pipes of its own), since O_NONBLOCK belongs to the open file, shared by every holder."""
        with self._lock, contextlib.suppress(OSError):
            if not self._owned and os.get_blocking(self.fd):
                os.set_blocking(self.fd, False)
                self._owned = True

    def disown(self) -> None:
        """Blocking again, as it was given: whoever holds it after us (a terminal's shell) expects it."""
        with self._lock, contextlib.suppress(OSError):
            if self._owned:
                os.set_blocking(self.fd, True)
                self._owned = False

    def put(self, data: bytes) -> None:
        with self._lock:
            if self._broken or not data:
                return
            if self._size + len(data) > STREAM_BUFFER_MAX_BYTES:
                self._dropped += len(data)
                return
            if self._dropped:
                self._note_dropped()
            self._chunks.append(data)
            self._size += len(data)
            self._flush_locked()
            waiting = bool(self._chunks or self._dropped)
        if waiting and self.notify is not None and threading.current_thread() is not threading.main_thread():
            self.notify()

    def pending(self) -> bool:
        with self._lock:
            return bool(self._chunks or self._dropped)

    def flush(self) -> None:
        """What the fd takes now, without blocking."""
        with self._lock:
            self._flush_locked()

    def drop(self) -> None:
        """Nowhere to write (the fd is closed, or cannot be waited on): the log still has it."""
        with self._lock:
            self._broken = True
            self._chunks.clear()
            self._size = self._dropped = 0

    def _note_dropped(self) -> None:
        """Where output was dropped, a line saying how much (once there is room for it)."""
        name = "stdout" if self.fd == 1 else "stderr"
        note = f"\ntfmw-supervisor: {self._dropped} bytes of output dropped here: {name} was not read\n"
        self._chunks.append(note.encode())
        self._size += len(note)
        self._dropped = 0

    def _flush_locked(self) -> None:
        while self._chunks or self._dropped:
            if not self._chunks:  # all that waited is out: the count of what was dropped after it
                self._note_dropped()
            head = self._chunks[0]
            if not self._owned:
                try:
                    if not select.select([], [self.fd], [], 0)[1]:
                        return
                except (OSError, ValueError):
                    return
                head = head[: select.PIPE_BUF]  # a pipe that says writable takes this much at once
            try:
                written = os.write(self.fd, head)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # nowhere to write: the child's output still goes to the log
                self._broken = True
                self._chunks.clear()
                self._size = self._dropped = 0
                return
            self._size -= written
            if written < len(self._chunks[0]):
                self._chunks[0] = self._chunks[0][written:]
            else:
                self._chunks.popleft()


STREAMS = {1: Stream(1), 2: Stream(2)}


def rfc3339(seconds: float) -> str:
    millis = int(seconds * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


# ---- what is read: the control file, the identity, the cgroup's OOM counter ----


@dataclasses.dataclass(frozen=True)
class Control:
    """The operator's word, from a control file that names this job."""

    attempt: int
    start: bool
    stacks: str | None
    exit: bool
    # How long a child being stopped (for this attempt, or to exit) gets between SIGTERM and
    # SIGKILL; None: --stop-seconds. 0 when there is nothing to save (a peer died on its own).
    stop_seconds: float | None = None
    # (stem, hostname) of the gang's pods not named as their pods are (made again in a later
    # attempt under a new name): put into TF_CONFIG before each command (with_hosts).
    hosts: tuple[tuple[str, str], ...] = ()


def parse_control(raw: bytes, job_uid: str) -> Control | None:
    """The control file's content, or None when it is not a well-formed word for this job.

    Anything unexpected ignores the whole file rather than part of it: a half-understood
    control must not start a child.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get(CONTROL_JOB_UID) != job_uid:
        return None
    attempt = doc.get(CONTROL_ATTEMPT)
    if type(attempt) is not int or not 0 <= attempt <= MAX_ATTEMPT:
        return None
    start = doc.get(CONTROL_START, False)
    exit_ = doc.get(CONTROL_EXIT, False)
    stacks = doc.get(CONTROL_STACKS)
    if not isinstance(start, bool) or not isinstance(exit_, bool):
        return None
    if stacks is not None and (not isinstance(stacks, str) or not 0 < len(stacks) <= STACKS_ID_MAX_CHARS):
        return None
    stop_seconds = doc.get(CONTROL_STOP_SECONDS)
    if stop_seconds is not None and (
        type(stop_seconds) not in (int, float) or not 0 <= stop_seconds <= MAX_STOP_SECONDS
    ):
        return None  # NaN and infinities fail the range too
    hosts = doc.get(CONTROL_HOSTS, {})
    if not isinstance(hosts, dict) or len(hosts) > MAX_HOSTS:
        return None
    for stem, host in hosts.items():
        if not (isinstance(host, str) and STEM_PATTERN.match(stem) and STEM_PATTERN.match(host)):
            return None
    return Control(
        attempt=attempt,
        start=start,
        stacks=stacks,
        exit=exit_,
        stop_seconds=None if stop_seconds is None else float(stop_seconds),
        hosts=tuple(sorted(hosts.items())),
    )


def with_hosts(tf_config: str, hosts: Mapping[str, str], job_name: str) -> str:
    """TF_CONFIG with every cluster member's hostname as the control file says: its entry in
    `hosts` (by stem, `worker-1`), else its pod's own name (`<job>-worker-1`). TF_CONFIG was
    written when this pod was made; a peer made again since has a new name (a new name has no
    stale DNS answer cached). Only an address of the operator's own form is rewritten
    (`<job>-<stem>` or `<stem>-a<attempt>`, then `.<job>.` or `.<job>:`); anything else, and a
    TF_CONFIG that is not the operator's, is left as it is."""
    try:
        config = json.loads(tf_config)
    except (ValueError, RecursionError):
        return tf_config
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict):
        return tf_config
    changed = False
    for task_type, addresses in cluster.items():
        if not isinstance(addresses, list):
            continue
        for index, address in enumerate(addresses):
            stem = f"{task_type}-{index}"
            host, dot, rest = address.partition(".") if isinstance(address, str) else ("", "", "")
            ours = host == f"{job_name}-{stem}" or re.fullmatch(re.escape(stem) + r"-a[0-9]{1,7}", host)
            if not ours or not (rest.startswith(job_name + ".") or rest.startswith(job_name + ":")):
                continue
            named = (hosts.get(stem) or f"{job_name}-{stem}") + dot + rest
            changed = changed or named != address
            addresses[index] = named
    return json.dumps(config, separators=(",", ":")) if changed else tf_config


def pod_stem(environ: Mapping[str, str], hostname: str) -> str | None:
    """`<replica type>-<index>` (worker-3): what this pod's logs and report are named by."""
    replica_type = environ.get(REPLICA_TYPE_ENV, "")
    index = environ.get(REPLICA_INDEX_ENV, "")
    if replica_type in REPLICA_TYPES and UNSIGNED.match(index):
        return f"{replica_type}-{int(index)}"
    job = environ.get(JOB_NAME_ENV, "")
    if job and hostname.startswith(job + "-"):
        stem = hostname[len(job) + 1 :]
        if STEM_PATTERN.match(stem):
            return stem
    return None


def attempt_from_env(environ: Mapping[str, str]) -> int:
    raw = environ.get(ATTEMPT_ENV, "")
    return int(raw) if UNSIGNED.match(raw) and int(raw) <= MAX_ATTEMPT else 0


def oom_kill_count(text: str) -> int | None:
    """`oom_kill` of cgroup v2's memory.events or v1's memory.oom_control (both "key value")."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and UNSIGNED.match(value.strip()):
            return int(value.strip())
    return None


def oom_counter_candidates(proc_self_cgroup: str, root: str = "/sys/fs/cgroup") -> list[str]:
    """Where this process's cgroup counts OOM kills, most specific first.

    /proc/self/cgroup names the cgroup as seen from the cgroup namespace; a container with a
    namespace of its own sees it as "/" and has it mounted at the root, one without sees the
    host's path. cgroup v2 ("0::<path>", memory.events: hierarchical) comes before v1's
    memory controller ("<n>:...memory...:<path>", memory.oom_control).
    """
    v2: list[str] = []
    v1: list[str] = []
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        hierarchy, controllers, path = parts
        path = path.rstrip("/")
        if hierarchy == "0" and controllers == "":
            v2 += [f"{root}{path}/memory.events", f"{root}/memory.events"]
        elif "memory" in controllers.split(","):
            v1 += [f"{root}/memory{path}/memory.oom_control", f"{root}/memory/memory.oom_control"]
    unique: list[str] = []
    for path in v2 + v1:
        if path not in unique:
            unique.append(path)
    return unique


class OomCounter:
    """The container cgroup's OOM-kill counter: it rising during a child's life is an OOM kill."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    @classmethod
    def find(cls) -> OomCounter:
        try:
            with open("/proc/self/cgroup") as file:
                candidates = oom_counter_candidates(file.read(65536))
        except OSError:
            return cls(None)
        for path in candidates:
            counter = cls(path)
            if counter.read() is not None:
                return counter
        return cls(None)

    def read(self) -> int | None:
        if self.path is None:
            return None
        try:
            with open(self.path) as file:
                return oom_kill_count(file.read(65536))
        except OSError:
            return None


def signal_caught(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (/proc/<pid>/status, SigCgt).

    A program that has none would die of SIGUSR1, its default action: a stacks request is
    sent only to a program that asked for it by handling the signal.
    """
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


# ---- the job's folder, never through a link ----

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(parent: int, name: str, create: bool) -> int:
    """`name` inside directory `parent`, a directory and not a link to one (ELOOP/ENOTDIR)."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent)
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


def read_bounded(parent: int, name: str, limit: int) -> bytes | None:
    """A regular file's content, at most `limit` bytes; None for anything else.

    O_NONBLOCK: a FIFO put in its place never blocks the open; O_NOFOLLOW: a link is refused.
    """
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class JobFolder:
    """The job's folder as this pod mounts it; every path below it is opened without links."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._fd

    def control_signature(self) -> tuple[int, ...] | None:
        """What changes when the control file is replaced or rewritten; None: no regular file."""
        try:
            info = os.stat(f"{CONTROL_DIR}/{CONTROL_FILE}", dir_fd=self.fd(), follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    def read_control(self, job_uid: str) -> Control | None:
        try:
            control_dir = open_dir(self.fd(), CONTROL_DIR, create=False)
        except OSError:
            return None
        try:
            raw = read_bounded(control_dir, CONTROL_FILE, CONTROL_MAX_BYTES)
        finally:
            os.close(control_dir)
        return None if raw is None else parse_control(raw, job_uid)

    def write_report(self, stem: str, doc: Mapping[str, object]) -> None:
        """`.tfmw/pods/<stem>.json`, atomically (a temporary file, then rename); OSError if not."""
        body = (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()
        control_dir = open_dir(self.fd(), CONTROL_DIR, create=True)
        try:
            reports = open_dir(control_dir, REPORTS_DIR, create=True)
        finally:
            os.close(control_dir)
        try:
            temporary = f".{stem}.json.tmp"
            with contextlib.suppress(FileNotFoundError):  # one left by a supervisor killed mid-write
                os.unlink(temporary, dir_fd=reports)
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=reports,
            )
            try:
                _write_file(fd, body)
            finally:
                os.close(fd)
            os.rename(temporary, f"{stem}.json", src_dir_fd=reports, dst_dir_fd=reports)
        finally:
            os.close(reports)

    def open_log(self, attempt: int, stem: str, max_bytes: int) -> LogFile:
        logs = open_dir(self.fd(), LOGS_DIR, create=True)
        try:
            attempt_dir = open_dir(logs, f"attempt-{attempt}", create=True)
        finally:
            os.close(logs)
        try:
            return LogFile(attempt_dir, f"{stem}.log", max_bytes)
        except BaseException:
            os.close(attempt_dir)
            raise


def _write_file(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class LogFile:
    """A child's output in one attempt: appended as it comes, capped, its end always kept.

    When `<stem>.log` reaches `max_bytes` it becomes `<stem>.log.1` (an older `.1` is dropped)
    and a new `<stem>.log` begins with a line saying so: at most about twice `max_bytes` per
    pod and attempt, and the last `max_bytes` at least always there.
    """

    def __init__(self, dir_fd: int, name: str, max_bytes: int) -> None:
        self.dir_fd = dir_fd
        self.name = name
        self.max_bytes = max_bytes
        self.fd = self._open()
        try:
            self.size = os.fstat(self.fd).st_size
        except BaseException:
            os.close(self.fd)  # `dir_fd` is still the caller's to close (open_log)
            raise
        self.total = self.size  # bytes of this attempt's output so far, in every file
        self.dirty = False

    def _open(self) -> int:
        # O_NONBLOCK: a FIFO in the log's place fails (ENXIO) rather than blocks.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(self.name, flags, 0o644, dir_fd=self.dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, f"{self.name} is not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, data: bytes) -> None:
        if self.size >= self.max_bytes:
            self._rotate()
        _write_file(self.fd, data)
        self.size += len(data)
        self.total += len(data)
        self.dirty = True

    def _rotate(self) -> None:
        # Renamed while still open, and the new file open before the old fd is closed: when the
        # rename or the open fails, `self.fd` is still this object's, open, closed once (by
        # close or abandon), never twice (a number closed twice may be another file's by then).
        previous = self.name + ".1"
        os.rename(self.name, previous, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        kept = self.size
        old, self.fd = self.fd, self._open()
        self.size = 0
        os.close(old)  # Linux frees the fd even when close reports an error
        note = (
            f"tfmw-supervisor: {self.total} bytes of output came before this line: the last {kept} of them "
            f"are in {previous}, {self.total - kept} before those were dropped (each file is capped at "
            f"{self.max_bytes} bytes)\n"
        ).encode()
        _write_file(self.fd, note)
        self.size = len(note)

    def sync(self) -> None:
        if self.dirty:
            self.dirty = False
            os.fdatasync(self.fd)

    def close(self) -> None:
        """Synced, then both fds closed; the first error is raised once both are."""
        try:
            self.sync()
        finally:
            self._close_fds(quiet=False)

    def abandon(self) -> None:
        """Both fds closed, errors ignored: the log stopped."""
        self._close_fds(quiet=True)

    def _close_fds(self, quiet: bool) -> None:
        # Each exactly once, even when one fails: Linux frees an fd whatever close reports.
        fds = [fd for fd in (self.fd, self.dir_fd) if fd >= 0]
        self.fd = self.dir_fd = -1
        failure: OSError | None = None
        for fd in fds:
            try:
                os.close(fd)
            except OSError as error:
                failure = failure or error
        if failure is not None and not quiet:
            raise failure


# ---- the volume's thread ----


@dataclasses.dataclass
class _Command:
    kind: str  # "open", "output", "dropped", "close", "report"
    data: bytes = b""
    attempt: int = 0
    dropped: int = 0
    report: dict[str, object] | None = None
    state: str = ""
    fatal: bool = False
    done: threading.Event | None = None  # set once carried out


@dataclasses.dataclass(frozen=True)
class ReportResult:
    state: str
    attempt: int
    fatal: bool
    error: str | None


class Volume:
    """Everything that touches the job's folder, on one thread of its own.

    A slow or hung volume (an NFS server gone) then stalls only this thread: the child's output
    still reaches kubectl logs, signals are still forwarded and children reaped, and the pod
    still ends within its grace. Output waiting for the volume is bounded; beyond the bound it
    is dropped from the log (never from stdout), and the log says how much.
    """

    def __init__(
        self,
        folder: JobFolder,
        job_uid: str,
        stem: str,
        log_max_bytes: int,
        poll_seconds: float,
        notify: Callable[[], None],
    ) -> None:
        self.folder = folder
        self.job_uid = job_uid
        self.stem = stem
        self.log_max_bytes = log_max_bytes
        self.poll_seconds = poll_seconds
        self._notify = notify
        self._cond = threading.Condition()
        self._commands: collections.deque[_Command] = collections.deque()
        self._buffered = 0
        self._drop: _Command | None = None
        self._stopping = False
        self._busy = False  # commands taken from `_commands` are being carried out (settle)
        # What the thread tells the main thread, appended here before `notify`.
        self.controls: collections.deque[Control | None] = collections.deque()
        self.results: collections.deque[ReportResult] = collections.deque()
        self._log: LogFile | None = None
        self._closed: list[LogFile] = []  # written to the end, not yet synced and closed
        self._log_warned = False
        self._last_signature: tuple[int, ...] | None = None
        self._last_control: Control | None = None
        self._polled = False
        self.failure: str | None = None  # the thread ended on an error of this file's own
        self._thread = threading.Thread(target=self._run, name="tfmw-volume", daemon=True)

    # -- the main thread's side --

    def start(self) -> None:
        self._thread.start()

    def _put(self, command: _Command) -> None:
        with self._cond:
            self._commands.append(command)
            self._cond.notify_all()  # the main thread may wait on it too (settle)

    def open_log(self, attempt: int) -> threading.Event:
        """Open the attempt's log (and so make its folder, where TFMW_STACKS_PATH points)."""
        done = threading.Event()
        self._put(_Command("open", attempt=attempt, done=done))
        return done

    def output(self, data: bytes) -> None:
        with self._cond:
            if self._buffered + len(data) > LOG_BUFFER_MAX_BYTES:
                if self._drop is None:
                    self._drop = _Command("dropped")
                    self._commands.append(self._drop)
                self._drop.dropped += len(data)
                return
            self._drop = None
            self._buffered += len(data)
            self._commands.append(_Command("output", data=data))
            self._cond.notify_all()

    def close_log(self, trailer: bytes) -> None:
        self._put(_Command("close", data=trailer))

    def report(self, doc: dict[str, object], state: str, attempt: int, fatal: bool) -> None:
        self._put(_Command("report", report=doc, state=state, attempt=attempt, fatal=fatal))

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def settle(self, timeout: float) -> bool:
        """Wait, at most `timeout`, while commands are pending or being carried out; True once
        none are. The thread idle, or in a poll of the control file (or a periodic sync), is not
        waited for: nothing the exit needs depends on it, and on a hung volume it never ends (a
        pod's SIGTERM with no child exits at once). What an idle thread's own stop would still
        do (close a log not closed by a command) the process's exit does too."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._commands or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return True

    # -- the thread --

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as error:  # a bug here must end the pod visibly, not leave it waiting
            self.failure = f"{type(error).__name__}: {error}"
            self._notify()
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _loop(self) -> None:
        next_poll = 0.0
        next_sync: float | None = None
        while True:
            with self._cond:
                while not self._commands and not self._stopping:
                    now = time.monotonic()
                    wake = next_poll if next_sync is None else min(next_poll, next_sync)
                    if wake <= now:
                        break
                    self._cond.wait(wake - now)
                commands = list(self._commands)
                self._commands.clear()
                self._buffered = 0
                self._drop = None
                stopping = self._stopping
                self._busy = bool(commands)
            for command in commands:
                self._do(command)
                if command.done is not None:
                    command.done.set()
            self._finish_closed()
            if stopping:
                self._close_log(b"")
                self._finish_closed()
                return
            with self._cond:
                self._busy = False
                self._cond.notify_all()
            now = time.monotonic()
            if self._log is not None and self._log.dirty and next_sync is None:
                next_sync = now + SYNC_SECONDS
            if next_sync is not None and now >= next_sync:
                next_sync = None
                self._log_io(lambda log: log.sync())
            if now >= next_poll:
                self._poll()
                next_poll = time.monotonic() + self.poll_seconds

    def _do(self, command: _Command) -> None:
        if command.kind == "open":
            self._close_log(b"")
            try:
                self._log = self.folder.open_log(command.attempt, self.stem, self.log_max_bytes)
                self._log_warned = False
            except OSError as error:
                say(f"no log on the volume for attempt {command.attempt}: {error}")
        elif command.kind == "output":
            data = command.data
            self._log_io(lambda log: log.write(data))
        elif command.kind == "dropped":
            note = f"\ntfmw-supervisor: {command.dropped} bytes of output dropped here: the volume was slow\n"
            self._log_io(lambda log: log.write(note.encode()))
        elif command.kind == "close":
            self._close_log(command.data)
        elif command.kind == "report" and command.report is not None:
            failure: str | None = None
            try:
                self.folder.write_report(self.stem, command.report)
            except OSError as error:
                failure = str(error)
            self.results.append(ReportResult(command.state, command.attempt, command.fatal, failure))
            self._notify()

    def _log_io(self, action: Callable[[LogFile], None]) -> None:
        if self._log is None:
            return
        try:
            action(self._log)
        except OSError as error:
            if not self._log_warned:
                self._log_warned = True
                say(f"the log on the volume stopped: {error}")
            self._log.abandon()
            self._log = None

    def _close_log(self, trailer: bytes) -> None:
        if self._log is None:
            return
        if trailer:
            self._log_io(lambda log: log.write(trailer))
        log, self._log = self._log, None
        if log is not None:
            self._closed.append(log)

    def _finish_closed(self) -> None:
        """Sync and close the logs of ended children once the batch's reports are written: the
        last words are in the file before the report (visible), on the disk just after it."""
        while self._closed:
            log = self._closed.pop(0)
            try:
                log.close()
            except OSError as error:
                say(f"the log on the volume could not be closed: {error}")

    def _poll(self) -> None:
        """Stat the control file; read it only when it changed; tell the main thread news."""
        try:
            signature = self.folder.control_signature()
        except OSError:
            signature = None
        if self._polled and signature == self._last_signature:
            return
        self._last_signature = signature
        control = None if signature is None else self.folder.read_control(self.job_uid)
        if self._polled and control == self._last_control:
            return
        self._polled = True
        self._last_control = control
        self.controls.append(control)
        self._notify()


# ---- what an attempt leaves behind ----


def become_subreaper() -> bool:
    """Adopt the orphans of this process's descendants, as PID 1 does (PR_SET_CHILD_SUBREAPER):
    a process of an attempt that left its group (setsid) is this process's child once its
    parent is killed, so it can be found, killed and reaped. ctypes, as the standard library has
    no prctl; False where it cannot be (no ctypes in a minimal image, not Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(PR_SET_CHILD_SUBREAPER, *(ctypes.c_ulong(n) for n in (1, 0, 0, 0)))
    except (ImportError, OSError, AttributeError):
        return False
    return bool(done == 0)


def list_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def own_children() -> list[int]:
    """This process's children, of every thread (/proc/self/task/<tid>/children), else of a scan."""
    children: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as file:
                children += [int(pid) for pid in file.read().split()]
    except (OSError, ValueError):  # a kernel without CONFIG_PROC_CHILDREN
        me = os.getpid()
        return [pid for pid in list_pids() if (proc_stat(pid) or ("", "", 0, 0))[2] == me]
    return children


def proc_stat(pid: int) -> tuple[str, str, int, int] | None:
    """(name, state, parent pid, process group) of /proc/<pid>/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            raw = file.read(4096).decode(errors="replace")
    except OSError:
        return None
    name, _, rest = raw.partition("(")[2].rpartition(")")  # the name may hold ")" and spaces
    fields = rest.split()
    try:
        return name, fields[0], int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


# ---- the child ----


@dataclasses.dataclass
class ChildEnd:
    attempt: int
    exit_code: int
    signal: int | None
    oom_killed: bool | None
    started_at: float
    finished_at: float

    def fields(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "oomKilled": self.oom_killed,
            "startedAt": rfc3339(self.started_at),
            "finishedAt": rfc3339(self.finished_at),
        }


# ---- a warm start: the next attempt's Python, its imports done while this one runs ----

PYTHON_NAME = re.compile(r"python[0-9.]*\Z")
MODULE_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
MODULE_NAME = re.compile(MODULE_NAME_PATTERN + r"\Z")
MAX_MODULE_NAME_CHARS = 128
MAX_WARM_MODULES = 16
# A standby is started this long after a child: never beside the child's own imports.
STANDBY_DELAY_SECONDS = 10.0
STANDBY_CHANNEL_FD = 3  # the standby's end of its socket pair to the supervisor
STANDBY_OUTPUT_MAX_BYTES = 256 * 1024  # what a standby prints before its attempt, kept for its log
PROMOTE_SECONDS = 2.0  # to hand a standby its attempt's environment; else the attempt starts cold
OOM_SCORE_ADJ_MAX = b"1000"  # the OOM killer's first choice: a standby, never the training beside it
# Run as `python -c STANDBY_CODE MODULES MODE TARGET ARG...`: imports MODULES, says `ready`,
# waits for the attempt's environment (JSON, one line), then runs TARGET as `python MODE
# TARGET ARG...` would: `-m` a module, `-` (here) a script's path.
STANDBY_CODE = """import os, sys
channel, modules, mode, target, rest = 3, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
os.set_inheritable(channel, False)
sys.path[0] = os.getcwd() if mode == "-m" else os.path.dirname(os.path.realpath(target))
for name in modules.split(","):
    __import__(name)
os.write(channel, b"ready\\n")
data = b""
while not data.endswith(b"\\n"):
    chunk = os.read(channel, 1 << 20)
    if not chunk:
        os._exit(0)
    data += chunk
os.close(channel)
import json, runpy
environ = json.loads(data.decode())
os.environ.clear()
os.environ.update(environ)
sys.argv = [target, *rest]
if mode == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(target, run_name="__main__")
"""


def python_invocation(command: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """`python3 -m MODULE ARG...` as ("-m", MODULE, ARGs), `python3 SCRIPT ARG...` as ("-",
    SCRIPT, ARGs): the commands a standby can run after importing ahead. None for any other
    (interpreter options, `-c`, a shell, another program)."""
    if len(command) < 2 or not PYTHON_NAME.match(os.path.basename(command[0])):
        return None
    if command[1] == "-m":
        if len(command) < 3 or not MODULE_NAME.match(command[2]):
            return None
        return ("-m", command[2], list(command[3:]))
    if command[1].startswith("-") or not command[1]:
        return None
    return ("-", command[1], list(command[2:]))


def warm_modules(text: str) -> tuple[str, ...]:
    """`--warm-start`'s comma-separated module names; ValueError naming the bad one."""
    names = tuple(n for n in text.split(",") if n)
    if not names or len(names) > MAX_WARM_MODULES:
        raise ValueError(f"1 to {MAX_WARM_MODULES} module names, comma-separated")
    for name in names:
        if not MODULE_NAME.match(name) or len(name) > MAX_MODULE_NAME_CHARS:
            raise ValueError(f"{name!r} is not a module name")
    return names


@dataclasses.dataclass
class Standby:
    """The next attempt's process, importing or ready, not yet given its attempt."""

    pid: int
    channel: int  # our end of its socket pair
    pipes: dict[int, int]  # its output, as Child.pipes; read once it is a child
    started: float = 0.0  # monotonic
    ready: bool = False  # it said so on its channel
    output: list[tuple[int, bytes]] = dataclasses.field(default_factory=list)  # (1 or 2, bytes)
    output_bytes: int = 0
    dropped_bytes: int = 0


@dataclasses.dataclass
class Child:
    pid: int
    attempt: int
    started_at: float
    oom_before: int | None
    pipes: dict[int, int]  # our reading end -> the fd (1 or 2) its output goes to
    stopping: bool = False
    kill_at: float | None = None  # monotonic: SIGKILL to its group then
    status: int | None = None  # waitpid's, once reaped
    line_open: bool = False  # its output so far does not end with a newline
    finished_at: float = 0.0  # when it was reaped (wall clock, for its report)
    drain_until: float = 0.0  # monotonic: after its reaping, how long its pipes may still be read


@dataclasses.dataclass
class Remains:
    """What may be left of an ended child's attempt: its process group and, where they can be
    told apart, the processes that left it (_strays). Killed at the child's end, then looked at
    on the main loop's timer until gone: the child's end is reported, and the next attempt
    starts, only then (or, the end, once `bound` passed: the next attempt never)."""

    pgid: int
    attempt: int
    since: float  # monotonic: the child's reaping, and their SIGKILL
    bound: float  # monotonic: the child's end is reported then even if some are still there
    next_check: float
    interval: float = GONE_CHECK_FIRST_SECONDS
    overdue: bool = False  # `bound` passed with some still there: reported so (REPORT_NOT_ENDED)


@dataclasses.dataclass(frozen=True)
class Settings:
    command: tuple[str, ...]
    grace_seconds: float
    stop_seconds: float
    log_max_bytes: int
    exited_wait_seconds: float
    poll_seconds: float
    warm_start: tuple[str, ...] = ()  # modules a standby imports ahead of the next attempt
    warm_start_delay: float = STANDBY_DELAY_SECONDS


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who this supervisor is in the job; None (plain mode) without a shared folder."""

    shared_dir: str
    job_uid: str
    stem: str
    pod_uid: str | None
    pod_name: str


def identity_from_env(environ: Mapping[str, str], hostname: str) -> Identity | None:
    shared_dir = environ.get(SHARED_DIR_ENV, "")
    if not shared_dir:
        return None
    job_uid = environ.get(JOB_UID_ENV, "")
    stem = pod_stem(environ, hostname)
    if not job_uid or len(job_uid) > 128 or stem is None:
        say(f"{SHARED_DIR_ENV} is set, {JOB_UID_ENV} or this pod's place is not: running the command alone")
        return None
    pod_uid = environ.get(POD_UID_ENV) or None
    return Identity(shared_dir, job_uid, stem, pod_uid[:128] if pod_uid else None, hostname[:253])


class Supervisor:
    def __init__(self, settings: Settings, identity: Identity | None, environ: Mapping[str, str]) -> None:
        self.settings = settings
        self.identity = identity
        self.environ = dict(environ)
        self.env_attempt = attempt_from_env(environ)
        self.oom = OomCounter.find() if identity is not None else OomCounter(None)
        self.selector = selectors.DefaultSelector()
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        self.volume: Volume | None = None
        if identity is not None:
            self.volume = Volume(
                JobFolder(identity.shared_dir),
                identity.job_uid,
                identity.stem,
                settings.log_max_bytes,
                settings.poll_seconds,
                self._wake,
            )
        self.child: Child | None = None
        self.last_end: ChildEnd | None = None
        self.last_attempt_run: int | None = None
        self.target = self.env_attempt  # the attempt this pod is to run next, or runs
        self.control: Control | None = None
        self.started_up = False
        self.state: str | None = None
        self.waiting_reported: int | None = None
        self.stacks_served: str | None = None
        self.stacks_delivered = False
        self.exit_requested = False
        self.terminating: int | None = None  # the signal that ends the supervisor
        self.terminate_deadline: float | None = None  # monotonic: the grace's end, less the margin
        self.terminate_margin = 0.0  # that margin: half of it for the last report, at the exit
        self.exited_deadline: float | None = None
        self.retry_report_at: float | None = None  # monotonic: a report that failed is written again
        self.reports_failing = False
        self.exit_code: int | None = None
        self.standby: Standby | None = None
        self.standby_at: float | None = None  # monotonic: start the next attempt's standby then
        # What the last child's attempt left, until it is gone (_check_remains), and, once its
        # end was reported without it gone, what is still there (REPORT_NOT_ENDED).
        self.remains: Remains | None = None
        self.not_ended: str | None = None
        # How the processes an attempt leaves behind are found (set by run): as PID 1 every
        # process of the namespace is ours to end; else, as a subreaper, the orphans we adopt.
        # Only through a /proc of this PID namespace: another's numbers would name others.
        self.pid1 = False
        self.subreaper = False
        self.proc_ours = False
        # Only where attempts follow one another (a job's folder): alone, there is no next.
        warm = bool(settings.warm_start) and identity is not None
        self.invocation = python_invocation(settings.command) if warm else None
        if warm and self.invocation is None:
            say(
                "--warm-start: the command is not `python3 -m MODULE ...` or `python3 SCRIPT ...`: no standby"
            )

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # the pipe is full: the main loop wakes anyway
            os.write(self.wake_write, b"\0")

    # ---- the loop ----

    def run(self) -> int:
        self.pid1 = os.getpid() == 1
        with contextlib.suppress(OSError):
            self.proc_ours = os.readlink("/proc/self") == str(os.getpid())
        if not self.pid1:
            self.subreaper = become_subreaper()
        for stream in STREAMS.values():
            stream.notify = self._wake
            if self.volume is not None:  # each child writes to pipes of its own, not to these
                stream.own()
        signal.set_wakeup_fd(self.wake_write, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, _record)
        for signum in FORWARDED_SIGNALS:  # the same handler, if main() was not run as a script
            signal.signal(signum, _record)
        self.selector.register(self.wake_read, selectors.EVENT_READ)
        if self.volume is not None:
            self.volume.start()
        else:
            self.started_up = True
            self._spawn(self.env_attempt)
        while self.exit_code is None:
            self._handle_signals()
            self._reap()
            if self.exit_code is None and self.volume is not None:
                self._handle_volume()
            if self.exit_code is None:
                self._handle_deadlines()
            if self.exit_code is None:
                self._wait()
        return self._finish(self.exit_code)

    def _wait(self) -> None:
        # Only deadlines whose action is still to come: a deadline passed and acted on is
        # dropped (None), or it would make select return at once and the loop spin. The grace's
        # end acts through the child's kill_at and the remains' bound, not on its own.
        deadlines = [d for d in (self.exited_deadline, self.retry_report_at) if d is not None]
        if self.standby_at is not None and self.remains is None:  # no standby before they are gone
            deadlines.append(self.standby_at)
        child = self.child
        if child is not None and child.status is None and child.kill_at is not None:
            deadlines.append(child.kill_at)
        if child is not None and child.status is not None:  # its end waits for its pipes, then the rest
            if child.pipes:
                deadlines.append(child.drain_until)
            elif self.remains is not None:
                deadlines.append(self.remains.bound)
        if self.remains is not None:
            deadlines.append(self.remains.next_check)
        self._register_streams()
        timeout = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
        for key, _ in self.selector.select(timeout):
            if isinstance(key.data, Stream):
                key.data.flush()
            elif key.fd == self.wake_read:
                self._drain_wake()
            elif self.child is not None and key.fd in self.child.pipes:
                self._pump(self.child, key.fd)
            elif self.standby is not None and key.fd == self.standby.channel:
                self._hear_standby(self.standby)
            elif self.standby is not None and key.fd in self.standby.pipes:
                self._keep_standby_output(self.standby, key.fd)

    def _register_streams(self) -> None:
        """fd 1 and 2 in the selector while output waits for them, and only then."""
        for stream in STREAMS.values():
            waiting = stream.pending()
            if waiting and not stream.registered:
                try:
                    self.selector.register(stream.fd, selectors.EVENT_WRITE, stream)
                    stream.registered = True
                except (OSError, ValueError, KeyError):  # closed, or a file epoll cannot wait on
                    stream.drop()
            elif not waiting and stream.registered:
                self.selector.unregister(stream.fd)
                stream.registered = False

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake_read, 4096):
                pass
        except OSError:
            pass  # empty: signals and the volume's news are in their queues

    def _read_pipe(self, pipes: dict[int, int], fd: int) -> bytes:
        """What is waiting in one of a process's output pipes; b"" when nothing is (or at the
        end of its output, when the pipe is closed and dropped from `pipes`)."""
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(fd)
            os.close(fd)
            del pipes[fd]
        return data

    def _pump(self, child: Child, fd: int) -> bool:
        """Pass on what the child wrote; at the end of its output, close the pipe. Whether
        anything came."""
        target = child.pipes[fd]
        data = self._read_pipe(child.pipes, fd)
        if not data:
            return False
        STREAMS[target].put(data)
        if self.volume is not None:
            self.volume.output(data)
            child.line_open = not data.endswith(b"\n")
        return True

    def _say(self, message: str) -> None:
        say(message)
        if self.volume is not None and self.child is not None and self.child.status is None:
            self.volume.output(self._log_line(self.child, message))

    @staticmethod
    def _log_line(child: Child, message: str) -> bytes:
        """The supervisor's line in the log, on a line of its own."""
        line = f"{chr(10) if child.line_open else ''}tfmw-supervisor: {message}\n".encode(errors="replace")
        child.line_open = False
        return line

    def _handle_signals(self) -> None:
        while _received:
            signum = _received.pop(0)
            if signum == signal.SIGCHLD:
                continue  # the loop reaps next
            child = self.child if self.child is not None and self.child.status is None else None
            if signum in (signal.SIGTERM, signal.SIGINT):
                self._kill_standby()
                self.standby_at = None
                if self.terminating is None:
                    self.terminating = signum
                    grace = self.settings.grace_seconds
                    self.terminate_margin = min(REPORT_MARGIN_SECONDS, grace / 2)
                    self.terminate_deadline = time.monotonic() + grace - self.terminate_margin
                if child is None and self.child is not None:
                    # Its command ended; what it left is being made sure of: its end is
                    # reported and the supervisor exits then, within the grace (_gone_bound).
                    remains = self.remains
                    if remains is not None and not remains.overdue:
                        remains.bound = min(remains.bound, self._gone_bound(remains.since))
                    continue
                if child is None:
                    self.exit_code = self._last_code(128 + signum)
                    return
                self._signal_child(child, signum)
                child.stopping = True
                if child.kill_at is None or child.kill_at > (self.terminate_deadline or 0.0):
                    child.kill_at = self.terminate_deadline
            elif child is not None:
                self._signal_child(child, signum)

    def _last_code(self, otherwise: int) -> int:
        """The exit code of the command's end this pod last reported, if that is its state."""
        if self.state == STATE_EXITED and self.last_end is not None:
            return self.last_end.exit_code
        return otherwise

    @staticmethod
    def _signal_child(child: Child, signum: int) -> None:
        with contextlib.suppress(OSError):  # it has just ended: reaped next
            os.kill(child.pid, signum)

    def _reap(self) -> None:
        """As PID 1, reap every child: ours, and orphans the kernel hands us."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if self.child is not None and pid == self.child.pid and self.child.status is None:
                self.child.status = status
                self._child_reaped(self.child)
            elif self.standby is not None and pid == self.standby.pid:
                self._standby_ended(status)

    def _handle_deadlines(self) -> None:
        now = time.monotonic()
        child = self.child
        if child is not None and child.status is None and child.kill_at is not None and now >= child.kill_at:
            child.kill_at = None
            self._kill_group(child)
            self._say(f"attempt {child.attempt}: the command did not end in time; SIGKILL")
        if self.remains is not None and now >= self.remains.next_check:
            self._check_remains()
        if self.child is not None and self.child.status is not None:
            self._end_child_when_ready()
            if self.exit_code is not None:
                return
            now = time.monotonic()
        if self.retry_report_at is not None and now >= self.retry_report_at:
            self.retry_report_at = None
            self._report_current()
        if self.standby_at is not None and now >= self.standby_at and self.remains is None:
            self.standby_at = None
            if self.standby is None and self.terminating is None and not self.exit_requested:
                self._spawn_standby()
        if self.exited_deadline is not None and now >= self.exited_deadline and self.child is None:
            waited = self.settings.exited_wait_seconds
            say(f"nothing asked of this pod in {waited:g} s since its command ended: exiting")
            self.exit_code = self.last_end.exit_code if self.last_end is not None else 0

    @staticmethod
    def _kill_group(child: Child) -> None:
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):  # it may have left its group
            os.kill(child.pid, signal.SIGKILL)

    # ---- the child's life ----

    def _spawn(self, attempt: int) -> None:
        env = dict(self.environ)
        file_actions: list[tuple[int, int, int]] = []
        pipes: dict[int, int] = {}
        ends: list[int] = []
        if self.identity is not None and self.volume is not None:
            env[ATTEMPT_ENV] = str(attempt)
            hosts = self.control.hosts if self.control is not None else ()
            if hosts and TF_CONFIG in env and env.get(JOB_NAME_ENV):
                env[TF_CONFIG] = with_hosts(env[TF_CONFIG], dict(hosts), env[JOB_NAME_ENV])
            env[STACKS_PATH_ENV] = os.path.join(
                self.identity.shared_dir, LOGS_DIR, f"attempt-{attempt}", f"{self.identity.stem}.stacks"
            )
            if not self.volume.open_log(attempt).wait(LOG_OPEN_WAIT_SECONDS):
                say(f"attempt {attempt}: the volume is slow; starting before its log folder is made")
            for target in (1, 2):
                read_end, write_end = os.pipe()
                pipes[read_end] = target
                ends.append(write_end)
                file_actions.append((os.POSIX_SPAWN_DUP2, write_end, target))
        oom_before = self.oom.read()
        started_at = time.time()
        self.last_attempt_run = attempt
        self.target = max(self.target, attempt)
        self.waiting_reported = None
        self.exited_deadline = None
        warm = self._promote_standby(env) if pipes else None
        if warm is not None:
            for fd in list(pipes) + ends:
                os.close(fd)
            self._start_child(warm.pid, attempt, started_at, oom_before, warm.pipes, "warm: imported ahead")
            for target_fd, data in warm.output:  # what it printed while it imported, first
                STREAMS[target_fd].put(data)
                if self.volume is not None:
                    self.volume.output(data)
            if warm.dropped_bytes:
                self._say(f"{warm.dropped_bytes} bytes the standby printed before its attempt were dropped")
            return
        try:
            pid = os.posix_spawnp(
                self.settings.command[0],
                list(self.settings.command),
                env,
                file_actions=file_actions,
                setpgroup=0,
                setsigdef=RESET_SIGNALS,
            )
        except OSError as error:
            for fd in pipes:
                os.close(fd)
            code = 127 if error.errno == errno.ENOENT else 126  # as a shell says it
            say(f"attempt {attempt}: cannot run {self.settings.command[0]!r}: {error.strerror}")
            self.child = Child(-1, attempt, started_at, oom_before, {}, status=code << 8)
            self._child_reaped(self.child)
            return
        finally:
            for fd in ends:
                os.close(fd)
        self._start_child(pid, attempt, started_at, oom_before, pipes, "")

    def _start_child(
        self,
        pid: int,
        attempt: int,
        started_at: float,
        oom_before: int | None,
        pipes: dict[int, int],
        how: str,
    ) -> None:
        self.child = Child(pid, attempt, started_at, oom_before, pipes)
        for fd in pipes:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ)
        self.state = STATE_RUNNING
        if self.volume is not None:
            name = os.path.basename(self.settings.command[0])
            self._say(f"attempt {attempt}: started {name} (pid {pid}{', ' + how if how else ''})")
            self._report(STATE_RUNNING, attempt, fatal=False)
        if self.terminating is not None:  # a SIGTERM came while it was being started
            self._signal_child(self.child, self.terminating)
            self.child.stopping = True
            self.child.kill_at = self.terminate_deadline
        elif self.invocation is not None and self.standby is None:
            self.standby_at = time.monotonic() + self.settings.warm_start_delay

    # ---- the warm standby ----

    def _spawn_standby(self) -> None:
        """The next attempt's Python, importing --warm-start's modules now, in a process group
        of its own; its output waits in its pipes until it becomes the child."""
        assert self.invocation is not None
        mode, target, rest = self.invocation
        ours, theirs = socket.socketpair()
        pipes: dict[int, int] = {}
        ends: list[int] = []
        file_actions: list[tuple[int, int, int]] = [
            (os.POSIX_SPAWN_DUP2, theirs.fileno(), STANDBY_CHANNEL_FD)
        ]
        for target_fd in (1, 2):
            read_end, write_end = os.pipe()
            pipes[read_end] = target_fd
            ends.append(write_end)
            file_actions.append((os.POSIX_SPAWN_DUP2, write_end, target_fd))
        argv = [
            self.settings.command[0],
            "-c",
            STANDBY_CODE,
            ",".join(self.settings.warm_start),
            mode,
            target,
        ]
        try:
            pid = os.posix_spawnp(
                self.settings.command[0],
                [*argv, *rest],
                dict(self.environ),
                file_actions=file_actions,
                setpgroup=0,
                setsigdef=RESET_SIGNALS,
            )
        except OSError as error:
            say(f"the warm standby cannot be started: {error.strerror}; the next attempt starts cold")
            ours.close()
            for fd in pipes:
                os.close(fd)
            return
        finally:
            theirs.close()
            for fd in ends:
                os.close(fd)
        channel = ours.detach()
        os.set_blocking(channel, False)
        self.standby = Standby(pid, channel, pipes, started=time.monotonic())
        self.selector.register(channel, selectors.EVENT_READ)
        for fd in pipes:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ)
        # Raising one's own child's score needs no privilege.
        with contextlib.suppress(OSError), open(f"/proc/{pid}/oom_score_adj", "wb") as adj:
            adj.write(OOM_SCORE_ADJ_MAX)
        say(f"warm standby (pid {pid}) importing {', '.join(self.settings.warm_start)} for the next attempt")

    def _hear_standby(self, standby: Standby) -> None:
        """Its one word, `ready`, once its imports are done; nothing (its end) if they failed."""
        try:
            word = os.read(standby.channel, 64)
        except BlockingIOError:
            return
        except OSError:
            word = b""
        with contextlib.suppress(KeyError, ValueError):  # heard already: its end
            self.selector.unregister(standby.channel)
        if word.startswith(b"ready"):
            standby.ready = True
            took = time.monotonic() - standby.started
            modules = ", ".join(self.settings.warm_start)
            say(f"warm standby (pid {standby.pid}) ready: {modules} imported in {took:.1f} s")

    def _promote_standby(self, env: Mapping[str, str]) -> Standby | None:
        """The standby, given the attempt's environment, when it has finished its imports; else
        None, and a standby still importing (or that cannot take it) is killed: the attempt
        starts cold."""
        standby = self.standby
        if standby is None:
            return None
        if not standby.ready:
            self._hear_standby(standby)
        try:
            ended, status = os.waitpid(standby.pid, os.WNOHANG)
        except ChildProcessError:
            ended, status = standby.pid, 0
        if ended:
            self._standby_ended(status)
            return None
        if not standby.ready:
            say(f"the warm standby (pid {standby.pid}) has not finished its imports: the attempt starts cold")
            self._kill_standby()
            return None
        if not self._tell_standby(standby, (json.dumps(dict(env)) + "\n").encode()):
            self._kill_standby()
            return None
        os.close(standby.channel)
        for fd in standby.pipes:
            self.selector.unregister(fd)
        self.standby = None
        return standby

    @staticmethod
    def _tell_standby(standby: Standby, message: bytes) -> bool:
        """Write `message` on its channel within PROMOTE_SECONDS, never blocking longer."""
        deadline = time.monotonic() + PROMOTE_SECONDS
        view = memoryview(message)
        while view:
            try:
                view = view[os.write(standby.channel, view) :]
            except BlockingIOError:
                pass
            except OSError as error:
                say(
                    f"the warm standby (pid {standby.pid}) cannot be told its attempt: {error}; starting cold"
                )
                return False
            left = deadline - time.monotonic()
            if view and left <= 0:
                say(f"the warm standby (pid {standby.pid}) did not take its attempt in time: starting cold")
                return False
            if view:
                select.select([], [standby.channel], [], left)
        return True

    def _keep_standby_output(self, standby: Standby, fd: int) -> None:
        """What a standby prints while it imports and waits, kept (bounded) for its attempt's
        log: a full pipe would stop it before it is ready."""
        target = standby.pipes[fd]
        data = self._read_pipe(standby.pipes, fd)
        if not data:
            return
        room = STANDBY_OUTPUT_MAX_BYTES - standby.output_bytes
        if room < len(data):
            standby.dropped_bytes += len(data) - max(room, 0)
            data = data[: max(room, 0)]
        if data:
            standby.output.append((target, data))
            standby.output_bytes += len(data)

    def _standby_ended(self, status: int) -> None:
        """The standby ended on its own: its imports failed, or the OOM killer chose it (its
        score makes it the first choice), which the running child's end must not be blamed for."""
        standby = self.standby
        assert standby is not None
        how = (
            f"signal {os.WTERMSIG(status)}"
            if os.WIFSIGNALED(status)
            else f"exit code {os.WEXITSTATUS(status)}"
        )
        say(f"the warm standby (pid {standby.pid}) ended ({how}) before its attempt: the next starts cold")
        child = self.child
        if child is not None and child.status is None and child.oom_before is not None:
            counted = self.oom.read()
            if counted is not None:
                child.oom_before = max(child.oom_before, counted)
        self._close_standby()

    def _kill_standby(self) -> None:
        standby = self.standby
        if standby is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(standby.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(standby.pid, signal.SIGKILL)
        self._close_standby()  # reaped by the loop as an orphan would be

    def _close_standby(self) -> None:
        standby, self.standby = self.standby, None
        if standby is None:
            return
        for fd in [standby.channel, *standby.pipes]:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(fd)
        for fd in [standby.channel, *standby.pipes]:
            with contextlib.suppress(OSError):
                os.close(fd)

    # ---- a child's end, and what its attempt left ----

    def _child_reaped(self, child: Child) -> None:
        """The command ended. What it left running is killed, as when a container's PID 1 ends;
        its end is reported (and the next attempt may start) once all of that is gone: a process
        slow to die (in D state on a hung volume, a GPU's teardown) or one that left the group
        would still hold the port the next attempt's TensorFlow listens on."""
        child.finished_at = time.time()
        now = time.monotonic()
        child.drain_until = now + DRAIN_SECONDS
        if child.pid > 0:  # killed by _check_remains, after a look that its group is still there
            self.remains = Remains(
                child.pid, child.attempt, since=now, bound=self._gone_bound(now), next_check=now
            )
            self._check_remains()
        self._end_child_when_ready()

    def _gone_bound(self, since: float) -> float:
        """When an ended child's end is reported even though some of what its attempt left is
        still there: its stop bound after its end (at least GONE_MIN_SECONDS); once the pod is
        terminating, no later than a quarter of the grace's margin after the kill deadline (the
        report and the exit have the rest)."""
        bound = since + max(self._stop_bound(), GONE_MIN_SECONDS)
        if self.terminate_deadline is not None:
            bound = min(bound, max(since, self.terminate_deadline) + self.terminate_margin / 4)
        return bound

    def _check_remains(self) -> None:
        """Kill what is left of the attempt again (a member may have forked), and note whether
        anything is: checked again later (the loop's timer, backing off), never waited for here."""
        remains = self.remains
        assert remains is not None
        strays = self._strays()
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.killpg(remains.pgid, 0)
            group = True
        except ProcessLookupError:
            group = False
        except OSError:
            group = True  # a member this process may not signal is one still
        if group:  # checked first: a group gone may have left its number to another
            with contextlib.suppress(OSError):
                os.killpg(remains.pgid, signal.SIGKILL)
        elif not strays:
            self.remains = None
            if remains.overdue:
                self._remains_ended(remains)
            return
        remains.next_check = time.monotonic() + remains.interval
        remains.interval = min(remains.interval * 2, GONE_CHECK_MAX_SECONDS)

    def _strays(self) -> list[int]:
        """Processes an attempt may leave outside its group (setsid): its own children but
        the standby, orphans it adopted as PID 1 or as a subreaper. Not every process of the
        PID namespace: a `kubectl exec` or `kubectl debug --target` session, an exec probe,
        have their parent outside it and are no attempt's (one it may not signal, a root debug
        shell, held every attempt back: a hostile read of 085da3e). None where /proc is
        another PID namespace's (its numbers are not the ones kill() takes); a zombie of its
        own is not one (the loop reaps it; it holds nothing)."""
        if not self.proc_ours or not (self.pid1 or self.subreaper):
            return []
        me = os.getpid()
        standby = self.standby.pid if self.standby is not None else None
        strays = []
        for pid in own_children():
            info = proc_stat(pid) if pid != me else None
            if info is None:
                continue
            _, state, parent, group = info
            if standby is not None and standby in (pid, group):
                continue
            if parent == me and state in ("Z", "X"):
                continue
            strays.append(pid)
        return strays

    def _end_child_when_ready(self) -> None:
        """Report the reaped child's end once its attempt left nothing (or the bound passed) and
        its output is read: to the end of its pipes, or for DRAIN_SECONDS."""
        child = self.child
        assert child is not None and child.status is not None
        if child.pipes and self.remains is None:
            # Nothing that could write to its pipes is left: what is in them is all there is.
            for fd in list(child.pipes):
                while fd in child.pipes and self._pump(child, fd):
                    pass
        now = time.monotonic()
        if child.pipes and now >= child.drain_until:
            for fd in list(child.pipes):  # held open by something not found (_strays)
                self.selector.unregister(fd)
                os.close(fd)
            child.pipes.clear()
        if child.pipes or (self.remains is not None and now < self.remains.bound):
            return
        self._child_done(child)

    def _describe_remains(self, remains: Remains) -> str:
        """What is still there of an attempt once the bound passed: its log's, stderr's and
        report's words (REPORT_NOT_ENDED)."""
        pids = self._strays()
        if self.proc_ours:
            pids += [pid for pid in list_pids() if (proc_stat(pid) or ("", "", 0, 0))[3] == remains.pgid]
        named = []
        for pid in dict.fromkeys(pids):
            info = proc_stat(pid)
            if info is not None:
                named.append(f"pid {pid} ({info[0]}, state {info[1]})")
        what = named[0] if named else f"a process of its group {remains.pgid}"
        if len(named) > 1:
            what += f" and {len(named) - 1} more"
        took = time.monotonic() - remains.since
        return (
            f"{what} of attempt {remains.attempt} has not ended {took:.1f} s after its SIGKILL: "
            "no attempt starts in this pod before it does"
        )

    def _remains_ended(self, remains: Remains) -> None:
        """What outlived the bound is gone at last: the next attempt may come."""
        say(f"attempt {remains.attempt}: its last process has ended")
        self.not_ended = None
        if self.exit_code is not None or self.child is not None:
            return
        self._apply_control()
        if self.exit_code is None and self.child is None and self.state == STATE_EXITED:
            self._report_current()  # without REPORT_NOT_ENDED

    def _child_done(self, child: Child) -> None:
        status = child.status if child.status is not None else 0
        if os.WIFSIGNALED(status):
            signum: int | None = os.WTERMSIG(status)
            code = 128 + os.WTERMSIG(status)
        else:
            signum = None
            code = os.WEXITSTATUS(status)
        oom_after = self.oom.read()
        oom = None if child.oom_before is None or oom_after is None else oom_after > child.oom_before
        end = ChildEnd(child.attempt, code, signum, oom, child.started_at, child.finished_at)
        self.last_end = end
        self.child = None
        how = f"signal {signum}" if signum is not None else f"exit code {code}"
        lines = [f"attempt {child.attempt}: the command ended: {how}{', OOM-killed' if oom else ''}"]
        remains = self.remains
        if remains is not None:  # the bound passed: reported so, and no attempt starts beside it
            remains.overdue = True
            self.not_ended = self._describe_remains(remains)
            lines.append(self.not_ended)
        if self.volume is None:  # alone, as if it were not there
            for line in lines[1:]:
                say(line)
            self.exit_code = code
            return
        for line in lines:
            say(line)
        self.volume.close_log(b"".join(self._log_line(child, line) for line in lines))
        if self.terminating is not None or self.exit_requested:
            self.state = STATE_EXITED
            self._report(STATE_EXITED, child.attempt, fatal=False)
            self.exit_code = code
            return
        if self.target > child.attempt and remains is None:  # stopped for a restart: the barrier is next
            self._report_waiting()
            self._apply_control()
            return
        # Ended on its own; or stopped for a restart while something of its attempt lives on,
        # which must not be reported waiting (the barrier would open beside it): `exited`, with
        # REPORT_NOT_ENDED, until it is gone (_remains_ended).
        own = self.target <= child.attempt
        self.state = STATE_EXITED
        self._report(STATE_EXITED, child.attempt, fatal=own)
        if own and self.settings.exited_wait_seconds > 0:
            self.exited_deadline = time.monotonic() + self.settings.exited_wait_seconds
        self._apply_control()

    # ---- the operator's word ----

    def _handle_volume(self) -> None:
        assert self.volume is not None
        if self.volume.failure is not None and not self.exit_requested:
            # It cannot report any more: the command runs on alone, and the pod ends with it, as
            # it would without a supervisor (the operator then restarts the gang the old way).
            say(f"the volume thread failed ({self.volume.failure}): this pod cannot report any more")
            self.exit_requested = True
            if self.child is None:
                self.exit_code = self.last_end.exit_code if self.last_end is not None else 70  # EX_SOFTWARE
            return
        while self.volume.controls:
            control = self.volume.controls.popleft()
            if not self.started_up:
                self._start_up(control)
            elif control is not None:
                self.control = control
                self._apply_control()
            if self.exit_code is not None:
                return
        while self.volume.results:
            result = self.volume.results.popleft()
            if result.error is None:
                self.reports_failing = False
                continue
            if not self.reports_failing or result.fatal:  # once, not at every retry
                report = f"the {result.state} report of attempt {result.attempt}"
                say(f"{report} could not be written: {result.error}")
            self.reports_failing = True
            if result.fatal and self.child is None and self.state == STATE_EXITED and self.last_end:
                say("the operator cannot see this pod's end: exiting with the command's code")
                self.exit_code = self.last_end.exit_code
                return
            if result.state == self.state and self.retry_report_at is None:
                self.retry_report_at = time.monotonic() + REPORT_RETRY_SECONDS

    def _start_up(self, control: Control | None) -> None:
        """The first look at the control file decides whether the child starts at once."""
        self.started_up = True
        if control is not None and control.exit:  # the job is over: nothing to start
            self.control = control
            self._exit_on_request()
            return
        if control is None or control.attempt < self.env_attempt:
            # No word for this job (a first attempt, or a restart the operator made by
            # re-creating the pods): start as a pod always did.
            self.control = control
            self.stacks_served = control.stacks if control is not None else None
            self._spawn(self.env_attempt)
            return
        self.control = control
        self.stacks_served = control.stacks  # a request made before this pod was is not for it
        self._apply_control()

    def _apply_control(self) -> None:
        control = self.control
        if control is None:
            return
        if control.exit:
            self._exit_on_request()
            return
        if control.stacks != self.stacks_served:
            self._serve_stacks(control.stacks)
        self.target = max(self.target, control.attempt)
        child = self.child
        if child is not None:
            if child.attempt < self.target and child.status is None:
                self._stop(child, f"attempt {self.target} begins: stopping attempt {child.attempt}")
            return  # (reaped, its end is being made sure of: _child_done comes back here)
        if self.last_attempt_run is not None and self.target <= self.last_attempt_run:
            return  # its child ran; nothing new is asked
        if self.remains is not None:
            return  # a process of the last attempt lives on: neither waiting nor a start beside it
        if control.attempt == self.target and control.start:
            self._spawn(self.target)
        elif self.waiting_reported != self.target:
            self._report_waiting()

    def _exit_on_request(self) -> None:
        if self.exit_requested:
            return
        self.exit_requested = True
        self._kill_standby()
        self.standby_at = None
        child = self.child
        if child is None:
            say("the operator asked this pod to exit")
            self.exit_code = self._last_code(0)
            return
        if child.status is not None:
            return  # its end is being made sure of: reported, then the exit (_child_done)
        self._stop(child, f"the operator asked this pod to exit: stopping attempt {child.attempt}")

    def _stop(self, child: Child, why: str) -> None:
        """SIGTERM to the command, SIGKILL to its group after the stop bound (at once if 0).

        Asked again with a shorter bound (the operator learnt there is nothing to save), the
        shorter one holds.
        """
        bound = self._stop_bound()
        deadline = time.monotonic() + bound
        if child.stopping and child.kill_at is not None and child.kill_at <= deadline:
            return
        first = not child.stopping
        child.stopping = True
        if bound <= 0:
            self._say(f"{why}: SIGKILL")
            self._kill_group(child)
            child.kill_at = None
            return
        if first:
            self._say(f"{why}: SIGTERM, SIGKILL after {bound:g} s")
            self._signal_child(child, signal.SIGTERM)
        child.kill_at = deadline

    def _stop_bound(self) -> float:
        """SIGTERM to SIGKILL for a child stopped now: the control file's, else --stop-seconds."""
        if self.control is not None and self.control.stop_seconds is not None:
            return self.control.stop_seconds
        return self.settings.stop_seconds

    def _serve_stacks(self, request: str | None) -> None:
        self.stacks_served = request
        self.stacks_delivered = False
        child = self.child
        if request is not None and child is not None and child.status is None:
            if signal_caught(child.pid, signal.SIGUSR1):
                self._signal_child(child, signal.SIGUSR1)
                self.stacks_delivered = True
                self._say(f"stacks request {request!r}: SIGUSR1 sent to pid {child.pid}")
            else:
                self._say(f"stacks request {request!r}: the command does not handle SIGUSR1; not sent")
        if self.state is not None:
            attempt = child.attempt if child is not None else self.target
            self._report(self.state, attempt, fatal=False)

    # ---- reports ----

    def _report_waiting(self) -> None:
        self.state = STATE_WAITING
        self.waiting_reported = self.target
        self.exited_deadline = None
        self._report(STATE_WAITING, self.target, fatal=False)

    def _report_current(self) -> None:
        if self.state == STATE_RUNNING and self.child is not None:
            self._report(STATE_RUNNING, self.child.attempt, fatal=False)
        elif self.state == STATE_WAITING:
            self._report(STATE_WAITING, self.target, fatal=False)
        elif self.state == STATE_EXITED and self.last_end is not None:
            self._report(STATE_EXITED, self.last_end.attempt, fatal=True)

    def _report(self, state: str, attempt: int, fatal: bool) -> None:
        assert self.identity is not None and self.volume is not None
        doc: dict[str, object] = {
            "jobUid": self.identity.job_uid,
            "pod": self.identity.pod_name,
            "attempt": attempt,
            "state": state,
            "exitCode": None,
            "signal": None,
            "oomKilled": None,
            "startedAt": None,
            "finishedAt": None,
            "stacks": self.stacks_served,
            "stacksDelivered": self.stacks_delivered,
            # It puts the control file's hosts into TF_CONFIG (with_hosts): the operator gives a
            # pod made again a new hostname only when every pod running on says so.
            REPORT_READS_HOSTS: True,
            "updatedAt": rfc3339(time.time()),
        }
        if self.identity.pod_uid is not None:
            doc["podUid"] = self.identity.pod_uid
        if self.not_ended is not None:
            doc[REPORT_NOT_ENDED] = self.not_ended
        end = self.last_end
        if state == STATE_RUNNING and self.child is not None:
            doc["startedAt"] = rfc3339(self.child.started_at)
        elif state == STATE_EXITED and end is not None:
            doc.update(end.fields())
        if end is not None and (state != STATE_EXITED or end.attempt != attempt):
            doc["previous"] = end.fields()  # the last child's end, for the time each phase took
        self.volume.report(doc, state, attempt, fatal)

    def _finish(self, code: int) -> int:
        self._kill_standby()
        if self.terminate_deadline is not None:  # before the kubelet's SIGKILL
            until = self.terminate_deadline + self.terminate_margin / 2
        else:
            until = time.monotonic() + FLUSH_SECONDS
        if self.volume is not None:
            self.volume.stop()
        # What waits for stdout and stderr, while the volume thread writes its last (both
        # bounded: a runtime that does not read them, a hung volume, must not hold the exit).
        self._flush_streams(min(until, time.monotonic() + STREAM_FLUSH_SECONDS))
        if self.volume is not None and not self.volume.settle(until - time.monotonic()):
            say("the volume did not answer in time: the last report or log lines may be missing")
        for stream in STREAMS.values():
            stream.flush()
            stream.disown()
        signal.set_wakeup_fd(-1)
        return code

    @staticmethod
    def _flush_streams(until: float) -> None:
        while True:
            waiting = [stream for stream in STREAMS.values() if stream.pending()]
            left = until - time.monotonic()
            if not waiting or left <= 0:
                return
            try:
                writable = select.select([], [stream.fd for stream in waiting], [], left)[1]
            except (OSError, ValueError):
                return
            for stream in waiting:
                if stream.fd in writable:
                    stream.flush()


def parse_args(argv: Sequence[str]) -> Settings:
    argv = list(argv)
    if "--" in argv:
        split = argv.index("--")
        options, command = argv[:split], argv[split + 1 :]
    elif argv and not argv[0].startswith("-"):
        options, command = [], argv
    else:
        options, command = argv, []
    parser = argparse.ArgumentParser(
        prog="supervisor.py",
        usage="%(prog)s [options] -- COMMAND [ARG...]",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("--grace-seconds", type=float, default=DEFAULT_GRACE_SECONDS)
    parser.add_argument("--stop-seconds", type=float, default=DEFAULT_STOP_SECONDS)
    parser.add_argument("--log-max-bytes", type=int, default=DEFAULT_LOG_MAX_BYTES)
    parser.add_argument("--exited-wait-seconds", type=float, default=DEFAULT_EXITED_WAIT_SECONDS)
    parser.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SECONDS)
    parser.add_argument(
        "--warm-start",
        default="",
        metavar="MODULE[,MODULE...]",
        help="keep the next attempt's Python ready, these modules imported (docs/supervisor.md)",
    )
    parser.add_argument("--warm-start-delay", type=float, default=STANDBY_DELAY_SECONDS)
    args = parser.parse_args(options)
    if not command:
        parser.error("no command: supervisor.py [options] -- COMMAND [ARG...]")
    if not 0 <= args.grace_seconds <= 86400 or not 0 <= args.stop_seconds <= 86400:
        parser.error("--grace-seconds and --stop-seconds are 0 to 86400")
    if not 4096 <= args.log_max_bytes <= 2**40:
        parser.error("--log-max-bytes is 4096 to 2**40")
    if not 0 <= args.exited_wait_seconds <= 10**7 or not 0.01 <= args.poll_seconds <= 10:
        parser.error("--exited-wait-seconds is 0 (for ever) to 10**7; --poll-seconds 0.01 to 10")
    if not 0 <= args.warm_start_delay <= 86400:
        parser.error("--warm-start-delay is 0 to 86400")
    try:
        warm = warm_modules(args.warm_start) if args.warm_start else ()
    except ValueError as error:
        parser.error(f"--warm-start: {error}")
    return Settings(
        command=tuple(command),
        grace_seconds=args.grace_seconds,
        stop_seconds=args.stop_seconds,
        log_max_bytes=args.log_max_bytes,
        exited_wait_seconds=args.exited_wait_seconds,
        poll_seconds=args.poll_seconds,
        warm_start=warm,
        warm_start_delay=args.warm_start_delay,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(sys.argv[1:] if argv is None else argv)
    identity = identity_from_env(os.environ, os.uname().nodename)
    return Supervisor(settings, identity, os.environ).run()


if __name__ == "__main__":
    _code = main()
    for _stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            _stream.flush()
    os._exit(_code)  # not waiting for a volume thread stuck on a dead server
