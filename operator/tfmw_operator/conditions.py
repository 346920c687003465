"""Kubernetes-style conditions on the job status."""

from __future__ import annotations

from tfmw_operator.api import Json

CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUSPENDED = "Suspended"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
STALLED = "Stalled"


def set_condition(
    conditions: list[Json], kind: str, true: bool, reason: str, message: str, now: str
) -> list[Json]:
    """Return `conditions` with `kind` set; lastTransitionTime moves only when status flips.

    A condition that was never true is left out rather than listed as False.
    """
    status = "True" if true else "False"
    existing = next((c for c in conditions if c.get("type") == kind), None)
    others = [c for c in conditions if c.get("type") != kind]
    if existing is None and not true:
        return conditions
    if existing is not None and existing.get("status") == status:
        transition = existing.get("lastTransitionTime", now)
    else:
        transition = now
    updated = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    return [*others, updated]


def condition_is_true(conditions: list[Json], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)
