"""The docs, run: every shell block marked runnable in README.md and docs/, and the minimal
training program of docs/training-program.md, taken from the doc, trained on the cluster.

The convention is in docs/development.md ("Docs that run"); tests/unit/docs checks the
parsing and that these blocks exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import REPO, ClusterClient, kubectl, wait_for
from unit.docs.blocks import Block, named_block, runnable_blocks

Json = dict[str, Any]
NAMESPACE = "default"  # where deploy/overlays/local puts the tfmw-shared claim
BLOCK_TIMEOUT = 900
TRAINING_TIMEOUT = 600
EPOCH_LINE = re.compile(r"^worker=(\d+) (epoch=\d+ loss=\S+)$", re.M)


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.where)
def test_runnable_block(kube: ClusterClient, block: Block) -> None:
    """As a user pastes it: bash, from the repository's root, against the cluster that
    the `kube` fixture brought up (its KUBECONFIG, hack/bin first on the PATH)."""
    if os.environ.get("TFMW_E2E_KUBECONFIG") and ".cluster/kubeconfig" in block.text:
        pytest.skip("the block points at the local cluster; these tests run against another one")
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    print(f"\n{block.where}:\n{result.stdout}")
    assert result.returncode == 0, (
        f"{block.where} exited {result.returncode}\n--- block\n{block.text}"
        f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )


def worker_log(shared_dir: Path, job: str, index: int) -> str:
    """The worker's log: from its pod while it exists, else the copy the operator saved
    before deleting it ("" while neither can be read)."""
    live = kubectl("logs", "-n", NAMESPACE, f"{job}-worker-{index}", check=False)
    if live.returncode == 0 and live.stdout:
        return live.stdout
    try:
        return (shared_dir / NAMESPACE / job / "logs" / "attempt-0" / f"worker-{index}.log").read_text()
    except OSError:
        return ""


def test_minimal_program_trains_to_success(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    """The program and its job, exactly as docs/training-program.md shows them, but for the
    names: two workers in sync, progress in the status, the marker naming the job."""
    program = named_block("minimal-program").text
    manifest: Json = yaml.safe_load(named_block("minimal-job").text)
    name = fresh_name("minimal")
    configmap = f"{name}-program"
    (tmp_path / "train.py").write_text(program)
    kubectl(
        "create", "configmap", configmap, "-n", NAMESPACE, f"--from-file=train.py={tmp_path / 'train.py'}"
    )
    try:
        manifest["metadata"]["name"] = name
        template = manifest["spec"]["template"]["spec"]
        (volume,) = [v for v in template["volumes"] if "configMap" in v]
        volume["configMap"]["name"] = configmap
        job = kube.create_job(NAMESPACE, manifest)
        workers = manifest["spec"]["workers"]

        status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
        assert status["restarts"] == 0 and status["attempt"] == 0
        progress = status["progress"]
        assert progress["epochs"] == "5/5" and progress["attempt"] == 0, progress
        assert set(progress["metrics"]) == {"loss", "accuracy"}, progress

        marker = json.loads((shared_dir / NAMESPACE / name / "multiworker-complete.txt").read_text())
        assert marker["jobUid"] == job["metadata"]["uid"] and marker["attempt"] == 0, marker

        # Every worker trained in step: the same epochs, the same (all-reduced) losses.
        def logs_complete() -> list[str] | None:
            texts = [worker_log(shared_dir, name, i) for i in range(workers)]
            return texts if all("epoch=5 " in text for text in texts) else None

        texts = wait_for(f"{name}: every worker's last epoch", logs_complete, timeout=60)
        lines = [[m.group(2) for m in EPOCH_LINE.finditer(text)] for text in texts]
        assert [line.split()[0] for line in lines[0]] == [f"epoch={e}" for e in range(1, 6)], texts[0][-2000:]
        assert all(other == lines[0] for other in lines[1:]), lines
    finally:
        kubectl("delete", "configmap", configmap, "-n", NAMESPACE, "--ignore-not-found", check=False)
