"""Frozen records and their JSON, declared once per field.

A status record says, per dataclass field, its JSON key and how its value is read and
written (`wire(...)` in the field's metadata); `Record.from_json` and `Record.to_json`
follow that declaration, so reading and writing a field cannot drift apart. Reading never
fails: whatever is in a status may have been written by an older operator or edited by
hand, and a value of the wrong type counts as absent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from tfmw_operator.api.objects import Json
from tfmw_operator.api.times import format_precise_time, format_time, parse_time

Frozen = TypeVar("Frozen")
R = TypeVar("R", bound="Record")
_FIELD_NAMES: dict[type, frozenset[str]] = {}


def evolve(record: Frozen, **changes: Any) -> Frozen:
    """`dataclasses.replace` for frozen records without a `__post_init__`, skipping its
    per-call field walk and `__init__` (docs/benchmarks.md, "The measurements behind the code")."""
    kind = type(record)
    names = _FIELD_NAMES.get(kind)
    if names is None:
        if hasattr(kind, "__post_init__"):  # it would be skipped: use dataclasses.replace there
            raise TypeError(f"{kind.__name__} has a __post_init__, which evolve does not run")
        names = _FIELD_NAMES.setdefault(kind, frozenset(f.name for f in fields(kind)))  # type: ignore[arg-type]
    if not names.issuperset(changes):
        raise TypeError(f"{kind.__name__} has no field {sorted(set(changes) - names)}")
    copied: Frozen = object.__new__(kind)
    copied.__dict__.update(record.__dict__, **changes)
    return copied


# ---- how one value is read and written ----


@dataclass(frozen=True)
class Codec:
    load: Callable[[object], Any]  # None: absent, or not a value of this kind
    dump: Callable[[Any], Any]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _same(value: Any) -> Any:
    return value


def _metrics(value: object) -> tuple[tuple[str, float], ...] | None:
    if not isinstance(value, dict):
        return None
    return tuple(
        (name, figure)
        for name, raw in value.items()
        if isinstance(name, str) and (figure := _float(raw)) is not None
    )


INT = Codec(_int, _same)
FLOAT = Codec(_float, _same)
STR = Codec(_str, _same)
TIME = Codec(parse_time, format_time)  # seconds, as Kubernetes writes times
PRECISE_TIME = Codec(parse_time, format_precise_time)  # milliseconds: progress comes faster
# Metrics by name, as a tuple of (name, figure) pairs: a record stays hashable.
METRICS = Codec(_metrics, dict)
TRUE_FALSE = Codec(lambda value: value == "True", lambda value: "True" if value else "False")


def enum(kind: type[StrEnum]) -> Codec:
    values = {member.value: member for member in kind}
    return Codec(
        lambda value: values.get(value) if isinstance(value, str) else None, lambda value: value.value
    )


def record(kind: type[Record]) -> Codec:
    return Codec(kind.from_json, lambda value: value.to_json())


def records(kind: type[Record], limit: int | None = None) -> Codec:
    """A list of records, the first `limit` of them read; those that cannot be read left out."""

    def load(value: object) -> tuple[Record, ...] | None:
        if not isinstance(value, list):
            return None
        found = (kind.from_json(item) for item in value[:limit])
        return tuple(item for item in found if item is not None)

    return Codec(load, lambda value: [item.to_json() for item in value])


def keyed(kind: type[Record], key_field: str) -> Codec:
    """A JSON object of records by a key each holds in `key_field` (a status's per-role counts,
    `replicas.worker.running`): written without the key inside, read back with it."""

    def load(value: object) -> tuple[Record, ...] | None:
        if not isinstance(value, dict):
            return None
        found = (
            kind.from_json({**item, key_field: key}) for key, item in value.items() if isinstance(item, dict)
        )
        return tuple(item for item in found if item is not None)

    def dump(value: tuple[Record, ...]) -> Json:
        rendered = {}
        for item in value:
            json = item.to_json()
            rendered[str(json.pop(key_field))] = json
        return rendered

    return Codec(load, dump)


def strings(limit: int | None = None) -> Codec:
    """A list of strings; what is not a string is left out."""

    def load(value: object) -> tuple[str, ...] | None:
        if not isinstance(value, list):
            return None
        return tuple(item for item in value[:limit] if isinstance(item, str))

    return Codec(load, list)


def wire(key: str, codec: Codec, *, required: bool = False, omit_empty: bool = False) -> Mapping[str, Any]:
    """A field's JSON: its key and codec. `required`: a record without it is not read at
    all. A field is written unless it is None, or, with `omit_empty`, empty or zero."""
    return {"wire": _Wire(key, codec, required, omit_empty)}


@dataclass(frozen=True)
class _Wire:
    key: str
    codec: Codec
    required: bool
    omit_empty: bool


@dataclass(frozen=True)
class _Column:
    name: str
    wire: _Wire
    default: Any


class Record:
    """A frozen dataclass whose fields declare their JSON with `wire`."""

    # A record read with every field at its default is no record (None), e.g. an empty checkpoint.
    EMPTY_IS_NONE: ClassVar[bool] = False
    _columns: ClassVar[tuple[_Column, ...]]

    @classmethod
    def _table(cls) -> tuple[_Column, ...]:
        table = cls.__dict__.get("_columns")
        if table is None:
            table = tuple(
                _Column(f.name, f.metadata["wire"], None if f.default is MISSING else f.default)
                for f in fields(cls)  # type: ignore[arg-type]
            )
            cls._columns = table
        return table

    @classmethod
    def from_json(cls: type[R], raw: object) -> R | None:
        if not isinstance(raw, dict):
            return None
        values: dict[str, Any] = {}
        for column in cls._table():
            value = column.wire.codec.load(raw.get(column.wire.key))
            if value is None:
                if column.wire.required:
                    return None
                value = column.default
            values[column.name] = value
        found = cls(**values)
        if cls.EMPTY_IS_NONE and all(values[c.name] == c.default for c in cls._table()):
            return None
        return found

    def to_json(self) -> Json:
        rendered: Json = {}
        for column in self._table():
            value = getattr(self, column.name)
            if value is None or (column.wire.omit_empty and not value):
                continue
            rendered[column.wire.key] = column.wire.codec.dump(value)
        return rendered
