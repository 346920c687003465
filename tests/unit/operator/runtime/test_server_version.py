"""The minimum Kubernetes version: which API servers the operator refuses to start on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tfmw_operator.runtime.server_version import MINIMUM, parse, refusal

CRD = Path(__file__).parents[4] / "crds" / "tfmwjobs.tfmw.dev.yaml"
# CEL's two-variable macros: all(i, v, ...), exists(i, v, ...), transformList(i, v, ...) ...
TWO_VARIABLE_MACRO = re.compile(
    r"\b(?:all|exists|exists_one|transformList|transformMap|transformMapEntry)\(\s*\w+\s*,\s*\w+\s*,"
)


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


def test_the_minimum_is_where_the_crds_cel_is_accepted() -> None:
    # The API server offers the two-variable macros from 1.32 and compiles a new CRD's rules at
    # the previous minor's library, so a CRD that uses them installs from 1.33 only
    # (k8s.io/apiserver pkg/cel/environment/base.go): on 1.30-1.32 the whole CRD is refused.
    assert TWO_VARIABLE_MACRO.search(CRD.read_text()), "the CRD no longer needs 1.33: lower MINIMUM"
    assert MINIMUM == (1, 33)


@pytest.mark.parametrize("minor", ["33", "34", "37", "33+"])
def test_the_minimum_and_newer_are_accepted(minor: str) -> None:
    assert refusal({"major": "1", "minor": minor, "gitVersion": f"v1.{minor.rstrip('+')}.0"}) is None


def test_a_newer_major_is_accepted() -> None:
    assert refusal({"major": "2", "minor": "0"}) is None


@pytest.mark.parametrize("minor", ["32", "30+", "29", "9"])
def test_an_older_server_is_refused_naming_both_versions(minor: str) -> None:
    why = refusal({"major": "1", "minor": minor, "gitVersion": f"v1.{minor.rstrip('+')}.3"})
    assert why is not None
    assert f"Kubernetes v1.{minor.rstrip('+')}.3" in why
    assert "1.33 or newer" in why


def test_a_server_that_names_no_version_is_refused() -> None:
    why = refusal({"platform": "linux/amd64"})
    assert why is not None and "names no Kubernetes version" in why


def test_the_minimum_can_be_given() -> None:
    assert refusal({"major": "1", "minor": "34"}, minimum=(1, 35)) is not None
    assert refusal({"major": "1", "minor": "34"}, minimum=(1, 34)) is None
