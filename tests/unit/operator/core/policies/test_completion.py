"""Completion (policies/completion.py): the chief's exit 0 without a marker under `Marker`,
and the exit-code policies' success."""

from __future__ import annotations

from typing import Any

from tfmw_operator.api.spec import ReplicaType, parse_job
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.completion import chief_exit, exit_completion
from tfmw_operator.core.policies.verdicts import Fail, WakeAt
from wrappers import at, job


def exited(index: int, replica_type: ReplicaType = ReplicaType.WORKER, **fields: Any) -> ObservedPod:
    """A pod of attempt 0 whose main container exited 0 at 10 s."""
    name = f"mnist-{replica_type}-{index}"
    return ObservedPod(
        name, index, 0, "Succeeded", exit_code=0, finished_at=at(10), replica_type=replica_type, **fields
    )


def running(index: int) -> ObservedPod:
    return ObservedPod(f"mnist-worker-{index}", index, 0, "Running")


def test_a_chief_without_a_marker_fails_the_job_once_its_grace_is_up() -> None:
    spec = parse_job(job().completion(chiefExitGraceSeconds=30).obj())
    pods = [exited(0), running(1)]
    assert chief_exit(spec, pods, at(39)) == WakeAt(at(40))
    verdict = chief_exit(spec, pods, at(40))
    assert isinstance(verdict, Fail) and verdict.reason == "MarkerMissing"
    assert verdict.message.startswith("worker 0 (pod mnist-worker-0) exited 0 but wrote no marker at ")
    assert "within chiefExitGraceSeconds=30;" in verdict.message


def test_a_chief_set_is_named_the_chief() -> None:
    spec = parse_job(job().chief().completion(chiefExitGraceSeconds=30).obj())
    verdict = chief_exit(spec, [exited(0, ReplicaType.CHIEF), running(0), running(1)], at(60))
    assert isinstance(verdict, Fail)
    assert verdict.message.startswith("the chief (pod mnist-chief-0) exited 0 but wrote no marker at ")


def test_chief_exit_code_names_the_chiefs_pod() -> None:
    spec = parse_job(job().completion(policy="ChiefExitCode").obj())
    assert exit_completion(spec, [running(1), exited(0)]) == (
        "ChiefSucceeded",
        "the chief (pod mnist-worker-0) exited 0",
    )
    assert exit_completion(spec, [running(1), exited(0, deleting=True)]) is None
