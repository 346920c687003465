from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from tfmw_operator.core.pods import observe_pod, same_image
from tfmw_operator.core.workloads import WorkloadState, observe_workload
from wrappers import at, job, pod

Json = dict[str, Any]


def test_failed_pod_reports_the_failing_container_and_message() -> None:
    j = job().obj()
    observed = observe_pod(
        pod(j, 1, attempt=2).exited(137, reason="OOMKilled", message="out of memory").obj()
    )
    assert observed is not None
    assert (observed.index, observed.attempt, observed.phase) == (1, 2, "Failed")
    assert (observed.exit_code, observed.reason, observed.message) == (137, "OOMKilled", "out of memory")


def test_pending_pod_carries_the_scheduler_or_kubelet_reason() -> None:
    j = job().obj()
    unschedulable = observe_pod(pod(j, 0).unschedulable("0/1 nodes: Insufficient cpu").obj())
    pulling = observe_pod(pod(j, 0).waiting("ImagePullBackOff", "not found").obj())
    creating = observe_pod(pod(j, 0).waiting("ContainerCreating").obj())
    assert unschedulable is not None and unschedulable.stall_reason == "Unschedulable"
    assert pulling is not None and pulling.stall_reason == "ImagePullBackOff"
    assert creating is not None and creating.stall_reason == ""


def test_pods_without_our_labels_are_ignored() -> None:
    assert observe_pod({"metadata": {"name": "x", "labels": {}}}) is None


def test_the_main_container_decides_and_a_sidecar_exit_explains_nothing() -> None:
    j = (
        job()
        .template(
            {"spec": {"containers": [{"name": "logger", "image": "b"}, {"name": "tensorflow", "image": "t"}]}}
        )
        .obj()
    )
    sidecar_killed = {"name": "logger", "state": {"terminated": {"exitCode": 143}}}
    trainer_failed = {"name": "tensorflow", "state": {"terminated": {"exitCode": 1, "message": "KeyError"}}}
    trainer_running = {"name": "tensorflow", "state": {"running": {}}}
    both = observe_pod(pod(j, 0).container_statuses("Failed", sidecar_killed, trainer_failed).obj())
    assert both is not None and (both.exit_code, both.message) == (1, "KeyError")
    alone = observe_pod(pod(j, 0).container_statuses("Running", sidecar_killed, trainer_running).obj())
    assert alone is not None and alone.phase == "Running" and alone.exit_code is None


def test_a_dead_trainer_beside_a_running_sidecar_is_a_failed_worker() -> None:
    j = (
        job()
        .template(
            {"spec": {"containers": [{"name": "tensorflow", "image": "t"}, {"name": "logger", "image": "b"}]}}
        )
        .obj()
    )
    observed = observe_pod(
        pod(j, 1)
        .container_statuses(
            "Running",
            {"name": "tensorflow", "state": {"terminated": {"exitCode": 2}}},
            {"name": "logger", "state": {"running": {}}},
        )
        .obj()
    )
    assert observed is not None and observed.phase == "Failed" and observed.exit_code == 2


def test_an_evicted_pod_is_disrupted_whatever_its_trainer_exited_with() -> None:
    j = job().obj()
    raw = pod(j, 0).exited(1).obj()
    raw["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    observed = observe_pod(raw)
    assert observed is not None and observed.disrupted and observed.exit_code == 1
    raw = pod(j, 0).exited(1).obj()
    raw["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    preempted = observe_pod(raw)
    assert preempted is not None and preempted.disrupted


def test_labels_that_are_not_numbers_make_a_pod_not_ours() -> None:
    assert (
        observe_pod({"metadata": {"labels": {"tfmw.dev/replica-index": "x", "tfmw.dev/attempt": "0"}}})
        is None
    )
    assert (
        observe_pod({"metadata": {"labels": {"tfmw.dev/replica-index": None, "tfmw.dev/attempt": "0"}}})
        is None
    )


def test_a_kueue_workload_reads_as_admitted_or_why_not() -> None:
    waiting = {
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "insufficient quota",
                },
                {"type": "Admitted", "status": "False", "reason": "NoReservation"},
            ]
        }
    }
    assert observe_workload("w", waiting) == WorkloadState("w", False, "Pending", "insufficient quota")
    admitted = {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
    assert observe_workload("w", admitted).admitted
    for junk in (
        {},
        {"status": "x"},
        {"status": {"conditions": "x"}},
        {"status": {"conditions": ["x", {"type": 3}]}},
    ):
        assert observe_workload("w", junk) == WorkloadState("w")


def test_a_pod_keeps_its_node_and_the_reason_kubernetes_gave_for_disrupting_it() -> None:
    raw = pod(job().obj(), 1).exited(137, reason="Error").obj()
    raw["spec"]["nodeName"] = "node-a"
    raw["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    observed = observe_pod(raw)
    assert observed is not None
    assert (observed.node, observed.disruption, observed.disrupted) == (
        "node-a",
        "PreemptionByScheduler",
        True,
    )


def folder_check_failed(code: int) -> dict[str, object]:
    return {
        "name": "tfmw-folder-check",
        "state": {"terminated": {"exitCode": code, "reason": "Error", "message": "claim c does not reach"}},
    }


def test_a_failed_folder_check_is_a_folder_mismatch_only_with_its_exit_code() -> None:
    j = job().obj()
    raw = pod(j, 0).container_statuses("Failed").obj()
    raw["status"]["initContainerStatuses"] = [folder_check_failed(3)]
    observed = observe_pod(raw)
    assert observed is not None and observed.folder_mismatch and observed.exit_code == 3
    assert observed.message == "claim c does not reach"
    raw["status"]["initContainerStatuses"] = [folder_check_failed(137)]  # OOM-killed: not a verdict
    killed = observe_pod(raw)
    assert killed is not None and not killed.folder_mismatch
    # The same exit code from an init container of the user's own says nothing about the claim.
    raw["status"]["initContainerStatuses"] = [{**folder_check_failed(3), "name": "fetch"}]
    theirs = observe_pod(raw)
    assert theirs is not None and not theirs.folder_mismatch and theirs.exit_code == 3


def _lost(raw: Json) -> tuple[bool, datetime | None]:
    observed = observe_pod(raw)
    assert observed is not None
    return observed.node_lost, observed.node_lost_at


def test_a_pod_whose_node_stopped_reporting_is_on_a_lost_node_since_its_ready_turned_false() -> None:
    # As MarkPodsNotReady leaves it: Ready False; ContainersReady and the containers as they were.
    assert _lost(pod(job().obj(), 1).node_not_ready(at_seconds=47).obj()) == (True, at(47))


def _not_ready(change: Callable[[Json], None]) -> Json:
    raw = pod(job().obj(), 1).node_not_ready().obj()
    change(raw)
    return raw


def _set_condition(kind: str, **fields: Any) -> Callable[[Json], None]:
    def change(raw: Json) -> None:
        next(c for c in raw["status"]["conditions"] if c["type"] == kind).update(fields)

    return change


@pytest.mark.parametrize(
    "change",
    [
        # What a live kubelet writes: its Ready follows ContainersReady and the containers.
        _set_condition("ContainersReady", status="False"),
        lambda raw: raw["status"]["containerStatuses"][0].update(ready=False),
        lambda raw: raw["status"]["containerStatuses"][0].pop("ready"),
        lambda raw: raw["status"].pop("containerStatuses"),
        lambda raw: raw["status"]["conditions"].pop(1),
        _set_condition("Ready", status="True"),
        # Ready False for a readiness gate alone is the kubelet's, the node may be fine.
        _set_condition("Ready", reason="ReadinessGatesNotReady"),
        # Not bound to a node: none to lose.
        lambda raw: raw["spec"].pop("nodeName"),
    ],
)
def test_ready_false_is_a_lost_node_only_beside_ready_containers_the_kubelet_would_not_leave(
    change: Callable[[Json], None],
) -> None:
    assert _lost(_not_ready(change)) == (False, None)


def _on_node(raw: Json, node: str = "node-b") -> Json:
    raw["spec"]["nodeName"] = node
    return raw


def _disrupted_by(reason: str, ready: bool = False, containers_ready: bool = True) -> Json:
    """Deleted with a DisruptionTarget; not Ready, its containers as the kubelet last said."""
    raw = _on_node(pod(job().obj(), 1).running(ready=ready).deleting().obj())
    raw["status"]["conditions"].append({"type": "ContainersReady", "status": str(containers_ready)})
    raw["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": reason,
            "lastTransitionTime": "2026-01-01T12:01:00Z",
        }
    )
    return raw


def test_the_taint_managers_and_pod_gcs_deletions_and_older_signals_are_a_lost_node() -> None:
    assert _lost(_disrupted_by("DeletionByTaintManager")) == (True, at(60))
    assert _lost(_disrupted_by("DeletionByPodGC")) == (True, at(60))
    # A NoExecute taint on a live node evicts the same way: its pod is still Ready.
    assert _lost(_disrupted_by("DeletionByTaintManager", ready=True)) == (False, None)
    # ... and once its containers stop there, the live kubelet reports them not ready.
    assert _lost(_disrupted_by("DeletionByTaintManager", containers_ready=False)) == (False, None)
    assert _lost(_disrupted_by("PreemptionByScheduler")) == (False, None)
    assert _lost(_disrupted_by("EvictionByEvictionAPI")) == (False, None)
    unknown = _on_node(pod(job().obj(), 1).running().obj())
    unknown["status"]["phase"] = "Unknown"
    assert _lost(unknown) == (True, None)
    old_reason = _on_node(pod(job().obj(), 1).running().obj())
    old_reason["status"].update(
        reason="NodeLost", message="Node node-b which was running pod x is unresponsive"
    )
    assert _lost(old_reason) == (True, None)
    assert _lost(_on_node(pod(job().obj(), 1).running().obj())) == (False, None)
    assert _lost(_on_node(pod(job().obj(), 1).exited(170).obj())) == (False, None)


def test_a_lost_nodes_time_that_is_not_a_time_is_unknown_and_junk_conditions_do_not_raise() -> None:
    garbled = _not_ready(_set_condition("Ready", lastTransitionTime="soon"))
    assert _lost(garbled) == (True, None)
    far = _not_ready(_set_condition("Ready", lastTransitionTime="9999-12-31T23:59:59Z"))
    assert _lost(far) == (True, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))  # the core judges it
    # The API server's schema holds them to objects, not to sense.
    junk = _not_ready(lambda raw: raw["status"]["conditions"].extend([{"type": None}, {}, {"type": 7}]))
    assert _lost(junk) == (True, at(50))
    odd_ready = _not_ready(lambda raw: raw["status"]["containerStatuses"][0].update(ready="True"))
    assert _lost(odd_ready) == (False, None)


def stalled(conditions: list[Json], *waiting: Json) -> tuple[str, str]:
    """The stall reason and message of a pending worker with these conditions and waiting containers."""
    raw = pod(job().obj(), 0).obj()
    raw["status"] = {
        "phase": "Pending",
        "conditions": conditions,
        "containerStatuses": [{"name": "tensorflow", "state": {"waiting": w}} for w in waiting],
    }
    observed = observe_pod(raw)
    assert observed is not None
    return observed.stall_reason, observed.stall_message


def test_a_scheduled_pod_is_stalled_by_its_container_not_by_its_conditions() -> None:
    conditions = [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "not ready"},
    ]
    pulling = {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}
    assert stalled(conditions, pulling) == ("ImagePullBackOff", "Back-off pulling image")
    assert stalled(conditions, {"reason": "ImagePullBackOff"}) == ("ImagePullBackOff", "")
    assert stalled(conditions, {"reason": "ContainerCreating"}) == ("", "")


def test_an_unscheduled_pod_says_the_scheduler_s_reason_else_unschedulable() -> None:
    bare = [{"type": "PodScheduled", "status": "False"}]
    assert stalled(bare) == ("Unschedulable", "")
    erred = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulerError", "message": "plugin failed"}
    ]
    assert stalled(erred) == ("SchedulerError", "plugin failed")


@pytest.mark.parametrize(
    ("written", "reported", "same"),
    [
        ("tfmw-operator", "tfmw-operator", True),
        ("tfmw-operator", "tfmw-operator:latest", True),
        ("localhost:5001/tfmw-operator", "localhost:5001/tfmw-operator:latest", True),
        ("me/tfmw-operator:dev", "docker.io/library/me/tfmw-operator:dev", False),
        ("tfmw-operator:dev", "tfmw-operator:dev:latest", False),
    ],
)
def test_only_a_short_name_is_completed_by_the_runtime(written: str, reported: str, same: bool) -> None:
    """Docker Hub's `library/` only before a name without a path; `:latest` only without a tag."""
    assert same_image(written, reported) is same
