"""policies/spec_change.py: a TFJob whose replica sets changed under its attempt has its pods
made again from the new spec, whole and not counted; api/tfjob.py's sets_version, which each
pod carries, and which it compares."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from tfmw_operator.api.names import ANNOTATION_SETS_VERSION
from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import Member, ReplicaType, parse_job
from tfmw_operator.api.status import AttemptRecord, JobStatus
from tfmw_operator.api.tfjob import parse_sets_version, parse_tfjob, sets_fingerprint, sets_version
from tfmw_operator.core.builders import build_pod
from tfmw_operator.core.pods import observe_pod
from tfmw_operator.core.policies.in_place import in_place
from tfmw_operator.core.policies.restart_backoff import untrained_restarts
from tfmw_operator.core.policies.spec_change import SPEC_CHANGED, judge_spec_change
from wrappers import SUPERVISOR_IMAGE, T0, decide, job

WORKER = ReplicaType.WORKER


def tfjob(
    workers: int = 2, image: str = "img:1", command: list[str] | None = None, generation: int = 1
) -> Json:
    container: Json = {"name": "tensorflow", "image": image}
    if command is not None:
        container["command"] = command
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "dist", "namespace": "ns", "uid": "uid-dist", "generation": generation},
        "spec": {
            "runPolicy": {"backoffLimit": 3},
            "tfReplicaSpecs": {
                "Worker": {"replicas": workers, "restartPolicy": "Never", "template": template}
            },
        },
    }


def changed(obj: Json, **how: Any) -> Json:
    """`obj` as a user's write leaves it: the next generation, with `how` changed."""
    new = copy.deepcopy(obj)
    new["metadata"]["generation"] += 1
    worker = new["spec"]["tfReplicaSpecs"]["Worker"]
    if "workers" in how:
        worker["replicas"] = how["workers"]
    if "image" in how:
        worker["template"]["spec"]["containers"][0]["image"] = how["image"]
    return new


def running_pods(
    obj: Json, attempt: int = 0, supervisor_image: str = "", count: int | None = None
) -> list[Json]:
    spec = dataclasses.replace(parse_tfjob(obj), supervisor_image=supervisor_image)
    pods = []
    for index in range(spec.workers if count is None else count):
        raw = build_pod(spec, Member(WORKER, index), attempt)
        raw["metadata"].update(uid=f"pod-{index}-{attempt}", creationTimestamp="2026-01-01T12:00:00Z")
        raw["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        pods.append(raw)
    return pods


def observed(raws: list[Json]) -> list[Any]:
    return [observe_pod(r) for r in raws]


def tfjob_decision(obj: Json, status: JobStatus, pods: list[Json], spec: Any = None) -> Any:
    """The core's decision for the TFJob `obj` with tfmw's status `status` (its annotation)."""
    holder = job().obj()
    holder["metadata"] = obj["metadata"]
    holder["status"] = status.to_json()
    return decide(holder, pods, spec=spec or parse_tfjob(obj), now=T0)


def launched(attempt: int = 0) -> JobStatus:
    return JobStatus(attempt=attempt, launched_attempt=attempt)


# ---- what each pod carries ----


def test_the_fingerprint_follows_the_sets_and_nothing_else() -> None:
    obj = tfjob()
    same = copy.deepcopy(obj)
    same["metadata"]["labels"] = {"team": "vision"}
    same["spec"]["runPolicy"] = {"backoffLimit": 9, "activeDeadlineSeconds": 60, "suspend": True}
    same["spec"]["successPolicy"] = ""  # as good as absent
    same["spec"]["enableDynamicWorker"] = False
    assert sets_fingerprint(same) == sets_fingerprint(obj)
    worker = obj["spec"]["tfReplicaSpecs"]["Worker"]
    reordered = copy.deepcopy(obj)
    reordered["spec"]["tfReplicaSpecs"]["Worker"] = dict(reversed(list(worker.items())))
    assert sets_fingerprint(reordered) == sets_fingerprint(obj)
    success = copy.deepcopy(obj)
    success["spec"]["successPolicy"] = "AllWorkers"
    others = [changed(obj, workers=3), changed(obj, image="img:2"), success]
    assert len({sets_fingerprint(o) for o in [obj, *others]}) == 4
    assert sets_fingerprint({"spec": "not an object"}) == sets_fingerprint({})


def test_each_pod_of_a_tfjob_says_the_generation_and_sets_it_was_made_from_and_a_tfmw_jobs_nothing() -> None:
    obj = tfjob(generation=7)
    assert sets_version(obj) == f"7:{sets_fingerprint(obj)}"
    (raw,) = running_pods(obj, count=1)
    assert raw["metadata"]["annotations"][ANNOTATION_SETS_VERSION] == sets_version(obj)
    assert observe_pod(raw) is not None and observe_pod(raw).sets_version == sets_version(obj)  # type: ignore[union-attr]
    assert parse_job(job().obj()).sets_version is None
    own = build_pod(parse_job(job().obj()), Member(WORKER, 0), 0)
    assert ANNOTATION_SETS_VERSION not in own["metadata"]["annotations"]


def test_only_a_well_formed_version_is_read() -> None:
    assert parse_sets_version("3:abc") == (3, "abc")
    for bad in (None, "", "3", "3:", ":abc", "-1:abc", "x:abc", "9" * 19 + ":abc"):
        assert parse_sets_version(bad) is None, bad


# ---- the verdict ----


def test_no_verdict_for_the_same_sets_a_write_that_left_them_or_a_read_that_moved_no_generation() -> None:
    obj = tfjob()
    pods = observed(running_pods(obj))
    assert judge_spec_change(parse_tfjob(obj), pods) is None
    relimited = copy.deepcopy(obj)
    relimited["metadata"]["generation"] = 2
    relimited["spec"]["runPolicy"]["backoffLimit"] = 9
    assert judge_spec_change(parse_tfjob(relimited), pods) is None
    # A default a newer CRD adds, applied as the API server reads the job: no user wrote it.
    defaulted = copy.deepcopy(obj)
    defaulted["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = (
        "Always"
    )
    assert judge_spec_change(parse_tfjob(defaulted), pods) is None
    # A TFMultiWorkerJob; pods that say nothing, or are going anyway.
    assert judge_spec_change(parse_job(job().obj()), pods) is None
    resized = parse_tfjob(changed(obj, workers=3))
    silent = [dataclasses.replace(p, sets_version="") for p in pods]
    assert judge_spec_change(resized, silent) is None
    assert judge_spec_change(resized, [dataclasses.replace(p, deleting=True) for p in pods]) is None


def test_new_sets_under_an_attempt_make_every_pod_again_uncounted() -> None:
    obj = tfjob()
    verdict = judge_spec_change(parse_tfjob(changed(obj, workers=3)), observed(running_pods(obj)))
    assert verdict is not None
    assert (verdict.counted, verdict.remake, verdict.reason) == (False, True, SPEC_CHANGED)
    assert verdict.cause is not None and verdict.cause.reason == SPEC_CHANGED
    assert verdict.event == ("Normal", SPEC_CHANGED)
    assert verdict.replace == ()
    assert "generation 1, now 2" in verdict.message and "suspend it first" in verdict.message


def test_a_user_change_ends_the_row_of_untrained_restarts_as_a_suspension_does() -> None:
    crash = AttemptRecord(attempt=1, outcome="Restarted", cause="Error", end_time=T0)
    earlier = AttemptRecord(attempt=0, outcome="Restarted", cause="Error", end_time=T0)
    assert untrained_restarts((crash, earlier)) == 2
    changed_spec = AttemptRecord(attempt=2, outcome="Restarted", cause=SPEC_CHANGED, end_time=T0)
    assert untrained_restarts((changed_spec, crash, earlier)) == 0


# ---- the decision, end to end ----


def test_a_tfjob_resized_as_it_runs_is_made_again_whole_at_its_new_size_and_not_counted() -> None:
    obj = tfjob(workers=2)
    resized = changed(obj, workers=3)
    stopping = tfjob_decision(resized, launched(), running_pods(obj))
    assert stopping.status is not None
    assert sorted(stopping.pods_to_delete) == ["dist-worker-0", "dist-worker-1"]
    assert stopping.pods_to_create == ()
    assert (stopping.status.attempt, stopping.status.restarts, stopping.status.restarts_not_counted) == (
        1,
        0,
        1,
    )
    assert stopping.status.history[0].cause == SPEC_CHANGED
    assert [(e.type, e.reason) for e in stopping.events] == [("Normal", SPEC_CHANGED)]
    # Once the old pods are gone, the next attempt is three, made from the new sets.
    made = tfjob_decision(resized, stopping.status, [])
    assert made.status is not None and len(made.pods_to_create) == 3
    # ... after which nothing more is decided about the change.
    again = tfjob_decision(resized, made.status, running_pods(resized, attempt=1))
    assert again.pods_to_delete == () and again.status is not None and again.status.attempt == 1


def test_a_launch_cut_short_is_not_finished_from_a_changed_spec() -> None:
    """Worker 0 made, the status write lost (an operator restarting, a refusal): the launch
    must not add workers 1 and 2 of the new spec beside a worker 0 of the old."""
    obj = tfjob(workers=2)
    resized = changed(obj, workers=3)
    decision = tfjob_decision(resized, JobStatus(), running_pods(obj, count=1))
    assert decision.pods_to_create == ()
    assert decision.pods_to_delete == ("dist-worker-0",)
    # The attempt never ran (no history entry for it); the next one is made from the new spec.
    assert decision.status is not None and decision.status.attempt == 1
    assert "replica sets changed" in (decision.status.message or "")


def test_a_gang_that_restarts_in_place_is_still_made_again_for_new_sets() -> None:
    """The supervised pods' TF_CONFIG and image are the old spec's: none may run on into the
    new one. (A TFJob's pods run unsupervised today, api/kinds.py; the rule does not rely on it.)"""
    obj = tfjob(workers=2, command=["python3", "train.py"])
    obj["metadata"]["annotations"] = {"tfmw.dev/shared-claim": "shared"}  # in place needs the volume
    spec = dataclasses.replace(parse_tfjob(changed(obj, image="img:2")), supervisor_image=SUPERVISOR_IMAGE)
    assert in_place(spec)
    decision = tfjob_decision(
        obj, launched(), running_pods(obj, supervisor_image=SUPERVISOR_IMAGE), spec=spec
    )
    assert sorted(decision.pods_to_delete) == ["dist-worker-0", "dist-worker-1"]
    assert decision.status is not None and decision.status.attempt == 1
