"""The typed status: read from anything, rendered in one place, patched as a merge patch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kube import REPO
from tfmw_operator.api.records import evolve
from tfmw_operator.api.status import (
    Checkpoint,
    Condition,
    ConditionType,
    ExcludedNode,
    JobStatus,
    Phase,
    ProgressStatus,
    WorkerCounts,
    merge_patch,
)
from wrappers import at

RUNNING: dict[str, Any] = {
    "phase": "Running",
    "attempt": 1,
    "launchedAttempt": 1,
    "restarts": 1,
    "workers": {"pending": 0, "running": 2, "succeeded": 0, "failed": 0},
    "readyWorkers": "2/2",
    "startTime": "2026-01-01T12:00:00Z",
    "observedGeneration": 3,
    "conditions": [
        {
            "type": "Running",
            "status": "True",
            "reason": "AllWorkersRunning",
            "message": "2 workers running",
            "lastTransitionTime": "2026-01-01T12:00:05Z",
        }
    ],
}


FAILED: dict[str, Any] = {
    **RUNNING,
    "phase": "Failed",
    "completionTime": "2026-01-01T12:01:00Z",
    "reason": "WorkerFailed",
    "message": "worker 1 exited with code 1",
    "marker": {"path": "default/mnist/done", "observedTime": "2026-01-01T12:00:59Z"},
    "workers": {"pending": 1, "running": 2, "succeeded": 3, "failed": 4},
}


def test_status_round_trips_through_json() -> None:
    status = JobStatus.from_json(RUNNING)
    assert status.phase is Phase.RUNNING and status.launched and status.restarts == 1
    assert status.workers == WorkerCounts(running=2)
    assert status.to_json() == RUNNING


def test_every_field_round_trips() -> None:
    status = JobStatus.from_json(FAILED)
    assert status.finished and status.reason == "WorkerFailed" and status.marker is not None
    assert status.marker.path == "default/mnist/done" and status.completion_time == at(60)
    assert status.workers == WorkerCounts(1, 2, 3, 4)
    assert status.to_json() == FAILED


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "Running",
        [],
        {"phase": "Exploded", "attempt": "1", "restarts": None, "conditions": "yes"},
        {"attempt": True, "workers": [1, 2], "marker": {"path": 3}, "startTime": "yesterday"},
        {"conditions": [None, {"status": "True"}, {"type": 7}]},
    ],
)
def test_malformed_status_reads_as_absent_fields(raw: object) -> None:
    status = JobStatus.from_json(raw)
    assert status.phase is None and status.attempt == 0 and status.restarts == 0
    assert status.conditions == () and status.start_time is None and status.marker is None


def test_condition_transition_time_moves_only_when_its_status_flips() -> None:
    status = JobStatus.from_json(RUNNING)
    same = status.with_condition(ConditionType.RUNNING, True, "Other", "still running", at(99))
    running = same.condition(ConditionType.RUNNING)
    assert running is not None and running.reason == "Other"
    assert running.last_transition_time == "2026-01-01T12:00:05Z"
    flipped = status.with_condition(ConditionType.RUNNING, False, "WorkerFailed", "x", at(99))
    condition = flipped.condition(ConditionType.RUNNING)
    assert condition is not None and not condition.true
    assert condition.last_transition_time == "2026-01-01T12:01:39Z"


def test_a_condition_keeps_its_place_and_said_again_unchanged_changes_nothing() -> None:
    """PodSecurityEnforced, said on every decision, moved to the end of the list, and the
    reordered list was a third status write per restart in place at scale (docs/benchmarks.md)."""
    status = (
        JobStatus()
        .with_condition(
            ConditionType.POD_SECURITY_ENFORCED, False, "PodSecurityNotEnforced", "x", at(0), listed=True
        )
        .with_condition(ConditionType.CREATED, True, "PodsCreated", "y", at(1))
    )
    again = status.with_condition(
        ConditionType.POD_SECURITY_ENFORCED, False, "PodSecurityNotEnforced", "x", at(9), listed=True
    )
    assert again is status
    changed = status.with_condition(ConditionType.POD_SECURITY_ENFORCED, True, "Enforced", "z", at(9))
    assert [c.type for c in changed.conditions] == ["PodSecurityEnforced", "Created"]


def test_a_duplicated_condition_is_set_once() -> None:
    twice = (Condition("Running", True, "A", "a"), Condition("Running", False, "B", "b"))
    status = evolve(JobStatus(), conditions=twice).with_condition(
        ConditionType.RUNNING, True, "C", "c", at(0)
    )
    assert [(c.type, c.reason) for c in status.conditions] == [("Running", "C")]


def test_a_condition_never_true_is_not_listed_as_false() -> None:
    status = JobStatus().with_condition(ConditionType.STALLED, False, "WorkersStarted", "", at(0))
    assert status.conditions == ()


def test_merge_patch_sends_changes_and_nulls_for_removed_keys() -> None:
    old = {"phase": "Running", "message": "gang restart 1/3", "restarts": 1}
    new = {"phase": "Running", "restarts": 1, "readyWorkers": "2/2"}
    assert merge_patch(old, new) == {"readyWorkers": "2/2", "message": None}


def test_merge_patch_is_empty_when_nothing_changed() -> None:
    assert merge_patch({"phase": "Pending"}, {"phase": "Pending"}) == {}


def test_evolve_changes_only_what_it_is_given_and_leaves_the_original() -> None:
    status = JobStatus.from_json(RUNNING)
    changed = evolve(status, phase=Phase.SUCCEEDED, restarts=4)
    assert (changed.phase, changed.restarts) == (Phase.SUCCEEDED, 4)
    assert (status.phase, status.restarts) == (Phase.RUNNING, 1)
    assert changed.attempt == status.attempt and changed.workers == status.workers
    assert evolve(status) == status and hash(evolve(status)) == hash(status)
    with pytest.raises(TypeError, match="phsae"):
        evolve(status, phsae=Phase.FAILED)
    with pytest.raises(AttributeError):
        changed.phase = Phase.FAILED  # type: ignore[misc]


def test_evolve_refuses_a_record_whose_post_init_it_would_skip() -> None:
    @dataclass(frozen=True)
    class Checked:
        size: int

        def __post_init__(self) -> None:
            if self.size < 0:
                raise ValueError("size must not be negative")

    with pytest.raises(TypeError, match="__post_init__"):
        evolve(Checked(1), size=-1)


def _wire_keys(kind: type) -> dict[str, Any]:
    """Every JSON key a record writes, with the record type under it where it nests one."""
    from dataclasses import fields

    from tfmw_operator.api.records import Record

    keys: dict[str, Any] = {}
    for item in fields(kind):
        wire = item.metadata["wire"]
        nested = None
        for candidate in Record.__subclasses__():
            # A record-typed field names the record in its annotation.
            if candidate.__name__ in str(item.type):
                nested = candidate
        keys[wire.key] = nested
    return keys


def test_every_status_field_the_operator_writes_is_in_the_crd() -> None:
    """The status subresource prunes what its schema does not name: a field missing there
    would be written and silently dropped (the operator would decide from its absence)."""
    crd = yaml.safe_load((REPO / "crds" / "tfmwjobs.tfmw.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    missing: list[str] = []

    def walk(kind: type, node: dict[str, Any], path: str) -> None:
        properties = node.get("properties")
        if properties is None and "items" in node:
            properties = node["items"].get("properties")
        if properties is None and "additionalProperties" in node:
            properties = node["additionalProperties"].get("properties")
        if properties is None:
            return
        for key, nested in _wire_keys(kind).items():
            if f"{path}.{key}" == "status.replicas.type":
                continue  # the map's key (replicas.<type>), not a field of its values
            if key not in properties:
                missing.append(f"{path}.{key}")
            elif nested is not None:
                walk(nested, properties[key], f"{path}.{key}")

    walk(JobStatus, schema, "status")
    assert not missing, missing


BEYOND: dict[str, Any] = {
    **RUNNING,
    "attemptWorkers": 2,
    "stragglers": {
        "attempt": 1,
        "workers": [
            {
                "pod": "mnist-worker-1",
                "worker": 1,
                "node": "n1",
                "medianSeconds": 0.21,
                "othersSeconds": 0.0105,
                "ratio": 20.0,
                "steps": 50,
                "slowReadings": 3,
                "evenReadings": 1,
                "since": "2026-01-01T12:00:50Z",
                "observedAt": "2026-01-01T12:00:49.000Z",
            }
        ],
        "error": "steps/worker-0.json: not JSON",
    },
    "excludedNodes": [
        {
            "node": "n2",
            "cause": "NodeLost",
            "attempt": 0,
            "pod": "mnist-worker-2",
            "since": "2026-01-01T12:00:00Z",
            "until": "2026-01-01T13:00:00Z",
        }
    ],
    "history": [
        {
            "attempt": 0,
            "outcome": "Restarted",
            "cause": "NodeLost",
            "endTime": "2026-01-01T12:00:00Z",
            "workers": 4,
        }
    ],
}


def test_stragglers_excluded_nodes_and_attempt_sizes_round_trip() -> None:
    status = JobStatus.from_json(BEYOND)
    assert status.attempt_workers == 2 and status.history[0].workers == 4
    assert status.stragglers is not None and [w.pod for w in status.stragglers.named] == ["mnist-worker-1"]
    assert [e.node for e in status.excluded_nodes] == ["n2"]
    assert status.to_json() == BEYOND


def test_the_crd_keeps_every_field_of_stragglers_excluded_nodes_and_attempt_sizes() -> None:
    """The API server prunes what the status schema does not name: each field written must be there."""
    crd = yaml.safe_load((REPO / "crds" / "tfmwjobs.tfmw.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert "attemptWorkers" in schema
    assert set(schema["history"]["items"]["properties"]) >= {"workers"}
    assert set(schema["stragglers"]["properties"]) == set(BEYOND["stragglers"])
    assert set(schema["stragglers"]["properties"]["workers"]["items"]["properties"]) == set(
        BEYOND["stragglers"]["workers"][0]
    ) | {"replicaType"}
    assert set(schema["excludedNodes"]["items"]["properties"]) == set(BEYOND["excludedNodes"][0]) | {"rule"}


def test_merge_patch_recurses_into_objects_present_on_both_sides() -> None:
    old = {"workers": {"running": 1, "failed": 0, "pending": 2}, "phase": "Running"}
    new = {"workers": {"running": 2, "failed": 0}, "phase": "Running"}
    assert merge_patch(old, new) == {"workers": {"running": 2, "pending": None}}


def test_a_checkpoint_and_progress_are_described_with_only_what_they_hold() -> None:
    assert (
        Checkpoint(epoch=2, step=40, path="ckpt-3").describe()
        == "the checkpoint of epoch 2 step 40 at ckpt-3"
    )
    assert Checkpoint(step=0).describe() == "the checkpoint of step 0"
    assert Checkpoint(epoch=0, path="").describe() == "the checkpoint of epoch 0"
    full = ProgressStatus(
        attempt=1, epoch=3, total_epochs=10, step=600, total_steps=2000, summary="loss=0.12"
    )
    assert full.describe() == "epoch 3/10, step 600/2000 (loss=0.12) in attempt 1"
    assert ProgressStatus(attempt=2, epoch=3, step=6).describe() == "epoch 3, step 6 in attempt 2"
    assert (
        ProgressStatus(updated_at=at(5)).describe()
        == "a progress document, written at 2026-01-01T12:00:05Z in attempt 0"
    )


def test_an_excluded_node_is_described_with_only_what_it_holds() -> None:
    full = ExcludedNode("node-a", "OOMKilled", 2, "mnist-worker-1", "failureRules[0]", at(1), at(3600))
    assert full.describe() == "node-a (OOMKilled in attempt 2, failureRules[0]) until 2026-01-01T13:00:00Z"
    assert ExcludedNode("node-b", "NodeLost").describe() == "node-b (NodeLost)"
    assert ExcludedNode("node-c", "NodeLost", 0).describe() == "node-c (NodeLost in attempt 0)"
    assert ExcludedNode("node-d", "Evicted", rule="r").describe() == "node-d (Evicted, r)"


# ---- the CRD keeps every field ----

# A status with every field the operator writes, each as it writes it.
EVERY_FIELD: dict[str, Any] = {
    **FAILED,
    "restartsNotCounted": 2,
    "evictions": 1,
    "replacing": ["worker-1", "evaluator-0"],
    "containerRestarts": [{"pod": "dist-worker-1", "uid": "u-1", "restarts": 2}],
    "replicas": {
        "chief": {"pending": 0, "running": 1, "succeeded": 0, "failed": 0, "ready": 1},
        "worker": {"pending": 0, "running": 2, "succeeded": 0, "failed": 1, "ready": 2, "restarts": 1},
    },
    "progress": {
        "attempt": 1,
        "epoch": 2,
        "totalEpochs": 10,
        "step": 200,
        "totalSteps": 1000,
        "metrics": {"loss": 0.5},
        "examplesPerSecond": 120.5,
        "updatedAt": "2026-01-01T12:00:30.250Z",
        "percent": 20.0,
        "eta": "4m",
        "etaTime": "2026-01-01T12:04:30Z",
        "lastUpdate": "2026-01-01T12:00:30.250Z",
        "epochs": "2/10",
        "summary": "loss=0.5",
        "since": {"percent": 10.0, "time": "2026-01-01T12:00:10.500Z"},
        "error": "progress.json: not JSON",
        "advancedAt": "2026-01-01T12:00:30.250Z",
        "checkpoint": {"epoch": 2, "step": 200, "path": "checkpoints/ckpt-2"},
    },
    "evaluation": {
        "checkpoint": "checkpoints/ckpt-2",
        "epoch": 2,
        "step": 200,
        "metrics": {"accuracy": 0.9},
        "summary": "accuracy=0.9",
        "updatedAt": "2026-01-01T12:00:31.500Z",
        "error": "evaluation.json: not JSON",
    },
    "history": [
        {
            "attempt": 0,
            "outcome": "Replaced",
            "cause": "OOMKilled",
            "endTime": "2026-01-01T12:00:20Z",
            "startTime": "2026-01-01T12:00:00Z",
            "worker": 1,
            "replicaType": "worker",
            "pod": "mnist-worker-1",
            "node": "node-a",
            "container": "tensorflow",
            "exitCode": 137,
            "message": "killed",
            "logs": "default/mnist/logs/attempt-0/",
            "epoch": 2,
            "checkpoint": {"epoch": 2, "step": 200, "path": "checkpoints/ckpt-2"},
            "epochsLost": 0,
            "workers": 3,
            "restart": "InPlace",
            "recreated": ["worker-1"],
            "stacks": "default/mnist/logs/attempt-0/worker-0.stacks",
        }
    ],
    "attemptWorkers": 3,
    "stacksRequest": {"id": "a1b2", "attempt": 0, "requestedAt": "2026-01-01T12:00:19.500Z"},
    "stragglers": {
        **BEYOND["stragglers"],
        "workers": [{**BEYOND["stragglers"]["workers"][0], "replicaType": "worker"}],
    },
    "excludedNodes": [{**BEYOND["excludedNodes"][0], "rule": "bad-gpu"}],
}


def wire_keys() -> set[str]:
    """Every JSON key of every record of the status."""
    from tfmw_operator.api import status as module
    from tfmw_operator.api.records import Record

    kinds = [
        k for k in vars(module).values() if isinstance(k, type) and issubclass(k, Record) and k is not Record
    ]
    fields = [f for kind in kinds for f in dataclasses.fields(kind) if "wire" in f.metadata]  # type: ignore[arg-type]
    assert len(kinds) >= 9 and fields
    return {f.metadata["wire"].key for f in fields}


def keys_in(document: Any, maps: frozenset[str] = frozenset({"replicas", "metrics"})) -> set[str]:
    if isinstance(document, list):
        return set().union(*(keys_in(item) for item in document))
    if not isinstance(document, dict):
        return set()
    found = set(document)
    for key, value in document.items():
        if key in maps and isinstance(value, dict):  # keyed by set or metric: the values' keys count
            found |= set().union(set(), *(keys_in(item) for item in value.values()))
        else:
            found |= keys_in(value)
    return found


def unknown_to(schema: dict[str, Any], document: Any, path: str) -> list[str]:
    """Paths of `document` that the structural schema would prune (or that have the wrong type)."""
    kinds = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float)}
    if not isinstance(document, kinds[schema["type"]]):  # type: ignore[arg-type]
        return [f"{path}: not {schema['type']}"]
    if isinstance(document, list):
        return [
            miss
            for i, item in enumerate(document)
            for miss in unknown_to(schema["items"], item, f"{path}[{i}]")
        ]
    if not isinstance(document, dict):
        return []
    missing = []
    for key, value in document.items():
        inner = (schema.get("properties") or {}).get(key) or schema.get("additionalProperties")
        if inner is None:
            missing.append(f"{path}.{key}")
        else:
            missing += unknown_to(inner, value, f"{path}.{key}")
    return missing


def test_the_crd_keeps_every_field_the_operator_writes_in_the_status() -> None:
    """The API server prunes what a structural schema does not name: a field the operator
    writes and the CRD lacks is lost without an error (status.replicas, evaluation,
    restartsNotCounted and history's replicaType were, until this test)."""
    import yaml
    from kube import REPO

    assert JobStatus.from_json(EVERY_FIELD).to_json() == EVERY_FIELD  # each key as the operator writes it
    assert wire_keys() <= keys_in(EVERY_FIELD), wire_keys() - keys_in(EVERY_FIELD)  # ... and every one
    for crd in (REPO / "crds", REPO / "charts" / "tfmw" / "crds"):
        loaded = yaml.safe_load((crd / "tfmwjobs.tfmw.dev.yaml").read_text())
        schema = loaded["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert unknown_to(schema, EVERY_FIELD, "status") == [], crd
