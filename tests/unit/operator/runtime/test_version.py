"""One version: pyproject.toml's, in --version and the tfmw_build_info metric."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata

import pytest
from kube import REPO
from prometheus_client import REGISTRY, generate_latest
from tfmw_operator.runtime.version import describe, revision, version


def pyproject_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_installed_the_version_is_pyprojects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TFMW_VERSION", raising=False)
    monkeypatch.delenv("TFMW_REVISION", raising=False)
    assert version() == pyproject_version()
    assert revision() == "unknown"


def test_in_an_image_the_build_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFMW_VERSION", "9.8.7")
    monkeypatch.setenv("TFMW_REVISION", "abc123")
    assert describe() == "tfmw-operator 9.8.7 (revision abc123)"


def test_uninstalled_and_unbuilt_the_version_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TFMW_VERSION", raising=False)

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert version() == "unknown"


def test_dash_dash_version_prints_it_and_exits() -> None:
    env = {"PATH": "/usr/bin:/bin", "TFMW_REVISION": "0123abc"}
    done = subprocess.run(
        [sys.executable, "-m", "tfmw_operator", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tfmw-operator {pyproject_version()} (revision 0123abc)"


def test_the_build_info_metric_carries_the_version() -> None:
    import tfmw_operator.runtime.metrics  # noqa: F401 - registers the gauge

    text = generate_latest(REGISTRY).decode()
    line = f'tfmw_build_info{{revision="{revision()}",version="{version()}"}} 1.0'
    assert line in text.splitlines()
