"""Kubeflow's TFJob notebook, examples/tensorflow/image-classification/create-tfjob.ipynb
(Chief, PS and 2 Workers through the SDK: create, get, conditions, wait, is_job_succeeded,
logs, delete), its code cells run in order with the SDK's own Python against the controller
under test (notebook_driver.py says what differs from Jupyter).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from kube import REPO, ClusterClient
from tfjob.harness import Controller, Result, TFJobs, describe, log, record
from tfjob.upstream import notebooks

TIMEOUT = 900
DRIVER = Path(__file__).resolve().parent / "notebook_driver.py"


def test_kubeflows_tfjob_notebook_runs_to_succeeded(
    kube: ClusterClient,
    namespace: str,
    module: Path,
    kubeflow_python: str,
    controller: Controller,
    controller_name: str,
) -> None:
    (notebook,) = notebooks(module)
    log(f"running the code cells of {notebook}")
    started = time.monotonic()
    done = subprocess.run(
        [kubeflow_python, str(DRIVER), str(module / notebook), namespace],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    seconds = time.monotonic() - started
    cells = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    succeeded = [c for c in cells if "is_job_succeeded" in "".join(c.get("source", []))]
    passed = done.returncode == 0 and [c["value"] for c in succeeded] == ["True"]
    changes = [f"cell {c['cell']}: {c.get('skipped') or c.get('changed')}" for c in cells if "value" not in c]
    record(Result(str(notebook.name), controller_name, "Succeeded" if passed else "FAILED", seconds, changes))
    if not passed:
        controller.check_alive()
        jobs = TFJobs(kube, namespace)
        raise AssertionError(
            f"{notebook}: exit {done.returncode}\n{done.stdout}\n{done.stderr}\n{describe(jobs, 'mnist')}"
        )
    assert TFJobs(kube, namespace).get("mnist") is None  # its last cell deletes the job
