"""Kubeflow's own SDK end-to-end test for TFJob, unmodified: sdk/python/test/e2e/test_e2e_tfjob.py
with its utils.py, constants.py and conftest.py, run in place from training-operator's module
at TFJOB_VERSION with kubeflow-training 1.9.4 from PyPI (its own virtual environment), as
Kubeflow's CI runs it (`pytest -s sdk/python/test/e2e --log-cli-level=debug --namespace=...`
from the module root), against the controller under test.

Without GANG_SCHEDULER_NAME (volcano or scheduler-plugins) the file's own skipif runs
test_sdk_e2e and skips test_sdk_e2e_with_gang_scheduling; this test requires exactly that.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from kube import ClusterClient
from tfjob.harness import Controller, Result, TFJobs, describe, log, record
from tfjob.upstream import E2E_TEST

JOB_NAME = "tfjob-mnist-ci-test"  # the test's own
TIMEOUT = 1200  # the test waits up to 900 s for Succeeded


def outcomes(junit: Path) -> dict[str, str]:
    """test name -> passed | skipped: <reason> | failed: <message>, from pytest's JUnit XML."""
    found = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        skipped, failure = case.find("skipped"), case.find("failure") or case.find("error")
        if failure is not None:
            found[name] = f"failed: {failure.get('message', '')}"
        elif skipped is not None:
            found[name] = f"skipped: {skipped.get('message', '')}"
        else:
            found[name] = "passed"
    return found


def test_kubeflows_sdk_e2e_test_passes_unmodified(
    kube: ClusterClient,
    namespace: str,
    module: Path,
    kubeflow_python: str,
    controller: Controller,
    controller_name: str,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GANG_SCHEDULER_NAME" and not k.startswith("PYTEST")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the module cache is read-only
    with tempfile.TemporaryDirectory() as scratch:
        junit = Path(scratch) / "junit.xml"
        command = [
            kubeflow_python, "-m", "pytest", "-s", str(E2E_TEST), "--log-cli-level=debug",
            f"--namespace={namespace}",
            # Beside Kubeflow's own command: no cache folder in the read-only module, results as XML.
            "-p", "no:cacheprovider", f"--junitxml={junit}",
        ]  # fmt: skip
        log(f"running {' '.join(command[2:])} in {module}")
        started = time.monotonic()
        done = subprocess.run(command, cwd=module, env=env, timeout=TIMEOUT, check=False)
        seconds = time.monotonic() - started
        found = outcomes(junit) if junit.exists() else {}
    jobs = TFJobs(kube, namespace)
    passed = done.returncode == 0 and found.get("test_sdk_e2e") == "passed"
    record(
        Result(
            f"SDK {E2E_TEST.name}::test_sdk_e2e",
            controller_name,
            "passed" if passed else f"FAILED ({found.get('test_sdk_e2e', 'no result')})",
            seconds,
            note="test_sdk_e2e_with_gang_scheduling: "
            + found.get("test_sdk_e2e_with_gang_scheduling", "not found"),
        )
    )
    if not passed:
        controller.check_alive()
        raise AssertionError(
            f"Kubeflow's e2e test: {found}, exit {done.returncode}\n{describe(jobs, JOB_NAME)}"
        )
    assert found == {
        "test_sdk_e2e": "passed",
        "test_sdk_e2e_with_gang_scheduling": "skipped: For gang-scheduling",
    }
    assert jobs.get(JOB_NAME) is None  # the test deletes its job
