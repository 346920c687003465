from tfmw_operator.observed import observe_pod
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
