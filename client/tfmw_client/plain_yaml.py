"""The YAML that kubeconfigs are written in, read without PyYAML; anything else declined.

Importing PyYAML (its Python modules load even for libyaml's C loader) was about a tenth of
`tfmw get`'s start (docs/benchmarks.md, "The CLI's start time"), to read a file that kubectl,
kind, kubeadm and cloud CLIs write in a small part of YAML: block mappings and sequences
indented by spaces, plain and quoted one-line scalars, and one-line flow collections. `load`
reads that part and returns DECLINED for anything else (block scalars, anchors, tags,
multi-line scalars, numbers, dates, escapes, comments after a value, tabs, non-ASCII
text...), which the caller then gives to PyYAML's safe loader. Where `load` returns a value
it is the value PyYAML's safe loader returns: tests/unit/client/test_plain_yaml.py checks it
on generated documents, on PyYAML's own output in every style, and on random text.
"""

from __future__ import annotations

import re
from typing import Any, Final


class _Declined(Exception):
    """Not in the part of YAML read here: PyYAML's to read."""


DECLINED: Final = object()  # what load() returns for a document it does not read

# YAML 1.1's booleans and null as PyYAML's resolver has them.
_BOOLEANS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS = frozenset(("~", "null", "Null", "NULL"))
# The first characters of PyYAML's other implicit types (int, float, timestamp, merge, value):
# a plain scalar starting with one of them is declined rather than resolved here.
_TYPED_START = frozenset("-+0123456789.<=~")
# A plain scalar, block context: printable ASCII, not starting with an indicator, no ": " or
# " #" inside, not ending with ":" (checked in _plain). In flow context, none of ",[]{}:" too.
_PLAIN = re.compile(r"[A-Za-z_/][ -~]*")
_FLOW_PLAIN = re.compile(r"[A-Za-z_/][^,\[\]{}:#'\"?]*")  # "?" too: PyYAML's own parser refuses it there
_OPTION = re.compile(r"[-+]+[A-Za-z_/][ -~]*")
_PRINTABLE = re.compile(r"[\n -~]*")
# PyYAML refuses an implicit key longer than this.
MAX_KEY = 1024
# Longer lines are left to PyYAML: flow collections here re-slice the rest of their line.
MAX_LINE = 65536


def load(text: str) -> Any:
    """The document's value as PyYAML's safe loader gives it, or DECLINED."""
    if not _PRINTABLE.fullmatch(text):
        return DECLINED  # tabs, carriage returns, control characters, non-ASCII
    lines: list[tuple[int, str]] = []
    for raw in text.split("\n"):
        if len(raw) > MAX_LINE:
            return DECLINED
        content = raw.rstrip(" ")
        stripped = content.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith(("---", "...", "%")) and len(content) == len(stripped):
            return DECLINED  # document markers and directives
        lines.append((len(content) - len(stripped), stripped))
    if not lines or lines[0][0] != 0:
        return DECLINED
    try:
        value, end = _Block(lines).node(0, 0)
    except (_Declined, RecursionError):  # RecursionError: nesting deeper than Python's stack
        return DECLINED
    return value if end == len(lines) else DECLINED


class _Block:
    def __init__(self, lines: list[tuple[int, str]]) -> None:
        self.lines = lines

    def node(self, at: int, indent: int) -> tuple[Any, int]:
        """The block node whose first line is lines[at], at `indent`; the line after it."""
        if self.lines[at][1] == "-" or self.lines[at][1].startswith("- "):
            return self.sequence(at, indent)
        return self.mapping(at, indent)

    def sequence(self, at: int, indent: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        while at < len(self.lines) and self.lines[at][0] == indent:
            content = self.lines[at][1]
            if content == "-":
                value, at = self.nested(at + 1, indent, same_indent_sequence=False)
            elif content.startswith("- "):
                rest = content[2:]
                inner = indent + 2 + len(rest) - len(rest.lstrip(" "))
                # The item's content as a line of its own, at its column (a compact mapping
                # or sequence continues on the lines below, at that column).
                self.lines[at] = (inner, rest.lstrip(" "))
                if self._is_collection_start(rest.lstrip(" ")):
                    value, at = self.node(at, inner)
                else:
                    value = _scalar_or_flow(rest.lstrip(" "))
                    at += 1
            else:
                break
            items.append(value)
        if at < len(self.lines) and self.lines[at][0] > indent:
            raise _Declined
        return items, at

    @staticmethod
    def _is_collection_start(content: str) -> bool:
        return content == "-" or content.startswith("- ") or _split_key(content) is not None

    def mapping(self, at: int, indent: int) -> tuple[dict[Any, Any], int]:
        found: dict[Any, Any] = {}
        while at < len(self.lines) and self.lines[at][0] == indent:
            content = self.lines[at][1]
            if content == "-" or content.startswith("- "):
                break  # a sequence at the key's indent ends the mapping (its parent's value)
            split = _split_key(content)
            if split is None:
                raise _Declined
            key, rest = split
            if rest:
                found[key] = _scalar_or_flow(rest)
                at += 1
            else:
                found[key], at = self.nested(at + 1, indent, same_indent_sequence=True)
        if at < len(self.lines) and self.lines[at][0] > indent:
            raise _Declined
        return found, at

    def nested(self, at: int, indent: int, same_indent_sequence: bool) -> tuple[Any, int]:
        """What follows `key:` or `-` with nothing after it: a deeper block, a sequence at the
        key's own indent, or null."""
        if at < len(self.lines):
            deeper, content = self.lines[at]
            if deeper > indent:
                return self.node(at, deeper)
            if same_indent_sequence and deeper == indent and (content == "-" or content.startswith("- ")):
                return self.sequence(at, indent)
        return None, at


def _split_key(content: str) -> tuple[str, str] | None:
    """`key: rest` or `key:` -> (key, rest); None when the line is not a mapping entry."""
    if content[:1] in ("'", '"'):
        quoted, after = _quoted(content)
        if len(content) - len(after) > MAX_KEY:
            raise _Declined
        if after == ":":
            return quoted, ""
        if after.startswith(": "):
            return quoted, after[2:].lstrip(" ")
        return None
    position = content.find(": ")
    if position < 0:
        if not content.endswith(":"):
            return None
        key, rest = content[:-1], ""
    else:
        key, rest = content[:position], content[position + 2 :].lstrip(" ")
    if key != key.rstrip(" ") or len(key) > MAX_KEY:
        raise _Declined
    value = _plain(key, flow=False)
    if not isinstance(value, str):
        raise _Declined  # a key that is not a string
    return value, rest


def _scalar_or_flow(content: str) -> Any:
    if content[:1] in ("[", "{"):
        value, after = _flow(content)
        if after.strip(" "):
            raise _Declined
        return value
    if content[:1] in ("'", '"'):
        value, after = _quoted(content)
        if after.strip(" "):
            raise _Declined
        return value
    return _plain(content, flow=False)


def _plain(text: str, flow: bool) -> Any:
    if text in _BOOLEANS:
        return _BOOLEANS[text]
    if text in _NULLS:
        return None
    if not flow and _OPTION.fullmatch(text):
        pass  # `--token-only`: a sign then a letter is no number
    elif text[:1] in _TYPED_START or not (_FLOW_PLAIN if flow else _PLAIN).fullmatch(text):
        raise _Declined
    if ": " in text or " #" in text or text.endswith(":") or "  " in text:
        raise _Declined
    return text


def _quoted(content: str) -> tuple[str, str]:
    """A one-line quoted scalar at the start of `content`; (its value, what follows)."""
    quote = content[0]
    if quote == '"':
        end = content.find('"', 1)
        if end < 0 or "\\" in content[1:end]:
            raise _Declined
        return content[1:end], content[end + 1 :]
    parts: list[str] = []
    at = 1
    while True:
        end = content.find("'", at)
        if end < 0:
            raise _Declined
        parts.append(content[at:end])
        if content[end + 1 : end + 2] == "'":
            parts.append("'")
            at = end + 2
            continue
        return "".join(parts), content[end + 1 :]


def _flow(content: str) -> tuple[Any, str]:
    """A one-line flow mapping or sequence at the start of `content`; (its value, the rest)."""
    opening = content[0]
    closing = "}" if opening == "{" else "]"
    rest = content[1:].lstrip(" ")
    mapping: dict[Any, Any] = {}
    sequence: list[Any] = []
    if rest.startswith(closing):
        return (mapping if opening == "{" else sequence), rest[1:]
    while True:
        if opening == "{":
            before = len(rest)
            key, rest = _flow_item(rest)
            if not isinstance(key, str) or before - len(rest) > MAX_KEY or not rest.startswith(": "):
                raise _Declined
            value, rest = _flow_item(rest[2:].lstrip(" "))
            mapping[key] = value
        else:
            value, rest = _flow_item(rest)
            sequence.append(value)
        rest = rest.lstrip(" ")
        if rest.startswith(closing):
            return (mapping if opening == "{" else sequence), rest[1:]
        if not rest.startswith(", "):
            raise _Declined
        rest = rest[2:].lstrip(" ")
        if rest.startswith(closing):
            raise _Declined  # a trailing comma


def _flow_item(content: str) -> tuple[Any, str]:
    if content[:1] in ("[", "{"):
        return _flow(content)
    if content[:1] in ("'", '"'):
        return _quoted(content)
    end = len(content)
    for stop in (",", "]", "}", ":"):
        found = content.find(stop)
        if 0 <= found < end:
            end = found
    text = content[:end].rstrip(" ")
    if not text:
        raise _Declined
    return _plain(text, flow=True), content[end:]
