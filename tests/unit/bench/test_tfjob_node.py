"""The TFJob API bench's pure parts: the one manifest and what each controller is given
beside it, the writes a job cost, the restart's figures from the workers' logs, and the
table."""

from __future__ import annotations

from typing import Any

from bench.felt import needs_follow, restart_count
from bench.tfjob_node import (
    DEATHS,
    back_after,
    describe,
    for_kubeflow,
    for_tfmw,
    job_writes,
    node_markdown,
    node_table,
    summarise,
    tfjob_manifest,
)
from tfmw_operator.api.kinds import TFJobKind
from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.tfjob import parse_tfjob
from tfmw_operator.core.supervision import KUBELET_RESTARTS, NO_SUPERVISOR_IMAGE, supervision_of

Json = dict[str, Any]


def test_the_template_gives_the_trainers_command_when_asked() -> None:
    container = tfjob_manifest("j", [], "ExitCode", command=True)["spec"]["tfReplicaSpecs"]["Worker"]
    assert container["template"]["spec"]["containers"][0]["command"] == ["python3", "-m", "tfmw_trainer"]
    plain = tfjob_manifest("j", [], "ExitCode")["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert "command" not in plain["spec"]["containers"][0]


def test_every_controller_gets_the_same_tfjob_of_the_samples_pods() -> None:
    job = tfjob_manifest("death-0", ["--epochs=20"], "OnFailure")
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "TFJob"
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2 and worker["restartPolicy"] == "OnFailure"
    container = worker["template"]["spec"]["containers"][0]
    assert container["image"] == "tfmw-trainer:dev" and container["args"] == ["--epochs=20"]
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "backoffLimit": 3,
        "activeDeadlineSeconds": 1800,
    }
    tfmw, kubeflow = for_tfmw(job), for_kubeflow(job, "ns", "tfjob-uid")
    assert "annotations" not in job["metadata"], "the manifest itself is left as it was"
    assert tfmw["metadata"]["annotations"] == {
        "tfmw.dev/shared-claim": "tfmw-shared",
        "tfmw.dev/shared-mount-path": "/shared",
    }
    assert tfmw["spec"] == job["spec"], "tfmw gets the manifest's spec untouched"
    given = kubeflow["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    env = {e["name"] for e in given["containers"][0]["env"]}
    assert {"TFMW_JOB_UID", "TFMW_WORKER_INDEX", "TFMW_SHARED_DIR"} <= env
    assert given["volumes"] == [
        {"name": "tfmw-shared", "persistentVolumeClaim": {"claimName": "tfmw-shared"}}
    ]
    assert "annotations" not in kubeflow["metadata"]


def test_tfmw_reads_the_benchs_tfjob_as_a_gang_of_two_on_the_claim() -> None:
    job = for_tfmw(tfjob_manifest("short-0", ["--epochs=4"], "ExitCode"))
    job["metadata"].update(namespace="ns", uid="u-1")
    spec = parse_tfjob(job)
    assert spec.workers == 2 and spec.uid == "u-1"
    assert spec.claim_name == "tfmw-shared"


def test_tfmw_restarts_a_tfjobs_gang_as_its_restart_policy_says_whatever_its_template() -> None:
    """A TFJob's pods keep Kubeflow's shape (api/kinds.py): no supervisor, even with the
    operator's supervisor image. Under OnFailure the kubelet restarts a container in its pod,
    as under Kubeflow; under ExitCode the gang is re-created."""
    for policy, by_kubelet, reason in (
        ("OnFailure", True, KUBELET_RESTARTS),
        ("ExitCode", False, NO_SUPERVISOR_IMAGE),
    ):
        for command in (False, True):
            job = for_tfmw(tfjob_manifest("death-0", ["--epochs=20"], policy, command))
            job["metadata"].update(namespace="ns", uid="u-1")
            spec = TFJobKind().parse(job, "", "tfmw-operator:dev")
            assert isinstance(spec, JobSpec)
            supervision = supervision_of(spec)
            assert not supervision.in_place
            assert (supervision.by_kubelet, supervision.reason) == (by_kubelet, reason)


def test_a_jobs_writes_leave_out_the_benchs_own_and_the_control_planes_housekeeping() -> None:
    before = {("POST", "pods", ""): 10.0, ("PATCH", "leases", ""): 100.0, ("POST", "events", ""): 4.0}
    after = {
        ("POST", "pods", ""): 12.0,
        ("PATCH", "pods", "status"): 9.0,
        ("POST", "events", ""): 10.0,
        ("PUT", "tfjobs", "status"): 5.0,
        ("POST", "tfjobs", ""): 1.0,  # the bench's create
        ("DELETE", "tfjobs", ""): 1.0,  # and delete
        ("POST", "configmaps", ""): 1.0,  # the floor's stand-in for a job
        ("PATCH", "leases", ""): 140.0,
        ("PATCH", "nodes", "status"): 3.0,
        ("PUT", "secrets", ""): 2.0,
    }
    assert job_writes(before, after) == {
        "total": 22,
        "without_events": 16,
        "PATCH pods/status": 9,
        "POST events": 6,
        "POST pods": 2,
        "PUT tfjobs/status": 5,
    }


def lines(*pairs: tuple[float, str]) -> list[tuple[float, str]]:
    return list(pairs)


UP = "worker={} start cluster_workers=2 replicas=2 global_batch=16 mode=loop attempt={}"
STEP = "worker=0 first_step attempt={} step={}"


def test_back_after_a_death_is_every_workers_cluster_up_and_the_chiefs_next_first_step() -> None:
    killed = 100.0
    old_chief = lines((10.0, UP.format(0, 0)), (12.0, STEP.format(0, 1)), (101.0, "worker=0 epoch=3 loss=1"))
    new_chief = lines((110.0, UP.format(0, 1)), (112.5, STEP.format(1, 151)))
    old_worker = lines((10.0, UP.format(1, 0)))
    new_worker = lines((109.0, UP.format(1, 1)))
    logs = {0: [old_chief, new_chief], 1: [old_worker, new_worker]}
    assert back_after(logs, killed) == (110.0, 112.5)
    # A worker not back yet: no time for all; the chief's step still found.
    assert back_after({0: [old_chief, new_chief], 1: [old_worker]}, killed) == (None, 112.5)
    # Lines of a restarted container come after the old one's, not in time order.
    assert back_after({0: [new_chief + old_chief], 1: [new_worker]}, killed) == (110.0, 112.5)
    assert back_after({0: [old_chief], 1: [old_worker]}, killed) == (None, None)


def test_a_restarted_container_is_followed_again_once_it_runs() -> None:
    def pod(restarts: int, state: str) -> Json:
        status = [{"name": "tensorflow", "restartCount": restarts, "state": {state: {}}}]
        return {"status": {"containerStatuses": status}}

    assert restart_count(pod(2, "running")) == 2 and restart_count({"status": {}}) == 0
    assert not needs_follow(pod(0, "waiting"), started=False, followed=None)
    assert needs_follow(pod(0, "running"), started=True, followed=None)
    assert not needs_follow(pod(0, "running"), started=True, followed=0)
    assert not needs_follow(pod(1, "waiting"), started=True, followed=0), "not before it runs again"
    assert needs_follow(pod(1, "running"), started=True, followed=0)
    assert not needs_follow(pod(1, "terminated"), started=True, followed=1)


def test_median_and_p90_of_the_runs_that_got_there() -> None:
    assert describe([3.0, 1.0, 2.0, None]) == {
        "n": 3,
        "missing": 1,
        "median_s": 2.0,
        "p90_s": 3.0,
        "min_s": 1.0,
        "max_s": 3.0,
    }
    assert describe([None]) == {"n": 0, "missing": 1}


def run(scale: float) -> Json:
    def short(factor: float) -> Json:
        return {
            "all_running": 2.0 * scale * factor,
            "first_step": 6.0 * scale * factor,
            "writes": {"total": 30, "without_events": 20},
        }

    start = {
        "tfmw-tfjob": {"args": short(1.0), "command": short(1.5)},
        "tfjob-tuned": {"args": short(1.0), "command": short(1.0)},
        "floor": {"args": short(1.0)},
    }
    death = {
        "tfmw-tfjob": {v: {"all_up": 5.0 * scale, "training_again": 7.0 * scale} for v in DEATHS},
        "tfjob-tuned": {v: {"all_up": 30.0 * scale, "training_again": None} for v in DEATHS},
        "floor": {"-": {"all_up": 6.0 * scale, "training_again": 8.0 * scale}},
    }
    return {"start": start, "death": death}


def test_the_table_shows_median_and_p90_and_tfmws_ratio_to_kubeflows() -> None:
    summary = summarise([run(1.0), run(2.0), run(1.5)])
    assert summary["start"]["tfmw-tfjob"]["args"]["all_running"]["median_s"] == 3.0
    assert summary["death"]["tfjob-tuned"]["ExitCode, args"]["training_again"] == {"n": 0, "missing": 3}
    text = node_table(summary).splitlines()

    def line(*words: str) -> str:
        return next(row for row in text if all(w in row for w in words))

    running = line("all pods Running", "only args")
    assert "3.00 / 4.00" in running and running.endswith("1.000")
    with_command = line("all pods Running", "its command")
    assert "4.50 / 6.00" in with_command and with_command.endswith("1.500")
    assert with_command.split()[-2] == "-", "the floor's pods give no command"
    exit_code = line("cluster up", "ExitCode, template gives only args")
    assert "7.50 / 10.00" in exit_code and "45.00 / 60.00" in exit_code and exit_code.endswith("0.167")
    again = line("training again", "OnFailure, template gives its command")
    assert "none of 3" in again and again.endswith("-")
    assert "12.00 / 16.00" in again, "the floor's one gang restart is shown beside every variant"
    markdown = node_markdown(summary)
    assert "| API writes per job, template gives only args | 30 | 30 | 30 | 1.000 |" in markdown
    assert (
        "| API writes per job (without Events), template gives its command | 30 | 30 | - | 1.000 |"
        not in markdown
    )
    assert (
        "| API writes per job (without Events), template gives its command | 20 | 20 | - | 1.000 |"
        in markdown
    )
