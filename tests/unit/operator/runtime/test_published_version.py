"""Where the operator writes its version for `tfmw version`, and what it writes."""

from __future__ import annotations

import asyncio

import kopf
import pytest
from tfmw_operator.runtime.published_version import default_target, parse_target, patch, publish


def test_the_configmap_is_the_operators_own_namespaces() -> None:
    assert default_target({"POD_NAMESPACE": "ops"}) == "ops/tfmw-version"
    assert default_target({}) == "tfmw-system/tfmw-version"
    assert default_target({"POD_NAMESPACE": ""}) == "tfmw-system/tfmw-version"


def test_a_target_is_namespace_slash_name() -> None:
    assert parse_target("ops/tfmw-version") == ("ops", "tfmw-version")


@pytest.mark.parametrize("target", ["tfmw-version", "/tfmw-version", "ops/", "ops/a/b", ""])
def test_anything_else_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="is not NAMESPACE/NAME"):
        parse_target(target)


def test_the_patch_sets_the_version_and_revision_and_leaves_the_rest() -> None:
    # A merge patch: the install's trainerImage, not named, stays as it is.
    assert patch("0.2.0", "abc123") == {"data": {"version": "0.2.0", "revision": "abc123"}}


@pytest.mark.parametrize("ca", [b"not a certificate", None], ids=["bad CA", "refused"])
def test_a_write_that_cannot_be_made_is_a_reason_the_operator_logs_not_an_exception(ca: bytes | None) -> None:
    """A CA that is not one (the TLS context cannot be built) or a server that refuses: the
    operator logs why and runs on (port 1 refuses at once)."""
    credentials = kopf.ConnectionInfo(server="https://127.0.0.1:1", ca_data=ca)
    reason = asyncio.run(publish(credentials, "ops"))
    assert reason is not None and reason.startswith("ConfigMap ops/tfmw-version: ")
