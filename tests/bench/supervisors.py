"""The in-pod supervisors of gangs on kwok's nodes, which run no process: the scale bench
writes each supervised pod's reports as its supervisor would, so that it measures the
operator's gang restart in place (issue 39) where no container runs.

What is replaced, and by what: a real pod's supervisor (operator/tfmw_operator/supervisor.py)
runs the command as a child, polls the job's control file every 0.1 s and reports its child's
state in `.tfmw/pods/<stem>.json` (docs/supervisor.md, "The protocol"). Here one thread does
that for every watched gang, with the supervisor's own code for the files (JobFolder: the
same atomic report writes, the same bounded, link-refusing control reads) and the same poll:
- a worker's death: its report says `exited`, exit code 137 (signal 9), as the supervisor
  reports a SIGKILLed child;
- a raised attempt without `start`: each pod reports `waiting` for it (a survivor once its
  child is stopped, which a real supervisor does with SIGKILL under `stopSeconds: 0`);
- `start` for the awaited attempt: each reports `running`, the child started.
A gang is running again when all its pods report `running` in the new attempt: the moment
the processes run again, where a re-created gang's is its new pods Running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tfmw_operator.supervisor import (
    DEFAULT_POLL_SECONDS,
    REPORT_READS_HOSTS,
    STATE_EXITED,
    STATE_RUNNING,
    STATE_WAITING,
    JobFolder,
    rfc3339,
)

# Where a restart in place got, from the worker's death, in order.
MARKS = ("attempt raised", "all waiting", "barrier open", "all running")
KILLED_EXIT_CODE = 137
KILLED_SIGNAL = 9


@dataclass
class PodState:
    pod: str  # the pod's name, as the supervisor's `pod` (its hostname)
    uid: str
    attempt: int
    state: str
    started_at: float
    end: dict[str, object] | None = None  # the last child's end, as the report says it


@dataclass
class Gang:
    job: str
    job_uid: str
    folder: JobFolder
    pods: dict[str, PodState]  # by stem
    signature: tuple[int, ...] | None = None
    awaited: int = 0  # the attempt the gang restarts into
    marks: dict[str, float] = field(default_factory=dict)  # MARKS, seconds from the death
    died_at: float = 0.0


def report(gang: Gang, stem: str) -> dict[str, object]:
    """A pod's report as its supervisor writes it (Supervisor._report)."""
    pod = gang.pods[stem]
    doc: dict[str, object] = {
        "jobUid": gang.job_uid,
        "podUid": pod.uid,
        "pod": pod.pod,
        "attempt": pod.attempt,
        "state": pod.state,
        "exitCode": None,
        "signal": None,
        "oomKilled": None,
        "startedAt": None,
        "finishedAt": None,
        "stacks": None,
        "stacksDelivered": False,
        REPORT_READS_HOSTS: True,
        "updatedAt": rfc3339(time.time()),
    }
    if pod.state == STATE_RUNNING:
        doc["startedAt"] = rfc3339(pod.started_at)
    elif pod.state == STATE_EXITED and pod.end is not None:
        doc.update(pod.end)
    if pod.end is not None and pod.state != STATE_EXITED:
        doc["previous"] = pod.end
    return doc


def ended(attempt: int, started_at: float) -> dict[str, object]:
    return {
        "attempt": attempt,
        "exitCode": KILLED_EXIT_CODE,
        "signal": KILLED_SIGNAL,
        "oomKilled": False,
        "startedAt": rfc3339(started_at),
        "finishedAt": rfc3339(time.time()),
    }


class EmulatedSupervisors:
    """Every watched gang's supervisors, in one thread; `on_running(job, seconds)` once all of
    a gang's pods run the new attempt's child, seconds from the death."""

    def __init__(self, shared: Path, namespace: str, on_running: Callable[[str, float], None]) -> None:
        self.root = shared / namespace
        self.on_running = on_running
        self.lock = threading.Lock()
        self.gangs: dict[str, Gang] = {}
        self.starting: list[tuple[str, str, str, str]] = []  # pod_running's, not yet reported
        self.folders: dict[str, JobFolder] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="supervisors", daemon=True)
        self.thread.start()

    def kill(self, job: str, job_uid: str, pods: Mapping[str, tuple[str, str]], stem: str) -> None:
        """`pods`: stem -> (pod name, pod UID) of a gang running attempt 0; the child of
        `stem` is SIGKILLed now: its supervisor reports `exited`."""
        now, wall = time.monotonic(), time.time()
        states = {
            s: PodState(pod=name, uid=uid, attempt=0, state=STATE_RUNNING, started_at=wall)
            for s, (name, uid) in pods.items()
        }
        gang = Gang(job, job_uid, self._folder(job), states, awaited=1, died_at=now)
        dead = states[stem]
        dead.state, dead.end = STATE_EXITED, ended(0, dead.started_at)
        gang.signature = gang.folder.control_signature()
        gang.folder.write_report(stem, report(gang, stem))
        with self.lock:
            self.gangs[job] = gang

    def pod_running(self, job: str, job_uid: str, pod: str, uid: str) -> None:
        """A pod of attempt 0 is Running: its supervisor starts the child and reports
        `running` (within one poll here, as its start-up takes)."""
        with self.lock:
            self.starting.append((job, job_uid, pod, uid))

    def marks(self) -> dict[str, dict[str, float]]:
        with self.lock:
            return {job: dict(gang.marks) for job, gang in self.gangs.items()}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def _run(self) -> None:
        while not self.stop.wait(DEFAULT_POLL_SECONDS):
            with self.lock:
                gangs = [g for g in self.gangs.values() if "all running" not in g.marks]
                starting, self.starting = self.starting, []
            for job, job_uid, pod, uid in starting:
                self._start(job, job_uid, pod, uid)
            for gang in gangs:
                self._poll(gang)

    def _start(self, job: str, job_uid: str, pod: str, uid: str) -> None:
        stem = pod.removeprefix(f"{job}-")
        gang = Gang(
            job, job_uid, self._folder(job), {stem: PodState(pod, uid, 0, STATE_RUNNING, time.time())}
        )
        try:
            gang.folder.write_report(stem, report(gang, stem))
        except OSError:
            with self.lock:  # the job's folder is not there yet: the next poll
                self.starting.append((job, job_uid, pod, uid))
                self.folders.pop(job, None)

    def _folder(self, job: str) -> JobFolder:
        """One per job, its directory held open for the run (as each pod's supervisor holds it)."""
        with self.lock:
            return self.folders.setdefault(job, JobFolder(str(self.root / job)))

    def _poll(self, gang: Gang) -> None:
        """One poll of the gang's control file, as each of its supervisors makes it."""
        signature = gang.folder.control_signature()
        if signature is None or signature == gang.signature:
            return
        gang.signature = signature
        control = gang.folder.read_control(gang.job_uid)
        if control is None or control.attempt < gang.awaited:
            return
        since = time.monotonic() - gang.died_at
        gang.marks.setdefault("attempt raised", since)
        for stem, pod in gang.pods.items():
            if (control.start and pod.state != STATE_RUNNING) or pod.attempt < control.attempt:
                if pod.state == STATE_RUNNING:  # a survivor's child, stopped
                    pod.end = ended(pod.attempt, pod.started_at)
                pod.attempt = control.attempt
                pod.state = STATE_RUNNING if control.start else STATE_WAITING
                pod.started_at = time.time()
                gang.folder.write_report(stem, report(gang, stem))
        since = time.monotonic() - gang.died_at
        if all(p.state == STATE_WAITING and p.attempt == control.attempt for p in gang.pods.values()):
            gang.marks.setdefault("all waiting", since)
        if control.start:
            gang.marks.setdefault("barrier open", since)
            if all(p.state == STATE_RUNNING and p.attempt == control.attempt for p in gang.pods.values()):
                gang.marks["all running"] = since
                self.on_running(gang.job, since)
