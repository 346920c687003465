"""The codecs and `wire` a record's fields are declared with, called here in each test: a
record class is built when its module is imported, so these are also what a test sees of
a codec that was built wrong."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pytest
from tfmw_operator.api.records import INT, STR, Record, enum, keyed, record, records, strings, wire


def counts_record() -> Any:  # a class built in the test (see the docstring), typed loosely
    @dataclass(frozen=True)
    class Counts(Record):
        role: str = field(metadata=wire("role", STR, required=True))
        running: int = field(default=0, metadata=wire("running", INT))
        restarts: int = field(default=0, metadata=wire("restarts", INT, omit_empty=True))

    return Counts


def test_wire_declares_the_key_the_codec_and_what_is_required_or_left_out() -> None:
    counts = counts_record()
    assert counts.from_json({"role": "worker", "running": 2, "restarts": 1}) == counts("worker", 2, 1)
    assert counts.from_json({"running": 2}) is None  # required
    assert counts.from_json({"role": "worker", "running": "2"}) == counts("worker", 0, 0)  # not an int
    assert counts("worker", 0, 0).to_json() == {"role": "worker", "running": 0}  # omit_empty: restarts
    assert counts("worker", 2, 3).to_json() == {"role": "worker", "running": 2, "restarts": 3}


def test_record_reads_and_writes_one_nested_record() -> None:
    counts = counts_record()
    codec = record(counts)
    assert codec.load({"role": "ps", "running": 1}) == counts("ps", 1, 0)
    assert codec.load("ps") is None
    assert codec.dump(counts("ps", 1, 0)) == {"role": "ps", "running": 1}


def test_records_reads_a_list_up_to_its_limit_leaving_out_what_cannot_be_read() -> None:
    counts = counts_record()
    codec = records(counts, limit=3)
    raw = [{"role": "a"}, {"running": 1}, {"role": "c", "running": 2}, {"role": "d"}]
    assert codec.load(raw) == (counts("a", 0, 0), counts("c", 2, 0))  # the 4th is past the limit
    assert records(counts).load(raw) == (counts("a", 0, 0), counts("c", 2, 0), counts("d", 0, 0))
    assert codec.load({"role": "a"}) is None  # not a list
    assert codec.dump((counts("a", 1, 0), counts("b", 0, 0))) == [
        {"role": "a", "running": 1},
        {"role": "b", "running": 0},
    ]


def test_keyed_reads_records_by_key_and_writes_them_without_the_key_inside() -> None:
    counts = counts_record()
    codec = keyed(counts, "role")
    raw = {"worker": {"running": 2}, "ps": {"running": 1, "restarts": 4}, "chief": "not an object"}
    assert codec.load(raw) == (counts("worker", 2, 0), counts("ps", 1, 4))
    assert codec.load([{"role": "worker"}]) is None  # not an object
    assert codec.dump((counts("worker", 2, 0), counts("ps", 1, 4))) == {
        "worker": {"running": 2},
        "ps": {"running": 1, "restarts": 4},
    }

    @dataclass(frozen=True)
    class Strict(Record):
        name: str = field(metadata=wire("name", STR, required=True))
        size: int = field(metadata=wire("size", INT, required=True))

    # A record that cannot be read (no size) is left out, the others kept.
    assert keyed(Strict, "name").load({"a": {"size": 1}, "b": {}}) == (Strict("a", 1),)


def test_strings_keeps_the_strings_up_to_the_limit() -> None:
    codec = strings(limit=2)
    assert codec.load(["a", 1, "b", "c"]) == ("a",)  # the limit counts items, not strings
    assert strings().load(["a", 1, "b", "c"]) == ("a", "b", "c")
    assert codec.load("a") is None
    assert codec.dump(("a", "b")) == ["a", "b"]


def test_enum_reads_its_values_only() -> None:
    class Colour(StrEnum):
        RED = "Red"
        BLUE = "Blue"

    codec = enum(Colour)
    assert codec.load("Red") is Colour.RED
    assert codec.load("Green") is None
    assert codec.load(["Red"]) is None  # not a string (and not hashable)
    assert codec.dump(Colour.BLUE) == "Blue"


@pytest.mark.parametrize("raw", [None, 3, "worker"])
def test_a_record_is_read_only_from_an_object(raw: object) -> None:
    assert counts_record().from_json(raw) is None
