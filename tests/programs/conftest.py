"""The sample programs of deploy/samples/programs/, run as local processes (local_job.py):
the proof, outside Kubernetes, of what each must do. Real TensorFlow; each test takes from
15 s to about a minute on two cores, so they are not part of `make test-unit`:
`make test-programs` runs them."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "programs: runs a sample TensorFlow program as local processes")
