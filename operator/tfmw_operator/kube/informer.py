"""What the watches last saw: an in-memory view of our pods and Services, by job, and of
the cluster's PersistentVolumeClaims, by name.

Reconciles read this view instead of asking the API server, so deciding costs no
round-trip. The pod and Service watches have a server-side label selector: pods of other
workloads never reach the operator. Claims carry no label of ours, so all of them are
watched (claim_checks: a claim the folder check passed through). Each object is kept
reduced (`reduce`), never as its full JSON; a LIST's page is held only as its text, of at
most client.MAX_LIST_PAGE_BYTES, while its objects are decoded and reduced one by one.

A watch that ends is resumed from the last resourceVersion it saw; one the server
refuses (410 Gone: compacted; 504: its watch cache is behind) or that fails any other
way is replaced by a fresh LIST and a watch from there. Failures are retried after a
growing pause (RETRY_SECONDS), and so is a watch that ended at once with nothing in it:
a failing API server is not listed in a loop. A LIST tells only the jobs whose objects it
changed.
The operator's own writes go in at once (`put`, `remove`), so the next reconcile sees
the pods it just created; a resourceVersion older than what the view holds, or than a
deletion it saw, never overwrites it, unless a LIST shows the versions went back (etcd
restored from a backup): then what was held is forgotten and the LIST believed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import aiohttp

from tfmw_operator.api.names import LABEL_JOB_NAME
from tfmw_operator.api.objects import Json, Key, cut_spec_reason, held_job
from tfmw_operator.kube.client import WATCH_SECONDS, ApiError, Kube

logger = logging.getLogger(__name__)
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
# Objects per LIST page. The byte cap on a page (client.MAX_LIST_PAGE_BYTES) lowers it
# where objects are large; at 500 the view of 8,000 pods lists in 16 pages.
PAGE_SIZE = 500
# The pause before the next try after each failure in a row (the last repeats): a failure
# (a refused or broken watch, 410 Gone, a failed LIST) or a watch that ended at once with
# nothing in it. Without it a watch failing at once listed again every 0.2 s for ever, and
# one answering 410 or an empty 200 at once was asked again at once: 2,169 LISTs, or 23,591
# watches, in 3 s. (client-go backs off the same way, and takes a watch that ended within a
# second with no event for a failure.)
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
RETRY_JITTER = 0.2  # each pause is up to this much longer or shorter: the views do not retry in step
# A watch that lasted this long, or that brought an event, worked: the pauses start over.
# One that ended sooner is resumed after a pause, not at once: a server that answers a
# watch and closes it at once is not asked again in a loop.
WATCH_WORKED_SECONDS = 10.0
TOMBSTONE_SECONDS = 120.0
TOMBSTONES_KEPT = 1000  # below this many, none is forgotten however old
ObjectKey = tuple[str, str]  # (namespace, name)


class Tombstones(Generic[K, V]):
    """What was deleted, oldest first. Beyond TOMBSTONES_KEPT, the oldest leave once
    TOMBSTONE_SECONDS old, one at a time from the front: each put costs O(1) however many are
    held. (Filtering the whole map at every put above the limit was O(n²) in a cleanup: 8,000
    pods deleted within the window, docs/benchmarks.md, run scale-9.)"""

    def __init__(self, kept: int = TOMBSTONES_KEPT, seconds: float = TOMBSTONE_SECONDS) -> None:
        self._kept = kept
        self._seconds = seconds
        self._held: OrderedDict[K, tuple[V, float]] = OrderedDict()

    def put(self, key: K, value: V, now: float) -> None:
        self._held[key] = (value, now)
        self._held.move_to_end(key)
        while len(self._held) > self._kept:
            _, (_, put_at) = next(iter(self._held.items()))
            if now - put_at < self._seconds:
                return
            self._held.popitem(last=False)

    def get(self, key: K) -> V | None:
        found = self._held.get(key)
        return None if found is None else found[0]

    def items(self) -> list[tuple[K, V]]:
        return [(key, value) for key, (value, _) in self._held.items()]

    def keep_only(self, keep: Callable[[K], bool]) -> None:
        """Forget every tombstone but those `keep` says to keep."""
        self._held = OrderedDict((key, held) for key, held in self._held.items() if keep(key))

    def __contains__(self, key: object) -> bool:
        return key in self._held

    def __len__(self) -> int:
        return len(self._held)


@dataclass(frozen=True)
class Sighting(Generic[R]):
    """One listed object, reduced, and where it goes in the view."""

    okey: ObjectKey
    at: int  # its resourceVersion
    job: Key
    reduced: R


class Gone(Exception):
    """The watch cannot resume from where it was: list again."""


def metadata(obj: Json) -> Json:
    """An object's metadata; {} when there is none, or what there is is not an object (a
    malformed answer is left out, never a task ended by an AttributeError)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def resource_version(obj: Json) -> int:
    """An object's resourceVersion as a number (etcd's revision); 0 when it is not one."""
    value = metadata(obj).get("resourceVersion")
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def job_label(obj: Json) -> str | None:
    """The job an object of ours belongs to: its job-name label."""
    labels = metadata(obj).get("labels")
    job = labels.get(LABEL_JOB_NAME) if isinstance(labels, dict) else None
    return job if isinstance(job, str) else None


def own_name(obj: Json) -> str | None:
    """Each object by itself: for objects not ours (claims), keyed by their own name."""
    name = metadata(obj).get("name")
    return name if isinstance(name, str) else None


def ignore_changes(key: Key) -> None:
    """For a view reconciles only read: its changes start none."""


class Informer(Generic[R]):
    """One kind of object (`path`, e.g. /api/v1/pods) with our job-name label, by job.

    `on_change(job_key)` is called for every change of one of a job's objects. With another
    `selector` and `group_by` (`own_name`), a view of objects that are not ours, by name.
    """

    def __init__(
        self,
        kube: Kube,
        path: str,
        reduce: Callable[[Json], R],
        on_change: Callable[[Key], None],
        selector: str = LABEL_JOB_NAME,
        group_by: Callable[[Json], str | None] = job_label,
    ) -> None:
        self.kube = kube
        self.path = path
        self.reduce = reduce
        self.on_change = on_change
        self.selector = selector
        self.group_by = group_by
        self.synced = asyncio.Event()
        # Listed, and watching since: False from a failure until the next list succeeds, while
        # the view holds what it saw last.
        self.fresh = False
        self._by_job: dict[Key, dict[str, R]] = {}
        self._versions: dict[ObjectKey, tuple[int, Key]] = {}
        self._tombstones: Tombstones[ObjectKey, int] = Tombstones()  # the version deleted
        # While a LIST is under way: the objects our own writes put in or removed since it began.
        self._written: set[ObjectKey] | None = None
        self._watched = 0  # events (bookmarks too) the current watch brought
        self.relists = 0

    def of_job(self, key: Key) -> list[R]:
        return list(self._by_job.get(key, {}).values())

    def jobs(self) -> list[Key]:
        """The jobs (by their objects' label) that have objects here."""
        return list(self._by_job)

    # ---- the operator's own writes ----

    def put(self, obj: Json) -> None:
        """An object as a write of ours returned it: the reconcile that wrote it knows. One
        without a resourceVersion (a pod the API server deleted at once comes back so) cannot
        be ordered against the watch's events: the watch brings what became of it."""
        if resource_version(obj):
            place = self._place(obj) if self._written is not None else None
            if place is not None and self._written is not None:
                self._written.add(place[0])  # a LIST under way: _replace keeps it
            self._apply("MODIFIED", obj, notify=False)

    def remove(self, namespace: str, name: str, held: Callable[[R], bool]) -> None:
        """An object a write of ours found gone, if the view still holds it as `held` says."""
        known = self._versions.get((namespace, name))
        if known is None:
            return
        record = self._by_job.get(known[1], {}).get(name)
        if record is not None and held(record):
            if self._written is not None:
                self._written.add((namespace, name))
            self._drop((namespace, name), known[0], notify=False)

    # ---- the watch ----

    async def run(self) -> None:
        """List, then watch, until cancelled. Whatever fails (an API error, a dropped or closed
        connection, a malformed answer, a bug) is logged and tried again after a pause
        (RETRY_SECONDS), never ends the task: the operator's liveness check restarts it when
        a watch task ends, and one 401 used to end them all."""
        failures = 0
        version: str | None = None
        while True:
            self._watched = 0
            watch_began: float | None = None
            routine = True  # a watch ended, or 410 Gone: what a working API server does too
            try:
                if version is None:
                    version = await self._list()
                watch_began = time.monotonic()
                version = await self._watch(version)
                why = "ended"
            except Gone as gone:
                why, version, self.fresh = f"{gone}; listing again", None, False
            except (ApiError, aiohttp.ClientError, ValueError, OSError, TimeoutError) as error:
                why, version, self.fresh, routine = f"failed ({error}); listing again", None, False, False
            except Exception as error:  # unforeseen: said with its traceback, and tried again
                logger.exception("watch of %s failed", self.path)
                why, version, self.fresh, routine = f"failed ({error!r}); listing again", None, False, False
            lasted = 0.0 if watch_began is None else time.monotonic() - watch_began
            if lasted >= WATCH_WORKED_SECONDS or (watch_began is not None and self._watched):
                failures = 0  # the watch worked: the pauses start over
            if why == "ended":
                if lasted >= WATCH_WORKED_SECONDS:
                    continue  # as watches end (the server's timeout): resumed at once
                why = f"ended after {lasted:.1f}s, {self._watched} events; watching again"
            delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
            delay *= 1 + RETRY_JITTER * (2 * random.random() - 1)
            failures += 1
            level = logging.INFO if routine and failures == 1 else logging.WARNING
            logger.log(level, "watch of %s %s in %.1fs (%d in a row)", self.path, why, delay, failures)
            await asyncio.sleep(delay)

    async def _list(self) -> str:
        """Everything there is now, page by page; the view is replaced by it. Each object is
        reduced as it is decoded (Kube.list_pages), so no page is ever held as whole objects: a
        list of 8,000 pods held whole took more than the view of them, and any tenant can make
        large objects (a claim or pod of up to 1.5 MiB) in numbers."""
        sightings: list[Sighting[R]] = []

        def each(obj: Json) -> None:
            sighting = self._sighting(obj)
            if sighting is not None:
                sightings.append(sighting)

        written = self._written = set()
        try:
            meta = await self.kube.list_pages(self.path, {"labelSelector": self.selector}, each, PAGE_SIZE)
            listed_at = resource_version({"metadata": meta})
            self._replace(sightings, listed_at, written)
        finally:
            self._written = None
        self.fresh = True
        self.relists += 1
        self.synced.set()
        version = meta.get("resourceVersion")
        return version if isinstance(version, str) else ""

    async def _watch(self, version: str) -> str:
        """Events from `version` on, until the server ends the watch; the version it came to.
        A line that is not an event (not JSON, not an object, an object without metadata as
        one) is a ValueError: the view may have missed a change, so it lists again."""
        params = {
            "labelSelector": self.selector,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        async for line in self.kube.stream_lines(self.path, params):
            event = json.loads(line)
            obj = event.get("object") if isinstance(event, dict) else None
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata") or {}, dict):
                raise ValueError(f"not a watch event: {line[:200]!r}")
            kind = event.get("type")
            if kind == "ERROR":
                code = obj.get("code")
                raise Gone(f"{code} {obj.get('message', '')}") if code in (410, 504) else ValueError(obj)
            rv = metadata(obj).get("resourceVersion")
            if isinstance(rv, str) and rv:
                version = rv
            if kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                self._watched += 1
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self._apply(kind, obj)
        return version

    # ---- the view ----

    def sightings(self, items: list[Json]) -> list[Sighting[R]]:
        """Listed objects, each reduced; those that belong to no job are left out."""
        found = [self._sighting(obj) for obj in items]
        return [sighting for sighting in found if sighting is not None]

    def _sighting(self, obj: Json) -> Sighting[R] | None:
        place = self._place(obj) if isinstance(obj, dict) else None
        return None if place is None else Sighting(*place, self.reduce(obj))

    def _place(self, obj: Json) -> tuple[ObjectKey, int, Key] | None:
        """Where an object goes in the view: its own key, its version, its job's key."""
        meta = metadata(obj)
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        job = self.group_by(obj)
        if not isinstance(namespace, str) or not isinstance(name, str) or not name or job is None:
            return None
        return (namespace, name), resource_version(obj), (namespace, job)

    def _apply(self, kind: str, obj: Json, notify: bool = True) -> None:
        place = self._place(obj)
        if place is None:
            return
        okey, at, key = place
        known = self._versions.get(okey)
        if known is not None and at and (at < known[0] or (at == known[0] and kind != "DELETED")):
            # Older than what is held (a late answer to a write of ours), or what is held
            # already (the echo of one). A deletion answered at once carries the version of
            # its DELETED event, which must still remove it.
            return
        if self._gone_since(okey, at):
            return
        if kind == "DELETED":
            self._drop(okey, at, notify)
            return
        if known is not None and known[1] != key:
            self._drop(okey, 0, notify)  # relabelled to another job
            known = None
        reduced = self.reduce(obj)
        # A change the reduced form does not show (a kubelet's heartbeat of a status, a
        # label or annotation the core never reads) gives a reconcile nothing new to decide.
        unchanged = known is not None and self._by_job.get(key, {}).get(okey[1]) == reduced
        self._hold(Sighting(okey, at, key, reduced))
        if notify and not unchanged:
            self.on_change(key)

    def _gone_since(self, okey: ObjectKey, at: int) -> bool:
        """Whether this version of the object was deleted since, as far as the view knows."""
        deleted_at = self._tombstones.get(okey)
        return deleted_at is not None and bool(at) and at <= deleted_at

    def _hold(self, sighting: Sighting[R]) -> None:
        self._by_job.setdefault(sighting.job, {})[sighting.okey[1]] = sighting.reduced
        self._versions[sighting.okey] = (sighting.at, sighting.job)

    def _drop(self, okey: ObjectKey, at: int, notify: bool = True) -> None:
        known = self._versions.pop(okey, None)
        if at:
            self._tombstones.put(okey, at, time.monotonic())
        if known is None:
            return
        key = known[1]
        objects = self._by_job.get(key, {})
        objects.pop(okey[1], None)
        if not objects:
            self._by_job.pop(key, None)
        if notify:
            self.on_change(key)

    def _replace(
        self, sightings: list[Sighting[R]], listed_at: int, written: set[ObjectKey] | None = None
    ) -> None:
        """The view becomes the list, except objects our own writes put in or removed since it
        began (`written`), which are as new as the list or newer. Only jobs whose objects it
        changes are told (one added, gone, or at another version): telling every job made a
        relist reconcile them all.

        The watch is not running while a LIST is made, so anything else held above the list's
        version is from before the versions went back (etcd restored from a backup): it, and
        every deletion remembered, is forgotten, or an object seen then would stay a ghost and
        one made since would be hidden by a deletion at a higher version."""
        written = written or set()
        held_at = max((at for okey, (at, _) in self._versions.items() if okey not in written), default=0)
        deleted_at = max((at for okey, at in self._tombstones.items() if okey not in written), default=0)
        if listed_at and max(held_at, deleted_at) > listed_at:
            logger.warning(
                "LIST of %s is at resourceVersion %d, below the %d the view saw: the versions went "
                "back (etcd restored?); forgetting what was seen before and taking the list as it is",
                self.path,
                listed_at,
                max(held_at, deleted_at),
            )
            self._tombstones.keep_only(lambda okey: okey in written)
        before, held = self._versions, self._by_job
        self._versions, self._by_job = {}, {}
        for okey in written:
            known = before.get(okey)
            reduced = held.get(known[1], {}).get(okey[1]) if known is not None else None
            if known is not None and reduced is not None:
                self._hold(Sighting(okey, known[0], known[1], reduced))
        for sighting in sightings:
            known = self._versions.get(sighting.okey)
            if known is not None and sighting.at and sighting.at <= known[0]:
                continue  # our write is as new, or newer
            if not self._gone_since(sighting.okey, sighting.at):
                if known is not None and known[1] != sighting.job:
                    self._versions.pop(sighting.okey)
                    self._by_job.get(known[1], {}).pop(sighting.okey[1], None)
                self._hold(sighting)
        changed: set[Key] = set()
        for okey, (at, key) in self._versions.items():
            was = before.get(okey)
            if was is None or was[0] != at or not at:
                changed.add(key)
            if was is not None and was[1] != key:
                changed.add(was[1])
        changed.update(key for okey, (_, key) in before.items() if okey not in self._versions)
        self._by_job = {key: objects for key, objects in self._by_job.items() if objects}
        for key in changed:
            self.on_change(key)


class LatestJobs:
    """The newest version seen of each job, of every kind served: kopf's watch events and our
    own status writes.

    A job once seen deleted stays deleted: a late answer to a write must not bring it back.
    A TFMultiWorkerJob and a TFJob may share a name in one namespace: they would share their
    pods' names, so only one runs, the one created first (`get`); the other is told so.
    """

    def __init__(self) -> None:
        self._jobs: dict[Key, dict[str, Json]] = {}  # by (namespace, name), then by kind
        self._deleted: Tombstones[str, bool] = Tombstones()  # by uid

    def get(self, key: Key) -> Json | None:
        """The job of that name; of two kinds, the one created first."""
        held = self._jobs.get(key)
        if not held:
            return None
        if len(held) == 1:
            return next(iter(held.values()))
        return min(held.values(), key=_created_first)

    def held(self, key: Key) -> list[Json]:
        """Every job of that name held, of every kind."""
        return list((self._jobs.get(key) or {}).values())

    def rivals(self, key: Key) -> list[Json]:
        """Jobs of that name that `get` does not give: they wait for it to go."""
        chosen = self.get(key)
        return [job for job in (self._jobs.get(key) or {}).values() if job is not chosen]

    def put(self, job: Json) -> bool:
        """Keep the job if it is newer than the one held; False when it is not (an echo)."""
        meta = job.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if meta.get("uid") in self._deleted:
            return False
        kinds = self._jobs.setdefault(key, {})
        kind = str(job.get("kind") or "")
        held = kinds.get(kind)
        at = resource_version(job)
        if held is not None and at and at <= resource_version(held):
            return False
        kinds[kind] = _held(job, held)
        return True

    def uids(self, kind: str | None = None) -> dict[Key, str]:
        """The UID of each job held (of `kind`, or the one `get` gives)."""
        found = {}
        for key, kinds in self._jobs.items():
            job = kinds.get(kind) if kind is not None else self.get(key)
            if job is not None:
                found[key] = str((job.get("metadata") or {}).get("uid") or "")
        return found

    def all_uids(self, key: Key) -> set[str]:
        return {
            str((job.get("metadata") or {}).get("uid") or "") for job in (self._jobs.get(key) or {}).values()
        }

    def remove(self, job: Json) -> None:
        meta = job.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        kinds = self._jobs.get(key) or {}
        kind = str(job.get("kind") or "")
        held = kinds.get(kind)
        if held is not None and (held.get("metadata") or {}).get("uid") == meta.get("uid"):
            del kinds[kind]
            if not kinds:
                del self._jobs[key]
        self._deleted.put(str(meta.get("uid")), True, time.monotonic())


def _held(job: Json, before: Json | None) -> Json:
    """The job as held: without its managedFields, and its spec cut if too large to hold
    (`held_job`). The spec changes only with metadata.generation, so a status write's echo
    keeps what was measured of it before."""
    job = _without_managed_fields(job)
    meta, was = job.get("metadata") or {}, (before or {}).get("metadata") or {}
    # The same job (a job re-created under its name while a DELETED was missed also starts
    # at generation 1) at the same generation: the same spec.
    same = meta.get("generation") and (meta.get("uid"), meta.get("generation")) == (
        was.get("uid"),
        was.get("generation"),
    )
    if before is not None and same:
        return job if cut_spec_reason(before) is None else {**job, "spec": before["spec"]}
    return held_job(job)


def _without_managed_fields(job: Json) -> Json:
    """The job as held: without metadata.managedFields, which nothing here reads, and which
    mirror every field of the spec and the status (more than half of a job held: history.md,
    "The operator's memory at 8,000 pods"). The object given is left as it is (kopf's)."""
    meta = job.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return job
    return {**job, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _created_first(job: Json) -> tuple[str, str]:
    meta = job.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(job.get("kind") or "")


__all__ = ["Informer", "LatestJobs", "Tombstones", "resource_version"]
