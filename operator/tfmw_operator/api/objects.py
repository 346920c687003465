"""API objects as the operator handles them: parsed JSON, and the key of a namespaced object."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
Key = tuple[str, str]  # (namespace, name) of a job


def copy_json(value: Any) -> Any:
    """A deep copy of parsed JSON (dicts, lists and scalars only): `copy.deepcopy` keeps a
    memo for cycles JSON cannot have (docs/benchmarks.md, "The measurements behind the code")."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value
