"""Which jobs keep their folders from the retention sweep, as the real API server lists them:
every kind's, served or not (shell/audit.py `live_job_uids`)."""

from __future__ import annotations

import asyncio

from kube import ClusterClient
from tfmw_operator.api import tfjob
from tfmw_operator.api.kinds import TFJOBS, TFMW_JOBS, TFJobKind
from tfmw_operator.kube.client import Kube, connection_info
from tfmw_operator.shell.audit import live_job_uids
from wrappers import simulated_job, simulated_tfjob


class NotInstalledKind(TFJobKind):
    plural = "tfmwabsentjobs"  # no CRD serves it: the API server answers 404


def test_the_jobs_uids_are_listed_page_by_page(kube: ClusterClient, namespace: str) -> None:
    """Pages of one job each: every job is in the list, whatever the page size."""
    made = {
        (namespace, name): kube.create_job(
            namespace, simulated_job(name).run_policy(suspend=True).manifest()
        )["metadata"]["uid"]
        for name in ("one", "two", "three")
    }

    async def listed() -> dict[tuple[str, str], str]:
        kube_client = Kube(connection_info())
        try:
            return await kube_client.list_job_uids(namespace, TFMW_JOBS, page=1)
        finally:
            await kube_client.close()

    assert asyncio.run(listed()) == made


def test_a_tfjobs_folder_is_kept_whether_or_not_tfjobs_are_served(
    kube: ClusterClient, namespace: str, tfjob_crd: None
) -> None:
    job = kube.create_job(namespace, simulated_job("kept").run_policy(suspend=True).manifest())
    created = kube.custom.create_namespaced_custom_object(
        tfjob.GROUP, tfjob.VERSION, namespace, tfjob.PLURAL, simulated_tfjob("kubeflows")
    )
    uids = {job["metadata"]["uid"], created["metadata"]["uid"]}

    async def listed() -> list[dict[str, set[str]]]:
        kube_client = Kube(connection_info())
        try:
            return [
                await live_job_uids(kube_client, (namespace,), (TFMW_JOBS, TFJOBS)),  # TFJobs served
                await live_job_uids(kube_client, (namespace,), (TFMW_JOBS,), (TFJOBS,)),  # --tfjobs=off
                await live_job_uids(kube_client, ("",), (TFMW_JOBS,), (TFJOBS,)),  # every namespace
                await live_job_uids(kube_client, (namespace,), (TFMW_JOBS, NotInstalledKind())),  # 404
            ]
        finally:
            await kube_client.close()

    served, unserved, everywhere, absent = asyncio.run(listed())
    assert served.get(namespace) == uids
    assert unserved.get(namespace) == uids
    assert everywhere.get(namespace) == uids
    assert absent.get(namespace) == {job["metadata"]["uid"]}
