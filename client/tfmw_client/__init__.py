"""tfmw's client: the `tfmw` command (also `kubectl tfmw`) and the Python `Client`.

It talks to the API server only, from the API's JSON and the documented wire names
(`tfmw_client.names`); it never imports the operator. `Client` is loaded when first used,
so that `tfmw --help` does not pay for the Kubernetes client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfmw_client.errors import TfmwError
    from tfmw_client.sdk import Client, Logs, Submission
    from tfmw_client.wait import JobFailed, WaitTimeout

__all__ = ["Client", "JobFailed", "Logs", "Submission", "TfmwError", "WaitTimeout"]


def __getattr__(name: str) -> Any:
    if name in ("Client", "Logs", "Submission"):
        from tfmw_client import sdk

        return getattr(sdk, name)
    if name in ("JobFailed", "WaitTimeout"):
        from tfmw_client import wait

        return getattr(wait, name)
    if name == "TfmwError":
        from tfmw_client.errors import TfmwError

        return TfmwError
    raise AttributeError(f"module 'tfmw_client' has no attribute {name!r}")
