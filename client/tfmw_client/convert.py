"""`tfmw convert`: Kubeflow TFJob manifests as TFMultiWorkerJobs.

The conversion is the API's pure function (`tfmw_operator.api.tfjob.convert`, the same the
operator's TFJob support is built on); this module applies it to every TFJob of a file,
checks each result as the operator would parse it, and says what was changed. Documents of
other kinds (a ConfigMap or a claim beside the TFJob) pass through unchanged, so that
`tfmw convert -f x.yaml | kubectl apply -f -` applies the whole file. A field tfmw cannot
honour is an error naming the document and the field, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfmw_client.errors import TfmwError

Json = dict[str, Any]
FIX = 'change or remove that field in the TFJob (docs/cli.md, "tfmw convert", lists what is refused)'


# What a file may come to with its YAML aliases expanded, in bytes as JSON writes it: `-o json`
# writes each alias out in full, so nine nested aliases of nine (a "billion laughs"), or a
# long string behind a few of them, would be gigabytes. No manifest comes near it.
MAX_EXPANDED_BYTES = 64 * 1024 * 1024


def expanded_size(value: object, sizes: dict[int, int] | None = None) -> int:
    """About the bytes of the value written out as JSON: an object an alias shares is counted
    at each place, but walked once; a string by its length, wherever it is repeated. One that
    holds itself counts past any cap."""
    if isinstance(value, str):
        return len(value) + 2
    if not isinstance(value, dict | list):
        return len(str(value))
    known = {} if sizes is None else sizes
    if id(value) in known:
        return known[id(value)]
    known[id(value)] = MAX_EXPANDED_BYTES + 1  # while it is walked: met again, it holds itself
    children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    known[id(value)] = 2 + sum(expanded_size(child, known) + 1 for child in children)
    return known[id(value)]


def check_expansion(documents: list[object], source: str) -> None:
    """Refuses a file that would be written out past MAX_EXPANDED_BYTES (as go-yaml, and so
    kubectl, refuses an alias bomb) before anything is converted or written."""
    sizes: dict[int, int] = {}
    if sum(expanded_size(document, sizes) for document in documents) > MAX_EXPANDED_BYTES:
        raise TfmwError(
            f"{source}: written out, it would be more than {MAX_EXPANDED_BYTES // 2**20} MiB "
            "(its YAML aliases, *name, each written in full; or an anchor holds itself)",
            "write the repeated parts out in full, or use fewer aliases",
        )


@dataclass(frozen=True)
class Converted:
    document: Json
    notes: tuple[str, ...]  # "field: what was done", one per field changed; none for pass-through


def _where(source: str, index: int, document: Json) -> str:
    meta = document.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{source}, document {index + 1}" + (f" (TFJob {name})" if name else "")


def convert(documents: list[object], source: str = "-") -> list[Converted]:
    """Every TFJob of `documents` converted, the rest as they are; TfmwError naming the
    document and the field that cannot be converted."""
    from tfmw_operator.api import tfjob
    from tfmw_operator.api.spec import SpecError, parse_job

    converted: list[Converted] = []
    for index, document in enumerate(documents):
        if document is None:
            continue  # an empty document between two ---
        if not isinstance(document, dict):
            raise TfmwError(f"{source}, document {index + 1}: not a Kubernetes object (a mapping)")
        if document.get("kind") != tfjob.TFJOB_KIND:
            converted.append(Converted(document, ()))
            continue
        where = _where(source, index, document)
        if document.get("apiVersion") != tfjob.TFJOB_API_VERSION:
            raise TfmwError(
                f"{where}: apiVersion: {document.get('apiVersion')!r} is not {tfjob.TFJOB_API_VERSION}",
                "tfmw converts Kubeflow's kubeflow.org/v1 TFJob (training-operator v1)",
            )
        meta = document.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise TfmwError(f"{where}: metadata.name: a TFJob needs a name", FIX)
        try:
            result = tfjob.convert(document)
            parse_job(result.manifest)  # what the operator (and the CRD) will take
        except SpecError as error:
            raise TfmwError(f"{where}: {error}", FIX) from None
        notes = tuple(f"{note.field}: {note.said}" for note in result.notes)
        converted.append(Converted(result.manifest, notes))
    if not any(isinstance(d, dict) and d.get("kind") == tfjob.TFJOB_KIND for d in documents):
        raise TfmwError(f"{source}: no TFJob found", "give a file with a kubeflow.org/v1 TFJob (kind: TFJob)")
    return converted
