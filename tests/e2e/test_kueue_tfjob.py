"""Kubeflow's TFJobs under a real Kueue with its TFJob integration on (as in Kueue's default
configuration), served by tfmw: Kueue suspends a queued TFJob at its creation and admits it
whole by setting `suspend: false` as its own ServiceAccount, which may not create pods. tfmw's
admission policy for TFJobs lets that change through (Kueue may update workloads/status),
tfmw launches the pods ungated (Kueue's pod webhook leaves the pods of a job it manages
alone), and a second job waits suspended, holding nothing, until the first has finished."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.test_kueue import OPT_IN, free_cpu_millicores
from kube import REPO, ClusterClient, applied, kubectl, wait_for
from operator_process import OperatorProcess
from tfjob import harness

Json = dict[str, Any]
TFJOB_CRD = REPO / "deploy" / "overlays" / "tfjob" / "component" / "kubeflow.org_tfjobs.yaml"
TFJOB_POLICY = REPO / "deploy" / "overlays" / "tfjob" / "component" / "tfjob-admission-policy.yaml"
QUEUE = "team"
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def tfjob(name: str, cpu: str, seconds: int, priority: str | None = None) -> Json:
    """Two workers that sleep `seconds` and exit 0 (TFJob's success: worker 0's exit);
    `priority`: a Kueue WorkloadPriorityClass."""
    container = {
        "name": "tensorflow",
        "image": "tfmw-trainer:dev",
        "imagePullPolicy": "Never",
        # Ends at once on SIGTERM: Python as PID 1 would otherwise ignore it for the grace.
        "command": [
            "python3",
            "-c",
            f"import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143)); time.sleep({seconds})",
        ],
        "resources": {"requests": {"cpu": cpu}},
        "securityContext": RESTRICTED,
    }
    pod = {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
    labels = {"kueue.x-k8s.io/queue-name": QUEUE}
    if priority is not None:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": f"{harness.GROUP}/{harness.VERSION}",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": pod}}}},
    }


def queues(namespace: str, quota_millicores: int) -> list[Json]:
    flavor = f"tfmw-tfjob-{namespace}"
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": flavor},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": flavor},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [{"name": "cpu", "nominalQuota": f"{quota_millicores}m"}],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": flavor},
        },
    ]


class TFJobs(harness.TFJobs):
    """The harness's TFJobs of one namespace (tests/tfjob), with Kueue's view of them."""

    def job(self, name: str) -> Json:
        found = self.get(name)
        assert found is not None, f"TFJob {name} is gone"
        return found

    def conditions(self, name: str) -> set[str]:
        return harness.true_conditions(self.get(name))

    def workload(self, name: str) -> Json | None:
        """Kueue's Workload for the TFJob: the one it controls, by the TFJob's UID."""
        uid = self.job(name)["metadata"]["uid"]
        listed = self.kube.custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", self.namespace, "workloads"
        )
        for workload in listed["items"]:
            owners = workload["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid and o.get("controller") for o in owners):
                return workload  # type: ignore[no-any-return]
        return None


@pytest.fixture(scope="module")
def tfjobs(kube: ClusterClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TFJobs]:
    """The TFJob CRD and tfmw's TFJob admission policy; Kueue up (restarted if it ran
    already: it sets its TFJob controller up only once it has seen the API, after a backoff
    of up to 2 minutes); a namespace of the test's own, opted in to Kueue, with a queue whose
    quota fits one job of two 300m workers; tfmw's operator serving TFJobs there. Each is
    undone afterwards, as soon as it exists, whatever fails later."""
    installed = (
        kubectl("-n", "kueue-system", "get", "deployment/kueue-controller-manager", check=False).returncode
        == 0
    )
    with contextlib.ExitStack() as undo:
        if kube.create_crd(yaml.safe_load(TFJOB_CRD.read_text())):
            undo.callback(kube.apiext.delete_custom_resource_definition, "tfjobs.kubeflow.org")
        if not installed:
            undo.callback(subprocess.run, [str(REPO / "hack" / "kueue.sh"), "down"], check=True)
        subprocess.run([str(REPO / "hack" / "kueue.sh"), "up"], check=True)
        if installed:
            kubectl("-n", "kueue-system", "rollout", "restart", "deployment/kueue-controller-manager")
            kubectl(
                "-n",
                "kueue-system",
                "rollout",
                "status",
                "deployment/kueue-controller-manager",
                "--timeout=180s",
            )
        undo.enter_context(applied(TFJOB_POLICY))
        namespace = kube.new_namespace("kueue-tfjob", pod_security="restricted")
        made = queues(namespace, 600)
        # The cluster-wide ones last, once the namespace (and its Workloads) are gone.
        undo.callback(
            kubectl, "delete", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(made[2::-1])
        )
        undo.callback(
            wait_for,
            "the namespace gone",
            lambda: kubectl("get", "namespace", namespace, check=False).returncode != 0,
            timeout=180,
        )
        undo.callback(kube.delete_namespace, namespace)
        kubectl("label", "namespace", namespace, f"{OPT_IN}=enabled")
        assert free_cpu_millicores(kube) >= 600, "the node cannot fit two 300m workers"
        # Kueue's webhooks answer once it serves; a queue made before then is refused.
        wait_for(
            "Kueue's queues made",
            lambda: kubectl("apply", "-f", "-", input=yaml.safe_dump_all(made), check=False).returncode == 0,
            timeout=120,
            interval=2,
        )
        operator = OperatorProcess(
            namespace, Path(tmp_path_factory.mktemp("kueue-tfjob")), args=("--tfjobs", "all")
        )
        undo.callback(operator.stop)
        operator.start()
        operator.wait_started(timeout=60)
        yield TFJobs(kube, namespace)


def test_kueue_admits_tfjobs_whole_one_at_a_time_and_tfmw_runs_them(tfjobs: TFJobs) -> None:
    first = tfjobs.create(tfjob("first", "300m", 20))
    # Kueue's webhook suspended it in the creation itself: nothing runs before admission.
    assert (first["spec"].get("runPolicy") or {}).get("suspend") is True, first["spec"]
    wait_for("first admitted: pods of tfmw", lambda: len(tfjobs.pods("first")) == 2, timeout=120)
    for pod in tfjobs.pods("first"):  # Kueue's pod integration left them alone: no gate
        assert not pod["spec"].get("schedulingGates"), pod["spec"]["schedulingGates"]
    tfjobs.create(tfjob("second", "300m", 1))
    wait_for("Kueue's Workload of the second", lambda: tfjobs.workload("second"), timeout=60)
    # While the first runs, the second waits suspended, holding nothing.
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and "Succeeded" not in tfjobs.conditions("first"):
        assert tfjobs.job("second")["spec"]["runPolicy"]["suspend"] is True
        assert tfjobs.pods("second") == []
        time.sleep(1)
    for name in ("first", "second"):
        wait_for(f"{name} Succeeded", lambda n=name: "Succeeded" in tfjobs.conditions(n), timeout=240)  # type: ignore[misc]
        workload = tfjobs.workload(name)
        assert workload is not None
        admitted = [c for c in workload["status"].get("conditions") or [] if c["type"] == "Admitted"]
        assert admitted, workload["status"]
    wait_for(
        "Kueue's Workloads finished",
        lambda: all(
            any(
                c["type"] == "Finished" and c["status"] == "True"
                for c in (tfjobs.workload(n) or {}).get("status", {}).get("conditions") or []
            )
            for n in ("first", "second")
        ),
        timeout=60,
    )


def test_kueue_preempts_a_running_tfjob_tfmw_stops_it_and_it_runs_again_after(tfjobs: TFJobs) -> None:
    """Kueue evicts the lower-priority TFJob by suspending it; tfmw deletes its pods and its
    status says no replica is active (what Kueue waits for before it frees the quota); the
    higher-priority job runs; then the first is admitted again and tfmw runs it to the end."""
    tfjobs.create(tfjob("low", "300m", 25))
    wait_for("low running", lambda: "Running" in tfjobs.conditions("low"), timeout=120)
    flavor = f"tfmw-tfjob-{tfjobs.namespace}"
    tfjobs.create(tfjob("high", "300m", 3, priority=flavor))
    wait_for("low suspended by Kueue", lambda: "Suspended" in tfjobs.conditions("low"), timeout=60)
    wait_for("low's pods gone", lambda: tfjobs.pods("low") == [], timeout=60)

    def inactive() -> bool:
        replicas = (tfjobs.job("low").get("status") or {}).get("replicaStatuses") or {}
        return not any(r.get("active") for r in replicas.values())

    wait_for("low's status: no replica active", inactive, timeout=30)
    wait_for("high Succeeded", lambda: "Succeeded" in tfjobs.conditions("high"), timeout=120)
    wait_for(
        "low Succeeded after its second admission",
        lambda: "Succeeded" in tfjobs.conditions("low"),
        timeout=180,
    )
    conditions = (tfjobs.workload("low") or {})["status"]["conditions"]
    preempted = [c for c in conditions if c["type"] == "Preempted"]
    # Once admitted again, Kueue keeps the preemption as "Previously: Preempted to ...".
    assert preempted and "Preempted to accommodate" in preempted[0]["message"], conditions


def test_a_tfjob_naming_its_queue_in_scheduling_policy_is_admitted_as_one_pod_group(tfjobs: TFJobs) -> None:
    """`schedulingPolicy.queue` (Volcano's field) without Kueue's label on the TFJob: Kueue's
    TFJob integration leaves the job alone, tfmw labels its pods for that queue as one pod
    group, and Kueue's pod integration admits the group whole."""
    job = tfjob("grouped", "300m", 15)
    del job["metadata"]["labels"]
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": QUEUE}}
    made = tfjobs.create(job)
    assert not (made["spec"].get("runPolicy") or {}).get("suspend"), made["spec"]
    wait_for("grouped's pods", lambda: len(tfjobs.pods("grouped")) == 2, timeout=60)
    groups = {p["metadata"]["labels"].get("kueue.x-k8s.io/pod-group-name") for p in tfjobs.pods("grouped")}
    assert len(groups) == 1 and None not in groups, groups
    name = groups.pop()

    def group_admitted() -> bool:
        # Read while the gang runs: once it has ended, tfmw ends its pod group's Workload.
        found = tfjobs.kube.custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", tfjobs.namespace, "workloads", field_selector=f"metadata.name={name}"
        )["items"]
        conditions = (found[0].get("status") or {}).get("conditions") or [] if found else []
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)

    wait_for("the pod group's Workload admitted", group_admitted, timeout=60)
    assert tfjobs.workload("grouped") is None  # no Workload of the TFJob's own
    wait_for("grouped Succeeded", lambda: "Succeeded" in tfjobs.conditions("grouped"), timeout=120)
