"""A finished job's cleanup (policies/cleanup.py): deletions no kubelet will confirm, the
evaluator's time after a success, and ttlSecondsAfterFinished."""

from __future__ import annotations

from typing import Any

from tfmw_operator.api.spec import ReplicaType, parse_job
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.cleanup import after_finish, overdue_deletions
from wrappers import at, job


def worker(index: int, phase: str = "Running", **fields: Any) -> ObservedPod:
    return ObservedPod(f"mnist-worker-{index}", index, 0, phase, **fields)


def test_deletions_on_lost_nodes_go_at_once_and_others_once_past_their_grace() -> None:
    pods = [
        worker(0),  # not being deleted
        worker(1, deleting=True, node_lost=True, deleting_since=at(85)),
        worker(2, deleting=True, deleting_since=at(0), grace_seconds=30),  # 30 + 60 s: due at 90 s
        worker(3, deleting=True, deleting_since=at(10), grace_seconds=30),  # due at 100 s
        worker(4, deleting=True, deleting_since=at(20), grace_seconds=30),  # due at 110 s
        worker(5, deleting=True),  # no deletion time: nothing to go by
    ]
    assert overdue_deletions(pods, at(90)) == (["mnist-worker-1"], ["mnist-worker-2"], at(100))
    assert overdue_deletions(pods, at(89)) == (["mnist-worker-1"], [], at(90))


def test_a_running_evaluator_gets_its_grace_period_after_a_success_and_no_more() -> None:
    spec = parse_job(job().evaluator().completion(chiefExitGraceSeconds=5).obj())
    evaluator = ObservedPod(
        "mnist-evaluator-0", 0, 0, "Running", grace_seconds=30, replica_type=ReplicaType.EVALUATOR
    )
    current = [worker(0, "Succeeded"), worker(1, "Succeeded"), evaluator]
    waiting = after_finish(spec, True, at(0), current, [], at(29))
    assert waiting.delete == [] and waiting.wake_at == at(30)
    done = after_finish(spec, True, at(0), current, [], at(30))
    assert done.delete == [evaluator] and done.wake_at is None


def test_the_job_goes_when_its_ttl_is_up() -> None:
    spec = parse_job(job().run_policy(ttlSecondsAfterFinished=60).obj())
    current = [worker(0, "Succeeded"), worker(1, "Failed")]
    before = after_finish(spec, False, at(0), current, [], at(59))
    assert not before.delete_job and before.wake_at == at(60) and before.delete == []
    expired = after_finish(spec, False, at(0), current, [], at(60))
    assert expired.delete_job and expired.delete == current and expired.wake_at is None
