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


def test_a_spec_too_large_to_hold_fails_its_job_naming_the_size_and_runs_nothing(
    kube: ClusterClient, namespace: str
) -> None:
    """A tenant's 1 MB spec is held cut to why (api/objects.py), not whole: twenty such jobs
    took the operator past its memory limit."""
    manifest = simulated_job("huge").manifest()
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": f"PAD{i}", "value": "x" * 4000} for i in range(250)]
    kube.create_job(namespace, manifest)
    status = kube.wait_phase(namespace, "huge", "Failed")
    failed = next(c for c in status.get("conditions") or [] if c["type"] == "Failed")
    print("Failed:", failed["message"])
    assert failed["reason"] == "InvalidSpec"
    assert "characters of JSON, more than the 131,072" in failed["message"]
    assert not kube.core.list_namespaced_pod(namespace, label_selector="tfmw.dev/job-name=huge").items


def test_a_templates_metadata_keeps_its_labels_and_annotations_and_nothing_else(
    kube: ClusterClient, namespace: str
) -> None:
    """The CRD gives a template's metadata a schema (Kubeflow's TFJob CRD's): a tenant can no
    longer store megabytes of anything there."""
    manifest = simulated_job("meta").manifest()
    manifest["spec"]["template"]["metadata"] = {
        "labels": {"team": "a"},
        "annotations": {"note": "b"},
        "x": [{}] * 1000,
    }
    created = kube.create_job(namespace, manifest)
    assert created["spec"]["template"]["metadata"] == {"labels": {"team": "a"}, "annotations": {"note": "b"}}
    pods = kube.wait_pods(namespace, "meta", 2)
    assert all(p["metadata"]["labels"]["team"] == "a" for p in pods)
    assert all(p["metadata"]["annotations"]["note"] == "b" for p in pods)
