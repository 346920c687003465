"""Gang restarts back off when they come in a row of attempts that did not train, so a job
that keeps crashing, or that Kueue keeps evicting, does not churn the cluster: the first
starts at once, the next waits 10 s, then 20 s, 40 s ... up to 5 minutes. A restart after
an attempt that trained starts at once, and starts the count again: it ran at least
RESTART_BACKOFF_SECONDS and its checkpoint moved on from the one it resumed from, or it ran
STABLE_SECONDS (as the kubelet forgets a container's crash loop after 10 minutes of
running). Waiting then would only lose training time (docs/benchmarks.md, run goodput-2:
9.5 s of a second fault's 16).

A pod restarted alone (a parameter-server job's worker, the evaluator) backs off the same way,
as the kubelet's crash loop does: the job's first replacement is made at once, the next 10 s
after its failure, then 20 s ... up to 5 minutes, the count starting again once STABLE_SECONDS
pass between two failures; pods taken away do not count. A rule's RestartNotCounted never fails the job, so
without this a pod that fails at its start was deleted and made again as fast as the API
server answered, for as long as the job lived. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise

from tfmw_operator.api.spec import Member
from tfmw_operator.api.status import (
    REPLACED,
    RESTARTED,
    WITHIN_ATTEMPT,
    AttemptRecord,
    Checkpoint,
    ConditionType,
    JobStatus,
)
from tfmw_operator.api.times import later, parse_time
from tfmw_operator.contract import WORKER
from tfmw_operator.core.pods import NODE_LOST
from tfmw_operator.core.policies.in_place import TAKEN_AWAY
from tfmw_operator.core.policies.spec_change import SPEC_CHANGED
from tfmw_operator.core.policies.verdicts import WakeAt

# Causes that are no crash loop of the program: a pod taken away, or its node lost.
NOT_A_CRASH_LOOP = TAKEN_AWAY | {NODE_LOST}
RESTART_BACKOFF_SECONDS = 10.0
MAX_RESTART_BACKOFF = 300.0
STABLE_SECONDS = 600.0


def judge_restart_backoff(status: JobStatus, now: datetime) -> WakeAt | None:
    """When the next attempt may launch, if not yet; None: now."""
    restarts = untrained_restarts(status.history)
    restarting = status.condition(ConditionType.RESTARTING)
    if restarts < 2 or restarting is None or not restarting.true:
        return None
    since = parse_time(restarting.last_transition_time)
    if since is None or since > now:
        return None  # unread, or dated ahead (a clock stepped back): no wait it could hold for ever
    # The exponent is held too (the history is bounded, but a status may say anything).
    ready_at = later(since, min(RESTART_BACKOFF_SECONDS * 2 ** min(restarts - 2, 16), MAX_RESTART_BACKOFF))
    return WakeAt(ready_at) if now < ready_at else None


def judge_replacement_backoff(
    history: Sequence[AttemptRecord], member: Member, now: datetime
) -> WakeAt | None:
    """When `member`, restarted alone for a failure of its own, may be made again, if not
    yet; None: now (a pod made again for another reason, such as a survivor late at an in-place
    restart's barrier, never waits)."""
    if not any(_replaced(r, now) and _is(r, member) for r in history):
        return None
    in_a_row, latest = replacements_in_a_row(history, now)
    if in_a_row < 2 or latest is None:
        return None
    ready_at = later(latest, replacement_backoff_seconds(in_a_row))
    return WakeAt(ready_at) if now < ready_at else None


def replacement_backoff_seconds(in_a_row: int) -> float:
    """The wait before a replacement when the job's pods were restarted alone `in_a_row` times
    in a row."""
    if in_a_row < 2:
        return 0.0
    return min(RESTART_BACKOFF_SECONDS * 2.0 ** min(in_a_row - 2, 16), MAX_RESTART_BACKOFF)


def replacements_in_a_row(history: Sequence[AttemptRecord], now: datetime) -> tuple[int, datetime | None]:
    """How many times the job's pods were restarted alone in a row for failures of their own,
    each within STABLE_SECONDS of the one before, and when the latest was. Counted for the
    job, not per pod: the history is bounded (MAX_HISTORY) and shared, so several pods
    failing in turn would each keep their own count low. A pod taken away (evicted, deleted,
    its node lost) is no crash loop and is left out, as is a record dated after `now` (a
    clock stepped back, or a TFJob's status annotation its owner wrote), which would hold the
    pod for as long as its date says."""
    mine = [r for r in history if _replaced(r, now)]
    if not mine:
        return 0, None
    count = 1
    for newer, older in pairwise(mine):
        if (newer.end_time - older.end_time).total_seconds() >= STABLE_SECONDS:
            break
        count += 1
    return count, mine[0].end_time


def _replaced(record: AttemptRecord, now: datetime) -> bool:
    return record.outcome == REPLACED and record.cause not in NOT_A_CRASH_LOOP and record.end_time <= now


def _is(record: AttemptRecord, member: Member) -> bool:
    return record.worker == member.index and (record.replica_type or WORKER) == str(member.type)


def untrained_restarts(history: Sequence[AttemptRecord]) -> int:
    """The gang restarts in a row, the latest first, whose attempts did not train. A pod
    restarted alone is not a gang restart (skipped); an attempt that failed or was suspended,
    or whose spec a user changed, ends the row."""
    attempts = [r for r in history if r.outcome not in WITHIN_ATTEMPT]
    count = 0
    for index, record in enumerate(attempts):
        if record.outcome != RESTARTED or record.cause == SPEC_CHANGED:
            break  # a user's change, as a suspension, starts the count again
        if index + 1 < len(attempts):
            if trained(record, attempts[index + 1].checkpoint):
                break
        elif record.attempt == 0 and trained(record, None):
            break  # the first attempt, which resumed from nothing
        elif record.attempt != 0 and trained(record, record.checkpoint):
            break  # what it resumed from is no longer in the history: only its run time says
        count += 1
    return count


def trained(record: AttemptRecord, resumed: Checkpoint | None) -> bool:
    """Whether the attempt trained: it ran STABLE_SECONDS, or at least RESTART_BACKOFF_SECONDS
    with its checkpoint ahead of the one it resumed from. (The checkpoint is the chief's word:
    a program that lies about it restarts at most once per RESTART_BACKOFF_SECONDS of running,
    as the first wait of a crash loop would have it.)"""
    started = record.start_time
    ran = (record.end_time - started).total_seconds() if started is not None else 0.0
    if ran >= STABLE_SECONDS:
        return True
    return ran >= RESTART_BACKOFF_SECONDS and _ahead(record.checkpoint, resumed)


def _ahead(checkpoint: Checkpoint | None, resumed: Checkpoint | None) -> bool:
    if checkpoint is None:
        return False
    if resumed is None:
        return checkpoint.step is not None or checkpoint.epoch is not None or checkpoint.path is not None
    if checkpoint.step is not None and resumed.step is not None:
        return checkpoint.step > resumed.step
    if checkpoint.epoch is not None and resumed.epoch is not None:
        return checkpoint.epoch > resumed.epoch
    return checkpoint.path is not None and checkpoint.path != resumed.path
