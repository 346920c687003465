"""API objects as the operator handles them: parsed JSON, and the key of a namespaced object."""

from __future__ import annotations

import json
from typing import Any, Final

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


# Every job is held in the operator's memory, and a tenant may write a spec as large as the
# API server stores (about 1.5 MB), ten to twenty times that once parsed: about twenty such
# jobs took an operator past its 512 MiB limit, and every replica after it (a hostile read
# of 7b3aa09). A spec above this is held cut to one key saying why, and its job fails. The
# largest spec of a real job we know (four roles, each template with its env) is a few KiB.
MAX_SPEC_CHARACTERS: Final = 128 * 1024
OVERSIZED_SPEC: Final = "tfmw.dev/oversized-spec"
# Kept of a cut spec: who reconciles a TFJob (api/tfjob.py, `serves`), and only if it is short
# enough to be a controller's name, so no cut can turn it into another.
_KEPT_MANAGED_BY_CHARACTERS: Final = 253


def oversized_spec(job: Json) -> str | None:
    """Why the job's spec is too large to hold, or None."""
    try:
        size = len(json.dumps(job.get("spec"), separators=(",", ":"), ensure_ascii=False))
    except RecursionError:
        return "spec is nested too deeply to hold: flatten it and create the job again"
    except (TypeError, ValueError):  # not JSON: nothing here reads such a spec either
        return None
    if size <= MAX_SPEC_CHARACTERS:
        return None
    return (
        f"spec is {size:,} characters of JSON, more than the {MAX_SPEC_CHARACTERS:,} the operator holds "
        "for a job: move long environment lists into a ConfigMap (envFrom) and files into a volume, "
        "then create the job again"
    )


def held_job(job: Json) -> Json:
    """The job as it can be held: itself, or with its spec cut to why it is not (a spec that
    is not an object is left for the parser to refuse)."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return job
    why = oversized_spec(job)
    if why is None:
        return job
    cut: Json = {OVERSIZED_SPEC: why}
    managed_by = (
        (spec.get("runPolicy") or {}).get("managedBy") if isinstance(spec.get("runPolicy"), dict) else None
    )
    if isinstance(managed_by, str) and len(managed_by) <= _KEPT_MANAGED_BY_CHARACTERS:
        cut["runPolicy"] = {"managedBy": managed_by}
    return {**job, "spec": cut}


def cut_spec_reason(job: Json) -> str | None:
    """Why the job's spec was cut (`held_job`), or None if it is whole."""
    spec = job.get("spec")
    why = spec.get(OVERSIZED_SPEC) if isinstance(spec, dict) else None
    return why if isinstance(why, str) else None
