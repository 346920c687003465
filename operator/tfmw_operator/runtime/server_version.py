"""The oldest Kubernetes tfmw runs on, and the check the operator makes before it starts.

1.33: the CRD's failureRules checks use CEL's two-variable comprehensions (`all(i, r, ...)`,
`transformList`), which the API server offers from 1.32 and accepts in a new CRD only from
the release after (a new expression is compiled at the previous minor's library:
k8s.io/apiserver pkg/cel/environment/base.go, IntroducedVersion 1.32, and
DefaultCompatibilityVersion); on 1.30-1.32 the whole CRD is refused. Below that, the admission
policy (deploy/admission) is admissionregistration.k8s.io/v1, GA in 1.30, and the CRD's
transition rules, fieldPath and reason need 1.29 and 1.28. On an older API server the
operator refuses to start: a clear log line, exit 2.
"""

from __future__ import annotations

import asyncio
import logging
import re

import kopf

from tfmw_operator.api.objects import Json
from tfmw_operator.kube.client import Kube

MINIMUM = (1, 33)
ATTEMPTS = 6
RETRY_SECONDS = 5.0
logger = logging.getLogger(__name__)


def parse(info: Json) -> tuple[int, int] | None:
    """(major, minor) of the API server's /version; None when it says neither.

    Managed clusters write the minor as "30+" and gitVersion as "v1.30.2-gke.1": the
    digits count, and gitVersion is the fallback when major/minor are empty.
    """
    major = re.match(r"\d+", str(info.get("major", "")))
    minor = re.match(r"\d+", str(info.get("minor", "")))
    if major and minor:
        return int(major.group()), int(minor.group())
    git = re.match(r"v?(\d+)\.(\d+)", str(info.get("gitVersion", "")))
    return (int(git.group(1)), int(git.group(2))) if git else None


def refusal(info: Json, minimum: tuple[int, int] = MINIMUM) -> str | None:
    """Why the operator must not run against this API server; None when it may."""
    found = parse(info)
    wanted = f"{minimum[0]}.{minimum[1]}"
    if found is None:
        return f"the API server's /version ({info!r}) names no Kubernetes version; tfmw needs {wanted}+"
    if found < minimum:
        shown = info.get("gitVersion") or f"{found[0]}.{found[1]}"
        return (
            f"the API server is Kubernetes {shown}; tfmw needs {wanted} or newer "
            "(ValidatingAdmissionPolicy v1, CEL transition rules in the CRD): upgrade the cluster"
        )
    return None


async def check(credentials: kopf.ConnectionInfo, minimum: tuple[int, int] = MINIMUM) -> str | None:
    """The API server's refusal (see `refusal`), asked with bounded retries; an API server
    that cannot be asked is a refusal too, naming the error."""
    kube = Kube(credentials)
    try:
        error: Exception | None = None
        for attempt in range(ATTEMPTS):
            try:
                return refusal(await kube.request("GET", "/version"), minimum)
            except Exception as failure:  # any failure is retried, then reported
                error = failure
                logger.warning("API server version, try %d/%d: %s", attempt + 1, ATTEMPTS, failure)
                if attempt + 1 < ATTEMPTS:
                    await asyncio.sleep(RETRY_SECONDS)
        return f"could not ask the API server {kube.server} its version: {error}"
    finally:
        await kube.close()
