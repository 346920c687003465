"""The wall as a job is told of it, against a real API server: a namespace that does not
enforce Pod Security baseline, and a claim that cannot be bound, named on the job."""

from __future__ import annotations

from kube import ClusterClient, kubectl, wait_for
from wrappers import simulated_job

Json = dict[str, object]


def condition(kube: ClusterClient, namespace: str, job: str, kind: str) -> Json:
    def probe() -> Json | None:
        found = [c for c in kube.status(namespace, job).get("conditions") or [] if c["type"] == kind]
        return found[0] if found else None

    found: Json = wait_for(f"{job}'s {kind}", probe, timeout=30)
    return found


def test_a_namespace_without_pod_security_and_a_missing_claim_are_named_on_the_job(
    kube: ClusterClient, namespace: str
) -> None:
    kube.create_job(namespace, simulated_job("exposed").manifest())
    walled = condition(kube, namespace, "exposed", "PodSecurityEnforced")
    print("PodSecurityEnforced:", walled["message"])
    assert (walled["status"], walled["reason"]) == ("False", "PodSecurityNotEnforced")
    assert f"kubectl label namespace {namespace}" in str(walled["message"])
    bound = condition(kube, namespace, "exposed", "SharedVolumeBound")
    assert (bound["status"], bound["reason"]) == ("False", "ClaimMissing")
    assert "tfmw-shared" in str(bound["message"])
    kube.wait_events(namespace, "exposed", {"PodSecurityNotEnforced", "ClaimMissing"})


def test_a_namespace_enforcing_baseline_is_not_warned_about(kube: ClusterClient, namespace: str) -> None:
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline")
    kube.create_job(namespace, simulated_job("walled").manifest())
    kube.wait_pods(namespace, "walled", 2)
    condition(kube, namespace, "walled", "SharedVolumeBound")  # the reconcile has run with both views
    kinds = {c["type"] for c in kube.status(namespace, "walled").get("conditions") or []}
    assert "PodSecurityEnforced" not in kinds
    assert "PodSecurityNotEnforced" not in {e["reason"] for e in kube.events(namespace, "walled")}
