"""What a pod's in-pod supervisor reports, read with the suspicion the marker gets. Pure.

Each supervised pod's supervisor (operator/tfmw_operator/supervisor.py, docs/supervisor.md)
writes `.tfmw/pods/<stem>.json` in the job's folder: whether its command runs, ended, or
waits for the operator to start the next attempt. Anything in the job's folder can be
written by the job's own pods, so a report is taken only when it is well formed, names this
job, and names the UID of the pod that holds that stem now: a forged or stale one is as
absent. Even a well-formed report speaks only for its own pod, in its own job: it can end or
hold up that job's attempt, never anything of another job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.times import parse_time
from tfmw_operator.contract import REPORT_EXITED, REPORT_READS_HOSTS, REPORT_RUNNING, REPORT_WAITING

MAX_REPORT_BYTES = 16 * 1024  # a report is a few hundred bytes; a bigger file is not one
MAX_ATTEMPT = 1_000_000  # the supervisor's own bound
MAX_ID_CHARS = 256  # a stacks request's id; a pod UID is 36
MAX_LOG_TAIL_BYTES = 8 * 1024  # read from the end of an ended child's log, for its message
STATES = frozenset({REPORT_RUNNING, REPORT_EXITED, REPORT_WAITING})
_STEM = re.compile(r"(chief|worker|ps|evaluator)-[0-9]{1,4}\Z")


@dataclass(frozen=True)
class ChildEnd:
    """How one run of the pod's command ended, as its supervisor saw it."""

    attempt: int
    exit_code: int  # 128 + the signal when a signal ended it, as a container status says it
    signal: int | None = None
    oom_killed: bool | None = None  # None: the cgroup's OOM counter could not be read
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class PodReport:
    """One supervisor's latest word on its pod."""

    stem: str  # worker-3, chief-0
    pod_uid: str
    attempt: int  # the child's (running, exited) or the one awaited (waiting)
    state: str  # running | exited | waiting
    end: ChildEnd | None = None  # exited: how the child of `attempt` ended
    previous: ChildEnd | None = None  # running, waiting: the last child's end
    started_at: datetime | None = None  # running: when its child started
    stacks: str | None = None  # the last stacks request served
    stacks_delivered: bool = False  # SIGUSR1 went to the command for it
    updated_at: datetime | None = None
    # The end of the exited child's log (logs/attempt-<a>/<stem>.log), read by the shell:
    # what a container's termination message would say (FallbackToLogsOnError).
    log_tail: str = ""
    # Its supervisor puts the control file's hosts into TF_CONFIG (contract.REPORT_READS_HOSTS).
    reads_hosts: bool = False


def is_stem(name: str) -> bool:
    return _STEM.match(name) is not None


def _int(value: object, low: int, high: int) -> int | None:
    return value if type(value) is int and low <= value <= high else None


def _end(raw: object) -> ChildEnd | None:
    if not isinstance(raw, dict):
        return None
    attempt = _int(raw.get("attempt"), 0, MAX_ATTEMPT)
    code = _int(raw.get("exitCode"), 0, 255)
    if attempt is None or code is None:
        return None
    signum = raw.get("signal")
    oom = raw.get("oomKilled")
    return ChildEnd(
        attempt=attempt,
        exit_code=code,
        signal=_int(signum, 1, 64),
        oom_killed=oom if isinstance(oom, bool) else None,
        started_at=parse_time(raw.get("startedAt")),
        finished_at=parse_time(raw.get("finishedAt")),
    )


def parse_report(raw: bytes, job_uid: str, stem: str) -> PodReport | None:
    """The report in `raw` (the file `<stem>.json`), or None when it is not one this job can
    use: not JSON, another job's, no pod UID, an unknown state, an exited child without an
    exit code. Never raises for its content."""
    if len(raw) > MAX_REPORT_BYTES or not is_stem(stem):
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("jobUid") != job_uid or not job_uid:
        return None
    pod_uid, state = doc.get("podUid"), doc.get("state")
    attempt = _int(doc.get("attempt"), 0, MAX_ATTEMPT)
    if not isinstance(pod_uid, str) or not 0 < len(pod_uid) <= MAX_ID_CHARS:
        return None
    if state not in STATES or attempt is None:
        return None
    end = None
    if state == REPORT_EXITED:
        end = _end({**doc, "attempt": attempt})
        if end is None:
            return None
    stacks = doc.get("stacks")
    if not isinstance(stacks, str) or not 0 < len(stacks) <= MAX_ID_CHARS:
        stacks = None
    previous = _end(doc.get("previous")) if state != REPORT_EXITED else None
    return PodReport(
        stem=stem,
        pod_uid=pod_uid,
        attempt=attempt,
        state=str(state),
        end=end,
        previous=previous,
        started_at=parse_time(doc.get("startedAt")) if state == REPORT_RUNNING else None,
        stacks=stacks,
        stacks_delivered=doc.get("stacksDelivered") is True,
        updated_at=parse_time(doc.get("updatedAt")),
        reads_hosts=doc.get(REPORT_READS_HOSTS) is True,
    )


def log_tail_text(raw: bytes, lines: int, whole: bool) -> str:
    """The last `lines` lines of the end of a log as read; `whole`: the read began at the
    file's start, else its first line may be cut and is dropped."""
    kept = raw.decode("utf-8", "replace").replace("\0", "").rstrip("\n").splitlines()
    if not whole and len(kept) > 1:
        kept = kept[1:]
    return "\n".join(kept[-lines:])


MAX_STACKS_TAIL_BYTES = 512 * 1024  # of the chief's .stacks file: its last dump, of every thread


@dataclass(frozen=True)
class StacksReading:
    """A supervised pod's `logs/attempt-<a>/<stem>.stacks` as found: its size and time, and,
    for the chief, the end of it (its last dump)."""

    stem: str
    size: int
    modified: datetime | None
    tail: str = ""
    whole: bool = True  # `tail` is the whole file
