"""Fixtures of the TFJob acceptance suite (make test-tfjob; tests/tfjob/README.md).

The local cluster with its node must be up and the example images loaded (the Makefile's
stages do both). The session: a namespace of its own, Kubeflow's TFJob CRD at TFJOB_VERSION,
the deployed tfmw operator paused, and the controller under test (TFJOB_CONTROLLER) started
for that namespace; afterwards all of it removed, the deployed operator resumed, and the
table of what ran, how it ended and how long it took printed and kept in
.tfjob/results-<controller>.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
from kube import LOCAL_KUBECONFIG, REPO, ClusterClient, pause_deployed_operator, wait_for
from tfjob.harness import (
    LOGS,
    RESULTS,
    Controller,
    TfmwController,
    Volumes,
    controller_under_test,
    install_crd,
    log,
    remove_crd,
    start_kubeflow,
)
from tfjob.upstream import module_dir, pinned_version


@pytest.fixture(scope="session")
def controller_name() -> str:
    return controller_under_test()


@pytest.fixture(scope="session")
def module() -> Path:
    """training-operator's module at TFJOB_VERSION: the test, examples, CRD and images' sources."""
    return module_dir(pinned_version())


@pytest.fixture(scope="session")
def kube() -> ClusterClient:
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    os.environ["KUBECONFIG"] = LOCAL_KUBECONFIG
    return ClusterClient()


@pytest.fixture(scope="session")
def namespace(kube: ClusterClient) -> Iterator[str]:
    name = kube.new_namespace("tfjob-e2e")
    yield name
    kube.delete_namespace(name)
    wait_for(
        f"namespace {name} gone",
        lambda: name not in {n.metadata.name for n in kube.core.list_namespace().items},
        timeout=180,
        interval=1,
    )


@pytest.fixture(scope="session")
def kubeflow_python() -> str:
    """The Kubeflow SDK's own virtual environment (hack/tfjob-venv.sh)."""
    return subprocess.run(
        [str(REPO / "hack" / "tfjob-venv.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()


@pytest.fixture(scope="session")
def controller(
    kube: ClusterClient, namespace: str, module: Path, controller_name: str
) -> Iterator[Controller]:
    shutil.rmtree(LOGS, ignore_errors=True)  # the examples' logs of this run only
    created = install_crd(kube, module)
    resume = pause_deployed_operator()
    logs = Path(tempfile.mkdtemp(prefix="tfjob-controller-"))
    running: Controller | None = None
    try:
        log(f"starting the controller under test: {controller_name} (TFJOB_CONTROLLER)")
        if controller_name == "kubeflow":
            running = start_kubeflow(kube, namespace, logs)
        else:
            running = TfmwController(namespace, logs).start()
        log(f"{controller_name} runs; its log: {running.log}")
        yield running
    finally:
        if running is not None:
            running.stop()
            if running.log is not None and running.log.exists():
                kept = REPO / ".tfjob" / f"controller-{controller_name}.log"
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(running.log, kept)
                log(f"the controller's log is kept in {kept}")
        resume()
        if created:
            remove_crd(kube)
        shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture(scope="session")
def volumes(kube: ClusterClient, namespace: str, module: Path) -> Iterator[Volumes]:
    made = Volumes(kube, namespace, module)
    yield made
    made.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    controller = RESULTS[0].controller
    width = max(len(r.test) for r in RESULTS)
    terminalreporter.section(f"TFJob acceptance under {controller}")
    terminalreporter.write_line(f"{'test':<{width}}  {'outcome':<34} {'seconds':>8}")
    for r in RESULTS:
        terminalreporter.write_line(f"{r.test:<{width}}  {r.outcome:<34} {r.seconds:>8.1f}")
        for change in r.changes:
            terminalreporter.write_line(f"{'':<{width}}    changed: {change}")
        if r.note:
            terminalreporter.write_line(f"{'':<{width}}    {r.note}")
    kept = REPO / ".tfjob" / f"results-{controller}.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps([asdict(r) for r in RESULTS], indent=2) + "\n")
    terminalreporter.write_line(f"(kept in {kept})")
