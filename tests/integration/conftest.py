"""Integration fixtures: the local control plane, the CRD, and the operator running in-process."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kopf.testing import KopfRunner
from kube import REPO, ClusterClient, SimulatedKubelet, kubectl, pause_deployed_operator
from operator_process import OperatorProcess

NAMESPACE_PREFIX = "it"


@pytest.fixture(scope="session")
def kube() -> ClusterClient:
    """Bring the local control plane up (or reuse a running one) and install the CRD."""
    os.environ.setdefault("KUBECONFIG", str(REPO / ".cluster" / "kubeconfig"))
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    subprocess.run([str(REPO / "hack" / "cluster.sh"), "up", "--no-node"], check=True)
    kubectl("apply", "-f", str(REPO / "crds" / "tfmwjobs.tfmw.dev.yaml"))
    kubectl("wait", "--for=condition=established", "crd/tfmwjobs.tfmw.dev", "--timeout=60s")
    pause_deployed_operator()
    kube = ClusterClient()
    SimulatedKubelet.register_node(kube)
    return kube


@pytest.fixture(scope="session")
def kubelet(kube: ClusterClient) -> Iterator[SimulatedKubelet]:
    simulator = SimulatedKubelet(kube).start()
    yield simulator
    simulator.stop()


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared-root")


@pytest.fixture(scope="session")
def operator(kube: ClusterClient, kubelet: SimulatedKubelet, shared_root: Path) -> Iterator[KopfRunner]:
    """The operator in-process, watching the namespaces these tests create."""
    os.environ["TFMW_SHARED_ROOT"] = str(shared_root)
    os.environ["TFMW_METRICS_PORT"] = "0"
    logging.getLogger("kopf").setLevel(logging.WARNING)
    args = ["run", "--standalone", "--namespace", f"{NAMESPACE_PREFIX}-*", "-m", "tfmw_operator.handlers"]
    with KopfRunner(args, timeout=60) as runner:
        yield runner


@pytest.fixture
def namespace(kube: ClusterClient, operator: KopfRunner) -> Iterator[str]:
    name = kube.new_namespace(NAMESPACE_PREFIX)
    yield name
    kube.delete_namespace(name)


@pytest.fixture
def operator_process(
    kube: ClusterClient, kubelet: SimulatedKubelet, shared_root: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    started: list[OperatorProcess] = []

    def start(
        namespace: str, kubeconfig: str | None = None, ports: tuple[int, int] | None = None
    ) -> OperatorProcess:
        process = OperatorProcess(namespace, shared_root, kubeconfig, ports)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
