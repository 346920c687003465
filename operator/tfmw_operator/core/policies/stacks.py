"""Where a hung job hung: every supervised pod's stacks, taken before a stalled gang is
restarted or failed, and the frame the chief was in. Pure.

A gang whose progress stopped for progressDeadlineSeconds (policies/progress_deadline.py)
has every pod Running: only the program's own threads can say where it waits. Before the
restart (or the failure) the operator writes a stacks request into the control file; each
supervisor sends SIGUSR1 to a command that handles it (the trainer's PID 1 forwards it to
its training process, where faulthandler writes every thread's stack to TFMW_STACKS_PATH,
`logs/attempt-<a>/<stem>.stacks`) and reports the request served. The operator waits a
bounded time for the files, then goes on; the attempt's history entry points to the chief's
file and its message names the frame the chief's training thread was in: the innermost one
in the program's own code, not TensorFlow's or Python's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.status import JobStatus
from tfmw_operator.api.times import format_precise_time, later
from tfmw_operator.contract import STACKS_FILE_SUFFIX, attempt_logs_folder
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.reports import StacksReading

# How long the operator waits for the stacks before it restarts (or fails) a stalled gang
# anyway: faulthandler writes them within milliseconds of the signal.
STACKS_WAIT_SECONDS = 10.0
STACKS_RECHECK_SECONDS = 0.5  # the .stacks files are not watched: looked at again this often
# A file's time is the volume's clock, the request's the operator's: this much apart is one.
CLOCK_SLACK_SECONDS = 2.0
MAX_FRAME_CHARS = 300

# The trainer's header before each dump (trainer/tfmw_trainer/stacks.py): which thread trains.
HEADER = re.compile(r"^--- tfmw-trainer stacks: (\S+) pid=(\d+) main_thread=(0x[0-9a-f]+) ---$", re.M)
THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):$", re.M)
FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S.*)$')
# Code that is not the program's own: installed packages (TensorFlow, Keras...) and Python's.
LIBRARY = re.compile(r"/(site|dist)-packages/|/lib/python3(\.\d+)?/|^<")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    def describe(self) -> str:
        return f"{self.function} ({self.path}:{self.line})"[:MAX_FRAME_CHARS]


def thread_frames(dump: str) -> tuple[list[Frame], bool]:
    """The frames (most recent first) of the training thread in the last dump of `dump`, and
    whether that thread was named (the trainer's header) rather than guessed: without a
    header, the last thread listed, which faulthandler lists the main thread as."""
    headers = list(HEADER.finditer(dump))
    named = None
    if headers:
        dump = dump[headers[-1].end() :]
        named = headers[-1].group(3)
    blocks: list[tuple[str, str]] = []
    starts = list(THREAD.finditer(dump))
    for position, start in enumerate(starts):
        end = starts[position + 1].start() if position + 1 < len(starts) else len(dump)
        blocks.append((start.group(1), dump[start.end() : end]))
    chosen = next((text for ident, text in blocks if ident == named), None) if named else None
    # The header's thread not (yet) in the dump: the last one listed is a guess, not named.
    found = chosen is not None
    if chosen is None and blocks:
        chosen = blocks[-1][1]
    frames = []
    for line in (chosen or "").splitlines():
        match = FRAME.match(line)
        if match:
            frames.append(Frame(match.group(1), int(match.group(2)), match.group(3).strip()))
    return frames, found


# faulthandler writes at most this many frames of a thread, then "  ...".
MAX_DUMPED_FRAMES = 100


def whole(frames: Sequence[Frame]) -> bool:
    """Whether a main thread's frames are all written: faulthandler writes them innermost
    first, one line at a time, so a dump read while it is written ends early (in
    threading.py's wait, say). A main thread's outermost frame is module level: `<module>`,
    or runpy's when run with `python -m`; or the list was cut at MAX_DUMPED_FRAMES."""
    if not frames:
        return False
    outermost = frames[-1]
    return outermost.function == "<module>" or "runpy" in outermost.path or len(frames) >= MAX_DUMPED_FRAMES


def own_frame(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame in the program's own code; else the innermost of all."""
    own = next((f for f in frames if not LIBRARY.search(f.path)), None)
    return own or (frames[0] if frames else None)


@dataclass(frozen=True)
class AskStacks:
    """Write this stacks request (the status records it, the control file carries it)."""

    id: str
    wake_at: datetime


@dataclass(frozen=True)
class AwaitStacks:
    wake_at: datetime


@dataclass(frozen=True)
class StacksTaken:
    """Done waiting: where the chief's stacks are (None: none came) and what to say of them."""

    path: str | None = None
    said: str = ""


def request_id(attempt: int, now: datetime) -> str:
    return f"stalled-attempt-{attempt}-{format_precise_time(now)}"


def judge_stacks(
    job: JobSpec,
    status: JobStatus,
    current: Sequence[ObservedPod],
    readings: Sequence[StacksReading],
    now: datetime,
) -> AskStacks | AwaitStacks | StacksTaken:
    """Before a stalled supervised gang is stopped: ask, wait, or go on with what came."""
    asked = [p for p in current if p.supervised and not p.deleting and not p.terminated]
    if not asked or not job.shared:
        return StacksTaken()
    request = status.stacks_request
    if request is None or request.attempt != status.attempt:
        return AskStacks(request_id(status.attempt, now), later(now, STACKS_RECHECK_SECONDS))
    deadline = later(request.requested_at, STACKS_WAIT_SECONDS)
    files = {r.stem: r for r in readings}
    since = later(request.requested_at, -CLOCK_SLACK_SECONDS)
    waiting = False
    for pod in asked:
        report = pod.report
        if report is None or report.stacks != request.id:
            waiting = True  # its supervisor has not served the request yet
            continue
        found = files.get(pod.member.stem)
        written = found is not None and found.size > 0 and (found.modified is None or found.modified >= since)
        if report.stacks_delivered and not written:
            waiting = True
    chief = next((p for p in asked if p.member == job.chief), None)
    reading = files.get(job.chief.stem)
    written = chief is not None and reading is not None and reading.size > 0
    frames: list[Frame] = []
    if written and reading is not None:
        frames, named = thread_frames(reading.tail)
        if HEADER.search(reading.tail) and not named:
            waiting = True  # the trainer's dump has begun; its training thread is not written yet
        elif frames and not whole(frames):
            waiting = True  # its training thread is being written: the frames so far end early
    if waiting and now < deadline:
        return AwaitStacks(min(later(now, STACKS_RECHECK_SECONDS), deadline))
    return taken(job, status.attempt, chief if written else None, frames)


def taken(job: JobSpec, attempt: int, chief: ObservedPod | None, frames: Sequence[Frame]) -> StacksTaken:
    """What the history says of the stacks: the chief's file, and its training thread's frame."""
    folder = f"{job.directory}/{attempt_logs_folder(attempt)}"
    if chief is None:
        return StacksTaken(None, f"; the chief's stacks did not come within {STACKS_WAIT_SECONDS:g} s")
    where = f"{folder}/{chief.member.stem}{STACKS_FILE_SUFFIX}"
    frame = own_frame(frames)
    if frame is None:
        return StacksTaken(where, f"; the chief's stacks are in {where}")
    said = f"; the chief ({chief.replica_type} {chief.index}) was in {frame.describe()}"
    return StacksTaken(where, f"{said}: every pod's stacks are in {folder}/")
