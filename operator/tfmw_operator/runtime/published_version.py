"""The running operator's version, written where every user may read it (`tfmw version`).

The install ships the ConfigMap `tfmw-version` in the operator's namespace (with the trainer
image `tfmw submit` uses by default) and a Role that lets every authenticated user `get` it.
The version in it is not the install's: the install names an image, which may have been
changed by hand since, or be a tag that moved. The operator that leads writes its own
(runtime.version: the image's TFMW_VERSION, else the installed package's) and revision there
as it starts, with a Role that lets it patch that one object (deploy/base/rbac.yaml). What
may pass (no answer, a timeout, a 429 or 5xx: an API server restarting beside a rolling
update) is tried again, three tries in all within about 35 s; a failure of any kind is then
logged and the operator runs on, and the ConfigMap still holds whichever version was
written last (by an earlier operator, if any).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence

import aiohttp
import kopf

from tfmw_operator.api.objects import Json
from tfmw_operator.kube.client import MERGE_PATCH, ApiError, Kube
from tfmw_operator.runtime.version import revision, version

CONFIGMAP = "tfmw-version"
DEFAULT_NAMESPACE = "tfmw-system"
TIMEOUT = aiohttp.ClientTimeout(total=10)
RETRY_DELAYS = (1.0, 2.0)  # seconds before the second and third tries
logger = logging.getLogger(__name__)


def default_target(environment: dict[str, str] | None = None) -> str:
    """NAMESPACE/NAME of the ConfigMap: the operator's namespace ($POD_NAMESPACE) and tfmw-version."""
    env = os.environ if environment is None else environment
    return f"{env.get('POD_NAMESPACE') or DEFAULT_NAMESPACE}/{CONFIGMAP}"


def parse_target(target: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` -> (namespace, name); ValueError when it is not that."""
    namespace, _, name = target.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{target!r} is not NAMESPACE/NAME")
    return namespace, name


def patch(running_version: str, running_revision: str) -> Json:
    """The merge patch: these two keys, the ConfigMap's others (the trainer image) left as they are."""
    return {"data": {"version": running_version, "revision": running_revision}}


def passing(error: Exception) -> bool:
    """Whether trying again may succeed: no answer or a timeout, or the server busy or failing
    (429, 5xx). A refusal (403, 404, 422) or a bad CA says the same the next time."""
    if isinstance(error, ApiError):
        return error.status == 429 or error.status >= 500
    return isinstance(error, aiohttp.ClientConnectionError | asyncio.TimeoutError)


async def publish(
    credentials: kopf.ConnectionInfo,
    namespace: str,
    name: str = CONFIGMAP,
    delays: Sequence[float] = RETRY_DELAYS,
) -> str | None:
    """Write this operator's version into the ConfigMap; None when written, else why not."""
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    kube: Kube | None = None
    try:
        kube = Kube(credentials)
        for delay in (*delays, None):
            try:
                await kube.request(
                    "PATCH",
                    path,
                    body=patch(version(), revision()),
                    content_type=MERGE_PATCH,
                    timeout=TIMEOUT,
                )
                break
            except Exception as error:
                if delay is None or not passing(error):
                    raise
                logger.info("publishing the version: %r; trying again in %.0fs", error, delay)
                await asyncio.sleep(delay)
    except ApiError as error:
        if error.status == 404:
            return f"ConfigMap {namespace}/{name} not found (the install makes it)"
        return f"ConfigMap {namespace}/{name}: {error}"
    except Exception as error:  # a bad CA, a reply not JSON, ...: the operator runs on
        return f"ConfigMap {namespace}/{name}: {error!r}"
    finally:
        if kube is not None:
            await kube.close()
    logger.info(
        "published version %s (revision %s) in ConfigMap %s/%s", version(), revision(), namespace, name
    )
    return None
