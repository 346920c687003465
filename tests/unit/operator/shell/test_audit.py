"""The job audit's end of Kueue Workloads: only those of pods the operator made for a job it
held and saw deleted, proven by the UIDs it recorded, never by a pod's labels or owners."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from loopback import kube_serving
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube.informer import Informer, LatestJobs, ignore_changes
from tfmw_operator.shell.audit import JobAudit, is_pod_group_of
from wrappers import job, pod

Json = dict[str, Any]
NS = "team"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"


class KueueApi:
    """Kueue's Workloads as the API server serves them; what was asked and deleted."""

    def __init__(self, workloads: list[Json], jobs: list[Json] | None = None) -> None:
        self.workloads = {w["metadata"]["name"]: w for w in workloads}
        self.read: list[str] = []
        self.deleted: list[tuple[str, Json]] = []
        self.jobs = jobs  # the namespace's jobs as a list serves them; None: the list fails
        self.jobs_listed = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(f"/apis/tfmw.dev/v1alpha1/namespaces/{NS}/tfmwjobs", self.list_jobs)
        app.router.add_get(WORKLOADS, self.list)
        app.router.add_get(WORKLOADS + "/{name}", self.get)
        app.router.add_delete(WORKLOADS + "/{name}", self.delete)
        return app

    async def list_jobs(self, request: web.Request) -> web.Response:
        self.jobs_listed += 1
        if self.jobs is None:
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        items = [{"metadata": {k: j["metadata"][k] for k in ("name", "namespace", "uid")}} for j in self.jobs]
        return web.json_response({"metadata": {"resourceVersion": "9"}, "items": items})

    async def list(self, request: web.Request) -> web.Response:
        return web.json_response({"metadata": {}, "items": list(self.workloads.values())})

    async def get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.read.append(name)
        if name not in self.workloads:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        return web.json_response(self.workloads[name])

    async def delete(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = json.loads(await request.read() or b"{}")
        self.deleted.append((name, body))
        return web.json_response(self.workloads.get(name, {}))


def workload(name: str, *owner_pods: Json, group: bool = True, uid: str = "wl-uid") -> Json:
    """A Workload as Kueue makes one for a plain-pod group: named as the group, owned by its pods."""
    meta: Json = {
        "name": name,
        "namespace": NS,
        "uid": uid,
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
            for p in owner_pods
        ],
    }
    if group:
        meta["annotations"] = {"kueue.x-k8s.io/is-group-workload": "true"}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta}


def queued_job(name: str) -> Json:
    obj = job(name, namespace=NS).queue("q").obj()
    obj["metadata"]["resourceVersion"] = "5"
    return obj


def worker(job_obj: Json, index: int) -> Json:
    """A worker of the job as the operator makes it (its one owner the job), in its attempt-0 group."""
    made = pod(job_obj, index).obj()
    made["metadata"]["resourceVersion"] = "7"
    made["metadata"]["uid"] = f"pod-{job_obj['metadata']['name']}-{index}"
    return made


def group_of(pod_obj: Json) -> str:
    group: str = pod_obj["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    return group


@asynccontextmanager
async def audit_of(api: KueueApi) -> AsyncIterator[tuple[JobAudit, LatestJobs, Informer[Owned]]]:
    async with kube_serving(api.app()) as kube:
        jobs = LatestJobs()
        view: Informer[Owned] = Informer(kube, "/api/v1/pods", Owned.pod_of, ignore_changes)
        yield JobAudit(kube, jobs, [view], (NS,), forget=lambda key: None), jobs, view


def run_audit(
    api: KueueApi, held: Sequence[Json], pods: Sequence[Json], gone: Sequence[Json] = ()
) -> JobAudit:
    """Jobs `held` and `gone` seen by the operator (an audit recorded them), then `gone`
    deleted; the pods view holds `pods`; one audit of orphaned Workloads."""

    async def scenario() -> JobAudit:
        async with audit_of(api) as (audit, jobs, view):
            for j in [*held, *gone]:
                jobs.put(j)
            await audit.end_orphaned_workloads()  # an audit while they were all held
            for j in gone:
                jobs.remove(j)  # their DELETED events
            for p in pods:
                view.put(p)
            api.read.clear()
            await audit.end_orphaned_workloads()
            return audit

    return asyncio.run(scenario())


def test_a_pod_the_operator_never_made_does_not_end_another_jobs_workload() -> None:
    """A tenant who may create pods labels one with the pod group of another user's running
    job (and with tfmw's labels): no owner at all, or an owner UID the operator never held.
    The victim's Workload is neither read nor deleted."""
    victim = queued_job("victim")
    victims_worker = worker(victim, 0)
    api = KueueApi([workload(group_of(victims_worker), victims_worker)])
    bait = worker(job("anything", namespace=NS).obj(), 0)
    bait["metadata"]["uid"] = "bait-uid"
    bait["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group_of(victims_worker)
    no_owner = json.loads(json.dumps(bait))
    del no_owner["metadata"]["ownerReferences"]
    no_owner["metadata"]["name"] = "bait-0"
    forged = json.loads(json.dumps(bait))
    forged["metadata"]["ownerReferences"][0]["uid"] = "never-held"
    forged["metadata"]["name"] = "bait-1"
    run_audit(api, held=[victim], pods=[victims_worker, no_owner, forged])
    assert api.deleted == [] and api.read == []


def test_a_pod_owned_by_a_job_seen_deleted_ends_only_that_jobs_groups() -> None:
    """The tenant names, as the owner of its pod, a job of its own the operator saw deleted:
    the group label must be one the operator gives that job's pods, so another job's
    Workload (or a name merely starting like one of that job's) is never touched."""
    victim, own = queued_job("victim"), queued_job("mine")
    victims_worker = worker(victim, 0)
    api = KueueApi([workload(group_of(victims_worker), victims_worker)])
    bait = worker(own, 0)
    bait["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group_of(victims_worker)
    longer = worker(own, 1)
    longer["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group_of(longer) + "-x"
    elsewhere = worker(own, 2)
    elsewhere["metadata"]["labels"]["tfmw.dev/job-name"] = "victim"  # its key is not the gone job's
    run_audit(api, held=[victim], gone=[own], pods=[victims_worker, bait, longer, elsewhere])
    assert api.deleted == []
    assert api.read == []


def test_the_workload_of_a_job_seen_deleted_is_read_and_deleted_by_its_uid() -> None:
    gone = queued_job("mnist")
    workers = [worker(gone, 0), worker(gone, 1)]
    group = group_of(workers[0])
    api = KueueApi([workload(group, *workers, uid="the-workload")])
    audit = run_audit(api, held=[], gone=[gone], pods=workers)
    assert api.read == [group]
    assert api.deleted == [
        (group, {"propagationPolicy": "Background", "preconditions": {"uid": "the-workload"}})
    ]
    assert "uid-mnist" in audit._seen  # its pods are still there (Kueue's finalizer)


def test_a_workload_of_that_name_not_kueues_for_those_pods_is_left() -> None:
    """The name is the gone job's group's, but the Workload is not Kueue's pod-group Workload
    of its pods (none of them among its owners, or not marked a group's): left alone."""
    gone = queued_job("mnist")
    ours = worker(gone, 0)
    stranger = worker(queued_job("other"), 0)
    for made in (
        workload(group_of(ours), stranger),
        workload(group_of(ours), ours, group=False),
        workload(group_of(ours)),
    ):
        api = KueueApi([made])
        run_audit(api, held=[], gone=[gone], pods=[ours])
        assert api.read == [group_of(ours)] and api.deleted == []


def test_a_job_gone_with_its_pods_is_forgotten() -> None:
    api = KueueApi([])
    audit = run_audit(api, held=[queued_job("kept")], gone=[queued_job("mnist")], pods=[])
    assert audit._seen == {"uid-kept": (NS, "kept")}


def test_a_deleted_jobs_workloads_are_those_named_as_its_groups_exactly() -> None:
    gone = queued_job("mnist")
    group = group_of(worker(gone, 0))  # tfmw-mnist-uid-mnis-0
    names = [group, group[:-1] + "12", group[:-1] + "x-uid-abcd-0", "tfmw-other-uid-othe-0"]
    api = KueueApi([workload(name) for name in names])

    async def scenario() -> None:
        async with audit_of(api) as (audit, _, _):
            await audit.end_workloads_of_deleted((NS, "mnist"), "uid-mnist")

    asyncio.run(scenario())
    assert [name for name, _ in api.deleted] == names[:2]


def test_the_group_names_of_a_job() -> None:
    assert is_pod_group_of("mnist", "1234abcd-ef", "tfmw-mnist-1234abcd-0")
    assert is_pod_group_of("mnist", "1234abcd-ef", "tfmw-mnist-1234abcd-17")
    assert not is_pod_group_of("mnist", "1234abcd-ef", "tfmw-mnist-1234abcd-")
    assert not is_pod_group_of("mnist", "1234abcd-ef", "tfmw-mnist-1234abcd-0-x")
    assert not is_pod_group_of("mnist", "1234abcd-ef", "tfmw-mnist-1234abcd-\u0661")  # a digit, not ASCII
    assert not is_pod_group_of("mnist", "", "tfmw-mnist--0")


def test_a_job_deleted_before_this_operator_held_it_has_its_workload_ended_once_a_list_leaves_it_out() -> (
    None
):
    """A failover: the job was deleted while no replica led, so this one never held it. Its
    pods are in view; a list of the namespace's jobs made after them leaves its UID out."""
    deleted = queued_job("lost")
    lost_worker = worker(deleted, 0)
    api = KueueApi([workload(group_of(lost_worker), lost_worker, uid="lost-wl")], jobs=[])
    run_audit(api, held=[], pods=[lost_worker])
    assert api.jobs_listed >= 1
    assert [(name, body["preconditions"]) for name, body in api.deleted] == [
        (group_of(lost_worker), {"uid": "lost-wl"})
    ]


def test_a_pod_claiming_a_made_up_owner_whose_group_a_listed_job_could_have_ends_nothing() -> None:
    """A group's name carries only 8 characters of its job's UID: a pod made to claim an owner
    UID sharing them, with that live job's name, is no proof the job is gone."""
    victim = queued_job("victim")
    victims_worker = worker(victim, 0)
    forged = json.loads(json.dumps(victims_worker))
    forged["metadata"]["name"], forged["metadata"]["uid"] = "bait", "bait-uid"
    forged["metadata"]["ownerReferences"][0]["uid"] = victim["metadata"]["uid"][:8] + "-made-up"
    api = KueueApi([workload(group_of(victims_worker), victims_worker, forged)], jobs=[victim])
    run_audit(api, held=[], pods=[victims_worker, forged])
    assert api.jobs_listed >= 1
    assert api.deleted == [] and api.read == []


def test_a_namespace_whose_jobs_cannot_be_listed_ends_no_workload_of_a_job_never_held() -> None:
    deleted = queued_job("lost")
    lost_worker = worker(deleted, 0)
    api = KueueApi([workload(group_of(lost_worker), lost_worker)], jobs=None)
    run_audit(api, held=[], pods=[lost_worker])
    assert api.jobs_listed >= 1 and api.deleted == [] and api.read == []
