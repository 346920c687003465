"""TFJob's status as Kubeflow's controller writes it, condition by condition and field by
field (api/tfjob.py, "the status, in TFJob's own shape"); test_tfjob.py holds the shape of
a whole lifecycle, these the exact values of each step."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tfmw_operator.api.kinds import TFJOBS, StatusWrites
from tfmw_operator.api.spec import ReplicaType
from tfmw_operator.api.status import Condition, ConditionType, JobStatus, Phase, ReplicaCounts, WorkerCounts
from tfmw_operator.api.tfjob import MAX_STATUS_ANNOTATION_BYTES, parse_tfjob, tfjob_conditions, tfjob_status
from wrappers import T0, at

Json = dict[str, Any]
T1, T2, T3 = "2026-01-01T12:00:01Z", "2026-01-01T12:00:02Z", "2026-01-01T12:00:03Z"


def step(phase: Phase | None, old: list[Json], stamp: str, **status: Any) -> list[Json]:
    status.setdefault("launched_attempt", 0)
    return tfjob_conditions(JobStatus(phase=phase, **status), "ns", "dist", old, stamp)


def cond(kind: str, status: str, reason: str, message: str, updated: str, transition: str) -> Json:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": updated,
        "lastTransitionTime": transition,
    }


CREATED = cond("Created", "True", "TFJobCreated", "TFJob dist is created.", T1, T1)
RUNNING = cond("Running", "True", "TFJobRunning", "TFJob ns/dist is running.", T1, T1)


def test_a_job_not_launched_and_without_a_phase_has_no_condition() -> None:
    assert step(None, [], T1, launched_attempt=None) == []
    assert step(None, [], T1) == [CREATED]
    assert step(Phase.PENDING, [], T1, launched_attempt=None) == [CREATED]


def test_running_then_succeeded_exactly_and_an_unchanged_condition_keeps_its_times() -> None:
    running = step(Phase.RUNNING, [], T1)
    assert running == [CREATED, RUNNING]
    assert step(Phase.RUNNING, running, T2) == running  # nothing new: every time kept
    succeeded = Condition("Succeeded", True, "AllWorkersSucceeded", "3 of 3 workers succeeded", T3)
    done = step(Phase.SUCCEEDED, running, T3, conditions=(succeeded,))
    assert done == [
        CREATED,
        # Kubeflow flips Running's status alone: reason, message and times kept.
        cond("Running", "False", "TFJobRunning", "TFJob ns/dist is running.", T1, T1),
        cond(
            "Succeeded",
            "True",
            "TFJobSucceeded",
            "TFJob ns/dist successfully completed. (3 of 3 workers succeeded)",
            T3,
            T3,
        ),
    ]
    # Without a message of tfmw's own, no parentheses.
    assert step(Phase.SUCCEEDED, running, T3)[-1]["message"] == "TFJob ns/dist successfully completed."


def test_restarting_tells_the_cause_only_while_its_condition_is_true() -> None:
    running = step(Phase.RUNNING, [], T1)
    cause = "gang restart 1/3: worker 1 exited with code 137"
    restarting = step(
        Phase.RESTARTING,
        running,
        T2,
        conditions=(Condition("Restarting", True, "WorkerFailed", cause, T2),),
    )
    assert restarting == [CREATED, cond("Restarting", "True", "TFJobRestarting", cause, T2, T2)]
    not_true = (Condition("Restarting", False, "WorkerFailed", cause, T2),)
    assert step(Phase.RESTARTING, running, T2, conditions=not_true) == running
    assert step(Phase.RESTARTING, running, T2) == running
    # Running again: Restarting leaves, Running comes back as new.
    assert step(Phase.RUNNING, restarting, T3) == [
        CREATED,
        cond("Running", "True", "TFJobRunning", RUNNING["message"], T3, T3),
    ]


def test_suspended_flips_running_where_it_stands_and_resuming_says_so() -> None:
    running = step(Phase.RUNNING, [], T1)
    suspended = step(Phase.SUSPENDED, running, T2)
    assert suspended == [
        CREATED,
        cond("Running", "False", "TFJobSuspended", RUNNING["message"], T2, T2),
        cond("Suspended", "True", "TFJobSuspended", "TFJob dist is suspended.", T2, T2),
    ]
    assert step(Phase.SUSPENDED, suspended, T3) == suspended
    # A Running condition without a message keeps none when it turns False.
    silent = [CREATED, {k: v for k, v in RUNNING.items() if k != "message"}]
    assert step(Phase.SUSPENDED, silent, T2)[1] == cond("Running", "False", "TFJobSuspended", "", T2, T2)
    resumed = step(Phase.RUNNING, suspended, T3)
    assert resumed == [  # Running put back where it stood, then Suspended turned False
        CREATED,
        cond("Running", "True", "TFJobRunning", RUNNING["message"], T3, T3),
        cond("Suspended", "False", "TFJobResumed", "TFJob dist is resumed.", T3, T3),
    ]
    assert step(Phase.PENDING, [CREATED], T3) == [CREATED]  # never suspended: no Resumed


def test_failed_says_why_from_the_message_or_else_the_reason() -> None:
    running = step(Phase.RUNNING, [], T1)
    failed = step(Phase.FAILED, running, T2, reason="WorkerFailed", message="worker 1 exited 1")
    assert failed == [
        CREATED,
        cond("Running", "False", "TFJobRunning", RUNNING["message"], T1, T1),
        cond("Failed", "True", "TFJobFailed", "TFJob ns/dist has failed because worker 1 exited 1", T2, T2),
    ]
    by_reason = step(Phase.FAILED, running, T2, reason="BackoffLimitExceeded")
    assert by_reason[-1]["message"] == "TFJob ns/dist has failed because BackoffLimitExceeded"
    assert step(Phase.RUNNING, failed, T3) is failed  # once Failed, the list as it was


def test_a_condition_keeps_its_transition_time_while_its_status_holds_and_its_update_time_while_its_reason_does() -> (
    None
):
    old = [CREATED, cond("Running", "True", "TFJobRunning", "an older message", T1, T1)]
    new_message = step(Phase.RUNNING, old, T2)
    assert new_message == [CREATED, cond("Running", "True", "TFJobRunning", RUNNING["message"], T1, T1)]
    other_reason = [CREATED, cond("Running", "True", "Other", "m", T1, T1)]
    assert step(Phase.RUNNING, other_reason, T2)[-1] == cond(
        "Running", "True", "TFJobRunning", RUNNING["message"], T2, T1
    )
    flipped = [CREATED, cond("Running", "False", "TFJobRunning", "m", T1, T1)]
    assert step(Phase.RUNNING, flipped, T2)[-1] == cond(
        "Running", "True", "TFJobRunning", RUNNING["message"], T2, T2
    )
    # Times missing from what was there are filled in, not left empty.
    bare = [CREATED, {"type": "Running", "status": "True", "reason": "TFJobRunning", "message": "m"}]
    assert step(Phase.RUNNING, bare, T2)[-1] == cond(
        "Running", "True", "TFJobRunning", RUNNING["message"], T2, T2
    )


def test_what_is_not_a_condition_is_left_out() -> None:
    old: list[Any] = ["Running", {"type": 3}, CREATED]
    assert step(Phase.RUNNING, old, T1) == [{"type": 3}, CREATED, RUNNING]


def job(**replicas: int) -> Json:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "dist", "namespace": "ns", "uid": "uid-dist"},
        "spec": {
            "tfReplicaSpecs": {
                kind: {
                    "replicas": count,
                    "template": {"spec": {"containers": [{"name": "tensorflow", "image": "img:1"}]}},
                }
                for kind, count in replicas.items()
            }
        },
    }


def test_replica_statuses_count_each_set_and_a_succeeded_job_has_none_active() -> None:
    tfjob = job(PS=1, Worker=3)
    spec = parse_tfjob(tfjob)
    status = JobStatus(
        phase=Phase.RUNNING,
        launched_attempt=0,
        workers=WorkerCounts(running=2, succeeded=1, failed=4),
        replicas=(ReplicaCounts(str(ReplicaType.PS), running=1),),
        start_time=T0,
    )
    rendered = tfjob_status(status, spec, tfjob, {}, T1)
    assert rendered == {
        "conditions": [CREATED, RUNNING],
        "replicaStatuses": {"PS": {"active": 1}, "Worker": {"active": 2, "succeeded": 1, "failed": 4}},
        "startTime": "2026-01-01T12:00:00Z",
    }
    done = JobStatus(
        phase=Phase.SUCCEEDED,
        launched_attempt=0,
        replicas=(
            ReplicaCounts(str(ReplicaType.PS), running=1),
            ReplicaCounts("worker", running=1, succeeded=2),
        ),
        start_time=T0,
        completion_time=at(9),
    )
    finished = tfjob_status(done, spec, tfjob, {"conditions": rendered["conditions"]}, T2)
    assert finished["replicaStatuses"] == {"PS": {"succeeded": 1}, "Worker": {"succeeded": 3}}
    assert finished["completionTime"] == "2026-01-01T12:00:09Z"
    assert [c["type"] for c in finished["conditions"]] == ["Created", "Running", "Succeeded"]
    # A set nothing was counted for is there, empty.
    nothing = tfjob_status(JobStatus(phase=Phase.RUNNING, launched_attempt=0), spec, tfjob, {}, T1)
    assert nothing["replicaStatuses"] == {"PS": {}, "Worker": {}}
    assert "startTime" not in nothing and "completionTime" not in nothing
    succeeded_uncounted = JobStatus(phase=Phase.SUCCEEDED, launched_attempt=0)
    assert tfjob_status(succeeded_uncounted, spec, tfjob, {}, T1)["replicaStatuses"] == {
        "PS": {},
        "Worker": {},
    }


def test_a_refused_tfjob_without_a_name_or_namespace_still_gets_conditions() -> None:
    status = JobStatus(phase=Phase.FAILED, reason="InvalidSpec", message="no replicas")
    status = status.with_condition(ConditionType.FAILED, True, "InvalidSpec", "no replicas", T0)
    rendered = tfjob_status(status, None, {"metadata": None}, {}, T1)
    assert rendered == {
        "conditions": [
            cond("Created", "True", "TFJobCreated", "TFJob  is created.", T1, T1),
            cond("Failed", "True", "TFJobFailed", "TFJob / has failed because no replicas", T1, T1),
        ],
        "replicaStatuses": {},
    }


def test_the_engines_status_is_one_compact_sorted_annotation_and_the_tfjobs_status_a_patch_of_its_own() -> (
    None
):
    tfjob = job(Worker=1)
    spec = parse_tfjob(tfjob)
    status = JobStatus(phase=Phase.RUNNING, launched_attempt=0, start_time=T0)
    writes = TFJOBS.status_writes(tfjob, status, spec, at(1))
    rendered = json.dumps(status.to_json(), separators=(",", ":"), sort_keys=True)
    assert writes.metadata == {"metadata": {"annotations": {"tfmw.dev/status": rendered}}}
    assert writes.status is not None and writes.status["conditions"] == [CREATED, RUNNING]
    tfjob["metadata"]["annotations"] = {"tfmw.dev/status": rendered}
    tfjob["status"] = writes.status
    assert TFJOBS.status_writes(tfjob, status, spec, at(9)) == StatusWrites(metadata=None, status=None)


def test_a_status_annotation_up_to_its_limit_is_read_and_one_not_a_string_is_not() -> None:
    tfjob = job(Worker=1)
    head = '{"attempt":3,"message":"'
    raw = head + "x" * (MAX_STATUS_ANNOTATION_BYTES - len(head) - 2) + '"}'
    assert len(raw) == MAX_STATUS_ANNOTATION_BYTES
    tfjob["metadata"]["annotations"] = {"tfmw.dev/status": raw}
    assert TFJOBS.recorded_status(tfjob).attempt == 3
    tfjob["metadata"]["annotations"] = {"tfmw.dev/status": 3}
    assert TFJOBS.recorded_status(tfjob) == JobStatus()


def test_a_suspended_condition_still_true_turns_false_on_resuming_whatever_its_reason() -> None:
    odd = cond("Suspended", "True", "TFJobResumed", "TFJob dist is resumed.", T1, T1)
    resumed = step(Phase.RUNNING, [CREATED, odd], T2)
    assert resumed == [
        CREATED,
        cond("Running", "True", "TFJobRunning", RUNNING["message"], T2, T2),
        cond("Suspended", "False", "TFJobResumed", "TFJob dist is resumed.", T2, T2),
    ]


def test_replica_statuses_of_a_spec_without_kubeflows_spellings_are_keyed_as_kubeflow_spells_them() -> None:
    native = dataclasses.replace(parse_tfjob(job(PS=1, Worker=2)), kubeflow_replica_types=())
    status = JobStatus(
        phase=Phase.RUNNING,
        launched_attempt=0,
        replicas=(ReplicaCounts("ps", running=1), ReplicaCounts("worker", running=2)),
    )
    rendered = tfjob_status(status, native, job(PS=1, Worker=2), {}, T1)
    assert rendered["replicaStatuses"] == {"Worker": {"active": 2}, "PS": {"active": 1}}


def test_replica_statuses_are_keyed_camel_case_whatever_case_the_manifest_uses() -> None:
    """Kubeflow's defaulter rewrites `worker:` as `Worker` before its status is written: the
    SDK and Katib read `replicaStatuses.Worker`."""
    lower = job(ps=1, worker=2, master=1)
    spec = parse_tfjob(lower)
    status = JobStatus(
        phase=Phase.RUNNING,
        launched_attempt=0,
        replicas=(
            ReplicaCounts("chief", running=1),
            ReplicaCounts("ps", running=1),
            ReplicaCounts("worker", running=2),
        ),
    )
    rendered = tfjob_status(status, spec, lower, {}, T1)
    assert rendered["replicaStatuses"] == {
        "Master": {"active": 1},
        "PS": {"active": 1},
        "Worker": {"active": 2},
    }
