"""`tfmw convert`: a Kubeflow TFJob manifest as a TFMultiWorkerJob.

The conversion itself is the operator side's pure function (the TFJob issue); until it is
connected here, the command says so and exits 1. Connecting it: make `converter()` return
that function (documents in, documents out), and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfmw_client.errors import TfmwError

Json = dict[str, Any]
Converter = Callable[[list[Json]], list[Json]]


def converter() -> Converter | None:
    """The conversion, once it exists; None until then."""
    return None


def convert(documents: list[Json]) -> list[Json]:
    conversion = converter()
    if conversion is None:
        raise TfmwError(
            "tfmw convert is not available yet: the TFJob conversion has not landed in this version",
            "write the TFMultiWorkerJob by hand for now (docs/reference.md has every field)",
        )
    return conversion(documents)
