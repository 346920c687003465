"""Leader election on a coordination.k8s.io Lease, with the client library's own elector.

Only the leader runs the operator; the others wait for the lease. A leader that cannot
renew in time exits at once, so two operators never act on the same jobs: the lease
outlives a renewal deadline by a margin, and a replaced leader is gone before its
successor can hold the lease.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from tfmw_operator.runtime.health import Health

logger = logging.getLogger(__name__)

# (connect, read) seconds, and no retries of the client's own: a renewal's GET and PUT
# together must end within the renew deadline, which the client's retries overran
# (docs/benchmarks.md, "The measurements behind the code").
LEASE_REQUEST_TIMEOUT = (2.0, 3.0)
LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2
LOST_LEADERSHIP_EXIT_CODE = 3
WATCHDOG_SECONDS = 0.5


class _Timed:
    """An API object whose every call carries LEASE_REQUEST_TIMEOUT."""

    def __init__(self, api: object) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        return functools.partial(getattr(self._api, name), _request_timeout=LEASE_REQUEST_TIMEOUT)


class SafeLeaseLock(LeaseLock):  # type: ignore[misc]
    """The client's LeaseLock with a timeout on every call, and any failure a failed try.

    The stock lock lets a connection error escape (it catches only ApiException), which
    ends the elector's thread: a standby then never leads, and a leader stops renewing
    without stopping work.
    """

    def __init__(self, name: str, namespace: str, identity: str) -> None:
        super().__init__(name, namespace, identity)
        self.api_instance = _Timed(self.api_instance)  # type: ignore[has-type]

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        try:
            return super().get(name, namespace)  # type: ignore[no-any-return]
        except Exception as error:
            logger.warning("reading the lease %s/%s failed: %s", namespace, name, error)
            return False, error

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        try:
            created = bool(super().create(name, namespace, election_record))
        except Exception as error:
            logger.warning("creating the lease %s/%s failed: %s", namespace, name, error)
            return False
        if created:
            self.renewed_at = time.monotonic()
        return created

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        try:
            renewed = bool(super().update(name, namespace, updated_record))
        except Exception as error:
            logger.warning("renewing the lease %s/%s failed: %s", namespace, name, error)
            return False
        if renewed:
            self.renewed_at = time.monotonic()
        return renewed

    renewed_at: float | None = None  # when the lease was last written by us (monotonic)


def load_client_config() -> None:
    """The elector uses the client library's default configuration: in a pod its service
    account, elsewhere $KUBECONFIG as it is now (not as it was at import time)."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    settings = client.Configuration.get_default_copy()
    settings.retries = 0
    client.Configuration.set_default(settings)


def identity() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def lead(namespace: str, name: str, me: str, health: Health | None = None) -> None:
    """Block until this process holds the lease; keep renewing it in the background.

    Once leading, a watchdog ends the process the moment RENEW_DEADLINE_SECONDS have
    passed since the last renewal, whatever the elector is doing: a standby may take the
    lease LEASE_SECONDS after it, and by then this one has stopped writing.
    """
    load_client_config()
    leading = threading.Event()

    def lost() -> None:
        logger.error("lost the leader lease %s/%s; exiting so that only one operator acts", namespace, name)
        os._exit(LOST_LEADERSHIP_EXIT_CODE)

    lock = SafeLeaseLock(name, namespace, me)

    def watchdog() -> None:
        leading.wait()
        while True:
            time.sleep(WATCHDOG_SECONDS)
            renewed = lock.renewed_at
            if renewed is not None and time.monotonic() - renewed > RENEW_DEADLINE_SECONDS:
                logger.error(
                    "the leader lease %s/%s was not renewed for %ss; exiting before a standby may lead",
                    namespace, name, RENEW_DEADLINE_SECONDS,
                )  # fmt: skip
                os._exit(LOST_LEADERSHIP_EXIT_CODE)

    config = electionconfig.Config(
        lock,
        lease_duration=LEASE_SECONDS,
        renew_deadline=RENEW_DEADLINE_SECONDS,
        retry_period=RETRY_SECONDS,
        onstarted_leading=leading.set,
        onstopped_leading=lost,
    )
    elector = leaderelection.LeaderElection(config)
    electing = threading.Thread(target=elector.run, name="leader-election", daemon=True)
    electing.start()
    threading.Thread(target=watchdog, name="leader-watchdog", daemon=True).start()
    if health is not None:
        health.live_while("lease", lambda: None if electing.is_alive() else "the lease elector has stopped")
    logger.info("waiting for the leader lease %s/%s as %s", namespace, name, me)
    leading.wait()
    logger.info("leading as %s", me)


def release(namespace: str, name: str, me: str) -> None:
    """Hand the lease back on a clean stop, so a standby takes over at once."""
    api = client.CoordinationV1Api()
    try:
        lease = api.read_namespaced_lease(name, namespace, _request_timeout=LEASE_REQUEST_TIMEOUT)
        if lease.spec.holder_identity != me:
            return
        lease.spec.holder_identity = None  # the elector takes a lease with no holder at once
        lease.spec.renew_time = datetime.now(UTC)
        lease.spec.lease_duration_seconds = 1
        api.replace_namespaced_lease(name, namespace, lease, _request_timeout=LEASE_REQUEST_TIMEOUT)
        logger.info("released the leader lease %s/%s", namespace, name)
    except Exception as error:  # the lease then simply expires
        logger.warning("could not release the leader lease %s/%s: %s", namespace, name, error)
