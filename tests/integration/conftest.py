"""Integration fixtures: the local control plane, the CRD, and the operator running in-process.

The session leaves the cluster as it found it: the CRD and RBAC put back as they were,
the simulated node and its pods removed, a deployed operator scaled back up, and every
namespace it made deleted, whether its tests passed or not.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kube import (
    LOCAL_KUBECONFIG,
    REPO,
    ClusterClient,
    SimulatedKubelet,
    applied,
    kubectl,
    pause_deployed_operator,
)
from operator_process import OperatorProcess, OperatorThread
from tfmw_operator.runtime.settings import Settings

NAMESPACE_PREFIX = "it"
CRD = REPO / "crds" / "tfmwjobs.tfmw.dev.yaml"
RBAC = (REPO / "deploy" / "base" / "namespace.yaml", REPO / "deploy" / "base" / "rbac.yaml")


@pytest.fixture(scope="session")
def kube() -> Iterator[ClusterClient]:
    """Bring the local control plane up (or reuse a running one) and install the CRD."""
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    subprocess.run([str(REPO / "hack" / "cluster.sh"), "up", "--no-node"], check=True)
    with applied(CRD, *RBAC):
        kubectl("wait", "--for=condition=established", "crd/tfmwjobs.tfmw.dev", "--timeout=60s")
        resume_deployed_operator = pause_deployed_operator()
        kube = ClusterClient()
        SimulatedKubelet.register_node(kube)
        try:
            yield kube
        finally:
            for namespace in kube.created_namespaces:
                kube.delete_namespace(namespace)
            SimulatedKubelet.remove_node(kube)
            resume_deployed_operator()


@pytest.fixture(scope="session")
def kubelet(kube: ClusterClient) -> Iterator[SimulatedKubelet]:
    simulator = SimulatedKubelet(kube).start()
    yield simulator
    simulator.stop()


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared-root")


class _ReconcileErrors(logging.Handler):
    """Collects what the operator logs at ERROR: a reconcile that raised is a bug to see."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="session")
def operator_errors() -> Iterator[_ReconcileErrors]:
    handler = _ReconcileErrors()
    logger = logging.getLogger("tfmw_operator")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture(scope="session")
def operator(
    kube: ClusterClient, kubelet: SimulatedKubelet, shared_root: Path, operator_errors: _ReconcileErrors
) -> Iterator[OperatorThread]:
    """The operator in-process, watching the namespaces these tests create."""
    logging.getLogger("kopf").setLevel(logging.WARNING)
    settings = Settings(shared_root=shared_root, namespaces=(f"{NAMESPACE_PREFIX}-*",))
    with OperatorThread(settings) as running:
        yield running


@pytest.fixture
def namespace(
    kube: ClusterClient, operator: OperatorThread, operator_errors: _ReconcileErrors
) -> Iterator[str]:
    name = kube.new_namespace(NAMESPACE_PREFIX)
    operator_errors.records.clear()
    yield name
    kube.delete_namespace(name)
    errors = [handler_format(r) for r in operator_errors.records]
    assert not errors, "the operator logged errors:\n" + "\n".join(errors)


def handler_format(record: logging.LogRecord) -> str:
    return logging.Formatter("%(name)s: %(message)s").format(record)


@pytest.fixture
def operator_process(
    kube: ClusterClient, kubelet: SimulatedKubelet, shared_root: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    """Operators as processes of their own; each must end its life without a failed reconcile."""
    started: list[OperatorProcess] = []

    def start(
        namespace: str,
        kubeconfig: str | None = None,
        ports: tuple[int, int] | None = None,
        args: tuple[str, ...] = (),
    ) -> OperatorProcess:
        process = OperatorProcess(namespace, shared_root, kubeconfig, ports, args=args)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
    for process in started:
        # Shown by pytest only when the test failed: what the operator did until then.
        print(
            f"--- the last lines of the operator for {process.namespace}:",
            *process.log_lines()[-80:],
            sep="\n",
        )
        failures = [line for line in process.log_lines() if "reconcile of" in line and "failed" in line]
        assert not failures, f"operator for {process.namespace} logged failed reconciles: {failures[:3]}"


TFJOB_CRD = REPO / "deploy" / "overlays" / "tfjob" / "component" / "kubeflow.org_tfjobs.yaml"
TFJOB_CRD_NAME = "tfjobs.kubeflow.org"


@pytest.fixture(scope="module")
def tfjob_crd(kube: ClusterClient) -> Iterator[None]:
    """Kubeflow's TFJob CRD, as deploy/overlays/tfjob installs it; removed after if this made it."""
    created = kube.create_crd(yaml.safe_load(TFJOB_CRD.read_text()))
    yield
    if created:
        kube.apiext.delete_custom_resource_definition(TFJOB_CRD_NAME)
