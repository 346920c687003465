"""The felt bench's pure parts: the runtime's log timestamps, the trainer's lines, what a
pod's object says, the workload each contender gets, and the table's figures."""

from __future__ import annotations

import calendar
from typing import Any

import pytest
from bench.felt import (
    CONTENDERS,
    FLOOR_GOAL,
    PodRecord,
    cell,
    death_stages,
    exit_of,
    first_step,
    floor_objects,
    gang_stages,
    goals,
    gone_at,
    markdown,
    parse_log_line,
    pick_trainer,
    pod_marks,
    ratio_of,
    stage_table,
    strategy_up,
    summarise,
    table,
    telling_line,
    tfjob_template,
    tfmw_manifest,
    training_after,
    turn,
)
from tfmw_operator.api.spec import Member, parse_job
from tfmw_operator.core.builders import build_pod, build_service

Json = dict[str, Any]
NOON = calendar.timegm((2026, 12, 2, 17, 20, 1, 0, 0, 0))


@pytest.mark.parametrize(
    ("line", "seconds"),
    [
        ("2026-12-02T17:20:01.123456789Z worker=0 x", NOON + 0.123456789),
        ("2026-12-02T17:20:01.5Z worker=0 x", NOON + 0.5),  # Go's RFC3339Nano drops trailing zeros
        ("2026-12-02T17:20:01Z worker=0 x", NOON),
        ("2026-12-02T18:20:01.25+01:00 worker=0 x", NOON + 0.25),
        ("2026-12-02T16:50:01.25-00:30 worker=0 x", NOON + 0.25),
    ],
)
def test_the_runtimes_timestamp_is_read_to_the_nanosecond_in_any_zone(line: str, seconds: float) -> None:
    parsed = parse_log_line(line + "\n")
    assert parsed is not None
    assert parsed[0] == pytest.approx(seconds, abs=1e-9) and parsed[1] == "worker=0 x"


def test_a_line_without_a_timestamp_is_not_a_log_line() -> None:
    assert parse_log_line("worker=0 first_step attempt=0 step=1") is None
    assert parse_log_line("") is None
    assert parse_log_line("2026-12-02T17:20:01.5Z") == (NOON + 0.5, "")


LOG = [
    (1.0, "worker=0 start cluster_workers=2 replicas=2 global_batch=16 mode=loop attempt=1"),
    (2.0, "worker=0 resumed_from_epoch=1 resumed_from_step=50"),
    (3.0, "worker=0 first_step attempt=1 step=51"),
    (4.0, "worker=0 epoch=2 loss=0.5 accuracy=0.8"),
    (5.0, "worker=0 epoch=3 loss=0.4 accuracy=0.9"),
]


def test_the_first_step_names_its_attempt_and_step() -> None:
    assert first_step(LOG) == (3.0, 1, 51)
    assert first_step(LOG, attempt=1) == (3.0, 1, 51)
    assert first_step(LOG, attempt=0) is None
    assert first_step([(1.0, "worker=0 first_step attempt=0 step=1 extra")]) is None
    assert strategy_up(LOG) == 1.0 and strategy_up(LOG[1:]) is None


def test_training_after_a_moment_is_a_first_step_or_an_epoch_line_after_it() -> None:
    assert training_after(LOG, 0.0) == LOG[2]
    assert training_after(LOG, 3.0) == LOG[3]  # a process that trained on prints epochs only
    assert training_after(LOG, 5.0) is None
    assert training_after(LOG[:2], 0.0) is None


def pod(phase: str = "Pending", **more: Any) -> Json:
    status: Json = {"phase": phase, "conditions": more.pop("conditions", [])}
    if "state" in more:
        status["containerStatuses"] = [
            {"name": "tfmw-sidecar", "state": {"terminated": {"exitCode": 9}}},
            {"name": "tensorflow", "state": more.pop("state")},
        ]
    return {"metadata": more.pop("metadata", {}), "spec": more.pop("spec", {}), "status": status}


def condition(kind: str, true: bool = True) -> Json:
    return {"type": kind, "status": "True" if true else "False"}


def test_a_pods_marks_follow_its_life() -> None:
    assert pod_marks(pod()) == []
    assert pod_marks(pod(conditions=[condition("PodScheduled")])) == ["scheduled"]
    assert pod_marks(pod(spec={"nodeName": "n"}, conditions=[condition("Initialized", False)])) == [
        "scheduled"
    ]
    running = pod(
        "Running",
        spec={"nodeName": "n"},
        conditions=[condition("Initialized"), condition("Ready")],
        state={"running": {}},
    )
    assert pod_marks(running) == ["scheduled", "initialized", "started", "running", "ready"]
    exited = pod("Running", spec={"nodeName": "n"}, state={"terminated": {"exitCode": 170}})
    assert pod_marks(exited) == ["scheduled", "started", "running", "exited"]
    failed = pod(
        "Failed",
        spec={"nodeName": "n"},
        metadata={"deletionTimestamp": "2026-12-02T17:20:01Z"},
        state={"terminated": {"exitCode": 137, "reason": "Error"}},
    )
    assert pod_marks(failed) == ["scheduled", "started", "exited", "ended", "deleting"]
    assert exit_of(failed) == (137, "Error")  # the trainer's container, not the sidecar
    assert exit_of(running) is None and exit_of(pod()) is None


def record(**marks: float) -> PodRecord:
    return PodRecord("u", "j-worker-0", {}, {"created": 0.0, **marks})


def test_workers_are_gone_when_the_last_one_stopped_or_went() -> None:
    assert gone_at([]) is None
    assert gone_at([record(ended=5.0), record(running=1.0)]) is None
    assert gone_at([record(ended=5.0), record(deleted=7.0)]) == 7.0
    assert gone_at([record(ended=5.0, deleted=9.0), record(ended=6.0)]) == 6.0


def test_the_trainer_killed_is_the_child_of_the_containers_first_process() -> None:
    assert pick_trainer({100: 90, 101: 100}) == 101
    assert pick_trainer({1: 0, 100: 1, 101: 100}) == 101  # under the in-pod supervisor
    with pytest.raises(AssertionError):
        pick_trainer({100: 90})
    with pytest.raises(AssertionError):
        pick_trainer({100: 90, 101: 100, 102: 100})


def test_the_summary_counts_a_run_that_never_got_there_as_longer_than_any() -> None:
    assert summarise([3.0, 1.0, 2.0]) == {"n": 3, "missing": 0, "median_s": 2.0, "min_s": 1.0, "max_s": 3.0}
    assert summarise([3.0, None, None]) == {
        "n": 1,
        "missing": 2,
        "median_s": None,
        "min_s": 3.0,
        "max_s": None,
    }
    assert summarise([3.0, 1.0, None])["median_s"] == 3.0
    assert summarise([])["median_s"] is None


def test_ratios_of_medians_and_against_a_peer_that_never_got_there() -> None:
    ours = summarise([2.0, 2.0])
    assert ratio_of(ours, summarise([4.0]), None) == (0.5, "0.500")
    assert ratio_of(ours, summarise([None, None]), 240.0) == (0.008, "<0.008")
    assert ratio_of(ours, summarise([None]), None) == (None, "-")
    assert ratio_of(summarise([None]), ours, None) == (None, "-")
    assert ratio_of(ours, summarise([0.0]), None) == (None, "inf")  # theirs at once, ours not
    assert ratio_of(summarise([0.0]), summarise([0.0]), None) == (1.0, "1.000")


def results(tfmw: float, tfjob: float | None, floor: float) -> dict[str, dict[str, Json]]:
    keys = (
        "apply_to_first_step",
        "death_to_training_again",
        "succeeded_to_workers_gone",
        "marker_to_succeeded",
        "marker_to_workers_gone",
    )
    figures = {"tfmw": tfmw, "tfjob-tuned": tfjob, "floor": floor}
    return {name: {key: summarise([figures[name]]) for key in keys} for name in CONTENDERS}


def test_the_table_shows_median_min_max_and_both_ratios() -> None:
    shown = table(results(6.0, 3.0, 5.0), {"tfjob-tuned": 240.0})
    assert "6.00 [6.00-6.00]" in shown and "2.000" in shown and "1.200" in shown
    never = table(results(6.0, None, 5.0), {"tfjob-tuned": 240.0})
    assert ">240 [>240->240]" in never and "<0.025" in never
    assert "| apply -> first training step (s) | 6.00 [6.00-6.00] |" in markdown(
        results(6.0, 3.0, 5.0), {"tfjob-tuned": 240.0}
    )
    assert cell(summarise([]), None) == "-"
    assert "... marker written -> Succeeded (s)" in shown
    unmeasured = {
        name: {k: v for k, v in row.items() if k != "marker_to_workers_gone"}
        for name, row in results(6.0, 3.0, 5.0).items()
    }
    last = table(unmeasured, {}).splitlines()[-1]
    assert (
        last.startswith("... marker written -> workers gone") and last.split()[-5:] == ["-"] * 5
    )  # no cells


def story(**marks: float) -> Json:
    return dict(marks)


def test_a_gangs_stages_are_its_later_workers() -> None:
    pods = [story(created=0.1, started=2.0, first_step=9.0), story(created=0.2, started=2.5, first_step=9.1)]
    stages = gang_stages(pods)
    assert stages["created"] == 0.2 and stages["started"] == 2.5 and stages["first_step"] == 9.1
    assert stages["scheduled"] is None


def test_a_restarts_stages_split_the_old_gang_from_the_new() -> None:
    pods = [
        story(created=-9.0, exited=0.3, deleting=0.9, ended=1.5, deleted=2.4),
        story(created=-9.0, exited=0.1, deleting=0.8, ended=1.4),  # a Failed pod left in place
        story(created=2.43, initialized=4.4, first_step=11.8),
        story(created=2.45, initialized=4.5, first_step=11.7),
    ]
    stages = death_stages(pods)
    assert (stages["first_exit_seen"], stages["deletion_asked"]) == (0.1, 0.8)
    assert (stages["old_exited"], stages["old_gone"]) == (0.3, 2.4)
    assert (stages["new_created"], stages["new_initialized"], stages["new_first_step"]) == (2.45, 4.5, 11.8)
    assert death_stages([*pods[:1], story(created=-9.0)])["old_gone"] is None  # one still there
    assert death_stages(pods[2:])["old_gone"] is None


def test_the_stage_table_shows_medians_of_the_runs() -> None:
    runs: dict[str, list[dict[str, float | None]]] = {
        "tfmw": [{"created": 1.0}, {"created": 3.0}, {"created": None}],
        "floor": [{}],
    }
    shown = stage_table(runs, ("created",), "the kill")
    assert shown.splitlines()[1].split() == ["created", "2.00", "-", "-"]


def test_the_goals_are_judged_against_tfjob_and_the_floor() -> None:
    said = goals(results(6.0, 7.0, 6.0 / FLOOR_GOAL), {})
    assert all("met" in line and "MISSED" not in line for line in said), said
    assert len(said) == 5  # three against TFJob, two against the floor
    assert "marker written -> workers gone" in said[-1] and not any("Succeeded ->" in line for line in said)
    missed = goals(results(6.0, 5.0, 4.0), {})
    assert sum("MISSED" in line for line in missed) == 5
    assert all("met" in line for line in goals(results(6.0, None, 5.5), {"tfjob-tuned": 240.0})[:1])


def test_every_contender_runs_the_samples_pods_with_the_benchs_arguments() -> None:
    job = tfmw_manifest("short-0", ["--epochs=4"])
    assert job["metadata"] == {"name": "short-0"} and job["spec"]["workers"] == 2
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--epochs=4"] and container["image"] == "tfmw-trainer:dev"
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}


def test_tfjobs_workers_get_by_hand_what_the_trainer_reads() -> None:
    template = tfmw_manifest("death-0", ["--epochs=20"])["spec"]["template"]
    given = tfjob_template(template, "death-0", "ns", "tfjob-uid")
    assert template["spec"]["containers"][0].get("env") is None, "the sample is left as it was"
    container = given["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["TFMW_JOB_UID"] == "tfjob-uid" and env["TFMW_ATTEMPT"] == "0"
    assert env["TFMW_SHARED_DIR"] == "/shared"
    assert env["TFMW_MARKER_PATH"] == "/shared/multiworker-complete.txt"
    assert env["TFMW_PROGRESS_PATH"] == "/shared/progress.json"
    assert env["TFMW_WORKER_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.labels['training.kubeflow.org/replica-index']"}
    }
    assert container["volumeMounts"] == [
        {"name": "tfmw-shared", "mountPath": "/shared", "subPath": "death-0"}
    ]
    assert given["spec"]["volumes"] == [
        {"name": "tfmw-shared", "persistentVolumeClaim": {"claimName": "tfmw-shared"}}
    ]
    assert container["args"] == ["--epochs=20"] and container["securityContext"]["capabilities"]


def test_each_run_begins_with_the_next_contender_in_the_same_cycle() -> None:
    orders = [turn(run, list(CONTENDERS)) for run in range(6)]
    assert [order[0] for order in orders] == [*CONTENDERS, *CONTENDERS]
    for order in orders:
        start = CONTENDERS.index(order[0])
        assert order == [CONTENDERS[(start + k) % len(CONTENDERS)] for k in range(len(CONTENDERS))]
    assert turn(4, []) == []


def test_the_floors_pods_are_what_the_deployed_operator_builds_with_its_supervisor_image() -> None:
    """The deployed operator has a supervisor image; the sample's template gives only `args`,
    so tfmw's pods are not supervised and the floor's, built without one, are the same pods.
    A sample that gave `command` would make tfmw's pods supervised: the floor must follow."""
    manifest = tfmw_manifest("short-0", ["--epochs=4"])
    _, pods = floor_objects(manifest, "ns", {"name": "short-0", "uid": "cm-uid"}, 0, "tfmw-operator:dev")
    job = {**manifest, "metadata": {"name": "short-0", "namespace": "ns", "uid": "cm-uid"}}
    spec = parse_job(job, "tfmw-operator:dev", "tfmw-operator:dev")
    for built, deployed in zip(pods, [build_pod(spec, Member.worker(i), 0) for i in range(2)], strict=True):
        built["metadata"].pop("ownerReferences")
        deployed["metadata"].pop("ownerReferences")
        assert built == deployed
        names = [c["name"] for c in deployed["spec"].get("initContainers") or []]
        assert names == ["tfmw-folder-check"] and "command" not in deployed["spec"]["containers"][0]


def test_the_floors_objects_are_tfmws_own_but_for_their_owner() -> None:
    manifest = tfmw_manifest("short-0", ["--epochs=4"])
    owner = {"name": "short-0", "uid": "cm-uid"}
    service, pods = floor_objects(manifest, "ns", owner, 1, "tfmw-operator:dev")
    job = {**manifest, "metadata": {"name": "short-0", "namespace": "ns", "uid": "cm-uid"}}
    spec = parse_job(job, "tfmw-operator:dev")
    expected = [build_pod(spec, Member.worker(i), 1) for i in range(2)]
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "short-0",
        "uid": "cm-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for built, wanted in zip(pods, expected, strict=True):
        assert built["metadata"].pop("ownerReferences") == [reference]
        wanted["metadata"].pop("ownerReferences")
        assert built == wanted
    assert pods[0]["spec"]["initContainers"][0]["image"] == "tfmw-operator:dev"
    assert pods[1]["metadata"]["labels"]["tfmw.dev/attempt"] == "1"
    assert service["metadata"].pop("ownerReferences") == [reference]
    wanted_service = build_service(spec)
    wanted_service["metadata"].pop("ownerReferences")
    assert service == wanted_service


def test_the_telling_line_is_the_exception_or_the_trainers_last_word() -> None:
    tail = [
        "tensorflow.python.framework.errors_impl.AbortedError: Collective ops is aborted by: ...",
        "The error could be from a previous operation. Restart your program to reset.",
    ]
    assert telling_line(tail).startswith("tensorflow.python.framework.errors_impl.AbortedError")
    assert (
        telling_line(["x", "tfmw-trainer: SIGTERM, saving within 20 s", "y"])
        == "tfmw-trainer: SIGTERM, saving within 20 s"
    )
    assert telling_line(["a", "b"]) == "b" and telling_line([]) == ""
