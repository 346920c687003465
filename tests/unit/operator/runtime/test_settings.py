"""The operator's settings: where it looks for Kubeflow's training-operator."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfmw_operator.api.tfjob import SERVE_ALL, SERVE_MANAGED_BY, SERVE_OFF
from tfmw_operator.runtime.settings import Settings


@pytest.mark.parametrize(
    ("tfjobs", "namespaces", "kubeflow_namespace", "scope"),
    [
        (SERVE_ALL, (), "kubeflow", "/api/v1/namespaces/kubeflow"),  # never the whole cluster's pods
        (SERVE_MANAGED_BY, (), "kf-system", "/api/v1/namespaces/kf-system"),
        (SERVE_ALL, ("team-a", "kubeflow"), "kubeflow", "/api/v1/namespaces/kubeflow"),
        (SERVE_ALL, ("team-a", "team-b"), "kubeflow", None),  # not watched: its pods cannot be read
        (SERVE_OFF, (), "kubeflow", None),
        (SERVE_ALL, (), "", None),  # looked for nowhere
    ],
)
def test_kubeflow_s_controller_is_looked_for_only_in_its_own_namespace(
    tfjobs: str, namespaces: tuple[str, ...], kubeflow_namespace: str, scope: str | None
) -> None:
    settings = Settings(
        Path("/shared"), namespaces=namespaces, tfjobs=tfjobs, kubeflow_namespace=kubeflow_namespace
    )
    assert settings.kubeflow_controller_scope == scope
