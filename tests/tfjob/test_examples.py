"""Every TFJob manifest of Kubeflow's examples/tensorflow (training-operator's module at
TFJOB_VERSION), each against the controller under test, one after another, with the images
built here (hack/tfjob-images.sh). What is changed to run them here is harness.adapt's and
Volumes.provide's list, printed beside each result. Expected: Succeeded (Kubeflow's e2e
verdict: Created and Succeeded true; Running, Restarting, Failed not), or for a manifest
that asks for a GPU, its pods Pending for lack of one.
"""

from __future__ import annotations

import time

import pytest
from kube import ClusterClient, wait_for
from tfjob.harness import (
    LOGS,
    Controller,
    Example,
    Result,
    TFJobs,
    Volumes,
    adapt,
    claim_names,
    describe,
    examples,
    log,
    record,
    true_conditions,
    wait_finished,
)
from tfjob.upstream import manifests, module_dir, pinned_version
from tfmw_operator.api.tfjob import REPLICA_TYPES

TIMEOUT = 600
PENDING_CHECK = 60  # seconds for the scheduler to say why a pod cannot run


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "example" in metafunc.fixturenames:
        found = examples(manifests(module_dir(pinned_version())))
        metafunc.parametrize("example", found, ids=[e.id for e in found])


def unschedulable_for(jobs: TFJobs, name: str, resource: str) -> str | None:
    """The scheduler's word, in each pod's PodScheduled condition (Events may be dropped by
    its rate limit), that every pod of the job is Pending for lack of the resource."""
    pods = jobs.pods(name)
    messages = []
    for pod in pods:
        scheduled = [c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
        said = [str(c.get("message") or "") for c in scheduled if c["status"] == "False"]
        if pod["status"].get("phase") != "Pending" or not any(resource in message for message in said):
            return None
        messages.append(said[-1])
    return messages[-1] if messages else None


def test_example(
    example: Example,
    kube: ClusterClient,
    namespace: str,
    volumes: Volumes,
    controller: Controller,
    controller_name: str,
) -> None:
    jobs = TFJobs(kube, namespace)
    job = adapt(example, namespace)
    name = job["metadata"]["name"]
    claims = claim_names(job)
    for claim in claims:
        volumes.provide(claim, example)
    log(f"{example.id}: creating TFJob {name}; expecting {example.expect}")
    started = time.monotonic()
    outcome, note = "did not finish", example.why
    try:
        jobs.create(job)
        if example.expect == "Succeeded":
            try:
                finished = wait_finished(jobs, name, TIMEOUT, controller.check_alive)
            except AssertionError:
                raise AssertionError(
                    f"{example.id}: not finished in {TIMEOUT}s\n{describe(jobs, name)}"
                ) from None
            conditions = true_conditions(finished)
            outcome = "Succeeded" if "Succeeded" in conditions else f"Failed ({sorted(conditions)})"
            assert "Succeeded" in conditions, describe(jobs, name)
            # Kubeflow's e2e verdict (sdk/python/test/e2e/utils.py: verify_job_e2e).
            assert conditions == {"Created", "Succeeded"}, conditions
            status = finished["status"]
            assert status.get("startTime") and status.get("completionTime"), status
            # Keyed as Kubeflow's defaulter spells the replica types, whatever the manifest's case.
            spelt = {REPLICA_TYPES[key.lower()] for key in job["spec"]["tfReplicaSpecs"]}
            assert set(status.get("replicaStatuses") or {}) <= spelt, status
        else:
            resource = example.expect.split(": ", 1)[1]
            said = wait_for(
                f"{name}'s pods unschedulable for {resource}",
                lambda: unschedulable_for(jobs, name, resource),
                timeout=PENDING_CHECK,
                interval=1,
            )
            outcome = f"Pending: {resource}"
            note = f"{example.why}. Scheduler: {said}"
            assert "Running" not in true_conditions(jobs.get(name))
    finally:
        seconds = time.monotonic() - started
        record(Result(example.id, controller_name, outcome, seconds, list(example.changes), note))
        jobs.keep_logs(name, LOGS / example.id.replace("/", "_").replace(" ", "_"))
        jobs.delete_and_wait(name)
        for claim in claims:
            volumes.release(claim)
    log(f"{example.id}: {outcome} in {seconds:.0f}s")
