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


# Nodes a file may hold with its YAML aliases expanded: `-o json` writes each alias out in
# full, so nine nested aliases of nine (a "billion laughs") would be gigabytes.
MAX_EXPANDED_NODES = 1_000_000


def expanded_size(value: object, sizes: dict[int, int] | None = None) -> int:
    """The value's nodes counted as JSON would write them out: an object an alias shares is
    counted at each place, but walked once. One that holds itself counts past any cap."""
    if not isinstance(value, dict | list):
        return 1
    known = {} if sizes is None else sizes
    if id(value) in known:
        return known[id(value)]
    known[id(value)] = MAX_EXPANDED_NODES + 1  # while it is walked: met again, it holds itself
    children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    known[id(value)] = 1 + sum(expanded_size(child, known) for child in children)
    return known[id(value)]


def check_expansion(documents: list[object], source: str) -> None:
    """Refuses a file whose aliases expand past MAX_EXPANDED_NODES (as go-yaml, and so
    kubectl, refuses an alias bomb) before anything is converted or written."""
    sizes: dict[int, int] = {}
    if sum(expanded_size(document, sizes) for document in documents) > MAX_EXPANDED_NODES:
        raise TfmwError(
            f"{source}: its YAML aliases (*name) expand to more than {MAX_EXPANDED_NODES:,} values "
            "(or an anchor holds itself)",
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
