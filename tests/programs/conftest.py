"""The sample programs of deploy/samples/programs/, run as local processes (local_job.py):
the proof, outside Kubernetes, of what each must do. Real TensorFlow, several processes a
test: too slow for `make test-unit`, so `make test-programs` runs them (and `make test`)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "programs: runs a sample TensorFlow program as local processes")
