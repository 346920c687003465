"""policies/spec_change.py: a TFJob whose replica sets changed under its running attempt has
its pods made again from the new spec, whole and not counted; and api/tfjob.py's
sets_fingerprint, which it compares."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from tfmw_operator.api.objects import Json
from tfmw_operator.api.records import evolve
from tfmw_operator.api.spec import Member, ReplicaType, parse_job
from tfmw_operator.api.status import JobStatus
from tfmw_operator.api.tfjob import parse_tfjob, sets_fingerprint
from tfmw_operator.core.builders import build_pod
from tfmw_operator.core.policies.in_place import in_place
from tfmw_operator.core.policies.spec_change import SPEC_CHANGED, judge_spec_change
from wrappers import SUPERVISOR_IMAGE, T0, decide, job

WORKER = ReplicaType.WORKER


def tfjob(workers: int = 2, image: str = "img:1", command: list[str] | None = None) -> Json:
    container: Json = {"name": "tensorflow", "image": image}
    if command is not None:
        container["command"] = command
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "dist", "namespace": "ns", "uid": "uid-dist"},
        "spec": {
            "runPolicy": {"backoffLimit": 3},
            "tfReplicaSpecs": {
                "Worker": {"replicas": workers, "restartPolicy": "Never", "template": template}
            },
        },
    }


def launched(obj: Json, attempt: int = 0) -> JobStatus:
    return JobStatus(attempt=attempt, launched_attempt=attempt, launched_sets=sets_fingerprint(obj))


def running_pods(obj: Json, attempt: int = 0, supervisor_image: str = "") -> list[Json]:
    spec = dataclasses.replace(parse_tfjob(obj), supervisor_image=supervisor_image)
    pods = []
    for index in range(spec.workers):
        raw = build_pod(spec, Member(WORKER, index), attempt)
        raw["metadata"].update(uid=f"pod-{index}-{attempt}", creationTimestamp="2026-01-01T12:00:00Z")
        raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        pods.append(raw)
    return pods


def changed(obj: Json, **how: Any) -> Json:
    new = copy.deepcopy(obj)
    worker = new["spec"]["tfReplicaSpecs"]["Worker"]
    if "workers" in how:
        worker["replicas"] = how["workers"]
    if "image" in how:
        worker["template"]["spec"]["containers"][0]["image"] = how["image"]
    return new


# ---- the fingerprint ----


def test_the_fingerprint_follows_the_sets_and_nothing_else() -> None:
    obj = tfjob()
    same = copy.deepcopy(obj)
    same["metadata"]["labels"] = {"team": "vision"}
    same["spec"]["runPolicy"] = {"backoffLimit": 9, "activeDeadlineSeconds": 60, "suspend": True}
    assert sets_fingerprint(same) == sets_fingerprint(obj)
    reordered = copy.deepcopy(obj)
    reordered["spec"]["tfReplicaSpecs"]["Worker"] = dict(
        reversed(list(obj["spec"]["tfReplicaSpecs"]["Worker"].items()))
    )
    assert sets_fingerprint(reordered) == sets_fingerprint(obj)
    others = [changed(obj, workers=3), changed(obj, image="img:2")]
    success = copy.deepcopy(obj)
    success["spec"]["successPolicy"] = "AllWorkers"
    others.append(success)
    assert len({sets_fingerprint(o) for o in [obj, *others]}) == 4
    assert sets_fingerprint({"spec": "not an object"}) == sets_fingerprint({})


def test_a_tfjobs_spec_carries_its_fingerprint_and_a_tfmw_job_none() -> None:
    assert parse_tfjob(tfjob()).sets_fingerprint == sets_fingerprint(tfjob())
    assert parse_tfjob(tfjob()).sets_fingerprint is not None
    assert parse_job(job().obj()).sets_fingerprint is None


# ---- the verdict ----


def test_no_verdict_while_the_sets_are_those_launched_or_either_side_is_unknown() -> None:
    obj = tfjob()
    spec = parse_tfjob(obj)
    assert judge_spec_change(spec, launched(obj)) is None
    other = parse_tfjob(changed(obj, workers=3))
    assert judge_spec_change(other, evolve(launched(obj), launched_sets=None)) is None  # an older operator's
    assert judge_spec_change(other, evolve(launched(obj), attempt=1)) is None  # the next attempt not launched
    assert judge_spec_change(parse_job(job().obj()), launched(obj)) is None


def test_new_sets_under_a_running_attempt_make_every_pod_again_uncounted() -> None:
    obj = tfjob()
    verdict = judge_spec_change(parse_tfjob(changed(obj, workers=3)), launched(obj))
    assert verdict is not None
    assert (verdict.counted, verdict.remake, verdict.reason) == (False, True, SPEC_CHANGED)
    assert verdict.cause is not None and verdict.cause.reason == SPEC_CHANGED
    assert verdict.replace == ()
    assert "suspend it first" in verdict.message


# ---- the decision, end to end ----


def tfjob_decision(obj: Json, status: JobStatus, pods: list[Json]) -> Any:
    """The core's decision for the TFJob `obj` with tfmw's status `status` (its annotation)."""
    holder = job().obj()
    holder["metadata"] = obj["metadata"]
    holder["status"] = status.to_json()
    return decide(holder, pods, spec=parse_tfjob(obj), now=T0)


def test_a_tfjob_resized_as_it_runs_is_made_again_whole_at_its_new_size_and_not_counted() -> None:
    obj = tfjob(workers=2)
    status = evolve(launched(obj), phase=None)
    resized = changed(obj, workers=3)
    stopping = tfjob_decision(resized, status, running_pods(obj))
    assert stopping.status is not None
    assert sorted(stopping.pods_to_delete) == ["dist-worker-0", "dist-worker-1"]
    assert stopping.pods_to_create == ()
    assert (stopping.status.attempt, stopping.status.restarts, stopping.status.restarts_not_counted) == (
        1,
        0,
        1,
    )
    assert stopping.status.history[0].cause == SPEC_CHANGED
    assert "replica sets changed" in (stopping.status.message or "")
    # Once the old pods are gone, the next attempt is three, and launched from the new sets.
    made = tfjob_decision(resized, stopping.status, [])
    assert made.status is not None and len(made.pods_to_create) == 3
    assert made.status.launched_sets == sets_fingerprint(resized) != sets_fingerprint(obj)
    # ... after which nothing more is decided about the change.
    again = tfjob_decision(resized, made.status, running_pods(resized, attempt=1))
    assert again.pods_to_delete == () and again.status is not None and again.status.attempt == 1


def test_a_gang_that_restarts_in_place_is_still_made_again_for_new_sets() -> None:
    """The supervised pods' TF_CONFIG and image are the old spec's: none may run on into the
    new one. (A TFJob's pods run unsupervised today, api/kinds.py; the rule does not rely on it.)"""
    obj = tfjob(workers=2, command=["python3", "train.py"])
    obj["metadata"]["annotations"] = {"tfmw.dev/shared-claim": "shared"}  # in place needs the volume
    spec = dataclasses.replace(parse_tfjob(changed(obj, image="img:2")), supervisor_image=SUPERVISOR_IMAGE)
    assert in_place(spec)
    holder = job().obj()
    holder["metadata"] = obj["metadata"]
    holder["status"] = evolve(launched(obj), phase=None).to_json()
    decision = decide(holder, running_pods(obj, supervisor_image=SUPERVISOR_IMAGE), spec=spec, now=T0)
    assert sorted(decision.pods_to_delete) == ["dist-worker-0", "dist-worker-1"]
    assert decision.status is not None and decision.status.attempt == 1
