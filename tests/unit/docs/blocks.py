"""Fenced code blocks of README.md and docs/*.md, for the tests that keep the docs true.

The convention (docs/development.md, "Docs that run"): a fenced block's info string is its
language, then words. `runnable` marks a shell block the docs test runs as it stands, from
the repository's root, against the local cluster; `name=<id>` names a block a test takes
out of the doc and uses (the minimal training program and its job).

    ```sh runnable
    kubectl get tfmwjobs
    ```
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SHELLS = frozenset({"sh", "bash", "shell", "console"})
# An opening fence: three or more backticks or tildes, then the info string.
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    words: tuple[str, ...]
    text: str

    @property
    def runnable(self) -> bool:
        return "runnable" in self.words

    @property
    def name(self) -> str | None:
        for word in self.words:
            if word.startswith("name="):
                return word.removeprefix("name=")
        return None

    @property
    def where(self) -> str:
        try:
            shown = self.path.relative_to(REPO)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"


class FenceError(ValueError):
    """A doc whose fences do not pair up, or a marked block that is not shell."""


def parse_blocks(text: str, path: Path = Path("<text>")) -> list[Block]:
    """Every fenced block of a Markdown text, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, info, indent = opening["fence"], opening["info"].strip(), len(opening["indent"])
        start, body = i, []
        i += 1
        while i < len(lines):
            closing = lines[i].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            body.append(_dedent(lines[i], indent))
            i += 1
        else:
            raise FenceError(f"{path}:{start + 1}: a fenced block that never closes")
        i += 1
        language, *words = info.split() or [""]
        block = Block(path, start + 1, language, tuple(words), "\n".join(body) + "\n")
        if block.runnable and block.language not in SHELLS:
            raise FenceError(f"{block.where}: only shell blocks can be runnable, not {block.language!r}")
        blocks.append(block)
    return blocks


def _dedent(line: str, indent: int) -> str:
    """A fenced block indented by `indent` spaces loses up to that many from each line."""
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(indent, spaces) :]


def doc_files(repo: Path = REPO) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def all_blocks(repo: Path = REPO) -> list[Block]:
    return [block for path in doc_files(repo) for block in parse_blocks(path.read_text(), path)]


def runnable_blocks(repo: Path = REPO) -> list[Block]:
    return [block for block in all_blocks(repo) if block.runnable]


def named_block(name: str, repo: Path = REPO) -> Block:
    found = [block for block in all_blocks(repo) if block.name == name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} blocks named {name!r} in the docs; expected exactly one")
    return found[0]
