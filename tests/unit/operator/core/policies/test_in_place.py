"""The rules of a gang restart that keeps its pods: which pods serve the attempt, which must be
made again, when the barrier opens, how long survivors get to stop, what the control file says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tfmw_operator.api.spec import JobSpec, parse_job
from tfmw_operator.api.status import AttemptRecord, JobStatus, Phase
from tfmw_operator.api.times import format_time
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.policies.failure import NODE_LOST_SECONDS
from tfmw_operator.core.policies.in_place import (
    BARRIER_SLACK_SECONDS,
    attempt_began,
    control,
    gone_at_raise,
    in_place,
    late_at_barrier,
    really_gone,
    released,
    split,
    stop_seconds,
    survivors_can_save,
)
from tfmw_operator.core.supervision import with_reports
from wrappers import SUPERVISOR_IMAGE, at, job, pod, report

Json = dict[str, Any]
GRACE = 30


def spec(manifest: Json | None = None) -> JobSpec:
    return parse_job(manifest or job().commanded().obj(), supervisor_image=SUPERVISOR_IMAGE)


def observed(raw: Json) -> ObservedPod:
    found = observe_pod(raw)
    assert found is not None
    return found


def record(cause: str = "Error", exit_code: int | None = 137, attempt: int = 0) -> AttemptRecord:
    return AttemptRecord(
        attempt=attempt, outcome="Restarted", cause=cause, end_time=at(50), exit_code=exit_code
    )


def raised(cause: str = "Error", exit_code: int | None = 137) -> JobStatus:
    """Attempt 1 launched by raising it after attempt 0 ended at 50 s."""
    return JobStatus(
        phase=Phase.RUNNING, attempt=1, launched_attempt=1, history=(record(cause, exit_code),), restarts=1
    )


@pytest.mark.parametrize(
    ("cause", "exit_code", "can"),
    [
        ("PodDeleted", None, True),
        ("Evicted", 137, True),
        ("Error", 143, True),  # ended on SIGTERM
        ("Error", 1, True),  # a program's own exit, maybe how it took a lost peer
        ("Error", 137, False),  # SIGKILLed: no save could finish without it
        ("OOMKilled", 137, False),
        ("NodeLost", None, False),
        ("ProgressStalled", None, False),
    ],
)
def test_when_survivors_may_save_together(cause: str, exit_code: int | None, can: bool) -> None:
    assert survivors_can_save(record(cause, exit_code)) is can
    assert stop_seconds(raised(cause, exit_code), GRACE) == (GRACE if can else 0)


def test_no_restart_no_stop_bound() -> None:
    assert stop_seconds(JobStatus(attempt=0, launched_attempt=0), GRACE) is None
    assert survivors_can_save(None)


def test_a_gang_without_command_keeps_each_pod_to_its_own_attempt() -> None:
    manifest = job().obj()
    plain = spec(manifest)
    assert not in_place(plain)
    pods = [observed(pod(manifest, 0).running().obj()), observed(pod(manifest, 1, 1).running().obj())]
    current, stale = split(plain, JobStatus(attempt=1), pods, at(60))
    assert [p.attempt for p in current] == [1] and [p.attempt for p in stale] == [0]
    assert control(plain, JobStatus(attempt=1), current, pods, GRACE) is None


def test_survivors_serve_the_next_attempt_and_the_gone_go() -> None:
    manifest = job().commanded().obj()
    survivor = observed(pod(manifest, 0).running().obj())
    deleted = observed(pod(manifest, 1).running().deleting(40).obj())
    status = JobStatus(attempt=1, history=(record("PodDeleted", None),))  # raised, not yet launched
    current, stale = split(spec(manifest), status, [survivor, deleted], at(60))
    assert current == [survivor] and stale == [deleted]
    assert really_gone(deleted, at(60)) and not really_gone(survivor, at(60))


def test_at_a_raise_only_the_really_gone_are_made_again() -> None:
    manifest = job().commanded().obj()
    evicted = observed(pod(manifest, 1).evicted().obj())
    survivor = observed(pod(manifest, 0).running().obj())
    unsupervised = observed(pod(job().obj(), 1).running().obj())  # made before the template had a command
    assert gone_at_raise([survivor, evicted, unsupervised], at(60)) == [evicted, unsupervised]


def test_a_pod_whose_node_stopped_reporting_is_gone_after_the_bound() -> None:
    manifest = job().commanded().obj()
    raw = pod(manifest, 1).running().obj()
    raw["status"]["phase"] = "Unknown"
    raw["status"]["conditions"] = [
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": format_time(at(0))}
    ]
    unknown = observed(raw)
    assert not really_gone(unknown, at(1))
    assert really_gone(unknown, at(NODE_LOST_SECONDS))


def test_the_barrier_opens_when_every_survivor_waits_for_the_attempt() -> None:
    manifest = job().commanded().obj()
    raws = [pod(manifest, 0).running().obj(), pod(manifest, 1, 1).running().obj()]
    pods = [observed(r) for r in raws]
    status = raised()
    assert not released(spec(manifest), status, list(with_reports(pods, (), 1)))
    only_new = (report(raws[1], "waiting", 1),)
    assert not released(spec(manifest), status, list(with_reports(pods, only_new, 1)))
    both = (report(raws[0], "waiting", 1), report(raws[1], "waiting", 1))
    assert released(spec(manifest), status, list(with_reports(pods, both, 1)))
    said = control(spec(manifest), status, list(with_reports(pods, both, 1)), pods, GRACE)
    assert said is not None and (said.attempt, said.start, said.stop_seconds, said.exit) == (
        1,
        True,
        0,
        False,
    )


def test_a_gang_made_whole_for_the_attempt_starts_at_once() -> None:
    manifest = job().commanded().obj()
    pods = [observed(pod(manifest, i, 1).running().obj()) for i in range(2)]
    assert released(spec(manifest), raised(), pods)
    assert not released(spec(manifest), JobStatus(attempt=1), pods)  # not launched yet


def test_a_survivor_late_at_the_barrier_is_made_again_after_its_bound() -> None:
    manifest = job().commanded().obj()
    raws = [pod(manifest, 0).running().obj(), pod(manifest, 1, 1).running().obj()]
    pods = list(with_reports([observed(r) for r in raws], (report(raws[1], "waiting", 1),), 1))
    status = raised("Error", 143)  # survivors get the grace to save
    deadline = at(50) + timedelta(seconds=GRACE + BARRIER_SLACK_SECONDS)
    early = late_at_barrier(spec(manifest), status, pods, at(60), GRACE)
    assert early.pods == () and early.wake_at == deadline
    late = late_at_barrier(spec(manifest), status, pods, deadline, GRACE)
    assert [p.index for p in late.pods] == [0]


def test_a_finished_job_tells_the_supervisors_to_exit_once_no_command_runs() -> None:
    manifest = job().commanded().obj()
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    done = JobStatus(phase=Phase.SUCCEEDED, attempt=0, launched_attempt=0)
    running = list(with_reports([observed(r) for r in raws], (report(raws[0], "running", 0),), 0))
    said = control(spec(manifest), done, running, running, GRACE)
    assert said is not None and not said.exit  # worker 0's command still runs
    ended = tuple(report(r, "exited", 0, exit_code=0) for r in raws)
    finished = list(with_reports([observed(r) for r in raws], ended, 0))
    said = control(spec(manifest), done, finished, finished, GRACE)
    assert said is not None and said.exit


def test_an_attempt_raised_in_place_began_at_the_raise() -> None:
    manifest = job().commanded().obj()
    pods = [observed(pod(manifest, 0).created(5).running().obj())]
    assert attempt_began(spec(manifest), raised(), pods) == at(50)
    assert attempt_began(spec(job().obj()), raised(), pods) is None  # no pod of attempt 1
