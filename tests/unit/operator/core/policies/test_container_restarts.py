"""A TFJob gang whose replicas restart OnFailure: the kubelet restarts a failed container in its
pod, as under Kubeflow's controller, and the operator counts each restart once, records it
and fails the job past backoffLimit."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.names import FOLDER_CHECK_CONTAINER
from tfmw_operator.api.spec import Member, ReplicaType
from tfmw_operator.api.status import ContainerRestarts, JobStatus, Phase
from tfmw_operator.api.tfjob import convert, parse_tfjob
from tfmw_operator.api.times import format_time
from tfmw_operator.contract import FOLDER_CHECK_MISMATCH_EXIT_CODE
from tfmw_operator.core.builders import build_pod, build_service
from tfmw_operator.core.decision import Decision, DeletePods
from tfmw_operator.core.observed import MarkerState
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.reconcile import reconcile
from tfmw_operator.core.supervision import KUBELET_RESTARTS, supervision_of
from wrappers import T0, at, observe

Json = dict[str, Any]
CHIEF, WORKER, EVALUATOR = ReplicaType.CHIEF, ReplicaType.WORKER, ReplicaType.EVALUATOR


def replica(replicas: int, policy: str, **more: Any) -> Json:
    container = {"name": "tensorflow", "image": "img:1", **more}
    return {"replicas": replicas, "restartPolicy": policy, "template": {"spec": {"containers": [container]}}}


def tfjob(backoff: int | None = 3, annotations: Json | None = None, **replicas: Json) -> Json:
    run: Json = {} if backoff is None else {"backoffLimit": backoff}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "dist", "namespace": "ns", "uid": "uid-dist", "annotations": annotations or {}},
        "spec": {"tfReplicaSpecs": replicas, "runPolicy": run},
    }


def on_failure(backoff: int | None = 3) -> Json:
    return tfjob(backoff, Worker=replica(2, "OnFailure"))


def terminated(code: int, seconds: float, reason: str = "Error") -> Json:
    return {"exitCode": code, "reason": reason, "finishedAt": format_time(at(seconds))}


def main_status(restarts: int = 0, state: Json | None = None, last: Json | None = None) -> Json:
    status: Json = {"name": "tensorflow", "restartCount": restarts, "state": state or {"running": {}}}
    if last is not None:
        status["lastState"] = {"terminated": last}
    return status


def kf_pod(obj: Json, index: int, container: Json, phase: str = "Running", attempt: int = 0) -> Json:
    raw = build_pod(parse_tfjob(obj), Member(WORKER, index), attempt)
    raw["metadata"].update(uid=f"pod-{index}-{attempt}", creationTimestamp=format_time(T0))
    raw["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [container],
    }
    return raw


def observed(raw: Json) -> ObservedPod:
    found = observe_pod(raw)
    assert found is not None
    return found


def running(**fields: Any) -> JobStatus:
    return JobStatus(phase=Phase.RUNNING, attempt=0, launched_attempt=0, start_time=T0, **fields)


def decide(obj: Json, pods: list[Json], status: JobStatus) -> Decision:
    spec = parse_tfjob(obj)
    seen = observe(obj, pods, MarkerState(), at(20), spec=spec, status=status, service=build_service(spec))
    return reconcile(seen)


# ---- which TFJobs, and their pods


@pytest.mark.parametrize(
    ("replicas", "restarts"),
    [
        ({"Worker": replica(2, "OnFailure")}, True),
        ({"Worker": replica(2, "Always")}, True),
        ({"Chief": replica(1, "OnFailure"), "Worker": replica(2, "OnFailure")}, True),
        ({"Worker": replica(1, "OnFailure")}, True),  # a lone worker, as Kubeflow restarts it
        ({"Worker": replica(2, "OnFailure"), "Evaluator": replica(1, "Never")}, True),
        ({"Chief": replica(1, "Never"), "Worker": replica(2, "OnFailure")}, False),  # mixed: tfmw restarts
        ({"Worker": replica(2, "ExitCode")}, False),
        ({"Worker": replica(2, "Never")}, False),
        (
            {
                "Chief": replica(1, "OnFailure"),
                "Worker": replica(2, "OnFailure"),
                "PS": replica(1, "OnFailure"),
            },
            False,
        ),
    ],
)
def test_only_a_gang_that_restarts_on_any_failure_keeps_the_kubelets_restart(
    replicas: Json, restarts: bool
) -> None:
    job = parse_tfjob(tfjob(**replicas))
    assert job.restart_containers is restarts
    said = supervision_of(job)
    assert (said.by_kubelet, said.keeps_pods, said.in_place) == (restarts, restarts, False)


def test_the_kubelet_restart_is_said_with_the_reason_it_is_not_supervised() -> None:
    said = supervision_of(parse_tfjob(on_failure()))
    assert said.reason == KUBELET_RESTARTS
    assert "counts against backoffLimit" in said.message and "no spec.sharedVolume" in said.message


def test_tfmw_convert_says_the_converted_job_restarts_its_gang_instead() -> None:
    notes = {n.field: n.said for n in convert(on_failure()).notes}
    assert "kubelet's restart" in notes["spec.tfReplicaSpecs.Worker.restartPolicy"]
    exit_code = {n.field: n.said for n in convert(tfjob(Worker=replica(2, "ExitCode"))).notes}
    assert "kubelet's restart" not in exit_code.get("spec.tfReplicaSpecs.Worker.restartPolicy", "")


def test_the_gangs_pods_restart_on_failure_and_the_evaluator_does_not() -> None:
    job = parse_tfjob(
        tfjob(
            Chief=replica(1, "OnFailure"), Worker=replica(2, "OnFailure"), Evaluator=replica(1, "OnFailure")
        )
    )
    assert build_pod(job, Member(CHIEF, 0), 0)["spec"]["restartPolicy"] == "OnFailure"
    assert build_pod(job, Member(WORKER, 1), 0)["spec"]["restartPolicy"] == "OnFailure"
    assert build_pod(job, Member(EVALUATOR, 0), 0)["spec"]["restartPolicy"] == "Never"
    never = parse_tfjob(tfjob(Worker=replica(2, "ExitCode")))
    assert build_pod(never, Member(WORKER, 0), 0)["spec"]["restartPolicy"] == "Never"


# ---- a pod as the kubelet restarts its container


@pytest.mark.parametrize(
    ("container", "restarts", "last_code"),
    [
        (main_status(), 0, None),
        # Ended, not yet restarted: one more than the kubelet's count.
        (main_status(0, {"terminated": terminated(137, 5)}), 1, 137),
        (main_status(1, {"waiting": {"reason": "CrashLoopBackOff"}}, terminated(1, 8)), 2, 1),
        (main_status(2, {"running": {}}, terminated(1, 8)), 2, 1),
        (main_status(1, {"waiting": {"reason": "ContainerCreating"}}, terminated(1, 8)), 1, 1),
    ],
)
def test_a_container_the_kubelet_restarts_leaves_the_pod_running_and_is_counted(
    container: Json, restarts: int, last_code: int | None
) -> None:
    pod = observed(kf_pod(on_failure(), 1, container))
    assert (pod.phase, pod.exit_code, pod.kubelet_restarts) == ("Running", None, True)
    assert pod.container_restarts == restarts
    assert (pod.last_end.exit_code if pod.last_end else None) == last_code


def test_an_exit_0_ends_the_pod_and_a_pod_the_operator_restarts_fails_on_any_exit() -> None:
    done = observed(kf_pod(on_failure(), 0, main_status(0, {"terminated": terminated(0, 9, "Completed")})))
    assert (done.phase, done.exit_code, done.container_restarts) == ("Succeeded", 0, 0)
    raw = kf_pod(tfjob(Worker=replica(2, "ExitCode")), 1, main_status(0, {"terminated": terminated(1, 9)}))
    failed = observed(raw)
    assert (failed.phase, failed.exit_code, failed.kubelet_restarts, failed.container_restarts) == (
        "Failed",
        1,
        False,
        0,
    )


def test_a_hostile_restart_count_counts_as_none() -> None:
    for count in (-5, "7", None, 1.5):
        container = main_status()
        container["restartCount"] = count
        assert observed(kf_pod(on_failure(), 1, container)).container_restarts == 0


# ---- the operator's account


def test_a_restart_by_the_kubelet_is_recorded_warned_and_counted_once() -> None:
    obj = on_failure()
    pods = [
        kf_pod(obj, 0, main_status()),
        kf_pod(obj, 1, main_status(1, {"running": {}}, terminated(137, 12))),
    ]
    decision = decide(obj, pods, running())
    status = decision.status
    assert (status.restarts, status.phase) == (1, Phase.RUNNING)
    assert status.container_restarts == (ContainerRestarts(pod="dist-worker-1", uid="pod-1-0", restarts=1),)
    record = status.history[0]
    assert (record.outcome, record.attempt, record.worker, record.exit_code) == (
        "ContainerRestarted",
        0,
        1,
        137,
    )
    warned = [e for e in decision.events if e.reason == "ContainerRestarted"]
    assert len(warned) == 1 and "restart 1/3" in warned[0].message and "dist-worker-1" in warned[0].message
    assert not [a for a in decision.actions if isinstance(a, DeletePods)]  # the pods stay
    # The same pods again (level, not edge): nothing more is counted.
    again = decide(obj, pods, status)
    assert (again.status.restarts, again.status.history) == (1, status.history)
    assert not [e for e in again.events if e.reason == "ContainerRestarted"]


def test_the_worker_and_the_chief_that_lost_it_are_two_restarts_oldest_first() -> None:
    obj = on_failure()
    pods = [
        kf_pod(obj, 0, main_status(0, {"terminated": terminated(170, 13)})),
        kf_pod(obj, 1, main_status(1, {"running": {}}, terminated(137, 12))),
    ]
    status = decide(obj, pods, running()).status
    assert status.restarts == 2
    assert [(r.worker, r.exit_code, r.cause) for r in status.history] == [
        (0, 170, "PeerLost"),
        (1, 137, "Error"),
    ]


def test_a_pod_made_again_starts_counting_afresh() -> None:
    obj = on_failure()
    old = ContainerRestarts(pod="dist-worker-1", uid="an-older-pod", restarts=4)
    pods = [kf_pod(obj, 0, main_status()), kf_pod(obj, 1, main_status(1, {"running": {}}, terminated(1, 12)))]
    status = decide(obj, pods, running(restarts=2, container_restarts=(old,))).status
    assert status.restarts == 3
    assert status.container_restarts == (ContainerRestarts(pod="dist-worker-1", uid="pod-1-0", restarts=1),)


def test_past_backoff_limit_the_job_fails_and_its_pods_go() -> None:
    obj = on_failure(backoff=1)
    counted = (ContainerRestarts(pod="dist-worker-1", uid="pod-1-0", restarts=1),)
    pods = [kf_pod(obj, 0, main_status()), kf_pod(obj, 1, main_status(1, {"terminated": terminated(1, 15)}))]
    decision = decide(obj, pods, running(restarts=1, container_restarts=counted))
    status = decision.status
    assert (status.phase, status.reason) == (Phase.FAILED, "BackoffLimitExceeded")
    assert "the kubelet restarted it in its pod" in (status.message or "")
    deleted = {n for a in decision.actions if isinstance(a, DeletePods) for n in a.names}
    assert deleted == {"dist-worker-0", "dist-worker-1"}  # else the kubelet restarts them for ever


def test_without_a_backoff_limit_the_kubelet_restarts_on() -> None:
    obj = on_failure(backoff=None)
    pods = [
        kf_pod(obj, 0, main_status()),
        kf_pod(obj, 1, main_status(40, {"running": {}}, terminated(1, 15))),
    ]
    status = decide(obj, pods, running()).status
    assert (status.phase, status.restarts) == (Phase.RUNNING, 40)


# ---- what the kubelet's restarts must not count, and what they must end


def test_an_evicted_pod_is_one_gang_restart_not_a_container_restart_too() -> None:
    obj = on_failure()
    evicted = kf_pod(obj, 1, main_status(0, {"terminated": terminated(137, 12)}), phase="Failed")
    evicted["status"].update(reason="Evicted", message="the node was low on memory")
    decision = decide(obj, [kf_pod(obj, 0, main_status()), evicted], running())
    status = decision.status
    # Not counted against backoffLimit: Kubeflow replaces the pod and counts nothing (api/tfjob.py _rules).
    assert (status.restarts, status.restarts_not_counted, status.attempt) == (0, 1, 1)
    assert [r.outcome for r in status.history] == ["Restarted"]
    assert not [e for e in decision.events if e.reason == "ContainerRestarted"]


def test_a_deleted_pod_whose_container_ended_is_not_a_container_restart() -> None:
    obj = on_failure()
    going = kf_pod(obj, 1, main_status(0, {"terminated": terminated(143, 12)}))
    going["metadata"]["deletionTimestamp"] = format_time(at(11))
    status = decide(obj, [kf_pod(obj, 0, main_status()), going], running()).status
    assert [r.outcome for r in status.history] == ["Restarted"]
    assert (status.restarts, status.restarts_not_counted) == (0, 1)  # a disruption: not counted


def test_an_init_container_the_kubelet_restarts_is_counted_and_named() -> None:
    obj = on_failure()
    raw = kf_pod(obj, 1, main_status(), phase="Pending")
    raw["status"]["containerStatuses"] = [{"name": "tensorflow", "restartCount": 0, "state": {"waiting": {}}}]
    raw["status"]["initContainerStatuses"] = [
        main_status(1, {"waiting": {"reason": "CrashLoopBackOff"}}, terminated(2, 9)) | {"name": "fetch-data"}
    ]
    pod = observed(raw)
    assert (pod.phase, pod.container_restarts) == ("Pending", 2)
    assert pod.last_end is not None and pod.last_end.container == "fetch-data"
    status = decide(obj, [kf_pod(obj, 0, main_status()), raw], running()).status
    assert status.restarts == 2
    assert (status.history[0].container, status.history[0].exit_code) == ("fetch-data", 2)


def test_a_folder_check_that_refuses_the_claim_fails_the_job_though_the_kubelet_would_retry() -> None:
    obj = tfjob(annotations={"tfmw.dev/shared-claim": "tfmw-shared"}, Worker=replica(2, "OnFailure"))
    spec = parse_tfjob(obj, folder_check_image="tfmw-operator:dev")
    raw = build_pod(spec, Member(WORKER, 1), 0)
    raw["metadata"].update(uid="pod-1-0", creationTimestamp=format_time(T0))
    refused = {"exitCode": FOLDER_CHECK_MISMATCH_EXIT_CODE, "finishedAt": format_time(at(5))}
    raw["status"] = {
        "phase": "Pending",
        "initContainerStatuses": [
            main_status(1, {"waiting": {"reason": "CrashLoopBackOff"}}, refused)
            | {"name": FOLDER_CHECK_CONTAINER}
        ],
    }
    pod = observed(raw)
    assert (pod.phase, pod.folder_mismatch) == ("Failed", True)
    seen = observe(
        obj, [raw], MarkerState(), at(20), spec=spec, status=running(), service=build_service(spec)
    )
    assert reconcile(seen).status.reason == "SharedVolumeMismatch"


def test_a_pod_on_a_lost_node_restarts_the_gang_and_its_peers_restarts_are_not_counted() -> None:
    obj = on_failure()
    lost = kf_pod(obj, 1, main_status())
    lost["spec"]["nodeName"] = "node-b"
    lost["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": format_time(at(10))},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": format_time(T0)},
        ],
        "containerStatuses": [main_status() | {"ready": True}],
    }
    peer = kf_pod(obj, 0, main_status(3, {"running": {}}, terminated(170, 15)))
    decision = decide(obj, [peer, lost], running())
    status = decision.status
    assert (status.attempt, status.restarts, status.restarts_not_counted) == (1, 0, 1)  # a disruption
    assert [(r.outcome, r.cause, r.worker) for r in status.history] == [("Restarted", "NodeLost", 1)]


def test_after_the_job_ended_a_pod_the_kubelet_restarts_goes_whatever_the_clean_pod_policy() -> None:
    obj = on_failure()
    done = JobStatus(
        phase=Phase.SUCCEEDED, attempt=0, launched_attempt=0, start_time=T0, completion_time=at(10)
    )
    crashing = kf_pod(obj, 1, main_status(0, {"terminated": terminated(1, 14)}))
    finishing = kf_pod(obj, 0, main_status())
    decision = decide(obj, [finishing, crashing], done)
    deleted = {n for a in decision.actions if isinstance(a, DeletePods) for n in a.names}
    assert deleted == {"dist-worker-1"}  # cleanPodPolicy None keeps worker 0, which runs on
    earlier = kf_pod(obj, 1, main_status(1, {"running": {}}, terminated(1, 8)))  # before the end
    decision = decide(obj, [finishing, earlier], done)
    assert not [a for a in decision.actions if isinstance(a, DeletePods)]


def test_a_job_edited_to_never_fails_on_the_next_restart_of_a_pod_made_under_on_failure() -> None:
    made = on_failure()
    pods = [
        kf_pod(made, 0, main_status()),
        kf_pod(made, 1, main_status(1, {"running": {}}, terminated(1, 12))),
    ]
    decision = decide(tfjob(Worker=replica(2, "Never")), pods, running())
    assert (decision.status.phase, decision.status.reason) == (Phase.FAILED, "WorkerFailed")
    deleted = {n for a in decision.actions if isinstance(a, DeletePods) for n in a.names}
    assert deleted == {"dist-worker-0", "dist-worker-1"}
