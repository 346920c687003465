"""Which client and operator are talking, and whether they understand each other.

The client's version is the package's (pyproject.toml, the one place it is stated). The
operator's is read where any user may read it: the ConfigMap `tfmw-version` in the operator's
namespace, which the install makes with a Role that lets every authenticated user `get` that
one object, and into which the operator that leads writes its own version as it starts
(docs/cli.md, "tfmw version"); failing that, from the operator's Deployment (admins).
Whether the API the client speaks is served is asked of discovery, open to all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata

from tfmw_client import names

UNKNOWN = "unknown"
_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def client_version() -> str:
    try:
        return metadata.version("tfmw")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def parse_version(text: str) -> tuple[int, int, int] | None:
    found = _SEMVER.match(text.strip())
    return (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None


@dataclass(frozen=True)
class OperatorVersion:
    version: str  # UNKNOWN when it could not be read
    source: str  # where it was read, or why not


@dataclass(frozen=True)
class Compatibility:
    compatible: bool | None  # None: cannot tell
    reason: str


def compatibility(client: str, operator: str, served: list[str] | None) -> Compatibility:
    """Compatible when the API server serves the API version the client speaks and the two
    versions are within one minor version of each other (kubectl's skew policy)."""
    if served is not None and names.VERSION not in served:
        shown = ", ".join(served) or "none"
        return Compatibility(
            False, f"the cluster serves {names.GROUP} {shown}; this client speaks {names.VERSION}"
        )
    ours, theirs = parse_version(client), parse_version(operator)
    if ours is None or theirs is None:
        which = "the operator's" if theirs is None else "the client's"
        api = f"{names.API_VERSION} is served" if served is not None else "the API was not checked"
        return Compatibility(None, f"{which} version is unknown; {api}")
    if ours[0] != theirs[0] or abs(ours[1] - theirs[1]) > 1:
        return Compatibility(
            False, f"client {client} and operator {operator} are more than one minor version apart"
        )
    return Compatibility(
        True, f"{names.API_VERSION} is served, and the versions are within one minor version"
    )


def image_tag(image: str) -> str:
    """`registry:5000/tfmw-operator:0.1.0@sha256:...` -> `0.1.0` ("" without a tag)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""
