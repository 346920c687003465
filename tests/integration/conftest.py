"""Integration fixtures: the local control plane, the CRD, and the operator running in-process."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kopf.testing import KopfRunner
from kube import REPO, Kube, SimulatedKubelet, kubectl, pause_deployed_operator, wait_for

NAMESPACE_PREFIX = "it"


@pytest.fixture(scope="session")
def kube() -> Kube:
    """Bring the local control plane up (or reuse a running one) and install the CRD."""
    os.environ.setdefault("KUBECONFIG", str(REPO / ".cluster" / "kubeconfig"))
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    subprocess.run([str(REPO / "hack" / "cluster.sh"), "up", "--no-node"], check=True)
    kubectl("apply", "-f", str(REPO / "crds" / "tfmwjobs.tfmw.dev.yaml"))
    kubectl("wait", "--for=condition=established", "crd/tfmwjobs.tfmw.dev", "--timeout=60s")
    pause_deployed_operator()
    kube = Kube()
    SimulatedKubelet.register_node(kube)
    return kube


@pytest.fixture(scope="session")
def kubelet(kube: Kube) -> Iterator[SimulatedKubelet]:
    simulator = SimulatedKubelet(kube).start()
    yield simulator
    simulator.stop()


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared-root")


@pytest.fixture(scope="session")
def operator(kube: Kube, kubelet: SimulatedKubelet, shared_root: Path) -> Iterator[KopfRunner]:
    """The operator in-process, watching the namespaces these tests create."""
    os.environ["TFMW_SHARED_ROOT"] = str(shared_root)
    os.environ["TFMW_METRICS_PORT"] = "0"
    logging.getLogger("kopf").setLevel(logging.WARNING)
    args = ["run", "--standalone", "--namespace", f"{NAMESPACE_PREFIX}-*", "-m", "tfmw_operator.handlers"]
    with KopfRunner(args, timeout=60) as runner:
        yield runner


@pytest.fixture
def namespace(kube: Kube, operator: KopfRunner) -> Iterator[str]:
    name = kube.new_namespace(NAMESPACE_PREFIX)
    yield name
    kube.delete_namespace(name)


class OperatorProcess:
    """The operator as a separate process, to be killed -9 and started again like a crashed pod."""

    def __init__(
        self,
        namespace: str,
        shared_root: Path,
        kubeconfig: str | None = None,
        ports: tuple[int, int] | None = None,
    ) -> None:
        self.namespace = namespace
        self.ports = ports  # (metrics, liveness); None: neither is served
        self.shared_root = shared_root
        self.env = {**os.environ, "KUBECONFIG": kubeconfig or os.environ["KUBECONFIG"]}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = shared_root / f"operator-{namespace}.log"
        self.starts = 0

    def start(self) -> None:
        metrics, liveness = self.ports or (0, 0)
        command = [
            sys.executable, "-m", "tfmw_operator", "--shared-root", str(self.shared_root),
            "--namespace", self.namespace, "--metrics-port", str(metrics),
            "--liveness", f"http://127.0.0.1:{liveness}/healthz" if liveness else "",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1

    def wait_started(self, timeout: float = 30) -> None:
        """Until this start of the operator has logged that it runs."""
        starts = self.starts
        wait_for("the operator to start", lambda: self._logged_starts() >= starts, timeout=timeout)

    def _logged_starts(self) -> int:
        return self.log.read_text(errors="replace").count("tfmw operator started")

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def operator_process(
    kube: Kube, kubelet: SimulatedKubelet, shared_root: Path
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
