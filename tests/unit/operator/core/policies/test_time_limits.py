"""Limits on time (policies/time_limits.py): activeDeadlineSeconds, workers stuck Pending
for good, and pendingTimeoutSeconds."""

from __future__ import annotations

from typing import Any

from tfmw_operator.api.spec import parse_job
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.time_limits import active_deadline, judge_pending
from tfmw_operator.core.policies.verdicts import Fail, Pending, WakeAt
from wrappers import at, job


def pending(index: int, **fields: Any) -> ObservedPod:
    return ObservedPod(f"mnist-worker-{index}", index, 0, "Pending", created=at(0), **fields)


def test_past_the_active_deadline_the_job_fails_and_every_pod_goes() -> None:
    spec = parse_job(job().run_policy(activeDeadlineSeconds=60).obj())
    assert active_deadline(spec, at(0), at(59)) == WakeAt(at(60))
    assert active_deadline(spec, at(0), at(60)) == Fail(
        "DeadlineExceeded", "the job ran longer than activeDeadlineSeconds=60", stop_all=True
    )


def test_a_worker_stuck_for_good_fails_the_job_at_once_naming_it() -> None:
    spec = parse_job(job().obj())
    stuck = pending(1, stall_reason="InvalidImageName", stall_message='"x y" is not a valid image')
    assert judge_pending(spec, [pending(0), stuck], at(1)) == Pending(
        stuck,
        Fail(
            "InvalidImageName",
            'worker 1 (pod mnist-worker-1) is stuck Pending: InvalidImageName: "x y" is not a valid image',
        ),
    )


def test_a_worker_pending_for_pending_timeout_seconds_fails_the_job() -> None:
    spec = parse_job(job().run_policy(pendingTimeoutSeconds=60).obj())
    pods = [pending(0), pending(1)]
    assert judge_pending(spec, pods, at(59)) == Pending(None, None, at(60))
    assert judge_pending(spec, pods, at(60)) == Pending(
        None,
        Fail(
            "PendingTimeout",
            "worker 0 (pod mnist-worker-0) was Pending longer than pendingTimeoutSeconds=60: NotStarted: ",
        ),
    )
