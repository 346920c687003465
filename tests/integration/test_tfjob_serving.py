"""Who may stop tfmw serving TFJobs (api/tfjob.py `serves`), with the real API server and an
operator process of its own in `--tfjobs=all`:

- a pod that a tenant labels as Kubeflow's training-operator, in its own namespace, proves
  nothing: the tenant's TFJobs, and everyone else's, are served as before;
- Kubeflow's training-operator seen running in its own namespace (`--kubeflow-namespace`)
  holds back a TFJob not yet launched (an Event says why), while one tfmw launched before
  goes on to its end under tfmw.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from kube import ClusterClient, Json, SimulatedKubelet, wait_for
from operator_process import OperatorProcess
from tfmw_operator.api import tfjob
from wrappers import SIM_NODE, simulated_tfjob

CONTROLLER_LABELS = {"control-plane": "kubeflow-training-operator"}


def running_pod(kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, name: str) -> None:
    """A Running pod labelled as Kubeflow's training-operator's."""
    kube.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": CONTROLLER_LABELS},
            "spec": {
                "nodeName": SIM_NODE,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "manager", "image": "busybox:1.36"}],
            },
        },
    )
    kubelet.run(namespace, name)


def create_tfjob(kube: ClusterClient, namespace: str, name: str) -> Json:
    created: Json = kube.custom.create_namespaced_custom_object(
        tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, simulated_tfjob(name)
    )
    return created


def pod_uids(kube: ClusterClient, namespace: str, name: str) -> dict[str, str]:
    """The job's pods not being deleted, by name: their UIDs."""
    pods = kube.core.list_namespaced_pod(namespace, label_selector=f"{tfjob.KF_JOB_NAME}={name}").items
    return {p.metadata.name: p.metadata.uid for p in pods if p.metadata.deletion_timestamp is None}


def tfjob_pods(kube: ClusterClient, namespace: str, name: str) -> list[str]:
    return list(pod_uids(kube, namespace, name))


def tfjob_conditions(kube: ClusterClient, namespace: str, name: str) -> set[str]:
    job = kube.custom.get_namespaced_custom_object(tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, name)
    conditions = (job.get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


def not_served(kube: ClusterClient, namespace: str, name: str) -> list[str]:
    """The messages of the job's NotServedByTfmw Events."""
    selector = f"involvedObject.name={name},involvedObject.kind={tfjob.TFJOB_KIND}"
    events = kube.core.list_namespaced_event(namespace, field_selector=selector).items
    return [e.message for e in events if e.reason == "NotServedByTfmw"]


def test_only_kubeflow_s_own_namespace_says_its_controller_runs(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    tfjob_crd: None,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    tenant = kube.new_namespace("it-tfjob-tenant")
    kubeflow = kube.new_namespace("it-tfjob-kubeflow")
    args = ("--namespace", kubeflow, "--kubeflow-namespace", kubeflow, "--tfjobs", "all")
    try:
        process = operator_process(tenant, args=args)
        process.wait_started()

        # A tenant's decoy, Running in its own namespace: its TFJob is served all the same.
        running_pod(kube, kubelet, tenant, "decoy")
        create_tfjob(kube, tenant, "first")
        (pod,) = wait_for("tfmw to launch first", lambda: tfjob_pods(kube, tenant, "first"), timeout=30)
        kubelet.run(tenant, pod)
        wait_for("first Running", lambda: "Running" in tfjob_conditions(kube, tenant, "first"), timeout=30)

        # Kubeflow's controller in its own namespace. The operator started again: a job is
        # decided only once that namespace's pods are listed, so the order is certain.
        running_pod(kube, kubelet, kubeflow, "training-operator")
        process.kill()
        process.start().wait_started()
        create_tfjob(kube, tenant, "second")
        (message,) = wait_for(
            "why second is not served", lambda: not_served(kube, tenant, "second"), timeout=30
        )
        assert "Kubeflow's training-operator is running" in message

        # The job tfmw launched before is still tfmw's, to its end.
        kubelet.exit(tenant, pod, 0)
        wait_for(
            "first Succeeded", lambda: "Succeeded" in tfjob_conditions(kube, tenant, "first"), timeout=30
        )
        assert tfjob_pods(kube, tenant, "second") == []
    finally:
        kube.delete_namespace(tenant)
        kube.delete_namespace(kubeflow)


def running_tfjob(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    operator_process: Callable[..., OperatorProcess],
    namespace: str,
    name: str,
) -> dict[str, str]:
    """An operator of its own serving `namespace`, and a 2-worker TFJob there Running: its pods' UIDs."""
    operator_process(namespace, args=("--tfjobs", "all")).wait_started()
    kube.custom.create_namespaced_custom_object(
        tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, simulated_tfjob(name, workers=2)
    )
    wait_for("two pods", lambda: len(pod_uids(kube, namespace, name)) == 2, timeout=30)
    pods = pod_uids(kube, namespace, name)
    for pod in pods:
        kubelet.run(namespace, pod)
    wait_for("Running", lambda: "Running" in tfjob_conditions(kube, namespace, name), timeout=30)
    return pods


def tf_config_workers(kube: ClusterClient, namespace: str, pod: str) -> int:
    spec = kube.core.read_namespaced_pod(pod, namespace).spec
    (value,) = [e.value for c in spec.containers for e in c.env or [] if e.name == "TF_CONFIG"]
    return len(json.loads(value)["cluster"]["worker"])


def test_a_tfjob_resized_while_suspended_resumes_at_its_new_size_with_no_restart_counted(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    tfjob_crd: None,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """The way to resize a TFJob tfmw serves (the admission policy holds its replica sets while
    it is not suspended, tests/integration/test_admission_policy.py): suspend it, change it,
    resume it. The next attempt is made from the new spec, whole, and is not a failure."""
    namespace = kube.new_namespace("it-tfjob-resize")
    try:
        running_tfjob(kube, kubelet, operator_process, namespace, "resized")

        def patch(body: Json) -> None:
            kube.custom.patch_namespaced_custom_object(
                tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, "resized", body
            )

        patch({"spec": {"runPolicy": {"suspend": True}, "tfReplicaSpecs": {"Worker": {"replicas": 3}}}})
        wait_for("Suspended", lambda: "Suspended" in tfjob_conditions(kube, namespace, "resized"), timeout=30)
        wait_for("the pods gone", lambda: tfjob_pods(kube, namespace, "resized") == [], timeout=30)
        patch({"spec": {"runPolicy": {"suspend": False}}})

        def three() -> list[str] | None:
            pods = tfjob_pods(kube, namespace, "resized")
            return pods if len(pods) == 3 else None

        pods = wait_for("three pods", three, timeout=30)
        assert {tf_config_workers(kube, namespace, pod) for pod in pods} == {3}
        for pod in pods:
            kubelet.run(namespace, pod)
        wait_for(
            "Running again", lambda: "Running" in tfjob_conditions(kube, namespace, "resized"), timeout=30
        )
        selector = "involvedObject.name=resized"
        reasons = {
            e.reason for e in kube.core.list_namespaced_event(namespace, field_selector=selector).items
        }
        assert {"Suspended", "Resumed"} <= reasons
        assert not reasons & {"GangRestart", "PodRestarted", "ContainerRestarted"}, reasons
        job = kube.custom.get_namespaced_custom_object(
            tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, "resized"
        )
        assert job["status"]["replicaStatuses"]["Worker"].get("active") == 3
        recorded = tfjob.recorded_status(job)
        assert (recorded.restarts, recorded.restarts_not_counted, recorded.attempt) == (0, 0, 1)
    finally:
        kube.delete_namespace(namespace)


def test_a_tfjob_resized_as_it_runs_is_made_again_whole_and_not_counted(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    tfjob_crd: None,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """What reaches the operator when the admission policy does not stand in the way (not
    installed here; or a suspension undone before the operator saw it): a running TFJob's
    replicas 2 -> 3. Before, worker 2 was taken for a lost pod and the gang restarted, counted
    against backoffLimit (core/policies/spec_change.py)."""
    namespace = kube.new_namespace("it-tfjob-drift")
    try:
        first = running_tfjob(kube, kubelet, operator_process, namespace, "drift")
        resize = {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 3}}}}
        kube.custom.patch_namespaced_custom_object(
            tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, "drift", resize
        )

        def three_new() -> dict[str, str] | None:
            pods = pod_uids(kube, namespace, "drift")
            return pods if len(pods) == 3 and not set(pods.values()) & set(first.values()) else None

        pods = wait_for("three new pods", three_new, timeout=60)
        assert {tf_config_workers(kube, namespace, pod) for pod in pods} == {3}
        for pod in pods:
            kubelet.run(namespace, pod)
        wait_for("Running again", lambda: "Running" in tfjob_conditions(kube, namespace, "drift"), timeout=30)
        job = kube.custom.get_namespaced_custom_object(
            tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, "drift"
        )
        recorded = tfjob.recorded_status(job)
        assert (recorded.restarts, recorded.restarts_not_counted, recorded.attempt) == (0, 1, 1)
        assert recorded.history[0].cause == "SpecChanged"
    finally:
        kube.delete_namespace(namespace)
