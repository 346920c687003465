"""The minimum Kubernetes version: which API servers the operator refuses to start on."""

from __future__ import annotations

import pytest
from tfmw_operator.runtime.server_version import MINIMUM, parse, refusal


@pytest.mark.parametrize(
    ("info", "found"),
    [
        ({"major": "1", "minor": "34", "gitVersion": "v1.34.4"}, (1, 34)),
        ({"major": "1", "minor": "30+", "gitVersion": "v1.30.2-gke.1"}, (1, 30)),
        ({"major": "", "minor": "", "gitVersion": "v1.29.0-eks-1"}, (1, 29)),
        ({"gitVersion": "1.31.1"}, (1, 31)),
        ({"major": "1", "minor": "x"}, None),
        ({}, None),
    ],
)
def test_the_version_is_read_as_managed_clusters_write_it(
    info: dict[str, str], found: tuple[int, int] | None
) -> None:
    assert parse(info) == found


def test_the_minimum_is_the_admission_policys_ga() -> None:
    # ValidatingAdmissionPolicy v1 (deploy/admission) is GA in 1.30.
    assert MINIMUM == (1, 30)


@pytest.mark.parametrize("minor", ["30", "31", "34", "30+"])
def test_the_minimum_and_newer_are_accepted(minor: str) -> None:
    assert refusal({"major": "1", "minor": minor, "gitVersion": f"v1.{minor.rstrip('+')}.0"}) is None


def test_a_newer_major_is_accepted() -> None:
    assert refusal({"major": "2", "minor": "0"}) is None


@pytest.mark.parametrize("minor", ["29", "28+", "9"])
def test_an_older_server_is_refused_naming_both_versions(minor: str) -> None:
    why = refusal({"major": "1", "minor": minor, "gitVersion": f"v1.{minor.rstrip('+')}.3"})
    assert why is not None
    assert f"Kubernetes v1.{minor.rstrip('+')}.3" in why
    assert "1.30 or newer" in why


def test_a_server_that_names_no_version_is_refused() -> None:
    why = refusal({"platform": "linux/amd64"})
    assert why is not None and "names no Kubernetes version" in why


def test_the_minimum_can_be_given() -> None:
    assert refusal({"major": "1", "minor": "34"}, minimum=(1, 35)) is not None
    assert refusal({"major": "1", "minor": "34"}, minimum=(1, 34)) is None
