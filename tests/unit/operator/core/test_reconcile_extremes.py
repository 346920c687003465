"""The core decides from any clock reading and any limit a spec, status, pod or file can
carry: the ends of the calendar and of int64 never make a reconcile raise, and every time
it writes is RFC 3339 (issue: a progress document dated 9999-12-31 raised OverflowError,
and the job never saw its marker)."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import ConditionType
from tfmw_operator.api.times import format_precise_time, format_time, later
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.observed import MarkerState, Observed
from tfmw_operator.core.progress import ProgressReport
from tfmw_operator.core.reconcile import reconcile
from wrappers import at, decide, job, observe, pod

EXAMPLES = int(os.environ.get("TFMW_HYPOTHESIS_EXAMPLES", "500"))
INT64_MAX = 2**63 - 1
# The CRD's bounds (a deadline from 1 s, a TTL from 0), at their edges and beyond any date.
LIMITS = st.sampled_from([None, 1, 30, 2**31 - 1, INT64_MAX])
TTLS = st.sampled_from([None, 0, 1, 30, 2**31 - 1, INT64_MAX])
TIMES = st.sampled_from(["0001-01-01T00:00:00Z", "0999-06-01T00:00:00Z", "2026-01-01T12:00:10Z",
                         "9999-12-31T23:59:50Z", "9999-12-31T23:59:59Z"])  # fmt: skip
DATES = st.sampled_from(
    [datetime(1, 1, 1, tzinfo=UTC), at(5), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)]
)
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$")


def times_in(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in times_in(v)]
    if isinstance(value, list):
        return [t for v in value for t in times_in(v)]
    return [value] if isinstance(value, str) and re.match(r"^-?\d+-\d+-\d+T", value) else []


@st.composite
def extreme_states(draw: st.DrawFn) -> Observed:
    builder = job().run_policy(
        activeDeadlineSeconds=draw(LIMITS),
        pendingTimeoutSeconds=draw(LIMITS),
        ttlSecondsAfterFinished=draw(TTLS),
        restartGracePeriodSeconds=draw(st.sampled_from([0, 5, INT64_MAX])),
    )
    builder.completion(chiefExitGraceSeconds=draw(st.sampled_from([0, 30, INT64_MAX])))
    phase = draw(st.sampled_from(["Pending", "Running", "Restarting", "Succeeded", "Failed"]))
    builder.launched(phase=phase, restarts=draw(st.sampled_from([0, 3, 10**9])))
    builder.status(
        startTime=draw(TIMES),
        completionTime=draw(TIMES),
        progress={"attempt": 0, "lastUpdate": draw(TIMES), "updatedAt": draw(TIMES), "percent": 10.0},
    )
    builder.condition("Restarting", draw(st.booleans()))
    builder.status(
        conditions=[{**c, "lastTransitionTime": draw(TIMES)} for c in builder.obj()["status"]["conditions"]]
    )
    j = builder.obj()
    pods = []
    for index in range(2):
        wrapper = pod(j, index).created(0)
        state = draw(st.sampled_from(["pending", "running", "ok", "fail137", "deleting", "unknown"]))
        if state == "running":
            wrapper.running()
        elif state == "ok":
            wrapper.exited(0)
        elif state == "fail137":
            wrapper.exited(137)
        elif state == "deleting":
            wrapper.running().deleting()
        raw = wrapper.obj()
        raw["metadata"]["creationTimestamp"] = draw(TIMES)
        if state == "unknown":
            raw["status"]["phase"] = "Unknown"
        for container in raw["status"].get("containerStatuses", []):
            terminated = container.get("state", {}).get("terminated")
            if terminated:
                terminated["finishedAt"] = draw(TIMES)
        if raw["metadata"].get("deletionTimestamp"):
            raw["metadata"]["deletionTimestamp"] = draw(TIMES)
            raw["metadata"]["deletionGracePeriodSeconds"] = draw(st.sampled_from([30, INT64_MAX]))
        pods.append(raw)
    marker = MarkerState(draw(st.booleans()), "uid-mnist", draw(DATES), attempt=0)
    report = ProgressReport(updated_at=draw(DATES), epoch=1, total_epochs=draw(st.sampled_from([2, 10**12])),
                            job_uid="uid-mnist", attempt=0)  # fmt: skip
    service = build_service(parse_job(j))
    return observe(j, pods, marker, at(20), service=service, progress=report)


@settings(max_examples=EXAMPLES, deadline=None)
@given(extreme_states())
def test_no_time_or_limit_makes_a_reconcile_raise(obs: Observed) -> None:
    decision = reconcile(obs)
    assert decision.requeue_after is None or 0 <= decision.requeue_after < 10**12
    written = json.dumps(decision.status.to_json())
    for stamp in times_in(json.loads(written)):
        assert RFC3339.match(stamp), stamp


def test_times_below_year_1000_are_written_with_four_digits() -> None:
    early = datetime(999, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
    assert format_time(early) == "0999-03-04T05:06:07Z"
    assert format_precise_time(early) == "0999-03-04T05:06:07.890Z"


def test_a_limit_past_the_calendar_is_never() -> None:
    assert later(at(0), INT64_MAX) == datetime.max.replace(tzinfo=UTC)
    assert later(at(0), -INT64_MAX) == datetime.min.replace(tzinfo=UTC)
    assert later(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), 10) == datetime.max.replace(tzinfo=UTC)


def test_a_progress_document_from_the_far_future_is_refused_and_the_marker_still_ends_the_job() -> None:
    far = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    running = job().launched(phase="Running").obj()
    pods = [pod(running, i).running().obj() for i in range(2)]
    report = ProgressReport(updated_at=far, epoch=1, total_epochs=4, job_uid="uid-mnist", attempt=0)
    refused = decide(running, pods, progress=report)
    assert [e.reason for e in refused.events] == ["ProgressRefused"]
    assert refused.status.progress is not None and "ahead of the operator's clock" in (
        refused.status.progress.error or ""
    )
    marker = MarkerState(True, "uid-mnist", far, attempt=0)
    done = decide(running, pods, marker=marker, progress=report)
    assert done.status.condition_is_true(ConditionType.SUCCEEDED)


def test_a_deadline_of_int64_seconds_never_fires_and_asks_for_no_wake_up() -> None:
    running = job().run_policy(activeDeadlineSeconds=INT64_MAX).launched(phase="Running").obj()
    decision = decide(running, [pod(running, i).running().obj() for i in range(2)])
    assert decision.status.phase is not None and decision.status.phase.value == "Running"
    assert decision.requeue_after is None
