"""A gang restart that keeps the pods that run: the rules. Pure.

Where the job's gang runs under the in-pod supervisor (core/supervision.py), a gang restart
raises the attempt in the job's control file instead of deleting the gang: every surviving
pod's supervisor stops its command and waits; only the pods that are really gone (deleted,
evicted, ended, on a lost node) are deleted and made again, for the new attempt; once every
pod of the gang reports that it waits for the new attempt, the control file says `start`
and every supervisor starts its command at once (the barrier: TensorFlow never sees a new
task beside an old one). docs/supervisor.md has the protocol.

So pods outlive attempts. A pod's `tfmw.dev/attempt` label is the attempt it was made for;
the attempt it serves is the job's. Which pods belong to the current attempt, which are
gone, when the barrier opens, what the control file says: each is decided here from what is
observed (the status, the pods, their supervisors' reports), so the same state gives the
same answer after an operator restart; reconcile.py applies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.status import AttemptRecord, JobStatus
from tfmw_operator.api.times import later
from tfmw_operator.contract import REPORT_RUNNING
from tfmw_operator.core.builders import cluster_hosts, renamed_hosts
from tfmw_operator.core.pods import NODE_LOST, ObservedPod, attempt_started
from tfmw_operator.core.policies.failure import PEER_LOST_EXIT_CODE, SIGTERM_EXIT_CODE, lost_unknown
from tfmw_operator.core.policies.progress_deadline import PROGRESS_STALLED
from tfmw_operator.core.supervision import GANG, supervision_of

IN_PLACE = "InPlace"  # status.history[].restart: the next attempt kept the pods that ran
# Beyond the stop bound: a surviving pod whose supervisor has not reported waiting by then
# (a command that will not die, a supervisor that cannot reach the volume) is made again.
BARRIER_SLACK_SECONDS = 30
# Causes of an attempt's end after which the others could still save together (they are told
# by SIGTERM, as the pod taken away was): they get restartGracePeriodSeconds to stop.
TAKEN_AWAY = frozenset({"Evicted", "Preempted", "PodDeleted", "Shutdown", "Terminated", "DeadlineExceeded"})
FIRST_SIGNAL_EXIT_CODE = 128


def in_place(job: JobSpec) -> bool:
    return supervision_of(job).in_place


def really_gone(pod: ObservedPod, now: datetime) -> bool:
    """A pod that cannot restart its command in place: deleted, ended (the supervisor itself:
    evicted, OOM-killed whole), on a lost node; or a gang pod made without the supervisor."""
    return pod.gone or lost_unknown(pod, now) or (pod.member.type in GANG and not pod.supervised)


def split(
    job: JobSpec, status: JobStatus, pods: Sequence[ObservedPod], now: datetime
) -> tuple[list[ObservedPod], list[ObservedPod]]:
    """The pods of the current attempt, and those left over that must go before it launches.

    Without the supervisor a pod serves the attempt it was made for. With it, the pods that
    survive a restart serve the next attempt too: once an attempt is launched every pod
    serves it (a survivor that dies is its failure); before, only the pods of earlier
    attempts that are really gone are left over, and the next attempt waits for them to go."""
    attempt = status.attempt
    if not in_place(job):
        return [p for p in pods if p.attempt == attempt], [p for p in pods if p.attempt != attempt]
    if status.launched:
        return [p for p in pods if p.attempt <= attempt], [p for p in pods if p.attempt > attempt]
    stale = [p for p in pods if p.attempt != attempt and (p.attempt > attempt or really_gone(p, now))]
    kept = {p.uid for p in stale}
    return [p for p in pods if p.uid not in kept], stale


def gone_at_raise(current: Sequence[ObservedPod], now: datetime) -> list[ObservedPod]:
    """At a raise, the pods to delete (and make again): the really gone ones not already going."""
    return [p for p in current if not p.deleting and really_gone(p, now)]


def survivors_can_save(record: AttemptRecord | None) -> bool:
    """From the ended attempt's record, as failure.survivors_can_save decided it: the gang
    can still save together when the pod that failed was taken away (told by SIGTERM as the
    survivors will be) or exited on SIGTERM or on a lost peer; not when a command ended on
    its own (an error, the OOM killer), its node was lost or the gang hung."""
    if record is None:
        return True
    if record.cause in (NODE_LOST, PROGRESS_STALLED):
        return False
    if record.cause in TAKEN_AWAY or record.exit_code is None:
        return True
    if record.cause in ("Error", "PeerLost") and record.exit_code < FIRST_SIGNAL_EXIT_CODE:
        return True  # a program's own error exit may be how it took a lost peer
    return record.exit_code in (SIGTERM_EXIT_CODE, PEER_LOST_EXIT_CODE)


def raise_record(status: JobStatus) -> AttemptRecord | None:
    """The record of the attempt the current one restarted, while it is the newest."""
    record = status.history[0] if status.history else None
    if record is None or record.attempt != status.attempt - 1 or record.outcome != "Restarted":
        return None
    return record


def stop_seconds(status: JobStatus, grace: int) -> int | None:
    """The control file's stopSeconds for the current attempt: SIGTERM to SIGKILL for the
    survivors' commands (restartGracePeriodSeconds when they can save together, else 0);
    None when the attempt is no restart."""
    record = raise_record(status)
    if record is None:
        return None
    return grace if survivors_can_save(record) else 0


def released(job: JobSpec, status: JobStatus, current: Sequence[ObservedPod]) -> bool:
    """The barrier is open: every pod of the gang may start its command of the attempt.

    At once when every gang pod was made for this attempt (a first launch, a resume, a gang
    made again whole: no old command can be left). Otherwise once every gang pod's
    supervisor reports this attempt: waiting for it (or already running it)."""
    if not status.launched:
        return False
    pods = {p.member: p for p in current if not p.deleting and p.member.type in GANG}
    if all(p.attempt >= status.attempt for p in pods.values()):
        return True
    for member in job.members:
        if member.type not in GANG:
            continue
        pod = pods.get(member)
        if pod is None or pod.report is None or pod.report.attempt != status.attempt:
            return False
    return True


@dataclass(frozen=True)
class Late:
    """Survivors that did not reach the barrier in time: made again in the attempt."""

    pods: tuple[ObservedPod, ...] = ()
    wake_at: datetime | None = None  # the barrier's deadline, while it is ahead


def late_at_barrier(
    job: JobSpec, status: JobStatus, current: Sequence[ObservedPod], now: datetime, grace: int
) -> Late:
    """Survivors whose supervisor has not reported the attempt within its stop bound plus
    BARRIER_SLACK_SECONDS of the raise: they hold up the whole gang, so they are made again."""
    record = raise_record(status)
    if record is None or not status.launched or released(job, status, current):
        return Late()
    stop = stop_seconds(status, grace) or 0
    deadline = later(record.end_time, stop + BARRIER_SLACK_SECONDS)
    if now < deadline:
        return Late(wake_at=deadline)
    late = [
        p
        for p in current
        if p.member.type in GANG
        and p.attempt < status.attempt
        and not p.deleting
        and (p.report is None or p.report.attempt != status.attempt)
    ]
    return Late(tuple(late))


@dataclass(frozen=True)
class Control:
    """What the job's control file says now (decision.WriteControl carries it)."""

    attempt: int
    start: bool
    stop_seconds: int | None = None
    stacks: str | None = None
    exit: bool = False
    # The gang's hostnames that are not their pods' own (builders.renamed_hosts), by stem.
    hosts: dict[str, str] | None = None


def command_runs(pod: ObservedPod) -> bool:
    """Its supervisor's command runs (as its report says) and the pod is not going."""
    report = pod.report
    running = report is not None and report.state == REPORT_RUNNING
    return running and not pod.child_ended and not pod.deleting and not pod.terminated


def control(
    job: JobSpec, status: JobStatus, current: Sequence[ObservedPod], pods: Sequence[ObservedPod], grace: int
) -> Control | None:
    """The control file as the status and the pods have it; None when there is none to
    write (no supervised gang, or a finished job whose supervised pods have all ended).

    A finished job says `exit` once no supervised pod it keeps runs its command (a worker
    that still trains under cleanPodPolicy None runs on): every supervisor then ends, and
    its pod ends Succeeded or Failed by its command's last code, as a pod always did."""
    if not in_place(job):
        return None
    alive = [p for p in pods if p.supervised and not p.deleting and not (p.terminated and not p.child_ended)]
    if status.finished and not alive:
        return None
    request = status.stacks_request
    return Control(
        attempt=status.attempt,
        start=released(job, status, current),
        stop_seconds=stop_seconds(status, grace),
        stacks=request.id if request is not None else None,
        exit=status.finished and not any(command_runs(p) for p in alive),
        hosts=renamed_hosts(job, cluster_hosts(job, status.attempt, current)) or None,
    )


def pod_group(job: JobSpec, current: Sequence[ObservedPod]) -> str | None:
    """The Kueue pod group the gang's new pods join: the survivors' (their admission is
    kept), when the gang restarts in place and any survives."""
    if not job.queue_name or not in_place(job):
        return None
    return next((p.pod_group for p in current if p.pod_group and not p.deleting), None)


def attempt_began(job: JobSpec, status: JobStatus, pods: Sequence[ObservedPod]) -> datetime | None:
    """When the current attempt began: the raise that started it, for a gang restarted in
    place (its surviving pods are older); else when its first pod was made."""
    record = raise_record(status)
    if record is not None and in_place(job):
        return record.end_time
    return attempt_started(pods, status.attempt)
