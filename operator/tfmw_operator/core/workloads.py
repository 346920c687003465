"""Kueue's Workload of an attempt's pod group, as the core needs it. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from tfmw_operator.api.objects import Json


@dataclass(frozen=True)
class WorkloadState:
    """The Kueue Workload of the current attempt's pod group, as Kueue reports it."""

    name: str
    admitted: bool = False
    reason: str = ""  # of QuotaReserved when not admitted: Pending (no quota yet), Inadmissible...
    message: str = ""


def observe_workload(name: str, workload: Json) -> WorkloadState:
    """A Kueue Workload reduced to admitted or not, and why not, from its conditions."""
    status = workload.get("status")
    listed = status.get("conditions") if isinstance(status, dict) else None
    conditions = {c.get("type"): c for c in listed if isinstance(c, dict)} if isinstance(listed, list) else {}
    admitted = (conditions.get("Admitted") or {}).get("status") == "True"
    waiting = conditions.get("QuotaReserved") or {}
    return WorkloadState(name, admitted, str(waiting.get("reason") or ""), str(waiting.get("message") or ""))
