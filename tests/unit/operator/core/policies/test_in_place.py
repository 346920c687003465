"""The rules of a gang restart that keeps its pods: which pods serve the attempt, which must be
made again, when the barrier opens, how long survivors get to stop, what the control file says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tfmw_operator.api.names import LABEL_POD_GROUP
from tfmw_operator.api.spec import JobSpec, parse_job
from tfmw_operator.api.status import AttemptRecord, JobStatus, Phase
from tfmw_operator.api.times import format_time
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.policies.failure import NODE_LOST_SECONDS
from tfmw_operator.core.policies.in_place import (
    BARRIER_SLACK_SECONDS,
    Late,
    attempt_began,
    control,
    gone_at_raise,
    in_place,
    late_at_barrier,
    pod_group,
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


def unknown_since(raw: Json, seconds: float) -> ObservedPod:
    """The pod as its silent kubelet left it: phase Unknown since `seconds`."""
    raw["status"]["phase"] = "Unknown"
    raw["status"]["conditions"] = [
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": format_time(at(seconds))}
    ]
    return observed(raw)


def test_at_a_raise_a_pod_on_a_lost_node_is_made_again() -> None:
    manifest = job().commanded().obj()
    lost = unknown_since(pod(manifest, 1).running().obj(), 0)
    survivor = observed(pod(manifest, 0).running().obj())
    assert gone_at_raise([survivor, lost], at(NODE_LOST_SECONDS)) == [lost]
    assert gone_at_raise([survivor, lost], at(1)) == []


@pytest.mark.parametrize(
    ("cause", "exit_code", "can"),
    [
        ("PeerLost", 1, True),  # a program's own exit on a lost peer
        ("PeerLost", 170, True),
        ("PeerLost", 137, False),
        ("Error", 127, True),
        ("Error", 128, False),  # the first signal code: not a program's own exit
    ],
)
def test_a_program_s_own_exit_is_below_the_signal_codes(cause: str, exit_code: int, can: bool) -> None:
    assert survivors_can_save(record(cause, exit_code)) is can


def test_only_a_restart_of_the_attempt_just_before_sets_a_stop_bound() -> None:
    failed = JobStatus(
        phase=Phase.RUNNING,
        attempt=1,
        launched_attempt=1,
        history=(AttemptRecord(attempt=0, outcome="Suspended", cause="Suspended", end_time=at(50)),),
    )
    assert stop_seconds(failed, GRACE) is None
    older = JobStatus(phase=Phase.RUNNING, attempt=2, launched_attempt=2, history=(record("Error", 143),))
    assert stop_seconds(older, GRACE) is None
    assert stop_seconds(raised("Error", 143), GRACE) == GRACE


def test_an_evaluator_left_from_an_earlier_attempt_does_not_hold_the_barrier() -> None:
    manifest = job().commanded().evaluator().obj()
    gang = [observed(pod(manifest, i, 1).running().obj()) for i in range(2)]
    evaluator = observed(pod(manifest, 0, 0, replica_type="evaluator").running().obj())
    assert released(spec(manifest), raised(), [*gang, evaluator])


def test_no_barrier_deadline_before_the_attempt_is_launched() -> None:
    manifest = job().commanded().obj()
    pods = [observed(pod(manifest, 0).running().obj())]
    waiting = JobStatus(phase=Phase.RUNNING, attempt=1, history=(record("Error", 143),), restarts=1)
    assert late_at_barrier(spec(manifest), waiting, pods, at(60), GRACE) == Late()
    first = JobStatus(phase=Phase.RUNNING, attempt=0, launched_attempt=0)
    assert late_at_barrier(spec(manifest), first, pods, at(60), GRACE) == Late()


def test_survivors_that_cannot_save_get_only_the_slack_at_the_barrier() -> None:
    manifest = job().commanded().obj()
    raws = [pod(manifest, 0).running().obj(), pod(manifest, 1, 1).running().obj()]
    pods = list(with_reports([observed(r) for r in raws], (), 1))
    said = late_at_barrier(spec(manifest), raised("Error", 137), pods, at(60), GRACE)
    assert said.pods == () and said.wake_at == at(50) + timedelta(seconds=BARRIER_SLACK_SECONDS)


def test_only_survivors_still_on_an_old_attempt_are_late() -> None:
    """A survivor still reporting its old attempt is late; a pod made for the attempt that has
    not reported yet, or that is going, is not."""
    manifest = job(workers=3).commanded().obj()
    raws = [
        pod(manifest, 0).running().obj(),
        pod(manifest, 1, 1).running().obj(),
        pod(manifest, 2).running().deleting(55).obj(),
    ]
    reports = (report(raws[0], "running", 0), report(raws[2], "running", 0))
    pods = list(with_reports([observed(r) for r in raws], reports, 1))
    deadline = at(50) + timedelta(seconds=GRACE + BARRIER_SLACK_SECONDS)
    late = late_at_barrier(spec(manifest), raised("Error", 143), pods, deadline, GRACE)
    assert [p.name for p in late.pods] == [pods[0].name]


def test_a_finished_job_whose_supervisors_never_reported_tells_them_to_exit() -> None:
    manifest = job().commanded().obj()
    done = JobStatus(phase=Phase.SUCCEEDED, attempt=0, launched_attempt=0)
    silent = list(with_reports([observed(pod(manifest, i).running().obj()) for i in range(2)], (), 0))
    said = control(spec(manifest), done, silent, silent, GRACE)
    assert said is not None and said.exit
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    waiting = tuple(report(r, "waiting", 0) for r in raws)
    at_barrier = list(with_reports([observed(r) for r in raws], waiting, 0))
    said = control(spec(manifest), done, at_barrier, at_barrier, GRACE)
    assert said is not None and said.exit


def test_a_finished_job_whose_pods_are_all_going_writes_no_control_file() -> None:
    manifest = job().commanded().obj()
    done = JobStatus(phase=Phase.SUCCEEDED, attempt=0, launched_attempt=0)
    going = [observed(pod(manifest, i).running().deleting(30).obj()) for i in range(2)]
    assert control(spec(manifest), done, going, going, GRACE) is None


def grouped(raw: Json, group: str | None) -> Json:
    """The pod in Kueue pod group `group`; None: in none (made before the job was queued)."""
    labels = raw["metadata"]["labels"]
    labels.pop(LABEL_POD_GROUP, None)
    if group is not None:
        labels[LABEL_POD_GROUP] = group
    return raw


def test_new_pods_join_the_survivors_pod_group() -> None:
    manifest = job().commanded().queue("team").obj()
    ungrouped = observed(grouped(pod(manifest, 0).running().obj(), None))
    going = observed(grouped(pod(manifest, 1).running().deleting(5).obj(), "tfmw-mnist-old"))
    survivor = observed(grouped(pod(manifest, 1).running().obj(), "tfmw-mnist-0"))
    queued = spec(manifest)
    assert pod_group(queued, [ungrouped, going, survivor]) == "tfmw-mnist-0"
    assert pod_group(queued, [going]) is None
    assert pod_group(queued, []) is None


def test_only_a_queued_gang_restarted_in_place_keeps_its_pod_group() -> None:
    survivor = grouped(pod(job().commanded().queue("team").obj(), 0).running().obj(), "tfmw-mnist-0")
    not_queued = job().commanded().obj()
    not_in_place = job().queue("team").obj()
    for manifest in (not_queued, not_in_place):
        assert pod_group(spec(manifest), [observed(survivor)]) is None


def test_an_attempt_made_afresh_began_with_its_first_pod() -> None:
    manifest = job().obj()
    pods = [observed(pod(manifest, 0).created(5).obj()), observed(pod(manifest, 0, 1).created(55).obj())]
    assert attempt_began(spec(manifest), raised(), pods) == at(55)
