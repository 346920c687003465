"""The wall between tenants as the job sees it: Pod Security on its namespace, its claim bound."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.status import ConditionType
from tfmw_operator.core.claim_checks import Claim
from tfmw_operator.core.decision import Decision
from tfmw_operator.core.tenancy import Finding, claim_finding, pod_security_finding, pod_security_of
from wrappers import decide, job

BOUND = Claim(uid="u", volume="pv-1", bound=True, phase="Bound")


def namespace(**labels: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team-a", "labels": labels}}


@pytest.mark.parametrize(
    ("raw", "level"),
    [
        (namespace(**{"pod-security.kubernetes.io/enforce": "baseline"}), "baseline"),
        (namespace(**{"pod-security.kubernetes.io/warn": "restricted"}), ""),  # warns, refuses nothing
        ({"metadata": {"name": "team-a"}}, ""),
        ({"metadata": {"name": "team-a", "labels": "junk"}}, ""),
        (namespace(**{"pod-security.kubernetes.io/enforce": 7}), ""),
        (namespace(**{"pod-security.kubernetes.io/enforce": "x" * 65}), ""),
        (namespace(**{"pod-security.kubernetes.io/enforce": "x" * 64}), "x" * 64),  # the longest read
    ],
)
def test_the_level_a_namespace_enforces_is_read_from_its_label_only(raw: dict[str, Any], level: str) -> None:
    assert pod_security_of(raw) == level


def test_only_baseline_or_restricted_walls_a_namespace() -> None:
    for level in ("baseline", "restricted"):
        found = pod_security_finding("team-a", level)
        assert found is not None and found.ok
    for level in ("", "privileged", "Baseline"):
        found = pod_security_finding("team-a", level)
        assert found is not None and not found.ok and found.reason == "PodSecurityNotEnforced"
        assert "kubectl label namespace team-a pod-security.kubernetes.io/enforce=baseline" in found.message
    assert pod_security_finding("team-a", None) is None  # not known: nothing said


def test_a_claim_not_bound_is_named_with_its_cause() -> None:
    assert claim_finding("c", None, known=False) is None
    cases = {
        "ClaimMissing": None,
        "ClaimPending": Claim(uid="u", volume="", bound=False, phase="Pending"),
        "ClaimLost": Claim(uid="u", volume="pv-1", bound=False, phase="Lost"),
        "ClaimDeleting": Claim(uid="u", volume="pv-1", bound=True, phase="Bound", deleting=True),
    }
    for reason, claim in cases.items():
        found = claim_finding("c", claim, known=True)
        assert found is not None and not found.ok and found.reason == reason and "claim c" in found.message
    bound = claim_finding("c", BOUND, known=True)
    assert bound is not None and bound.ok and "pv-1" in bound.message


def test_what_is_said_of_pod_security_word_for_word() -> None:
    assert pod_security_finding("team-a", "restricted") == Finding(
        True, "PodSecurityEnforced", "namespace team-a enforces Pod Security restricted"
    )
    fix = (
        "any pod there may mount the node's shared root by hostPath and read or write every namespace's "
        "folders, this job's included. Fix: kubectl label namespace team-a "
        "pod-security.kubernetes.io/enforce=baseline (hack/namespace-storage.sh does), unless a "
        "cluster-wide Pod Security default already enforces it"
    )
    assert pod_security_finding("team-a", "privileged") == Finding(
        False,
        "PodSecurityNotEnforced",
        "namespace team-a enforces 'privileged' (label pod-security.kubernetes.io/enforce), not baseline "
        f"or restricted: {fix}",
    )
    unlabelled = pod_security_finding("team-a", "")
    assert unlabelled is not None and unlabelled.message.startswith(
        "namespace team-a enforces no level (label pod-security.kubernetes.io/enforce), not baseline"
    )


def test_what_is_said_of_a_claim_word_for_word() -> None:
    def said(claim: Claim | None) -> Finding | None:
        return claim_finding("c", claim, known=True)

    assert said(None) == Finding(False, "ClaimMissing", "claim c does not exist in the job's namespace")
    assert said(Claim(uid="u", volume="pv-1", bound=True, phase="Bound", deleting=True)) == Finding(
        False, "ClaimDeleting", "claim c is being deleted"
    )
    assert said(BOUND) == Finding(True, "ClaimBound", "claim c is bound to volume pv-1")
    assert said(Claim(uid="u", volume="pv-1", bound=False, phase="Lost")) == Finding(
        False, "ClaimLost", "claim c lost its volume pv-1: it was deleted"
    )
    assert said(Claim(uid="u", volume="", bound=False, phase="Lost")) == Finding(
        False, "ClaimLost", "claim c lost its volume (none): it was deleted"
    )
    why = "no volume matches it, or its storage class provisions none (kubectl describe pvc c says why)"
    assert said(Claim(uid="u", volume="", bound=False, phase="Pending")) == Finding(
        False, "ClaimPending", f"claim c is not bound to a volume (Pending): {why}"
    )
    assert said(Claim(uid="u", volume="", bound=False)) == Finding(
        False, "ClaimPending", f"claim c is not bound to a volume (no phase): {why}"
    )
    # Bound in its phase but to no volume yet: not bound.
    unbound = said(Claim(uid="u", volume="", bound=True, phase="Bound"))
    assert unbound is not None and unbound.reason == "ClaimPending"


def conditions(decision: Decision) -> dict[str, tuple[bool, str]]:
    return {c.type: (c.true, c.reason) for c in decision.status.conditions}


def warnings(decision: Decision) -> list[str]:
    return [e.reason for e in decision.events if e.type == "Warning"]


def test_a_job_in_a_namespace_without_pod_security_gets_a_warning_and_a_condition_once() -> None:
    j = job().obj()
    first = decide(j, pod_security="privileged", claim=BOUND, claim_known=True)
    assert conditions(first)[ConditionType.POD_SECURITY_ENFORCED] == (False, "PodSecurityNotEnforced")
    assert warnings(first).count("PodSecurityNotEnforced") == 1
    assert ConditionType.SHARED_VOLUME_BOUND not in conditions(first)  # bound: nothing to say
    j["status"] = first.status.to_json()
    again = decide(j, pod_security="privileged", claim=BOUND, claim_known=True)
    assert "PodSecurityNotEnforced" not in warnings(again)  # said once, not every reconcile
    j["status"] = again.status.to_json()
    fixed = decide(j, pod_security="baseline", claim=BOUND, claim_known=True)
    assert conditions(fixed)[ConditionType.POD_SECURITY_ENFORCED] == (True, "PodSecurityEnforced")
    # Walled from the start, or not known: no condition at all.
    for level in ("restricted", None):
        assert ConditionType.POD_SECURITY_ENFORCED not in conditions(decide(job().obj(), pod_security=level))


def test_a_job_whose_claim_cannot_be_bound_says_so_and_why() -> None:
    pending = Claim(uid="u", volume="", bound=False, phase="Pending")
    decision = decide(job().obj(), pod_security="baseline", claim=pending, claim_known=True)
    assert conditions(decision)[ConditionType.SHARED_VOLUME_BOUND] == (False, "ClaimPending")
    assert "ClaimPending" in warnings(decision)
    missing = decide(job().obj(), claim=None, claim_known=True)
    assert conditions(missing)[ConditionType.SHARED_VOLUME_BOUND] == (False, "ClaimMissing")
    unknown = decide(job().obj(), claim=None, claim_known=False)
    assert ConditionType.SHARED_VOLUME_BOUND not in conditions(unknown)
