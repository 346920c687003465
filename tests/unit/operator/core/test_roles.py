"""Jobs of several roles: a chief of its own, parameter servers, a side-car evaluator; TF_CONFIG
per TensorFlow's rules, what a failure restarts, and success by exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tfmw_operator.api.spec import Member, ReplicaType, parse_job
from tfmw_operator.api.status import ConditionType
from tfmw_operator.core.builders import build_pod, build_service, build_tf_config
from tfmw_operator.core.decision import CreatePods, DeletePods, EnsureJobDirectory, RemoveMarker
from tfmw_operator.core.observed import MarkerState
from wrappers import Json, at, container_env, decide, job

CHIEF, WORKER, PS, EVALUATOR = ReplicaType.CHIEF, ReplicaType.WORKER, ReplicaType.PS, ReplicaType.EVALUATOR


def config(obj: Json, member: Member) -> Json:
    parsed: Json = json.loads(build_tf_config(parse_job(obj), member))
    return parsed


def test_a_job_of_workers_alone_is_as_before() -> None:
    obj = job("mnist").workers(2).obj()
    assert config(obj, Member.worker(1)) == {
        "cluster": {
            "worker": ["mnist-worker-0.mnist.default.svc:2222", "mnist-worker-1.mnist.default.svc:2222"]
        },
        "task": {"type": "worker", "index": 1},
    }


def test_a_chief_of_its_own_is_in_the_cluster_and_its_task_is_chief() -> None:
    obj = job("mw").workers(2).chief().obj()
    cluster = {
        "chief": ["mw-chief-0.mw.default.svc:2222"],
        "worker": ["mw-worker-0.mw.default.svc:2222", "mw-worker-1.mw.default.svc:2222"],
    }
    assert config(obj, Member(CHIEF, 0)) == {"cluster": cluster, "task": {"type": "chief", "index": 0}}
    assert config(obj, Member(WORKER, 0)) == {"cluster": cluster, "task": {"type": "worker", "index": 0}}


def test_parameter_servers_make_a_cluster_of_chief_worker_and_ps() -> None:
    obj = job("ps").workers(2).chief().parameter_servers(2).obj()
    cluster = config(obj, Member(PS, 1))["cluster"]
    assert list(cluster) == ["chief", "worker", "ps"]
    assert cluster["ps"] == ["ps-ps-0.ps.default.svc:2222", "ps-ps-1.ps.default.svc:2222"]
    assert config(obj, Member(PS, 1))["task"] == {"type": "ps", "index": 1}


def test_the_evaluator_is_never_in_the_cluster() -> None:
    obj = job("ev").workers(2).chief().evaluator().obj()
    evaluator = config(obj, Member(EVALUATOR, 0))
    assert evaluator["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in evaluator["cluster"]
    assert all("evaluator" not in config(obj, m)["cluster"] for m in parse_job(obj).members)


def test_pods_say_their_role_in_names_labels_and_environment() -> None:
    spec = parse_job(job("ps").workers(2).chief().parameter_servers().evaluator().obj())
    names = {m: build_pod(spec, m, 3) for m in spec.members}
    assert [pod["metadata"]["name"] for pod in names.values()] == [
        "ps-chief-0",
        "ps-worker-0",
        "ps-worker-1",
        "ps-ps-0",
        "ps-evaluator-0",
    ]
    roles = {p["metadata"]["name"]: p["metadata"]["labels"]["tfmw.dev/role"] for p in names.values()}
    assert roles == {
        "ps-chief-0": "chief",
        "ps-worker-0": "worker",
        "ps-worker-1": "worker",
        "ps-ps-0": "ps",
        "ps-evaluator-0": "evaluator",
    }
    chief_env = container_env(names[Member(CHIEF, 0)]["spec"]["containers"][0])
    assert chief_env["TFMW_ROLE"] == "chief" and chief_env["TFMW_REPLICA_TYPE"] == "chief"
    assert "TFMW_WORKER_INDEX" not in chief_env  # only the worker set's pods have one
    worker_env = container_env(names[Member(WORKER, 1)]["spec"]["containers"][0])
    assert (worker_env["TFMW_ROLE"], worker_env["TFMW_WORKER_INDEX"], worker_env["TFMW_NUM_WORKERS"]) == (
        "worker",
        "1",
        "2",
    )
    assert worker_env["TFMW_STEP_TIMES_PATH"] == "/shared/steps/worker-1.json"
    assert worker_env["TFMW_STACKS_PATH"] == "/shared/logs/attempt-3/worker-1.stacks"
    evaluator_env = container_env(names[Member(EVALUATOR, 0)]["spec"]["containers"][0])
    assert evaluator_env["TFMW_EVALUATION_PATH"] == "/shared/evaluation.json"


def test_every_role_is_found_through_the_one_headless_service_by_a_name_that_says_its_role() -> None:
    spec = parse_job(job("ps").workers(2).chief().parameter_servers(2).evaluator().obj())
    selector = build_service(spec)["spec"]["selector"]
    cluster = json.loads(build_tf_config(spec, Member(CHIEF, 0)))["cluster"]
    addresses = {address.split(".")[0] for hosts in cluster.values() for address in hosts}
    for member in spec.members:
        made = build_pod(spec, member, 0)
        assert selector.items() <= made["metadata"]["labels"].items(), member
        hostname = made["spec"]["hostname"]
        assert (hostname, made["spec"]["subdomain"]) == (made["metadata"]["name"], "ps")
        assert hostname.startswith(f"ps-{member.type}-")
        assert (hostname in addresses) is (member.type is not EVALUATOR)  # DNS, and TF_CONFIG's name


def test_worker_zero_is_the_chief_only_without_a_chief_of_its_own() -> None:
    alone = parse_job(job().obj())
    assert build_pod(alone, Member.worker(0), 0)["metadata"]["labels"]["tfmw.dev/role"] == "chief"
    with_chief = parse_job(job().chief().obj())
    assert build_pod(with_chief, Member.worker(0), 0)["metadata"]["labels"]["tfmw.dev/role"] == "worker"


def test_every_set_has_its_own_template() -> None:
    obj = job().role("parameterServers", image="ps-image:1", replicas=1).obj()
    spec = parse_job(obj)
    assert build_pod(spec, Member(PS, 0), 0)["spec"]["containers"][0]["image"] == "ps-image:1"
    assert build_pod(spec, Member.worker(0), 0)["spec"]["containers"][0]["image"] == "tfmw-trainer:dev"


def test_a_launch_creates_every_role_and_counts_them_all() -> None:
    obj = job("ps").workers(2).chief().parameter_servers().evaluator().obj()
    decision = decide(obj, service=None)
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert [m.stem for m in create.members] == ["chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0"]
    assert decision.status.ready_workers == "0/5"
    assert {r.type: r.pending for r in decision.status.replicas} == {
        "chief": 1,
        "worker": 2,
        "ps": 1,
        "evaluator": 1,
    }


def running_roles(obj: Json, attempt: int = 0) -> list[Json]:
    from wrappers import pod

    spec = parse_job(obj)
    return [pod(obj, m.index, attempt, str(m.type)).running().obj() for m in spec.members]


def test_a_parameter_server_workers_death_replaces_it_alone() -> None:
    from wrappers import pod

    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()
    pods = running_roles(obj)
    pods[1] = pod(obj, 0, 0, "worker").exited(137, reason="OOMKilled").obj()
    decision = decide(obj, pods)
    assert decision.status.phase == "Running"
    assert decision.status.attempt == 0 and decision.status.restarts == 1
    assert decision.status.replacing == ("worker-0",)
    (delete,) = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert delete.names == ("ps-worker-0",) and delete.grace_seconds == 0
    record = decision.status.history[0]
    assert (record.outcome, record.cause, record.worker, record.attempt) == ("Replaced", "OOMKilled", 0, 0)
    assert record.logs == "default/ps/logs/attempt-0/"

    # Once the old pod is gone, the new one is created in the same attempt.
    obj["status"] = decision.status.to_json()
    gone = [p for p in pods if p["metadata"]["name"] != "ps-worker-0"]
    after = decide(obj, gone)
    (create,) = [a for a in after.actions if isinstance(a, CreatePods)]
    assert create.attempt == 0 and [m.stem for m in create.members] == ["worker-0"]
    assert after.status.replacing == ()
    assert not any(isinstance(a, DeletePods) for a in after.actions)


def test_a_parameter_servers_death_restarts_the_whole_job() -> None:
    from wrappers import pod

    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()
    pods = running_roles(obj)
    pods[3] = pod(obj, 0, 0, "ps").exited(137).obj()
    decision = decide(obj, pods)
    assert decision.status.attempt == 1 and decision.status.phase == "Restarting"
    assert decision.status.history[0].replica_type == "ps"


def test_the_chief_of_a_parameter_server_job_restarts_the_whole_job() -> None:
    """The coordinator holds the training loop: without it the workers and parameter servers
    wait for nothing, so the whole job restarts from its checkpoint."""
    from wrappers import pod

    obj = job("ps").workers(2).chief().parameter_servers().launched(phase="Running").obj()
    pods = running_roles(obj)
    pods[0] = pod(obj, 0, 0, "chief").exited(137).obj()
    decision = decide(obj, pods)
    assert (decision.status.attempt, decision.status.phase) == (1, "Restarting")
    assert decision.status.replacing == ()
    record = decision.status.history[0]
    assert (record.outcome, record.replica_type, record.worker) == ("Restarted", "chief", 0)
    (delete,) = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert set(delete.names) == {"ps-chief-0", "ps-worker-0", "ps-worker-1", "ps-ps-0"}


def test_a_collective_gang_restarts_whole_on_a_workers_death() -> None:
    from wrappers import pod

    obj = job("mw").workers(2).chief().launched(phase="Running").obj()
    pods = running_roles(obj)
    pods[2] = pod(obj, 1, 0, "worker").exited(137).obj()
    decision = decide(obj, pods)
    assert decision.status.attempt == 1
    (delete,) = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert set(delete.names) == {"mw-chief-0", "mw-worker-0", "mw-worker-1"}


def test_the_evaluator_restarts_alone_and_never_restarts_training() -> None:
    from wrappers import pod

    wrapper = job("ev").workers(2).chief().evaluator().rules({"action": "Restart", "onRoles": ["evaluator"]})
    obj = wrapper.launched(phase="Running").obj()
    pods = running_roles(obj)
    pods[3] = pod(obj, 0, 0, "evaluator").exited(1, reason="Error").obj()
    decision = decide(obj, pods)
    assert decision.status.attempt == 0
    assert decision.status.replacing == ("evaluator-0",)
    (delete,) = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert delete.names == ("ev-evaluator-0",)
    assert {r.type: r.restarts for r in decision.status.replicas}["evaluator"] == 1
    record = decision.status.history[0]  # one entry, with its role
    assert (record.outcome, record.replica_type, record.attempt) == ("Replaced", "evaluator", 0)
    assert decision.status.phase == "Running" and decision.status.restarts == 1


def test_training_runs_without_its_evaluator_started() -> None:
    from wrappers import pod

    obj = job("ev").workers(1).evaluator().launched().obj()
    pods = [pod(obj, 0).running().obj(), pod(obj, 0, 0, "evaluator").unschedulable().obj()]
    assert decide(obj, pods).status.phase == "Running"


@pytest.mark.parametrize("chief", [True, False])
def test_chief_exit_code_ends_the_job_on_the_chiefs_exit(chief: bool) -> None:
    from wrappers import pod

    wrapper = job("ce").workers(2).completion(policy="ChiefExitCode")
    if chief:
        wrapper = wrapper.chief()
    obj = wrapper.launched(phase="Running").obj()
    pods = running_roles(obj)
    chief_member = parse_job(obj).chief
    pods = [
        pod(obj, chief_member.index, 0, str(chief_member.type)).exited(0).obj()
        if p["metadata"]["name"].endswith(chief_member.stem)
        else p
        for p in pods
    ]
    decision = decide(obj, pods, marker=MarkerState())
    assert decision.status.phase == "Succeeded"
    assert decision.status.condition("Succeeded").reason == "ChiefSucceeded"  # type: ignore[arg-type,union-attr]
    assert decision.status.marker is None


def test_all_workers_exit_code_waits_for_every_worker() -> None:
    from wrappers import pod

    wrapper = job("aw").workers(2).chief().parameter_servers().completion(policy="AllWorkersExitCode")
    obj = wrapper.launched(phase="Running").obj()
    pods = running_roles(obj)
    done = [pod(obj, 0, 0, "chief").exited(0).obj(), pod(obj, 0).exited(0).obj()]
    assert decide(obj, [*done, pods[2], pods[3]]).status.phase == "Running"
    finished = decide(obj, [*done, pod(obj, 1).exited(0).obj(), pods[3]])
    assert finished.status.phase == "Succeeded"
    # The parameter server never exits: cleanPodPolicy Running deletes it once the workers may.
    assert finished.status.condition("Succeeded").reason == "AllWorkersSucceeded"  # type: ignore[arg-type,union-attr]


def test_a_job_without_shared_volume_touches_no_storage() -> None:
    obj = job("nv").without_shared_volume().obj()
    decision = decide(obj, service=None)
    assert not any(isinstance(a, EnsureJobDirectory | RemoveMarker) for a in decision.actions)
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    built = create.build(Member.worker(0))
    assert "volumes" not in built["spec"] or all(v["name"] != "tfmw-shared" for v in built["spec"]["volumes"])
    env = container_env(built["spec"]["containers"][0])
    assert "TFMW_SHARED_DIR" not in env and "TFMW_MARKER_PATH" not in env
    assert "initContainers" not in built["spec"]
    assert decision.watch_marker is None and decision.watch_progress is None
    created = decision.status.condition(ConditionType.CREATED)
    assert created is not None and created.message.endswith(
        "no shared volume: no progress, evaluation or checkpoint is recorded, "
        "and pods' logs are not kept once the pods are deleted"
    )
    with_volume = decide(job("sv").completion(policy="ChiefExitCode").obj(), service=None)
    assert "no shared volume" not in (with_volume.status.condition(ConditionType.CREATED) or created).message


def test_a_job_without_shared_volume_keeps_no_logs_and_has_no_log_path() -> None:
    from wrappers import pod

    obj = job("nv").without_shared_volume().launched(phase="Running").obj()
    decision = decide(obj, [pod(obj, 0).running().obj(), pod(obj, 1).exited(137).obj()])
    assert decision.status.history[0].logs is None
    (delete,) = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert delete.keep_logs is False


def test_a_marker_does_not_end_a_job_that_ends_by_exit_code() -> None:
    obj = job("ce").completion(policy="ChiefExitCode").launched(phase="Running").obj()
    decision = decide(obj, running_roles(obj), marker=MarkerState(exists=True, job_uid="uid-ce"))
    assert decision.status.phase == "Running"


def test_the_chiefs_marker_ends_a_job_with_a_chief() -> None:
    obj = job("mw").chief().launched(phase="Running").obj()
    decision = decide(obj, running_roles(obj), marker=MarkerState(exists=True, job_uid="uid-mw"), now=at(30))
    assert decision.status.phase == "Succeeded"
    assert "the chief wrote" in decision.status.condition("Succeeded").message  # type: ignore[arg-type,union-attr]


def evicted_while_running(obj: Json, index: int, exit_code: int | None = None) -> Json:
    """A worker evicted through the Eviction API (deleted with its grace period, marked
    DisruptionTarget): still running, or its program exited on the SIGTERM with `exit_code`."""
    from wrappers import pod

    wrapper = (
        pod(obj, index).running() if exit_code is None else pod(obj, index).exited(exit_code, at_seconds=18)
    )
    evicted = wrapper.deleting(at_seconds=45).obj()
    evicted["metadata"]["deletionGracePeriodSeconds"] = 30
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    evicted["status"].setdefault("conditions", []).append(disruption)
    return evicted


PREEMPTED_RULE = {"action": "RestartNotCounted", "onExitCodes": [42]}


def test_an_evicted_pod_is_judged_by_the_exit_code_a_rule_of_the_jobs_matches_on() -> None:
    """PreemptionCheckpointHandler saves and exits 42 on the eviction's SIGTERM: the rule on 42
    must see that code, so the eviction is not ruled on before the program has exited."""
    from wrappers import pod

    obj = job("pre").workers(2).rules(PREEMPTED_RULE).launched(phase="Running").obj()
    saving = decide(obj, [pod(obj, 0).running().obj(), evicted_while_running(obj, 1)])
    assert (saving.status.phase, saving.status.attempt) == ("Running", 0)
    assert not any(isinstance(a, DeletePods) for a in saving.actions)

    exited = decide(obj, [pod(obj, 0).running().obj(), evicted_while_running(obj, 1, exit_code=42)])
    assert (exited.status.phase, exited.status.attempt) == ("Restarting", 1)
    assert (exited.status.restarts, exited.status.restarts_not_counted) == (0, 1)
    record = exited.status.history[0]
    assert (record.worker, record.exit_code, record.cause) == (1, 42, "Evicted")
    assert "failureRules[0]: RestartNotCounted" in (exited.status.message or "")


def test_an_evicted_pod_gone_before_its_exit_was_seen_leaves_its_peers_exit_to_decide() -> None:
    from wrappers import pod

    obj = job("pre").workers(2).rules(PREEMPTED_RULE).launched(phase="Running").obj()
    decision = decide(obj, [pod(obj, 0).exited(42, at_seconds=19).obj()])
    assert (decision.status.restarts, decision.status.restarts_not_counted) == (0, 1)
    assert decision.status.history[0].worker == 0


def test_without_an_exit_code_rule_an_eviction_restarts_at_once_counted() -> None:
    """The presets rule an eviction a disruption whatever its code: no reason to wait."""
    from wrappers import pod

    for rules in [(), ({"action": "Fail", "onCauses": ["OOMKilled"]},)]:
        obj = job("ev").workers(2).rules(*rules).launched(phase="Running").obj()
        decision = decide(obj, [pod(obj, 0).running().obj(), evicted_while_running(obj, 1)])
        assert (decision.status.phase, decision.status.restarts) == ("Restarting", 1)
        assert decision.status.history[0].cause == "Evicted"


def test_a_pod_on_a_lost_node_is_not_waited_for_whatever_the_rules() -> None:
    from wrappers import pod

    obj = job("pre").workers(2).rules(PREEMPTED_RULE).launched(phase="Running").obj()
    lost = pod(obj, 1).node_not_ready(at_seconds=5).deleting(at_seconds=15).obj()
    decision = decide(obj, [pod(obj, 0).running().obj(), lost], now=at(20))
    assert decision.status.phase == "Restarting"


@pytest.mark.parametrize(
    ("wrapper", "said"),
    [
        (job().workers(1).chief(), "created a chief and 1 worker (pods) for attempt 0"),
        (
            job().workers(2).chief().parameter_servers(1).evaluator(),
            "created a chief, 2 workers, 1 parameter server and an evaluator (pods) for attempt 0",
        ),
        (
            job().workers(3).parameter_servers(2),
            "created 3 workers and 2 parameter servers (pods) for attempt 0",
        ),
    ],
)
def test_the_created_condition_counts_each_role_in_words(wrapper: Any, said: str) -> None:
    decision = decide(wrapper.obj(), service=None)
    assert decision.status is not None
    created = decision.status.condition(ConditionType.CREATED)
    assert created is not None and created.message == said
