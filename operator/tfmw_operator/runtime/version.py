"""The one version of tfmw, pyproject.toml's, and the source revision it was built from.

Installed from the repository (make install), the package's metadata carries the version.
In the images the package is not installed: hack/images.sh passes the version (read from
pyproject.toml) and the git revision to the build, which sets TFMW_VERSION and
TFMW_REVISION (and the OCI labels) from them. Nothing else states the version.
"""

from __future__ import annotations

import os
from importlib import metadata

UNKNOWN = "unknown"


def version() -> str:
    """pyproject.toml's version, as built into the image or as installed."""
    built = os.environ.get("TFMW_VERSION", "")
    if built:
        return built
    try:
        return metadata.version("tfmw")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def revision() -> str:
    """The git commit the image was built from; unknown outside an image."""
    return os.environ.get("TFMW_REVISION", "") or UNKNOWN


def describe() -> str:
    """What `python -m tfmw_operator --version` prints."""
    return f"tfmw-operator {version()} (revision {revision()})"
