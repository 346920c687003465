from tfmw_operator.observed import WorkloadState, observe_pod, observe_workload
from wrappers import job, pod


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
