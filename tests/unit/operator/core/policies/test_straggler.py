"""Naming the straggler (policies/straggler.py): the rule one margin at a time, and what
reconcile makes of it (the Straggler condition, status.stragglers, Events)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest
from tfmw_operator.api.records import evolve
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import ConditionType, JobStatus, StragglerRecord, StragglerStatus
from tfmw_operator.api.times import format_time
from tfmw_operator.core.decision import Decision
from tfmw_operator.core.policies.straggler import (
    CHIEF_RATIO,
    MIN_EXCESS_SECONDS,
    MIN_SAMPLES,
    RATIO,
    READINGS,
    STALE_SECONDS,
    StragglerVerdict,
    describe,
    judge_stragglers,
    straggler_message,
)
from tfmw_operator.core.progress import ProgressProblem
from tfmw_operator.core.step_times import StepTimesReading, StepTimesReport, StepTimesSnapshot
from wrappers import at, decide, job, pod

Json = dict[str, Any]


def running_job(workers: int = 3, **spec: Any) -> Json:
    return job().workers(workers).spec(**spec).launched(phase="Running").obj()


def pods(j: Json) -> list[Json]:
    spec = parse_job(j)
    return [pod(j, i).running().on_node(f"node-{i}").obj() for i in range(spec.workers)]


def report(
    seconds: float | Sequence[float], written: float, attempt: int | None = 0, **more: Any
) -> StepTimesReport:
    figures = tuple(seconds) if isinstance(seconds, Sequence) else (seconds,) * 50
    identity: dict[str, Any] = {"job_uid": "uid-mnist", "attempt": attempt, **more}
    return StepTimesReport(updated_at=at(written), compute_seconds=figures, **identity)


def snapshot(
    figures: Mapping[str, float | Sequence[float]], written: float, **more: Any
) -> StepTimesSnapshot:
    return StepTimesSnapshot(tuple((stem, report(s, written, **more)) for stem, s in figures.items()))


def readings(
    j: Json, figures: Sequence[Mapping[str, float | Sequence[float]]], start: float = 30
) -> list[Decision]:
    """One reading every 10 s (a new document each time), the status carried over as the API
    server would keep it."""
    decisions = []
    for n, each in enumerate(figures):
        now = start + 10 * n
        decision = decide(j, pods(j), step_times=snapshot(each, now - 1), now=at(now))
        j["status"] = decision.status.to_json()
        decisions.append(decision)
    return decisions


SLOW = {"worker-0": 0.010, "worker-1": 0.210, "worker-2": 0.011}
EVEN = {"worker-0": 0.010, "worker-1": 0.011, "worker-2": 0.012}


def straggler_condition(decision: Decision) -> tuple[bool, str, str] | None:
    found = decision.status.condition(ConditionType.STRAGGLER)
    return None if found is None else (found.true, found.reason, found.message)


def test_a_worker_slower_in_three_readings_in_a_row_is_named_with_its_pod_node_and_figures() -> None:
    j = running_job()
    decisions = readings(j, [SLOW] * READINGS)
    for early in decisions[:-1]:
        assert straggler_condition(early) is None
        assert not any(e.reason == "Straggler" for e in early.events)
    last = decisions[-1]
    true, reason, message = straggler_condition(last) or (False, "", "")
    assert (true, reason) == (True, "SlowCompute")
    assert "worker 1 (pod mnist-worker-1 on node node-1) computes a step in 0.21 s" in message
    assert "20x the other pods' 0.0105 s" in message and "every step of the gang waits for it" in message
    (named,) = last.status.stragglers.workers  # type: ignore[union-attr]
    assert (named.pod, named.worker, named.node, named.replica_type) == ("mnist-worker-1", 1, "node-1", None)
    assert (named.median_seconds, named.others_seconds, named.ratio, named.steps) == (0.21, 0.0105, 20.0, 50)
    assert named.slow_readings == READINGS and named.since == at(50)
    (event,) = [e for e in last.events if e.reason == "Straggler"]
    assert event.type == "Warning" and "mnist-worker-1" in event.message


def test_the_same_document_read_again_is_not_new_evidence() -> None:
    j = running_job()
    for now in (30, 40, 50, 60):  # the workers stopped writing: one document, four readings
        decision = decide(j, pods(j), step_times=snapshot(SLOW, 29), now=at(now))
        j["status"] = decision.status.to_json()
    assert straggler_condition(decision) is None
    assert decision.status.stragglers.workers[0].slow_readings == 1  # type: ignore[union-attr]


def test_nothing_read_now_changes_nothing() -> None:
    j = running_job()
    readings(j, [SLOW] * 2)
    before = JobStatus.from_json(j["status"])
    decision = decide(j, pods(j), step_times=None, now=at(55))
    assert decision.status.stragglers == before.stragglers


def test_a_suspect_whose_streak_breaks_starts_again() -> None:
    j = running_job()
    decisions = readings(j, [SLOW, SLOW, EVEN, SLOW, SLOW])
    assert decisions[2].status.stragglers is None
    assert all(straggler_condition(d) is None for d in decisions)


def test_a_named_straggler_is_cleared_after_three_even_readings_in_a_row() -> None:
    j = running_job()
    decisions = readings(j, [SLOW] * READINGS + [EVEN, EVEN, SLOW, EVEN, EVEN, EVEN])
    assert [straggler_condition(d)[0] for d in decisions[READINGS - 1 :]] == [  # type: ignore[index]
        True, True, True, True, True, True, False,
    ]  # fmt: skip
    last = decisions[-1]
    assert straggler_condition(last)[1:] == (  # type: ignore[index]
        "ComputeEven",
        "no training pod's compute is slower than the others'",
    )
    assert last.status.stragglers is None
    (cleared,) = [e for e in last.events if e.reason == "StragglerCleared"]
    assert cleared.type == "Normal" and "mnist-worker-1" in cleared.message


@pytest.mark.parametrize(
    ("slow", "named"),
    [
        (0.010 * RATIO + MIN_EXCESS_SECONDS, True),
        (0.0105 * RATIO - 0.0001 + 0.0, False),  # below the ratio
        (0.0105 + MIN_EXCESS_SECONDS - 0.001, False),  # 2.9x, but 19 ms: timer noise on tiny steps
        (0.0105 + MIN_EXCESS_SECONDS + 0.001, True),
    ],
)
def test_both_margins_must_hold(slow: float, named: bool) -> None:
    j = running_job()
    decisions = readings(j, [{"worker-0": 0.010, "worker-1": slow, "worker-2": 0.011}] * READINGS)
    assert (straggler_condition(decisions[-1]) is not None) is named


def test_tiny_steps_twice_as_slow_are_not_a_straggler() -> None:
    j = running_job()
    decisions = readings(j, [{"worker-0": 0.002, "worker-1": 0.004, "worker-2": 0.002}] * 5)
    assert all(d.status.stragglers is None for d in decisions)


def test_the_chief_must_be_twice_as_slow_a_worker_half_again() -> None:
    j = running_job()
    between = 0.2 * (RATIO + CHIEF_RATIO) / 2  # 1.75x
    chief = readings(j, [{"worker-0": between, "worker-1": 0.2, "worker-2": 0.2}] * READINGS)
    assert straggler_condition(chief[-1]) is None
    j = running_job()
    worker = readings(j, [{"worker-0": 0.2, "worker-1": between, "worker-2": 0.2}] * READINGS)
    assert straggler_condition(worker[-1]) is not None
    j = running_job()
    twice = readings(j, [{"worker-0": 0.2 * CHIEF_RATIO, "worker-1": 0.2, "worker-2": 0.2}] * READINGS)
    assert "worker 0 (pod mnist-worker-0" in straggler_condition(twice[-1])[2]  # type: ignore[index]


def test_a_chief_of_its_own_is_compared_with_the_workers() -> None:
    j = job().workers(2).chief().launched(phase="Running").obj()
    all_pods = [pod(j, 0, replica_type="chief").running().on_node("n-c").obj()] + [
        pod(j, i).running().obj() for i in range(2)
    ]
    figures = {"chief-0": 0.5, "worker-0": 0.1, "worker-1": 0.1}
    for n in range(READINGS):
        decision = decide(j, all_pods, step_times=snapshot(figures, 29 + 10 * n), now=at(30 + 10 * n))
        j["status"] = decision.status.to_json()
    (named,) = decision.status.stragglers.workers  # type: ignore[union-attr]
    assert (named.pod, named.replica_type, named.node) == ("mnist-chief-0", "chief", "n-c")


def test_two_workers_can_be_compared_and_the_faster_is_never_named() -> None:
    j = running_job(workers=2)
    decisions = readings(j, [{"worker-0": 0.01, "worker-1": 0.3}] * READINGS)
    (named,) = decisions[-1].status.stragglers.workers  # type: ignore[union-attr]
    assert named.pod == "mnist-worker-1"


def test_when_most_are_slow_the_few_fast_ones_are_not_stragglers() -> None:
    j = running_job(workers=4)
    figures = {"worker-0": 0.3, "worker-1": 0.3, "worker-2": 0.3, "worker-3": 0.01}
    assert all(d.status.stragglers is None for d in readings(j, [figures] * 5))


def test_several_stragglers_are_named_together() -> None:
    j = running_job(workers=5)
    figures = {"worker-0": 0.01, "worker-1": 0.3, "worker-2": 0.01, "worker-3": 0.4, "worker-4": 0.01}
    last = readings(j, [figures] * READINGS)[-1]
    assert [w.pod for w in last.status.stragglers.workers] == ["mnist-worker-1", "mnist-worker-3"]  # type: ignore[union-attr]
    assert straggler_condition(last)[2].count("computes a step") == 2  # type: ignore[index]
    assert "waits for them" in straggler_condition(last)[2]  # type: ignore[index]


def test_even_workers_with_noise_are_never_named() -> None:
    """Three workers of the same speed, each step 10 ms to 40 ms at random (scheduling on a busy
    node), 200 readings: no name, ever."""
    rng = random.Random(38)
    j = running_job()
    for n in range(200):
        figures: dict[str, float | Sequence[float]] = {
            f"worker-{i}": [rng.uniform(0.010, 0.040) for _ in range(50)] for i in range(3)
        }
        decision = decide(j, pods(j), step_times=snapshot(figures, n * 10 + 1), now=at(n * 10 + 2))
        j["status"] = decision.status.to_json()
        assert straggler_condition(decision) is None, n


def test_garbage_collections_in_the_window_move_no_median() -> None:
    window = [0.010] * 45 + [2.0] * 5  # five steps of fifty with a long pause
    j = running_job()
    decisions = readings(j, [{"worker-0": 0.010, "worker-1": window, "worker-2": 0.011}] * 5)
    assert all(d.status.stragglers is None for d in decisions)


def test_a_job_of_one_worker_has_no_one_to_compare_with() -> None:
    j = running_job(workers=1)
    decisions = readings(j, [{"worker-0": 5.0}] * 5)
    assert all(d.status.stragglers is None for d in decisions)


def test_documents_of_another_attempt_or_job_too_short_or_stale_are_left_out() -> None:
    spec = parse_job(running_job())
    status = JobStatus.from_json(running_job()["status"])

    def judged(documents: dict[str, StepTimesReport]) -> int:
        verdict = judge_stragglers(
            spec, status, StepTimesSnapshot(tuple(documents.items())), [], at(0), at(30)
        )
        return len(verdict.status.workers) if verdict.status else 0

    fast = {"worker-0": report(0.01, 29), "worker-2": report(0.01, 29)}
    assert judged({**fast, "worker-1": report(0.5, 29)}) == 1
    assert judged({**fast, "worker-1": report(0.5, 29, attempt=1)}) == 0  # the next attempt's? not this one's
    assert judged({**fast, "worker-1": report(0.5, 29, job_uid="uid-old", attempt=0)}) == 0
    assert judged({**fast, "worker-1": report([0.5] * (MIN_SAMPLES - 1), 29)}) == 0
    assert judged({**fast, "worker-1": report(0.5, 29 - STALE_SECONDS - 1)}) == 0  # its writer stopped
    assert (
        judged({**fast, "worker-1": report(0.5, -60, job_uid=None, attempt=None)}) == 0
    )  # before the attempt
    assert judged({**fast, "ps-0": report(0.5, 29)}) == 0  # not a training pod


def test_a_refused_document_is_said_once_and_kept_in_the_status() -> None:
    j = running_job()
    problem = ProgressProblem(
        "ELOOP: Too many levels of symbolic links (a symlink; the operator never follows them)"
    )
    documents = StepTimesSnapshot((("worker-1", problem),))
    first = decide(j, pods(j), step_times=documents, now=at(30))
    (event,) = [e for e in first.events if e.reason == "StepTimesRefused"]
    assert event.type == "Warning"
    assert event.message.startswith("step-times document refused: steps/worker-1.json: ELOOP")
    assert first.status.stragglers is not None and first.status.stragglers.error is not None
    j["status"] = first.status.to_json()
    again = decide(j, pods(j), step_times=documents, now=at(40))
    assert not [e for e in again.events if e.reason == "StepTimesRefused"]
    fine = decide(j, pods(j), step_times=snapshot(EVEN, 45), now=at(50))
    assert fine.status.stragglers is None


def test_a_folder_that_cannot_be_read_is_said_too() -> None:
    j = running_job()
    decision = decide(
        j, pods(j), step_times=StepTimesSnapshot(error="default/mnist/steps: ENOTDIR"), now=at(30)
    )
    assert decision.status.stragglers.error == "default/mnist/steps: ENOTDIR"  # type: ignore[union-attr]


def test_a_gang_restart_drops_the_names_and_compares_the_new_attempt_afresh() -> None:
    j = running_job()
    readings(j, [SLOW] * READINGS)
    j["spec"]["runPolicy"]["restartPolicy"] = "OnFailure"
    failed = [pod(j, 0).running().obj(), pod(j, 1).exited(137).obj(), pod(j, 2).running().obj()]
    decision = decide(j, failed, now=at(70))
    assert decision.status.attempt == 1 and decision.status.stragglers is None
    assert straggler_condition(decision) == (False, "NewAttempt", "attempt 1's pods are compared afresh")


def test_a_job_that_is_not_running_is_not_judged() -> None:
    j = job().workers(3).launched(phase="Pending").obj()
    decision = decide(j, [pod(j, i).obj() for i in range(3)], step_times=snapshot(SLOW, 29), now=at(30))
    assert decision.status.stragglers is None


# The rule read directly, a verdict at a time: a job of three workers in its attempt 2.
ATTEMPT = 2


def record(worker: int, **fields: Any) -> StragglerRecord:
    return StragglerRecord(pod=f"mnist-worker-{worker}", worker=worker, **fields)


def judge(
    documents: Mapping[str, StepTimesReading],
    workers: Sequence[StragglerRecord] = (),
    recorded_attempt: int = ATTEMPT,
    error: str | None = None,
    started: datetime | None = None,
) -> StragglerVerdict:
    spec = parse_job(running_job())
    recorded = StragglerStatus(attempt=recorded_attempt, workers=tuple(workers), error=error)
    status = JobStatus(attempt=ATTEMPT, stragglers=recorded if workers or error else None)
    snapshot = StepTimesSnapshot(tuple(documents.items()))
    return judge_stragglers(spec, status, snapshot, [], started or at(0), at(30))


def doc(seconds: float | Sequence[float], written: float = 29, **more: Any) -> StepTimesReport:
    return report(seconds, written, **({"attempt": ATTEMPT} | more))


def suspects(verdict: StragglerVerdict) -> dict[str, int]:
    return {w.pod: w.slow_readings for w in verdict.status.workers} if verdict.status else {}


FAST_PAIR = {"worker-0": doc(0.01), "worker-2": doc(0.01)}


def test_a_first_slow_reading_makes_a_suspect_of_the_current_attempt() -> None:
    verdict = judge({**FAST_PAIR, "worker-1": doc(0.5)})
    assert verdict.status is not None and verdict.status.attempt == ATTEMPT
    assert suspects(verdict) == {"mnist-worker-1": 1}
    assert (verdict.named, verdict.cleared, verdict.refused, verdict.new_attempt) == ((), (), None, False)
    assert verdict.new_attempt is False


def test_exactly_the_excess_margin_is_slow() -> None:
    # 0.04 - 0.02 is 0.02 exactly in binary floating point: the margin is reached, not passed.
    verdict = judge({"worker-0": doc(0.02), "worker-1": doc(0.04), "worker-2": doc(0.02)})
    assert suspects(verdict) == {"mnist-worker-1": 1}


def test_the_figures_are_rounded_as_the_status_shows_them() -> None:
    verdict = judge({"worker-0": doc(0.01013), "worker-1": doc(0.20537), "worker-2": doc(0.01011)})
    (entry,) = verdict.status.workers  # type: ignore[union-attr]
    assert (entry.median_seconds, entry.others_seconds, entry.ratio) == (0.2054, 0.0101, 20.3)
    assert (entry.steps, entry.observed_at, entry.node) == (50, at(29), None)


def test_names_of_an_attempt_that_ended_are_dropped_and_said_once() -> None:
    old = [record(1, slow_readings=READINGS, since=at(5), observed_at=at(4))]
    few = judge({"worker-1": doc(0.5)}, old, recorded_attempt=ATTEMPT - 1)
    assert (few.status, few.new_attempt, few.refused) == (None, True, None)
    enough = judge({**FAST_PAIR, "worker-1": doc(0.5)}, old, recorded_attempt=ATTEMPT - 1)
    assert (enough.new_attempt, enough.refused, enough.named) == (True, None, ())
    assert suspects(enough) == {"mnist-worker-1": 1}  # compared afresh
    unchanged = judge({**FAST_PAIR, "worker-1": doc(0.5)}, old)
    assert unchanged.new_attempt is False


def test_a_refused_document_with_no_one_to_compare_is_kept_with_the_attempt() -> None:
    verdict = judge({"worker-1": ProgressProblem("compute_seconds must be a list")})
    assert verdict.status == StragglerStatus(
        attempt=ATTEMPT, error="steps/worker-1.json: compute_seconds must be a list"
    )
    assert verdict.refused == "steps/worker-1.json: compute_seconds must be a list"


def test_a_refused_document_leaves_only_its_pod_out() -> None:
    problem = ProgressProblem("compute_seconds must be a list")
    verdict = judge({"worker-0": problem, "worker-1": doc(0.5), "worker-2": doc(0.01)})
    assert verdict.refused == "steps/worker-0.json: compute_seconds must be a list"
    assert verdict.status is not None and verdict.status.attempt == ATTEMPT
    assert verdict.status.error == "steps/worker-0.json: compute_seconds must be a list"
    assert suspects(verdict) == {"mnist-worker-1": 1}
    said = judge({"worker-0": problem, "worker-1": doc(0.5), "worker-2": doc(0.01)}, error=verdict.refused)
    assert said.refused is None and said.status is not None and said.status.error == verdict.refused


def test_a_document_dated_ahead_of_the_clock_is_refused_by_its_date() -> None:
    ahead = doc(0.5, written=30 + 301)
    verdict = judge({"worker-0": ahead, "worker-1": doc(0.5), "worker-2": doc(0.01)})
    assert verdict.refused == (
        f"steps/worker-0.json: updatedAt {format_time(at(331))} is ahead of the operator's clock; "
        "write the current time"
    )
    assert suspects(verdict) == {"mnist-worker-1": 1}


@pytest.mark.parametrize(
    "left_out",
    [
        {"worker-0": doc(0.01, attempt=ATTEMPT - 1)},  # another attempt's
        {"worker-0": doc([0.01] * (MIN_SAMPLES - 1))},  # too short
        {"evaluator-0": doc(0.5), "ps-0": doc(0.5)},  # no training pods
    ],
)
def test_a_document_left_out_leaves_the_others_compared(left_out: Mapping[str, StepTimesReport]) -> None:
    verdict = judge({**left_out, "worker-1": doc(0.5), "worker-2": doc(0.01)})
    assert suspects(verdict) == {"mnist-worker-1": 1}


def test_a_window_of_exactly_the_minimum_is_compared() -> None:
    verdict = judge({**FAST_PAIR, "worker-1": doc([0.5] * MIN_SAMPLES)})
    assert suspects(verdict) == {"mnist-worker-1": 1}


def test_a_document_exactly_the_stale_bound_older_than_the_newest_is_compared() -> None:
    verdict = judge({**FAST_PAIR, "worker-1": doc(0.5, written=29 - STALE_SECONDS)})
    assert suspects(verdict) == {"mnist-worker-1": 1}


def test_documents_without_identity_written_in_this_attempt_are_compared() -> None:
    plain: dict[str, Any] = {"job_uid": None, "attempt": None}
    documents = {
        "worker-0": doc(0.01, **plain),
        "worker-1": doc(0.5, **plain),
        "worker-2": doc(0.01, **plain),
    }
    assert suspects(judge(documents, started=at(10))) == {"mnist-worker-1": 1}
    assert suspects(judge(documents, started=at(29.5))) == {}  # written before it started


def test_a_pod_not_read_now_keeps_its_entry_and_the_others_are_judged() -> None:
    kept = record(0, slow_readings=1, median_seconds=0.5, observed_at=at(19))
    verdict = judge({"worker-1": doc(0.5), "worker-2": doc(0.01)}, [kept])
    assert verdict.status is not None and verdict.status.workers[0] == kept
    assert suspects(verdict) == {"mnist-worker-0": 1, "mnist-worker-1": 1}


def test_an_unchanged_document_is_kept_as_counted_and_the_next_pod_judged() -> None:
    kept = record(0, slow_readings=1, median_seconds=0.5, observed_at=at(19))
    verdict = judge({"worker-0": doc(0.5, written=19), "worker-1": doc(0.5), "worker-2": doc(0.01)}, [kept])
    assert verdict.status is not None and verdict.status.workers[0] == kept
    assert suspects(verdict) == {"mnist-worker-0": 1, "mnist-worker-1": 1}


def test_a_suspect_keeps_the_node_it_was_seen_on_when_no_pod_says() -> None:
    seen = record(1, slow_readings=1, node="n-old", observed_at=at(19))
    (entry,) = judge({**FAST_PAIR, "worker-1": doc(0.5)}, [seen]).status.workers  # type: ignore[union-attr]
    assert (entry.node, entry.slow_readings) == ("n-old", 2)


def test_a_slow_reading_ends_a_named_pods_even_streak() -> None:
    named = record(1, slow_readings=READINGS, even_readings=2, since=at(5), observed_at=at(19))
    verdict = judge({**FAST_PAIR, "worker-1": doc(0.5)}, [named])
    (entry,) = verdict.status.workers  # type: ignore[union-attr]
    assert (entry.slow_readings, entry.even_readings, entry.since, entry.median_seconds) == (
        READINGS,
        0,
        at(5),
        0.5,
    )
    assert verdict.named == ()  # named already


def test_even_readings_of_a_named_pod_carry_the_new_figures_until_it_is_cleared() -> None:
    named = record(1, slow_readings=READINGS, since=at(5), median_seconds=0.5, observed_at=at(19))
    once = judge({**FAST_PAIR, "worker-1": doc(0.011)}, [named])
    (entry,) = once.status.workers  # type: ignore[union-attr]
    assert (entry.even_readings, entry.median_seconds, entry.observed_at) == (1, 0.011, at(29))
    assert once.cleared == ()
    last = evolve(named, even_readings=READINGS - 1)
    cleared = judge({**FAST_PAIR, "worker-1": doc(0.011)}, [last])
    assert cleared.status is None
    (gone,) = cleared.cleared
    assert (gone.even_readings, gone.median_seconds, gone.ratio, gone.observed_at) == (
        READINGS,
        0.011,
        1.1,
        at(29),
    )


def described(worker: int) -> StragglerRecord:
    return record(
        worker, median_seconds=0.2, others_seconds=0.01, ratio=20.0, steps=50, since=at(30 + worker)
    )


def test_a_pod_on_no_known_node_is_described_without_one() -> None:
    assert describe(described(1)) == (
        "worker 1 (pod mnist-worker-1) computes a step in 0.2 s (the median of its last 50 steps, "
        "before the all-reduce), 20x the other pods' 0.01 s"
    )


def test_the_message_names_one_pod_with_when() -> None:
    assert straggler_message([described(1)]) == (
        f"{describe(described(1))}: every step of the gang waits for it at the all-reduce "
        f"(slow in {READINGS} readings in a row, named at 2026-01-01T12:00:31Z)"
    )


@pytest.mark.parametrize(("count", "more"), [(2, ""), (4, ""), (5, "; and 1 more"), (6, "; and 2 more")])
def test_the_message_describes_four_pods_at_most(count: int, more: str) -> None:
    named = [described(i) for i in range(count)]
    told = "; ".join(describe(r) for r in named[:4])
    assert straggler_message(named) == (
        f"{told}{more}: every step of the gang waits for them at the all-reduce "
        f"(slow in {READINGS} readings in a row, named at 2026-01-01T12:00:30Z)"
    )
