"""End-to-end fixtures: a cluster with a real node and the operator deployed from deploy/.

By default the local cluster is brought up (or reused) with images built and the
operator deployed. With TFMW_E2E_KUBECONFIG set (e.g. a kind cluster, `make kind-e2e`)
that cluster is used as it is, and TFMW_E2E_SHARED_DIR names where this machine sees
its shared storage.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kube import LOCAL_KUBECONFIG, REPO, SHARED_DIR, ClusterClient, kubectl, wait_for

NAMESPACE = "default"  # where deploy/overlays/local puts the tfmw-shared claim


@pytest.fixture(scope="session")
def kube() -> ClusterClient:
    external = os.environ.get("TFMW_E2E_KUBECONFIG")
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    if external:
        os.environ["KUBECONFIG"] = external
    else:
        os.environ["KUBECONFIG"] = LOCAL_KUBECONFIG
        subprocess.run([str(REPO / "hack" / "up.sh")], check=True)
    kubectl("-n", "tfmw-system", "rollout", "status", "deployment/tfmw-operator", "--timeout=180s")
    return ClusterClient()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return Path(os.environ.get("TFMW_E2E_SHARED_DIR") or SHARED_DIR)


def _names(kube: ClusterClient, shared_dir: Path) -> Iterator[Callable[[str], str]]:
    """Names of a test's own, so no test reads what an earlier one left; afterwards their
    jobs are deleted and their folders (and any moved aside) removed."""
    made: list[str] = []

    def fresh(base: str) -> str:
        name = f"{base}-{uuid.uuid4().hex[:5]}"
        made.append(name)
        return name

    yield fresh
    remove_jobs(kube, shared_dir, made)


fresh_name = pytest.fixture(_names, name="fresh_name")
module_name = pytest.fixture(_names, scope="module", name="module_name")  # jobs several tests look at


def remove_jobs(kube: ClusterClient, shared_dir: Path, names: list[str]) -> None:
    for name in names:
        if kube.get_job(NAMESPACE, name) is not None:
            kube.delete_job(NAMESPACE, name)
    for name in names:
        wait_for(f"pods of {name} gone", lambda n=name: not kube.pods(NAMESPACE, n), timeout=120)  # type: ignore[misc]
        for folder in (shared_dir / NAMESPACE).glob(f"{name}*"):
            shutil.rmtree(folder, ignore_errors=True)
