"""Jobs deleted while the watch could not see them, and Kueue Workloads their pods left:
found by listing, and forgotten or deleted, by level.

kopf lists jobs again after a watch expires but tells nothing of those deleted in the gap;
the operator would keep such a job in memory, write its status into a 404 and create pods
for a dead owner. Kueue holds a deleted job's pods until their Workload goes, and the
Workload goes only with its pods: the DELETED event ends them, once; a deletion during a
failover is missed, and this catches it.
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

    async def end_orphaned_workloads(self) -> None:
        """The Workloads of pods whose job is gone."""
        for view in self.pods:
            for key in view.jobs():
                live = self.jobs.all_uids(key)
                groups = {
                    owned.pod.pod_group
                    for owned in view.of_job(key)
                    if owned.pod is not None and owned.pod.pod_group and not live & owned.owners
                }
                for group in sorted(g for g in groups if g):
                    logger.info("ending Workload %s/%s: its job is gone", key[0], group)
                    await self.kube.delete_workload(key[0], group)

    async def end_workloads_of_deleted(self, key: Key, uid: str) -> None:
        """At once, on a job's DELETED event: its Workloads, by their names."""
        namespace, name = key
        prefix = pod_group_name_prefix(name, uid)
        for workload in await self.kube.list_workload_names(namespace):
            if workload.startswith(prefix):
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
