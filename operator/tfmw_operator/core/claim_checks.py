"""Claims the folder check has found reaching the operator's folders: later jobs on the same
claim start without it.

A job's pods mount `subPath <job>` of the job's claim, and the operator's folder for the
job is `<shared-root>/<namespace>/<job>`. Once one job's worker found its own folder
through a claim, the claim gives `<shared-root>/<namespace>`, so every later job on that
same claim reaches its own folder too. Checking again would cost each job the start of
one more container before TensorFlow starts, and tell nothing new (docs/benchmarks.md,
"The measurements behind the code").

The same claim means the same object bound to the same volume: a claim deleted and made
again under its name, or not bound, is checked again. The record is kept in memory only:
an operator that restarts has forgotten it, and checks the next job on each claim once
more, which costs time, never safety.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.objects import Json
from tfmw_operator.api.times import parse_time
from tfmw_operator.core.pods import ObservedPod

# One entry per claim a job used: far more than a cluster has, few bytes each.
MAX_CLAIMS = 4096
# Pods this operator created, remembered for their folder check: far more than run at once.
MAX_OWN_PODS = 65536
PARTS = ("metadata", "spec", "status")


@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim as the claims view keeps it."""

    uid: str
    volume: str  # spec.volumeName: the volume it is bound to, "" before
    bound: bool
    created: datetime | None = None
    deleting: bool = False
    phase: str = ""  # status.phase: Pending, Bound, Lost

    @classmethod
    def of(cls, raw: Json) -> Claim:
        meta, spec, status = (part if isinstance(part := raw.get(k), dict) else {} for k in PARTS)
        uid, volume = meta.get("uid"), spec.get("volumeName")
        return cls(
            uid=uid if isinstance(uid, str) else "",
            volume=volume if isinstance(volume, str) else "",
            bound=status.get("phase") == "Bound",
            created=parse_time(meta.get("creationTimestamp")),
            deleting=bool(meta.get("deletionTimestamp")),
            phase=phase if isinstance(phase := status.get("phase"), str) else "",
        )

    @property
    def identity(self) -> tuple[str, str] | None:
        """What makes two sightings the same claim on the same volume; None: not bound, or
        on its way out (a pod created now would mount whatever claim takes its name next)."""
        usable = self.bound and not self.deleting and self.uid and self.volume
        return (self.uid, self.volume) if usable else None

    def checked_by(self, check_started: datetime | None) -> bool:
        """Whether a folder check that started then can have read this claim: only one that
        existed before it (the views of pods and claims come by separate watches, so the
        claim seen now may have replaced, under the same name, the one the check read)."""
        return self.created is not None and check_started is not None and self.created < check_started


@dataclass(frozen=True)
class FolderReached:
    """Who found a claim reaching the operator's folders: worker `worker` of job `job`."""

    job: str
    worker: int

    def message(self, claim_name: str) -> str:
        return (
            f"claim {claim_name} reached job {self.job}'s folder for its worker {self.worker}; the same "
            "claim gives this job its own folder, so its workers start without the folder check"
        )


class ReachedClaims:
    """The claims, by namespace and identity, a folder check has passed through: bounded,
    the oldest forgotten first (its next job is checked again)."""

    def __init__(self, limit: int = MAX_CLAIMS) -> None:
        self.limit = limit
        self._reached: OrderedDict[tuple[str, str, str], FolderReached] = OrderedDict()

    @staticmethod
    def _key(namespace: str, claim: Claim | None) -> tuple[str, str, str] | None:
        identity = None if claim is None else claim.identity
        return None if identity is None else (namespace, *identity)

    def record(
        self, namespace: str, claim: Claim | None, reached: FolderReached, check_started: datetime | None
    ) -> None:
        key = self._key(namespace, claim)
        if key is None or claim is None or not claim.checked_by(check_started) or key in self._reached:
            return
        self._reached[key] = reached
        while len(self._reached) > self.limit:
            self._reached.popitem(last=False)

    def reached(self, namespace: str, claim: Claim | None) -> FolderReached | None:
        key = self._key(namespace, claim)
        return None if key is None else self._reached.get(key)

    def __len__(self) -> int:
        return len(self._reached)


class OwnPods:
    """The UIDs of the pods this operator created, as the API server answered the creation:
    bounded, the oldest forgotten first (a check of a pod forgotten is not counted, and the
    next job on its claim is checked again)."""

    def __init__(self, limit: int = MAX_OWN_PODS) -> None:
        self.limit = limit
        self._uids: OrderedDict[str, None] = OrderedDict()

    def add(self, uid: object) -> None:
        if not isinstance(uid, str) or not uid:
            return
        self._uids[uid] = None
        self._uids.move_to_end(uid)
        while len(self._uids) > self.limit:
            self._uids.popitem(last=False)

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, str) and bool(uid) and uid in self._uids

    def __len__(self) -> int:
        return len(self._uids)


def trusted_pass(pods: Iterable[ObservedPod], own: OwnPods, image: str) -> ObservedPod | None:
    """The first pod, still up, whose folder check passed and counts: a pod this operator
    made (by UID), whose check ran `image`, the operator's own."""
    return next(
        (
            p
            for p in pods
            if p.folder_checked and p.active and p.uid in own and image and p.folder_check_image == image
        ),
        None,
    )
