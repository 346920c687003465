"""Naming the straggler: a training pod whose own compute per step is persistently slower
than the others'. Pure; it only reports (the `Straggler` condition, `status.stragglers`).

In synchronous training every worker waits at each step's all-reduce for the slowest, so
step times alone look the same everywhere. What differs is each pod's own work before the
collective, which it writes to its step-times document (core/step_times.py) as a window
of its last steps. At each reading (at most one per progress interval while the job runs):

- a pod's figure is the median of its window (a garbage collection, a checkpoint or a slow
  input batch is one step of fifty, and moves a median not at all);
- it is slow when that median is at least RATIO times the median of the other pods'
  medians (CHIEF_RATIO for the chief, which often does a little more each step: summaries,
  logs) and at least MIN_EXCESS_SECONDS more per step: below that, on steps of a few
  milliseconds, timer and scheduling noise alone makes ratios of 2;
- it is named after READINGS readings in a row that found it slow, each of a newer
  document than the last (a document that did not change is not new evidence), and the
  name goes after READINGS readings in a row that found it even.

Not judged: fewer than two pods with a document of this attempt holding MIN_SAMPLES steps
(a job of one worker has no one to compare with), documents of another job or attempt, and
documents more than STALE_SECONDS older than the newest (their writer stopped). Parameter
servers and the evaluator compute no steps. The figures, the margins and why they are what
they are: docs/reference.md, "Stragglers".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from tfmw_operator.api.records import evolve
from tfmw_operator.api.spec import JobSpec, Member, ReplicaType
from tfmw_operator.api.status import JobStatus, StragglerRecord, StragglerStatus
from tfmw_operator.api.times import format_time
from tfmw_operator.contract import CHIEF
from tfmw_operator.core.builders import member_pod_name
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.progress import ProgressProblem
from tfmw_operator.core.step_times import StepTimesReport, StepTimesSnapshot, ahead_of_clock

RATIO = 1.5
CHIEF_RATIO = 2.0
MIN_EXCESS_SECONDS = 0.02
MIN_SAMPLES = 10
READINGS = 3
STALE_SECONDS = 60.0
# A median below this is taken as this for the ratio: a step measured at 0 s makes no infinity.
FLOOR_SECONDS = 1e-4
TRAINING_SETS = (ReplicaType.CHIEF, ReplicaType.WORKER)


@dataclass(frozen=True)
class StragglerVerdict:
    status: StragglerStatus | None  # what status.stragglers becomes
    named: tuple[StragglerRecord, ...] = ()  # named in this reading
    cleared: tuple[StragglerRecord, ...] = ()  # named, and even for READINGS readings now
    refused: str | None = None  # a newly refused document: say so once
    new_attempt: bool = False  # the figures were of an attempt that ended: dropped


@dataclass(frozen=True)
class _Figure:
    member: Member
    report: StepTimesReport
    median: float


def judge_stragglers(
    job: JobSpec,
    status: JobStatus,
    snapshot: StepTimesSnapshot | None,
    pods: Sequence[ObservedPod],
    attempt_started: datetime | None,
    now: datetime,
) -> StragglerVerdict:
    """What `status.stragglers` becomes after `snapshot` (None: nothing was read now);
    `pods`: the current attempt's (a gang restarted in place keeps pods made for an older one)."""
    attempt = status.attempt
    recorded = status.stragglers
    if recorded is not None and recorded.attempt != attempt:
        recorded, dropped = None, True
    else:
        dropped = False
    if snapshot is None:
        return StragglerVerdict(recorded, new_attempt=dropped)
    training = {m.stem: m for m in job.members if m.type in TRAINING_SETS}
    figures, problems = _figures(job, snapshot, training, attempt, attempt_started, now)
    error = problems[0] if problems else None
    refused = error if error is not None and error != (recorded.error if recorded else None) else None
    old = {w.pod: w for w in recorded.workers} if recorded is not None else {}
    if len(figures) < 2:
        kept = _status(attempt, tuple(old.values()), error)
        return StragglerVerdict(kept, refused=refused, new_attempt=dropped)
    nodes = {p.member: p.node for p in pods if p.node}
    entries: list[StragglerRecord] = []
    named: list[StragglerRecord] = []
    cleared: list[StragglerRecord] = []
    for stem, member in training.items():
        pod = member_pod_name(job, member)
        entry = old.get(pod)
        figure = figures.get(stem)
        if figure is None:  # not read now: as it was
            if entry is not None:
                entries.append(entry)
            continue
        others = [f.median for s, f in figures.items() if s != stem]
        baseline = statistics.median(others)
        ratio = figure.median / max(baseline, FLOOR_SECONDS)
        needed = CHIEF_RATIO if job.role(member) == CHIEF else RATIO
        slow = ratio >= needed and figure.median - baseline >= MIN_EXCESS_SECONDS
        new_evidence = entry is None or entry.observed_at != figure.report.updated_at
        if not new_evidence:
            assert entry is not None
            entries.append(entry)
            continue
        measured = {
            "median_seconds": round(figure.median, 4),
            "others_seconds": round(baseline, 4),
            "ratio": round(ratio, 1),
            "steps": len(figure.report.compute_seconds),
            "observed_at": figure.report.updated_at,
            "node": nodes.get(member) or (entry.node if entry is not None else None),
        }
        if slow:
            if entry is None:
                kind = None if member.type is ReplicaType.WORKER else str(member.type)
                entry = StragglerRecord(pod=pod, worker=member.index, replica_type=kind)
            entry = evolve(
                entry, slow_readings=min(entry.slow_readings + 1, READINGS), even_readings=0, **measured
            )
            if entry.slow_readings >= READINGS and not entry.named:
                entry = evolve(entry, since=now)
                named.append(entry)
            entries.append(entry)
        elif entry is not None and entry.named:
            even = entry.even_readings + 1
            if even >= READINGS:
                cleared.append(evolve(entry, even_readings=even, **measured))
            else:
                entries.append(evolve(entry, even_readings=even, **measured))
        # else: a suspect whose streak broke, or a pod as fast as the rest: nothing to keep
    return StragglerVerdict(
        _status(attempt, tuple(entries), error), tuple(named), tuple(cleared), refused, dropped
    )


def _figures(
    job: JobSpec,
    snapshot: StepTimesSnapshot,
    training: dict[str, Member],
    attempt: int,
    attempt_started: datetime | None,
    now: datetime,
) -> tuple[dict[str, _Figure], list[str]]:
    """The pods' figures that may be compared now, and why documents were refused."""
    found: dict[str, _Figure] = {}
    problems = [snapshot.error] if snapshot.error else []
    for stem, reading in sorted(snapshot.documents):
        member = training.get(stem)
        if member is None:
            continue
        if isinstance(reading, ProgressProblem):
            problems.append(f"steps/{stem}.json: {reading.message}")
            continue
        if ahead_of_clock(reading, now):
            problems.append(
                f"steps/{stem}.json: updatedAt {format_time(reading.updated_at)} is ahead of the "
                "operator's clock; write the current time"
            )
            continue
        if not reading.is_current(job.uid, attempt, attempt_started):
            continue
        if len(reading.compute_seconds) < MIN_SAMPLES:
            continue
        found[stem] = _Figure(member, reading, statistics.median(reading.compute_seconds))
    if found:
        newest = max(f.report.updated_at for f in found.values())
        fresh_after = newest - timedelta(seconds=STALE_SECONDS)
        found = {s: f for s, f in found.items() if f.report.updated_at >= fresh_after}
    return found, problems


def _status(attempt: int, entries: tuple[StragglerRecord, ...], error: str | None) -> StragglerStatus | None:
    if not entries and error is None:
        return None
    return StragglerStatus(attempt=attempt, workers=entries, error=error)


def describe(record: StragglerRecord) -> str:
    """ "worker 2 (pod mnist-worker-2 on node n1) computes a step in 0.203 s, 40.1x the others' 0.0051 s" """
    kind = record.replica_type or "worker"
    where = f"pod {record.pod}" + (f" on node {record.node}" if record.node else "")
    return (
        f"{kind} {record.worker} ({where}) computes a step in {record.median_seconds:g} s (the median of "
        f"its last {record.steps} steps, before the all-reduce), {record.ratio:g}x the other pods' "
        f"{record.others_seconds:g} s"
    )


def straggler_message(named: Sequence[StragglerRecord]) -> str:
    """The Straggler condition's message while pods are named."""
    told = "; ".join(describe(r) for r in named[:4]) + (
        f"; and {len(named) - 4} more" if len(named) > 4 else ""
    )
    since = min(r.since for r in named if r.since is not None)
    every = "it" if len(named) == 1 else "them"
    return (
        f"{told}: every step of the gang waits for {every} at the all-reduce (slow in {READINGS} readings "
        f"in a row, named at {format_time(since)})"
    )
