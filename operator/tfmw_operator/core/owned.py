"""What the views keep of a pod or Service between reconciles. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from tfmw_operator.api.objects import Json
from tfmw_operator.core.pods import ObservedPod, observe_pod


def owner_uids(obj: Json) -> frozenset[str]:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return frozenset(str(o.get("uid")) for o in owners if isinstance(o, dict) and o.get("uid"))


@dataclass(frozen=True)
class Owned:
    """A pod or Service as the operator keeps it between reconciles: its name, its owners,
    and for a pod what the core needs of it (None: not one of our workers)."""

    name: str
    owners: frozenset[str]
    pod: ObservedPod | None = None

    @classmethod
    def pod_of(cls, raw: Json) -> Owned:
        return cls(str((raw.get("metadata") or {}).get("name") or ""), owner_uids(raw), observe_pod(raw))

    @classmethod
    def service_of(cls, raw: Json) -> Owned:
        return cls(str((raw.get("metadata") or {}).get("name") or ""), owner_uids(raw))
