"""The minimum Kubernetes version, asked of the real API server (hack/bin's, KUBE_VERSION)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from kube import REPO, ClusterClient
from operator_process import OperatorProcess
from tfmw_operator.kube.client import connection_info
from tfmw_operator.runtime.server_version import MINIMUM, check


def pinned_kube_version() -> str:
    command = f'source "{REPO}/hack/versions.env" && echo "$KUBE_VERSION"'
    return subprocess.run(["bash", "-c", command], check=True, capture_output=True, text=True).stdout.strip()


def test_the_local_api_server_is_new_enough(kube: ClusterClient) -> None:
    assert asyncio.run(check(connection_info())) is None


def test_a_minimum_above_the_server_is_refused_naming_its_version(kube: ClusterClient) -> None:
    why = asyncio.run(check(connection_info(), minimum=(MINIMUM[0], 99)))
    assert why is not None
    assert f"Kubernetes {pinned_kube_version()}" in why


def test_the_operator_starts_past_the_check(kube: ClusterClient, tmp_path: Path) -> None:
    """`python -m tfmw_operator` asks /version before anything else: against this server it
    goes on to start (a refusal would end it at once, exit 2, without that log line)."""
    operator = OperatorProcess("it-server-version", tmp_path).start()
    try:
        operator.wait_started(timeout=60)
        assert not [line for line in operator.log_lines() if "refuses to start" in line]
    finally:
        operator.stop()
