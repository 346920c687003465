"""Jobs deleted while the watch could not see them, and Kueue Workloads their pods left:
found by listing, and forgotten or deleted, by level.

kopf lists jobs again after a watch expires but tells nothing of those deleted in the gap;
the operator would keep such a job in memory, write its status into a 404 and create pods
for a dead owner. Kueue holds a deleted job's pods until their Workload goes, and the
Workload goes only with its pods: the DELETED event ends them, once; a deletion during a
failover is missed, and this catches it: what it ends is proven its own by the UIDs it
recorded, or, for a job it never held, proven gone by a list made after its pods were seen;
never by a name or a label (anyone who may create a pod writes its labels and its owners).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from tfmw_operator.api.kinds import TFMW_JOBS, JobKind
from tfmw_operator.api.objects import Key
from tfmw_operator.core.builders import pod_group_name_prefix
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube.client import ApiError, Kube
from tfmw_operator.kube.informer import Informer, LatestJobs

logger = logging.getLogger(__name__)

# A job that lists this far apart both leave out is forgotten.
JOB_AUDIT_SECONDS = 60.0
# Kueue's mark on the Workload it makes for a plain-pod group (named as the group, owned by
# the group's pods): a Workload without it is no pod group's, and not one to end here.
KUEUE_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"


def is_pod_group_of(job_name: str, job_uid: str, group: str) -> bool:
    """Whether `group` is a name the operator gives that job's pod groups (builders.
    pod_group_name: its prefix, then an attempt's number), and nothing longer: a prefix alone
    would also match another job's group whose name happens to continue it."""
    prefix = pod_group_name_prefix(job_name, job_uid)
    attempt = group[len(prefix) :]
    return bool(job_uid) and group.startswith(prefix) and attempt.isascii() and attempt.isdecimal()


def _only(owners: frozenset[str]) -> str | None:
    """The one owner of a pod the operator made (its job, as controller); None for any other
    number: such a pod is not as the operator makes them."""
    return next(iter(owners)) if len(owners) == 1 else None


class JobAudit:
    def __init__(
        self,
        kube: Kube,
        jobs: LatestJobs,
        pods: Iterable[Informer[Owned]],
        namespaces: tuple[str, ...],
        forget: Callable[[Key], None],
        kinds: Iterable[JobKind] = (TFMW_JOBS,),
    ) -> None:
        self.kube = kube
        self.jobs = jobs
        self.pods = list(pods)
        self.namespaces = namespaces or ("",)
        self.forget = forget
        self.kinds = tuple(kinds)  # the kinds of job served
        # Every job held since this operator started, by UID: a UID here and held no more is
        # a job seen deleted (LatestJobs lets a job go only once it is known gone). Kept while
        # the job is held or a pod it owns is in view, so no longer than there is work for it.
        self._seen: dict[str, Key] = {}

    async def run(self) -> None:
        """Until cancelled: an audit every JOB_AUDIT_SECONDS."""
        suspects: dict[str, dict[Key, str]] = {}
        while True:
            await asyncio.sleep(JOB_AUDIT_SECONDS)
            try:
                for kind in self.kinds:
                    suspects[kind.kind] = await self.once(suspects.get(kind.kind, {}), kind)
                await self.end_orphaned_workloads()
            except Exception as error:  # the next audit tries again; nothing is forgotten meanwhile
                logger.warning("listing jobs to find those deleted unseen failed: %s", error)

    async def once(self, suspects: dict[Key, str], kind: JobKind = TFMW_JOBS) -> dict[Key, str]:
        """Forget the jobs of `kind` held that this list and the one before (`suspects`) both
        leave out; the jobs this list leaves out, to look at next time. Two lists, because a
        job created while one is being made may be held already and not in it.

        While nothing is suspect and the API server counts as many jobs as are held, no list
        is made: a job deleted unseen stays held, so the counts part as soon as every job
        created is seen (and the watch misses no creation: it resumes, or lists again). A
        list of 1,000 jobs' metadata was all of the operator's idle CPU (docs/benchmarks.md)."""
        self._note_held()  # before any is forgotten: its Workloads are still to be ended
        if not suspects and await self._counts_agree(kind):
            return {}
        listed: dict[Key, str] = {}
        for namespace in self.namespaces:
            listed |= await self.kube.list_job_uids(namespace, kind)
        missing = {key: uid for key, uid in self.jobs.uids(kind.kind).items() if listed.get(key) != uid}
        for key, uid in missing.items():
            job = next((j for j in self.jobs.held(key) if j.get("kind") == kind.kind), None)
            if suspects.get(key) == uid and job is not None:
                logger.info("%s %s/%s (uid %s) was deleted while unseen: forgotten", kind.kind, *key, uid)
                self.jobs.remove(job)
                self.forget(key)
        return {key: uid for key, uid in missing.items() if suspects.get(key) != uid}

    async def _counts_agree(self, kind: JobKind) -> bool:
        counted = 0
        for namespace in self.namespaces:
            count = await self.kube.count_jobs(namespace, kind)
            if count is None:
                return False
            counted += count
        return counted == len(self.jobs.uids(kind.kind))

    def _note_held(self) -> dict[str, Key]:
        """Record the UID of every job held now, of every kind; those held, by UID."""
        held = {uid: key for key in self.jobs.uids() for uid in self.jobs.all_uids(key) if uid}
        self._seen.update(held)
        return held

    async def end_orphaned_workloads(self) -> None:
        """The Workloads of pods whose job is gone: a job this operator held and has seen
        deleted, by its recorded UID. A pod counts only with that job as its one owner and
        the job's name as its job label; its group only by a name the operator gives that
        job's groups (is_pod_group_of); and a Workload of that name is ended only when Kueue
        made it for that group with one of those very pods among its owners, and only that
        Workload (by its UID). A pod with no owner or any owner, carrying a group label that
        names another job's Workload, is anyone's to create: it never ends that Workload.

        A job this operator never held (deleted during a failover, before it first held it) is
        gone when a list of its namespace's jobs, made after its pods were seen, leaves its UID
        out (`_listed_gone`): the same checks then apply."""
        held = self._note_held()
        gone = {uid: key for uid, key in self._seen.items() if uid not in held}
        owning: set[str] = set()  # every owner of a pod in view
        groups: dict[tuple[str, str, str], set[str]] = {}  # (namespace, group, job UID): its pods' UIDs
        unknown: dict[tuple[str, str, str], set[str]] = {}  # the same, of an owner never held
        for view in self.pods:
            for key in view.jobs():
                for owned in view.of_job(key):
                    owning |= owned.owners
                    pod, owner = owned.pod, _only(owned.owners)
                    if pod is None or not pod.pod_group or not pod.uid or owner is None:
                        continue
                    if not is_pod_group_of(key[1], owner, pod.pod_group):
                        continue
                    if gone.get(owner) == key:
                        groups.setdefault((key[0], pod.pod_group, owner), set()).add(pod.uid)
                    elif owner not in self._seen:  # every UID held is recorded there
                        unknown.setdefault((key[0], pod.pod_group, owner), set()).add(pod.uid)
        # A job gone with no pod left in view has nothing left to end: its record goes.
        self._seen = {uid: key for uid, key in self._seen.items() if uid in held or uid in owning}
        groups |= await self._listed_gone(unknown)
        for (namespace, group, job_uid), pods in sorted(groups.items()):
            try:
                await self._end_workload(namespace, group, job_uid, pods)
            except ApiError as error:  # the next audit tries again; the other groups go on
                logger.warning("ending Workload %s/%s failed: %s", namespace, group, error)

    async def _listed_gone(
        self, unknown: dict[tuple[str, str, str], set[str]]
    ) -> dict[tuple[str, str, str], set[str]]:
        """Of the groups whose job this operator never held (deleted during a failover, before
        it first held it), those no job of a list made now could own, of every kind served:
        the pods were in view before the list, so their job was made before it. A group's
        name carries its job's name and only 8 characters of its UID, and a pod's owner is
        anyone's to write: so a group that a listed job's groups could be named as is left,
        whatever UID its pods claim. Any namespace whose list fails ends nothing."""
        live: dict[str, list[tuple[str, str]]] = {}
        for namespace in sorted({namespace for namespace, _, _ in unknown}):
            try:
                for kind in self.kinds:
                    listed = await self.kube.list_job_uids(namespace, kind)
                    live.setdefault(namespace, []).extend((name, uid) for (_, name), uid in listed.items())
            except ApiError as error:
                logger.warning(
                    "listing the jobs of %s to end orphaned Workloads failed: %s", namespace, error
                )
                live.pop(namespace, None)
        return {
            (namespace, group, owner): pods
            for (namespace, group, owner), pods in unknown.items()
            if namespace in live
            and not any(uid == owner or is_pod_group_of(name, uid, group) for name, uid in live[namespace])
        }

    async def _end_workload(self, namespace: str, group: str, job_uid: str, pods: set[str]) -> None:
        """Delete the Workload of `group` if Kueue made it for that group and one of `pods`
        (the gone job's own) is among its owners; exactly the one read (by its UID)."""
        workload = await self.kube.get_workload(namespace, group)
        if workload is None:
            return
        meta = workload.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return  # going already: Kueue removes its finalizer
        owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
        # As Kueue makes a pod group's Workload: owned by the group's pods, by nothing else.
        by_pods = all(o.get("kind") == "Pod" and o.get("apiVersion") == "v1" for o in owners)
        owner_pods = {str(o.get("uid")) for o in owners}
        kueue_group = (meta.get("annotations") or {}).get(KUEUE_GROUP_WORKLOAD) == "true"
        uid = str(meta.get("uid") or "")
        if not (kueue_group and owners and by_pods and owner_pods & pods and uid):
            logger.info(
                "not ending Workload %s/%s: not Kueue's Workload of the pods of job uid %s",
                namespace,
                group,
                job_uid,
            )
            return
        logger.info("ending Workload %s/%s: its job (uid %s) is gone", namespace, group, job_uid)
        await self.kube.delete_exact_workload(namespace, group, uid)

    async def end_workloads_of_deleted(self, key: Key, uid: str) -> None:
        """At once, on a job's DELETED event: its Workloads, by the names its groups have."""
        namespace, name = key
        if uid:
            self._seen[uid] = key  # should this fail, the audit ends them
        for workload in await self.kube.list_workload_names(namespace):
            if is_pod_group_of(name, uid, workload):
                await self.kube.delete_workload(namespace, workload)


async def live_job_uids(
    kube: Kube, namespaces: Iterable[str], kinds: Iterable[JobKind], unserved: Iterable[JobKind] = ()
) -> dict[str, set[str]]:
    """Each namespace's jobs' UIDs (every namespace: ""), of every kind served and, where the
    operator may still list them, of the kinds it serves no more. The folder retention keeps a
    folder while a job of its namespace has its UID: a TFJob's folder is as much its data as a
    TFMultiWorkerJob's, and stays its data when the operator stops serving TFJobs. A kind
    whose resource is not installed (404) has no jobs, and so has an unserved kind the
    operator may not list (403); any other failure raises, and the sweep removes nothing."""
    live: dict[str, set[str]] = {}
    kinds_listed = [(kind, (404,)) for kind in kinds] + [(kind, (403, 404)) for kind in unserved]
    for kind, none_when in kinds_listed:
        for namespace in namespaces:
            try:
                listed = await kube.list_job_uids(namespace, kind)
            except ApiError as error:
                if error.status not in none_when:
                    raise
                continue
            for (job_namespace, _), uid in listed.items():
                live.setdefault(job_namespace, set()).add(uid)
    return live
