"""Whether a client and an operator fit."""

from __future__ import annotations

import pytest
from tfmw_client.version import compatibility, image_tag, parse_version


@pytest.mark.parametrize(
    ("client", "operator", "served", "compatible"),
    [
        ("0.1.0", "0.1.0", ["v1alpha1"], True),
        ("0.2.0", "0.1.3", ["v1alpha1"], True),
        ("0.3.0", "0.1.0", ["v1alpha1"], False),
        ("1.1.0", "0.1.0", ["v1alpha1"], False),
        ("0.1.0", "0.1.0", ["v1beta1"], False),
        ("0.1.0", "0.1.0", [], False),
        ("0.1.0", "unknown", ["v1alpha1"], None),
        ("0.1.0", "dev", None, None),
    ],
)
def test_compatible_within_one_minor_version_when_the_api_is_served(
    client: str, operator: str, served: list[str] | None, compatible: bool | None
) -> None:
    assert compatibility(client, operator, served).compatible is compatible


def test_versions_and_image_tags_parse() -> None:
    assert parse_version("v0.12.3-rc1") == (0, 12, 3)
    assert parse_version("dev") is None
    assert image_tag("localhost:5000/ml/tfmw-operator:0.1.0@sha256:abc") == "0.1.0"
    assert image_tag("localhost:5000/tfmw-operator") == ""
