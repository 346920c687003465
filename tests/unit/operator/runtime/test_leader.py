"""The lease lock never lets a connection error end the elector's thread."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.runtime.leader import LEASE_REQUEST_TIMEOUT, SafeLeaseLock
from urllib3.exceptions import MaxRetryError


class Unreachable:
    """An API server that cannot be reached, as during its restart."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> None:
            self.calls.append(kwargs)
            raise MaxRetryError(None, "/apis/coordination.k8s.io", "Connection refused")  # type: ignore[arg-type]

        return call


@pytest.fixture
def lock() -> tuple[SafeLeaseLock, Unreachable]:
    lock = SafeLeaseLock("tfmw-operator", "tfmw-system", "me")
    api = Unreachable()
    lock.api_instance._api = api
    return lock, api


def test_reading_the_lease_while_the_api_server_is_away_is_a_failed_try(
    lock: tuple[SafeLeaseLock, Unreachable],
) -> None:
    safe, api = lock
    found, error = safe.get("tfmw-operator", "tfmw-system")
    assert found is False and isinstance(error, MaxRetryError)
    assert api.calls == [{"_request_timeout": LEASE_REQUEST_TIMEOUT}]


def test_creating_and_renewing_fail_quietly_too(lock: tuple[SafeLeaseLock, Unreachable]) -> None:
    from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord

    safe, _ = lock
    record = LeaderElectionRecord("me", "15", "2026-01-01 12:00:00", "2026-01-01 12:00:00")
    assert safe.create("tfmw-operator", "tfmw-system", record) is False
    safe.lease_reference = object()
    assert safe.update("tfmw-operator", "tfmw-system", record) is False
