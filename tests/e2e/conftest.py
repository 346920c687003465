"""End-to-end fixtures: a cluster with a real node and the operator deployed from deploy/.

By default the local cluster is brought up (or reused) with images built and the
operator deployed. With TFMW_E2E_KUBECONFIG set (e.g. a kind cluster, `make kind-e2e`)
that cluster is used as it is, and TFMW_E2E_SHARED_DIR names where this machine sees
its shared storage.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kube import LOCAL_KUBECONFIG, REPO, SHARED_DIR, ClusterClient, kubectl


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
