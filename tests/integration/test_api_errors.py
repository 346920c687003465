"""Every class of API error on the real API server ends in a clear status: a quota that
refuses the Service, a fail-closed admission webhook that is down (500), and a job the
operator holds after it was deleted unseen."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube import ClusterClient, Json, SimulatedKubelet, kubectl, wait_for
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tfmw_operator.api.kinds import TFMW_JOBS, JobKind
from tfmw_operator.api.objects import Key
from tfmw_operator.kube.client import JOB_UIDS_PAGE, Kube, connection_info
from tfmw_operator.runtime.settings import Settings
from tfmw_operator.shell.controller import JobController
from watching import follow_in_thread
from wrappers import simulated_job, write_marker


def stalled(kube: ClusterClient, namespace: str, name: str) -> Json | None:
    conditions = kube.status(namespace, name).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Stalled" and c["status"] == "True"), None)


def test_a_quota_that_refuses_the_service_stalls_the_job_and_keeps_no_pod(
    kube: ClusterClient, namespace: str
) -> None:
    quota = {"metadata": {"name": "no-services"}, "spec": {"hard": {"services": "0"}}}
    kube.core.create_namespaced_resource_quota(namespace, quota)
    wait_for(
        "the quota to count",
        lambda: kube.core.read_namespaced_resource_quota("no-services", namespace).status.hard,
    )
    made: list[str] = []  # every pod the job ever had, by UID
    stop = threading.Event()
    follow_in_thread(
        kube.core.list_namespaced_pod,
        namespace,
        on_event=lambda kind, pod: made.append(pod["metadata"]["uid"]) if kind == "ADDED" else None,
        stop=stop,
    )
    try:
        kube.create_job(namespace, simulated_job("noservice", workers=4).manifest())
        condition = wait_for(
            "Stalled ServiceCreationRefused", lambda: stalled(kube, namespace, "noservice"), timeout=20
        )
        assert condition["reason"] == "ServiceCreationRefused" and "exceeded quota" in condition["message"]
        assert kube.status(namespace, "noservice")["phase"] == "Pending"
        # The first pod, sent beside the Service, is deleted before the job says it stalled;
        # the other three never were: no pod runs without its peers' names.
        assert kube.pods(namespace, "noservice") == []
        assert len(set(made)) <= 1, made
        time.sleep(3)  # past the first retry (2 s): made Service first, no pod is sent again
        assert len(set(made)) <= 1 and kube.pods(namespace, "noservice") == [], made
    finally:
        stop.set()
    kube.core.delete_namespaced_resource_quota("no-services", namespace)
    kube.wait_pods(namespace, "noservice", 4, timeout=60)  # backed off, then tried again


@pytest.fixture
def failing_webhook(kube: ClusterClient, namespace: str) -> Iterator[None]:
    """A fail-closed webhook on pod creation in this namespace, whose server is not there."""
    name = f"tfmw-test-down-{uuid.uuid4().hex[:6]}"
    kubectl("label", "namespace", namespace, f"tfmw-test-webhook={name}")
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "down.tfmw.test",
                "clientConfig": {"url": "https://127.0.0.1:1/down"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 2,
                "namespaceSelector": {"matchLabels": {"tfmw-test-webhook": name}},
            }
        ],
    }
    api = client.AdmissionregistrationV1Api(kube.api_client)
    api.create_validating_webhook_configuration(webhook)
    try:
        yield
    finally:
        with contextlib.suppress(ApiException):
            api.delete_validating_webhook_configuration(name)


@pytest.mark.usefixtures("failing_webhook")
def test_a_webhook_that_is_down_stalls_the_job_then_its_pending_timeout_fails_it(
    kube: ClusterClient, namespace: str
) -> None:
    kube.create_job(namespace, simulated_job("hooked").run_policy(pendingTimeoutSeconds=12).manifest())
    condition = wait_for("Stalled PodCreationRefused", lambda: stalled(kube, namespace, "hooked"), timeout=30)
    assert condition["reason"] == "PodCreationRefused" and "down.tfmw.test" in condition["message"]
    status = kube.wait_phase(namespace, "hooked", "Failed", timeout=40)
    assert status["reason"] == "PendingTimeout" and "pendingTimeoutSeconds=12" in status["message"]


def test_a_job_deleted_unseen_is_forgotten_after_two_lists(kube: ClusterClient, namespace: str) -> None:
    kept = kube.create_job(namespace, simulated_job("kept").run_policy(suspend=True).manifest())
    gone = {**kept, "metadata": {**kept["metadata"], "name": "gone", "uid": str(uuid.uuid4())}}
    replaced = {**kept, "metadata": {**kept["metadata"], "uid": str(uuid.uuid4())}}  # same name, older job

    async def audit() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        controller = JobController(
            Kube(connection_info()), Settings(Path("/nonexistent"), namespaces=(namespace,))
        )
        try:
            controller.jobs.put(gone)  # deleted while the watch could not see it
            controller.jobs.put(replaced)  # deleted and created again under its name, unseen
            suspects = await controller.audit.once({})
            held_after_one = set(controller.jobs.uids())
            await controller.audit.once(suspects)
            return held_after_one, set(controller.jobs.uids())
        finally:
            await controller.kube.close()

    after_one, after_two = asyncio.run(audit())
    assert after_one == {(namespace, "gone"), (namespace, "kept")}  # one list is not enough
    assert after_two == set()  # neither is what the API server holds


def test_an_audit_lists_no_job_while_the_counts_agree(kube: ClusterClient, namespace: str) -> None:
    kept = kube.create_job(namespace, simulated_job("kept").run_policy(suspend=True).manifest())
    kube.create_job(namespace, simulated_job("other").run_policy(suspend=True).manifest())
    gone = {**kept, "metadata": {**kept["metadata"], "name": "gone", "uid": str(uuid.uuid4())}}
    lists: list[str] = []

    class Counted(Kube):
        async def list_job_uids(
            self, namespace: str = "", kind: JobKind = TFMW_JOBS, page: int = JOB_UIDS_PAGE
        ) -> dict[Key, str]:
            lists.append(namespace)
            return await super().list_job_uids(namespace, kind, page)

    async def audit() -> tuple[dict[Key, str], dict[Key, str], int | None]:
        controller = JobController(
            Counted(connection_info()), Settings(Path("/nonexistent"), namespaces=(namespace,))
        )
        try:
            for name in ("kept", "other"):
                job = kube.get_job(namespace, name)
                assert job is not None
                controller.jobs.put(job)
            agreed = await controller.audit.once({})
            controller.jobs.put(gone)  # deleted while the watch could not see it
            suspects = await controller.audit.once({})
            return agreed, suspects, await controller.kube.count_jobs(namespace)
        finally:
            await controller.kube.close()

    agreed, suspects, count = asyncio.run(audit())
    assert count == 2
    assert agreed == {} and suspects == {(namespace, "gone"): gone["metadata"]["uid"]}
    assert lists == [namespace]  # the counts agreed first: only the second audit listed the jobs


def test_a_running_job_whose_service_cannot_come_back_still_sees_its_marker(
    kube: ClusterClient, kubelet: SimulatedKubelet, namespace: str, shared_root: Path
) -> None:
    job = kubelet.start_job(namespace, simulated_job("nodns").manifest())
    quota = {"metadata": {"name": "no-services"}, "spec": {"hard": {"services": "0"}}}
    kube.core.create_namespaced_resource_quota(namespace, quota)
    wait_for(
        "the quota to count",
        lambda: kube.core.read_namespaced_resource_quota("no-services", namespace).status.used,
    )
    kube.core.delete_namespaced_service("nodns", namespace)
    kube.wait_events(namespace, "nodns", {"ServiceRefused"}, timeout=20)
    write_marker(shared_root / namespace / "nodns", job["metadata"]["uid"])
    kube.wait_phase(namespace, "nodns", "Succeeded", timeout=20)
