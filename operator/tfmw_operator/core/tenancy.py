"""What a job's namespace and claim say about the wall between tenants. Pure.

A namespace's pods see, through the claim `hack/namespace-storage.sh` (or the chart, the
overlays, docs/storage.md's recipes) gives it, the namespace's own folder and nothing
above it. That holds only while its pods cannot mount the node's disk themselves: a pod
with a `hostPath` volume of the shared root reads and writes every namespace's folders.
Pod Security `baseline` (or `restricted`) refuses such pods; without it enforced on the
namespace, the wall is not there, and the operator says so on every job with a shared
volume there (a Warning, and the condition PodSecurityEnforced False).

A claim that cannot be bound leaves the job's pods Pending with the scheduler's terse
"unbound immediate PersistentVolumeClaims"; the job's condition SharedVolumeBound names
the claim and why (missing, Pending, Lost, being deleted).
"""

from __future__ import annotations

from dataclasses import dataclass

from tfmw_operator.api.objects import Json
from tfmw_operator.core.claim_checks import Claim

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
WALLED_LEVELS = frozenset({"baseline", "restricted"})


def pod_security_of(namespace: Json) -> str:
    """The Pod Security level a namespace enforces by its label ("" when it has none, or one
    no level is called)."""
    labels = (namespace.get("metadata") or {}).get("labels")
    level = labels.get(ENFORCE_LABEL) if isinstance(labels, dict) else None
    return level if isinstance(level, str) and len(level) <= 64 else ""


@dataclass(frozen=True)
class Finding:
    ok: bool
    reason: str
    message: str


def pod_security_finding(namespace: str, level: str | None) -> Finding | None:
    """What to say of a job with a shared volume in `namespace`, enforcing `level` (None:
    not known, nothing said)."""
    if level is None:
        return None
    if level in WALLED_LEVELS:
        return Finding(True, "PodSecurityEnforced", f"namespace {namespace} enforces Pod Security {level}")
    shown = repr(level) if level else "no level"
    return Finding(
        False,
        "PodSecurityNotEnforced",
        f"namespace {namespace} enforces {shown} (label {ENFORCE_LABEL}), not baseline or restricted: any "
        "pod there may mount the node's shared root by hostPath and read or write every namespace's "
        "folders, this job's included. Fix: kubectl label namespace "
        f"{namespace} {ENFORCE_LABEL}=baseline (hack/namespace-storage.sh does), unless a cluster-wide "
        "Pod Security default already enforces it",
    )


def claim_finding(claim_name: str, claim: Claim | None, known: bool) -> Finding | None:
    """What to say of the job's claim as the claims watch saw it (`known`: that watch lists
    fresh; otherwise nothing is said)."""
    if not known:
        return None
    if claim is None:
        return Finding(False, "ClaimMissing", f"claim {claim_name} does not exist in the job's namespace")
    if claim.deleting:
        return Finding(False, "ClaimDeleting", f"claim {claim_name} is being deleted")
    if claim.bound and claim.volume:
        return Finding(True, "ClaimBound", f"claim {claim_name} is bound to volume {claim.volume}")
    if claim.phase == "Lost":
        return Finding(
            False,
            "ClaimLost",
            f"claim {claim_name} lost its volume {claim.volume or '(none)'}: it was deleted",
        )
    return Finding(
        False,
        "ClaimPending",
        f"claim {claim_name} is not bound to a volume ({claim.phase or 'no phase'}): no volume matches "
        "it, or its storage class provisions none (kubectl describe pvc "
        f"{claim_name} says why)",
    )
