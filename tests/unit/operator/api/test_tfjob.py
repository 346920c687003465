"""Kubeflow's TFJob: converted to the TFMultiWorkerJob that means the same, refused where tfmw
has no faithful meaning, its status told in TFJob's shape, and one controller per job."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import wrappers
from tfmw_operator.api.kinds import TFJOBS, TFMW_JOBS
from tfmw_operator.api.spec import CompletionPolicy, Member, ReplicaType, SpecError, parse_job
from tfmw_operator.api.status import ConditionType, JobStatus, Phase, ReplicaCounts, WorkerCounts
from tfmw_operator.api.tfjob import (
    MANAGED_BY_KUBEFLOW,
    MANAGED_BY_TFMW,
    SERVE_ALL,
    SERVE_MANAGED_BY,
    ConversionError,
    Serving,
    convert,
    kubeflow_pod_labels,
    managed_by,
    parse_tfjob,
    serves,
    tfjob_conditions,
)
from tfmw_operator.api.times import format_time
from tfmw_operator.core.builders import EVENT_MESSAGE_LIMIT, build_pod, build_service, build_tf_config
from tfmw_operator.core.observed import MarkerState
from tfmw_operator.core.reconcile import reconcile
from tfmw_operator.core.supervision import supervision_of
from wrappers import T0, at, container_env, observe

Json = dict[str, Any]
STAMP = "2026-01-01T12:00:20Z"


def replica(replicas: int = 1, policy: str | None = None, image: str = "img:1", **more: Any) -> Json:
    spec: Json = {
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "tensorflow", "image": image, **more}]}},
    }
    if policy is not None:
        spec["restartPolicy"] = policy
    return spec


def tfjob(name: str = "dist", run: Json | None = None, **replicas: Json) -> Json:
    spec: Json = {"tfReplicaSpecs": replicas}
    if run is not None:
        spec["runPolicy"] = run
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": spec,
    }


def test_dist_mnist_chief_ps_and_workers_become_roles() -> None:
    job = tfjob(Chief=replica(1, "Never"), PS=replica(1, "Never"), Worker=replica(2, "Never"))
    converted = convert(job).manifest
    spec = converted["spec"]
    assert converted["kind"] == "TFMultiWorkerJob" and converted["metadata"] == {
        "name": "dist",
        "namespace": "ns",
    }
    assert spec["workers"] == 2 and spec["parameterServers"]["replicas"] == 1 and "chief" in spec
    assert spec["completion"] == {"policy": "ChiefExitCode"}
    assert spec["runPolicy"]["cleanPodPolicy"] == "None"  # TFJob's default
    assert {r["action"] for r in spec["runPolicy"]["failureRules"]} == {"Fail"}
    parsed = parse_job(converted)  # what the CRD would take, the parser takes
    assert [m.stem for m in parsed.members] == ["chief-0", "worker-0", "worker-1", "ps-0"]


def test_a_converted_job_is_what_the_engine_runs_for_the_tfjob() -> None:
    job = parse_tfjob(tfjob(Worker=replica(2, "OnFailure")))
    assert (job.kind, job.api_version, job.uid) == ("TFJob", "kubeflow.org/v1", "uid-dist")
    assert job.completion_policy is CompletionPolicy.CHIEF_EXIT_CODE and not job.shared
    pod = build_pod(job, Member.worker(0), 0)
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "TFJob"
    labels = pod["metadata"]["labels"]
    assert labels["training.kubeflow.org/job-name"] == "dist"
    assert labels["training.kubeflow.org/replica-type"] == "worker"
    assert labels["training.kubeflow.org/replica-index"] == "0"
    assert labels["training.kubeflow.org/job-role"] == "master"  # worker 0, without a chief
    assert labels["training.kubeflow.org/operator-name"] == "tfmw"  # never Kubeflow's: it would adopt
    assert "training.kubeflow.org/job-role" not in build_pod(job, Member.worker(1), 0)["metadata"]["labels"]


def first_launch_events(job: Json, status: JobStatus, notes: tuple[str, ...] | None = None) -> dict[str, str]:
    spec = parse_tfjob(job)
    if notes is not None:
        spec = dataclasses.replace(spec, conversion_notes=notes)
    seen = observe(job, [], MarkerState(), at(1), spec=spec, status=status, service=build_service(spec))
    return {event.reason: event.message for event in reconcile(seen).events}


def test_the_first_launch_says_where_tfmw_runs_the_tfjob_differently() -> None:
    job = tfjob(Worker=replica(2, "ExitCode"), run={"backoffLimit": 3})
    said = first_launch_events(job, JobStatus())["PodsCreated"]
    assert said.startswith(
        "created 2 worker pods for attempt 0; run as Kubeflow's controller would, except: "
    )
    # Each note as `tfmw convert` says it, naming the TFJob's own field.
    for note in convert(job).notes:
        assert f"{note.field}: {note.said}" in said
    assert "spec.runPolicy.cleanPodPolicy: None" in said
    assert len(said) <= EVENT_MESSAGE_LIMIT
    # Said once: a later attempt's launch is only the launch.
    again = JobStatus(phase=Phase.RESTARTING, attempt=1, launched_attempt=0, start_time=T0)
    assert first_launch_events(job, again)["PodsCreated"] == "created 2 worker pods for attempt 1"


def test_notes_beyond_an_events_room_are_counted_not_cut() -> None:
    notes = tuple(f"spec.tfReplicaSpecs.Worker.field{i}: {'x' * 80}" for i in range(20))
    said = first_launch_events(tfjob(Worker=replica(2)), JobStatus(), notes)["PodsCreated"]
    assert len(said) <= EVENT_MESSAGE_LIMIT
    kept = [note for note in notes if note in said]
    assert 5 <= len(kept) < 20 and said.endswith(f"; and {20 - len(kept)} more (tfmw convert prints them)")
    assert said.count("field") == len(kept)  # whole notes only


def test_a_tfmultiworkerjobs_launch_says_only_the_launch() -> None:
    spec = parse_job(wrappers.job("plain", workers=2).obj())
    assert spec.conversion_notes == ()


def test_a_master_keeps_its_name_in_the_labels_and_is_the_chief() -> None:
    job = parse_tfjob(tfjob(Master=replica(1), Worker=replica(1)))
    labels = kubeflow_pod_labels(job, "chief", 0)
    assert labels["training.kubeflow.org/replica-type"] == "master"
    assert labels["training.kubeflow.org/job-role"] == "master"
    assert job.chief == Member(ReplicaType.CHIEF, 0)
    # Where Kubeflow's would name it <job>-master-0 with TF_CONFIG type master: said once.
    said = [n for n in job.conversion_notes if n.startswith("spec.tfReplicaSpecs.Master: ")]
    assert len(said) == 1 and "<job>-chief-0" in said[0] and "<job>-master-0" in said[0]
    chief = parse_tfjob(tfjob(Chief=replica(1), Worker=replica(1)))
    assert not [n for n in chief.conversion_notes if n.startswith("spec.tfReplicaSpecs.Chief")]


def test_a_lone_replica_gets_no_tf_config_as_under_tfjob() -> None:
    job = parse_tfjob(tfjob(Worker=replica(1)))
    env = container_env(build_pod(job, Member.worker(0), 0)["spec"]["containers"][0])
    assert "TF_CONFIG" not in env and env["TFMW_ROLE"] == "chief"
    two = parse_tfjob(tfjob(Worker=replica(2)))
    assert "TF_CONFIG" in container_env(build_pod(two, Member.worker(0), 0)["spec"]["containers"][0])


@pytest.mark.parametrize(
    ("policy", "actions"),
    [
        ("Never", [("Fail", None)]),
        ("OnFailure", [("RestartNotCounted", True), ("Restart", None)]),
        ("Always", [("RestartNotCounted", True), ("Restart", None)]),
        ("ExitCode", [("RestartNotCounted", True), ("Fail", None), ("RestartNotCounted", False)]),
    ],
)
def test_each_replicas_restart_policy_becomes_rules_on_its_role(
    policy: str, actions: list[tuple[str, bool | None]]
) -> None:
    rules = convert(tfjob(Worker=replica(2, policy))).manifest["spec"]["runPolicy"]["failureRules"]
    assert [(r["action"], r.get("onDisruption")) for r in rules] == actions
    assert all(r["onRoles"] == ["worker", "chief"] for r in rules)  # worker 0 is the chief


def test_exit_code_fails_on_the_programs_own_codes_and_restarts_signals() -> None:
    from tfmw_operator.core.policies.failure_rules import Failure, rule_on

    job = parse_tfjob(tfjob(Worker=replica(2, "ExitCode")))
    assert rule_on(job, Failure("worker", "Error", 1, False)).action.value == "Fail"
    assert rule_on(job, Failure("worker", "OOMKilled", 137, False)).action.value == "RestartNotCounted"
    assert rule_on(job, Failure("chief", "Evicted", 1, True)).action.value == "RestartNotCounted"


def launched_pod(job: Json, index: int, phase: str = "Running", exit_code: int | None = None) -> Json:
    """Worker `index`'s pod of attempt 0 as the API server returns it: running, or ended."""
    raw = build_pod(parse_tfjob(job), Member.worker(index), 0)
    raw["metadata"].update(uid=f"pod-{index}", creationTimestamp=format_time(T0))
    state: Json = {"running": {}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": format_time(at(12))}}
    raw["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "tensorflow", "restartCount": 0, "state": state}],
    }
    return raw


def decided(job: Json, pods: list[Json]) -> JobStatus:
    spec = parse_tfjob(job)
    status = JobStatus(phase=Phase.RUNNING, attempt=0, launched_attempt=0, start_time=T0)
    seen = observe(job, pods, MarkerState(), at(20), spec=spec, status=status, service=build_service(spec))
    return reconcile(seen).status


@pytest.mark.parametrize("policy", ["OnFailure", "Always"])
def test_a_disruption_under_on_failure_or_always_is_not_counted_as_in_kubeflow(policy: str) -> None:
    """Kubeflow deletes an evicted OnFailure pod for a new one and counts nothing against
    backoffLimit (pkg/controller.v1/common/pod.go; PastBackoffLimit sums kubelet restarts)."""
    from tfmw_operator.core.policies.failure_rules import Failure, rule_on

    job = parse_tfjob(tfjob(run={"backoffLimit": 3}, Worker=replica(2, policy)))
    assert rule_on(job, Failure("worker", "Evicted", 137, True)).action.value == "RestartNotCounted"
    assert rule_on(job, Failure("worker", "Error", 1, False)).action.value == "Restart"
    # With a PS, tfmw replaces the pod itself (no kubelet restart): an evicted worker is not counted.
    obj = tfjob(run={"backoffLimit": 3}, Worker=replica(2, policy), PS=replica(1, policy))
    evicted = launched_pod(obj, 1, "Failed", 137)
    evicted["status"].update(reason="Evicted", message="the node was low on memory")
    status = decided(obj, [launched_pod(obj, 0), evicted])
    assert [r.outcome for r in status.history] == ["Replaced"]
    assert (status.restarts, status.restarts_not_counted) == (0, 1)


def test_a_disruption_under_on_failure_with_a_backoff_limit_of_0_fails_the_job_as_in_kubeflow() -> None:
    """Kubeflow's exceedsBackoffLimit fails the job at its first new failed pod under a limit of 0."""
    obj = tfjob(run={"backoffLimit": 0}, Worker=replica(2, "OnFailure"), PS=replica(1, "OnFailure"))
    assert [r["action"] for r in convert(obj).manifest["spec"]["runPolicy"]["failureRules"]] == [
        "Restart",
        "Restart",
    ]
    evicted = launched_pod(obj, 1, "Failed", 137)
    evicted["status"].update(reason="Evicted", message="the node was low on memory")
    assert decided(obj, [launched_pod(obj, 0), evicted]).phase is Phase.FAILED


@pytest.mark.parametrize("policy", ["Never", "ExitCode"])
def test_a_tfjobs_failed_message_names_its_restart_policy_not_failure_rules(policy: str) -> None:
    """A TFJob has no failureRules: the rule that failed it is named by what the TFJob wrote."""
    obj = tfjob(run={"backoffLimit": 3}, Worker=replica(2, policy))
    status = decided(obj, [launched_pod(obj, 0), launched_pod(obj, 1, "Failed", 1)])
    assert status.phase is Phase.FAILED
    assert (status.message or "").endswith(f"(spec.tfReplicaSpecs.Worker.restartPolicy {policy}: Fail)")
    assert "failureRules" not in (status.message or "")
    # A TFMultiWorkerJob's own rules are still named by their place in its failureRules.
    native = parse_job(convert(obj).manifest | {"metadata": obj["metadata"]})
    assert native.run_policy.failure_rules[0].describe(0) == "failureRules[0]"


@pytest.mark.parametrize(
    ("backoff_limit", "action", "noted"),
    [(None, "RestartNotCounted", False), (3, "RestartNotCounted", True), (0, "Restart", False)],
)
def test_exit_code_restarts_count_against_backoff_limit_only_at_zero_as_in_kubeflow(
    backoff_limit: int | None, action: str, noted: bool
) -> None:
    """Kubeflow's PastBackoffLimit skips ExitCode replicas; its exceedsBackoffLimit fails
    the job at the first new failure only when backoffLimit is 0."""
    run = {} if backoff_limit is None else {"backoffLimit": backoff_limit}
    converted = convert(tfjob(run=run, Worker=replica(2, "ExitCode"), PS=replica(1, "OnFailure")))
    rules = converted.manifest["spec"]["runPolicy"]["failureRules"]
    assert {r["action"] for r in rules if r["onRoles"] != ["ps"]} == {action, "Fail"}
    # OnFailure: a container restart counted, a disruption not (but for a limit of 0).
    ps = [r["action"] for r in rules if r["onRoles"] == ["ps"]]
    assert ps == (["Restart"] if backoff_limit == 0 else ["RestartNotCounted", "Restart"])
    fields = [n.field for n in converted.notes if "backoffLimit" in n.said and "restartPolicy" in n.field]
    assert (fields == ["spec.tfReplicaSpecs.Worker.restartPolicy"]) is noted


def test_success_policy_and_run_policy_map() -> None:
    run = {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 60,
        "ttlSecondsAfterFinished": 5,
        "cleanPodPolicy": "All",
    }
    job = tfjob(run=run, Worker=replica(2))
    job["spec"]["successPolicy"] = "AllWorkers"
    spec = convert(job).manifest["spec"]
    assert spec["completion"]["policy"] == "AllWorkersExitCode"
    assert {k: spec["runPolicy"][k] for k in run} == run
    unbounded = convert(tfjob(Worker=replica(2))).manifest["spec"]["runPolicy"]["backoffLimit"]
    assert unbounded == 2**31 - 1  # TFJob has no limit unless one is set


def test_a_queue_becomes_kueues_label_and_a_priority_class_every_pods() -> None:
    job = tfjob(
        run={"schedulingPolicy": {"queue": "team", "priorityClass": "high", "minAvailable": 2}},
        Worker=replica(2),
    )
    converted = convert(job)
    assert converted.manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team"}
    assert converted.manifest["spec"]["template"]["spec"]["priorityClassName"] == "high"
    assert {n.field for n in converted.notes} >= {
        "spec.runPolicy.schedulingPolicy.queue",
        "spec.runPolicy.schedulingPolicy.priorityClass",
    }


def test_the_shared_volume_comes_from_an_annotation() -> None:
    job = tfjob(Worker=replica(2))
    job["metadata"]["annotations"] = {"tfmw.dev/shared-claim": "tfmw-shared"}
    assert parse_tfjob(job).claim_name == "tfmw-shared"


def test_tfjob_port_becomes_the_jobs_port_and_leaves_the_container() -> None:
    ported = replica(2, ports=[{"name": "tfjob-port", "containerPort": 3333}])
    converted = convert(tfjob(Worker=ported)).manifest["spec"]
    assert converted["port"] == 3333
    assert "ports" not in converted["template"]["spec"]["containers"][0]


def test_a_sidecars_port_named_tfjob_port_stays_on_the_sidecar() -> None:
    ported = replica(2, ports=[{"name": "tfjob-port", "containerPort": 3333}])
    sidecar_port = {"name": "tfjob-port", "containerPort": 9000}
    ported["template"]["spec"]["containers"].append(
        {"name": "proxy", "image": "proxy:1", "ports": [sidecar_port]}
    )
    converted = convert(tfjob(Worker=ported)).manifest["spec"]
    containers = converted["template"]["spec"]["containers"]
    assert converted["port"] == 3333
    assert "ports" not in containers[0]
    assert containers[1]["ports"] == [sidecar_port]


@pytest.mark.parametrize("number", ["3333", 0, 70000, True, 2.5])
def test_a_tfjob_port_that_is_no_port_number_is_refused_naming_it(number: object) -> None:
    ported = replica(2, ports=[{"name": "tfjob-port", "containerPort": number}])
    with pytest.raises(ConversionError) as refused:
        convert(tfjob(Worker=ported))
    assert (
        refused.value.field
        == "spec.tfReplicaSpecs.Worker.template.spec.containers[tensorflow].ports[tfjob-port].containerPort"
    )
    assert "1 to 65535" in str(refused.value)


@pytest.mark.parametrize(
    ("job", "field"),
    [
        (tfjob(Foo=replica(1)), "spec.tfReplicaSpecs.Foo"),
        (tfjob(Chief=replica(1), Master=replica(1), Worker=replica(1)), "spec.tfReplicaSpecs."),
        (tfjob(Chief=replica(2), Worker=replica(1)), "spec.tfReplicaSpecs.Chief.replicas"),
        (tfjob(Chief=replica(1)), "spec.tfReplicaSpecs.Worker"),
        (tfjob(Worker=replica(1, "Sometimes")), "spec.tfReplicaSpecs.Worker.restartPolicy"),
        (
            tfjob(run={"schedulingPolicy": {"minAvailable": 1}}, Worker=replica(2)),
            "spec.runPolicy.schedulingPolicy.minAvailable",
        ),
        (
            tfjob(run={"schedulingPolicy": {"minResources": {"cpu": 1}}}, Worker=replica(2)),
            "spec.runPolicy.schedulingPolicy.minResources",
        ),
        ({"metadata": {"name": "x"}, "spec": {}}, "spec.tfReplicaSpecs"),
    ],
)
def test_what_has_no_faithful_meaning_is_refused_naming_the_field(job: Json, field: str) -> None:
    with pytest.raises(ConversionError) as refused:
        convert(job)
    assert refused.value.field.startswith(field) and field in str(refused.value)


def test_enable_dynamic_worker_and_success_policy_typos_are_refused() -> None:
    dynamic = tfjob(Worker=replica(2))
    dynamic["spec"]["enableDynamicWorker"] = True
    with pytest.raises(ConversionError, match=r"spec\.enableDynamicWorker"):
        convert(dynamic)
    typo = tfjob(Worker=replica(2))
    typo["spec"]["successPolicy"] = "AllWorker"
    with pytest.raises(ConversionError, match=r"spec\.successPolicy"):
        convert(typo)


def test_the_tf_config_of_a_converted_job_follows_tensorflows_rules() -> None:
    import json

    job = parse_tfjob(tfjob(Chief=replica(1), Worker=replica(1), Evaluator=replica(1)))
    config = json.loads(build_tf_config(job, Member(ReplicaType.EVALUATOR, 0)))
    assert set(config["cluster"]) == {"chief", "worker"}  # TFJob put the evaluator in; TF does not
    assert config["task"] == {"type": "evaluator", "index": 0}


# ---- status ----


def conditions(phase: Phase | None, old: list[Json] | None = None, **status: Any) -> list[Json]:
    return tfjob_conditions(
        JobStatus(phase=phase, launched_attempt=0, **status), "ns", "dist", old or [], STAMP
    )


def test_a_succeeded_job_ends_as_kubeflows_do() -> None:
    running = conditions(Phase.RUNNING)
    assert [(c["type"], c["status"], c["reason"]) for c in running] == [
        ("Created", "True", "TFJobCreated"),
        ("Running", "True", "TFJobRunning"),
    ]
    done = conditions(Phase.SUCCEEDED, running)
    assert [(c["type"], c["status"]) for c in done] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Succeeded", "True"),
    ]
    # The SDK's e2e test asks: Created and Succeeded true, Running, Restarting and Failed not.


def test_running_and_restarting_exclude_each_other_and_restarting_tells_the_cause() -> None:
    from tfmw_operator.api.status import Condition

    restarting = Condition(
        "Restarting", True, "WorkerFailed", "gang restart 1/3: worker 1 exited with code 137", STAMP
    )
    after = conditions(Phase.RESTARTING, conditions(Phase.RUNNING), conditions=(restarting,))
    assert [c["type"] for c in after] == ["Created", "Restarting"]
    assert after[-1]["message"].startswith("gang restart 1/3")
    again = conditions(Phase.RUNNING, after)
    assert [c["type"] for c in again] == ["Created", "Running"]


def test_nothing_changes_once_failed() -> None:
    failed = conditions(
        Phase.FAILED, conditions(Phase.RUNNING), reason="WorkerFailed", message="worker 1 exited 1"
    )
    assert failed[-1]["type"] == "Failed" and "worker 1 exited 1" in failed[-1]["message"]
    assert conditions(Phase.RUNNING, failed) == failed


def test_replica_statuses_are_keyed_as_the_tfjob_spells_them() -> None:
    job = tfjob(Chief=replica(1), Worker=replica(2))
    spec = parse_tfjob(job)
    status = JobStatus(
        phase=Phase.RUNNING,
        launched_attempt=0,
        start_time=T0,
        workers=WorkerCounts(running=2),
        replicas=(ReplicaCounts("chief", running=1), ReplicaCounts("worker", running=1, failed=1)),
    )
    writes = TFJOBS.status_writes(job, status, spec, at(20))
    assert writes.status is not None and writes.status["replicaStatuses"] == {
        "Chief": {"active": 1},
        "Worker": {"active": 1, "failed": 1},
    }
    assert writes.status["startTime"] == "2026-01-01T12:00:00Z"
    # tfmw's own status is kept first, in an annotation the engine reads back.
    assert writes.metadata is not None
    job["metadata"]["annotations"] = writes.metadata["metadata"]["annotations"]
    assert TFJOBS.recorded_status(job) == status
    assert TFJOBS.status_writes(job, status, spec, at(20)).metadata is None  # unchanged: no write


def test_a_forged_status_annotation_reads_as_nothing() -> None:
    job = tfjob(Worker=replica(1))
    for forged in ("not json", "[1, 2]", "x" * 70_000, '{"attempt": "three"}'):
        job["metadata"]["annotations"] = {"tfmw.dev/status": forged}
        assert TFJOBS.recorded_status(job).attempt == 0


def test_a_refused_tfjob_says_why_in_its_failed_condition() -> None:
    status = JobStatus(
        phase=Phase.FAILED, reason="InvalidSpec", message="spec.tfReplicaSpecs.Foo: tfmw runs ..."
    )
    status = status.with_condition(ConditionType.FAILED, True, "InvalidSpec", status.message or "", T0)
    writes = TFJOBS.status_writes(tfjob(Foo=replica(1)), status, None, at(1))
    assert writes.status is not None
    (failed,) = [c for c in writes.status["conditions"] if c["type"] == "Failed"]
    assert "spec.tfReplicaSpecs.Foo" in failed["message"]


# ---- one controller per job ----


@pytest.mark.parametrize(
    ("mode", "named", "kubeflows_pods", "running", "launched", "served"),
    [
        (SERVE_ALL, None, False, False, False, True),
        (SERVE_ALL, MANAGED_BY_KUBEFLOW, False, False, False, True),
        (SERVE_ALL, MANAGED_BY_TFMW, False, True, False, True),
        (SERVE_ALL, None, True, False, False, False),  # started under Kubeflow's controller
        (SERVE_ALL, None, True, False, True, False),  # ... whatever its status claims
        (SERVE_ALL, None, False, True, False, False),  # Kubeflow's controller runs: it would serve it too
        (SERVE_ALL, None, False, True, True, True),  # ... but a job tfmw launched stays tfmw's
        (SERVE_ALL, None, False, None, True, True),  # ... whether it runs or not
        (SERVE_ALL, MANAGED_BY_TFMW, False, None, False, True),
        (SERVE_ALL, "kueue.x-k8s.io/multikueue", False, False, True, False),
        (SERVE_MANAGED_BY, None, False, False, True, False),
        (SERVE_MANAGED_BY, MANAGED_BY_TFMW, False, False, False, True),
        ("off", MANAGED_BY_TFMW, False, False, True, False),
    ],
)
def test_exactly_one_controller_serves_a_tfjob(
    mode: str, named: str | None, kubeflows_pods: bool, running: bool | None, launched: bool, served: bool
) -> None:
    job = tfjob(Worker=replica(1))
    if named is not None:
        job["spec"]["runPolicy"] = {"managedBy": named}
    decision = serves(mode, copy.deepcopy(job), kubeflows_pods, running, launched)
    assert decision.served is served
    assert served or decision.why  # never silent
    assert decision.settled


def test_a_tfjob_waits_while_whether_kubeflow_runs_is_not_known() -> None:
    """Kubeflow's namespace not listed yet (the operator starting): an unclaimed job waits,
    unsettled, and nothing is said on it yet."""
    decision = serves(SERVE_ALL, tfjob(Worker=replica(1)), False, None)
    assert not decision.served and not decision.settled


def test_a_tfjob_s_pods_keep_kubeflow_s_shape_no_supervisor() -> None:
    """Given the operator's image and a command, a TFMultiWorkerJob restarts in place; the
    TFJob that means the same is parsed without the supervisor: its pods are as Kubeflow's."""
    job = tfjob(Worker=replica(2, command=["python3", "-m", "tfmw_trainer"]))
    job["metadata"]["annotations"] = {"tfmw.dev/shared-claim": "tfmw-shared"}
    spec = TFJOBS.parse(job, "", "tfmw-operator:dev")
    assert not isinstance(spec, SpecError) and spec.supervisor_image == ""
    assert not supervision_of(spec).in_place
    native = TFMW_JOBS.parse(convert(job).manifest | {"metadata": job["metadata"]}, "", "tfmw-operator:dev")
    assert not isinstance(native, SpecError) and supervision_of(native).in_place


HAND_OVER = "set spec.runPolicy.managedBy: tfmw.dev/tfjob-controller to hand a new TFJob to tfmw"


@pytest.mark.parametrize(
    ("mode", "named", "kubeflows_pods", "running", "why"),
    [
        ("off", MANAGED_BY_TFMW, False, False, "tfmw serves no TFJob (--tfjobs=off)"),
        (
            SERVE_ALL,
            "kueue.x-k8s.io/multikueue",
            False,
            False,
            "spec.runPolicy.managedBy names kueue.x-k8s.io/multikueue, not tfmw",
        ),
        (
            SERVE_ALL,
            "x" * 100,
            False,
            False,
            f"spec.runPolicy.managedBy names {'x' * 80}, not tfmw",  # a name cut to 80 characters
        ),
        (
            SERVE_MANAGED_BY,
            None,
            False,
            False,
            f"tfmw serves only TFJobs handed to it (--tfjobs=managedBy): {HAND_OVER}",
        ),
        (
            SERVE_ALL,
            None,
            True,
            True,
            "its pods were made by Kubeflow's training-operator: tfmw does not take over a job started "
            "there; delete and create it again to run it under tfmw",
        ),
        (
            SERVE_ALL,
            MANAGED_BY_KUBEFLOW,
            False,
            True,
            "Kubeflow's training-operator is running in this cluster and would serve it too: stop it, or "
            + HAND_OVER,
        ),
    ],
)
def test_why_a_tfjob_is_not_served_word_for_word(
    mode: str, named: str | None, kubeflows_pods: bool, running: bool, why: str
) -> None:
    job = tfjob(Worker=replica(1))
    if named is not None:
        job["spec"]["runPolicy"] = {"managedBy": named}
    assert serves(mode, job, kubeflows_pods, running) == Serving(False, why)


@pytest.mark.parametrize("named", ["", 7, None])
def test_a_managed_by_that_names_nothing_is_as_if_unset(named: Any) -> None:
    job = tfjob(Worker=replica(1))
    job["spec"]["runPolicy"] = {"managedBy": named}
    assert managed_by(job) is None
    assert serves(SERVE_ALL, job, False, False) == Serving(True)


def test_a_replica_type_the_job_does_not_spell_is_labelled_as_tfmw_names_it() -> None:
    native = parse_job(convert(tfjob(Worker=replica(2))).manifest)  # a TFMultiWorkerJob: no spellings
    labels = kubeflow_pod_labels(native, "worker", 1)
    assert labels["training.kubeflow.org/replica-type"] == "worker"
    assert labels["training.kubeflow.org/replica-index"] == "1"
    assert "training.kubeflow.org/job-role" not in labels


def test_a_pod_is_kubeflows_by_its_operator_name_label_alone() -> None:
    from tfmw_operator.api.tfjob import KF_OPERATOR_NAME, KUBEFLOW_OPERATOR_NAME, is_kubeflows_pod

    assert is_kubeflows_pod({KF_OPERATOR_NAME: KUBEFLOW_OPERATOR_NAME})
    assert not is_kubeflows_pod({KF_OPERATOR_NAME: "tfmw"})
    assert not is_kubeflows_pod({"training.kubeflow.org/job-name": "dist"})
    assert not is_kubeflows_pod(None) and not is_kubeflows_pod([KF_OPERATOR_NAME])


def test_a_tfjob_template_with_an_init_container_named_as_the_folder_check_is_refused() -> None:
    """Kubeflow's TFJob CRD has no rule against it, as tfmw's CRD has: the conversion refuses it."""
    claimed = replica(2)
    claimed["template"]["spec"]["initContainers"] = [{"name": "tfmw-folder-check", "image": "mine:1"}]
    job = tfjob(Worker=claimed)
    job["metadata"]["annotations"] = {"tfmw.dev/shared-claim": "tfmw-shared"}
    with pytest.raises(SpecError) as refused:
        parse_tfjob(job, folder_check_image="check:1")
    assert str(refused.value).startswith(
        "spec.tfReplicaSpecs.Worker.template.spec.initContainers[0].name: tfmw-folder-check is the name"
    )
