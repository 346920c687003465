"""A program, as `tfmw submit` and `Client().train` ship it: files in a ConfigMap.

A ConfigMap holds at most 1 MiB of data (the API server sums the values of `data` and
`binaryData`: ValidateConfigMap, `core.MaxSecretSize`), so a program is measured here and
refused beyond it before anything is created. Keys may only use `[-._a-zA-Z0-9]`: a file's
path becomes a key, and the volume's `items` put each key back at its path.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from tfmw_client.errors import TfmwError

CONFIGMAP_LIMIT = 1024 * 1024  # bytes of values, as the API server counts them
LAUNCHER_KEY = ".tfmw-launch.py"  # a user's hidden files are never packaged, so never a clash
ENTRYPOINTS = ("train.py", "main.py", "__main__.py")  # tried in order for a folder
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})
_KEY_UNSAFE = re.compile(r"[^-._a-zA-Z0-9]")
_KEY_MAX = 253


@dataclass(frozen=True)
class ProgramFile:
    path: str  # relative, with `/`
    content: bytes


@dataclass(frozen=True)
class Program:
    files: tuple[ProgramFile, ...]
    entrypoint: str  # the relative path of the script that runs
    skipped: tuple[str, ...] = ()  # what was left out, and why, for the user to read

    @property
    def size(self) -> int:
        return sum(len(f.content) for f in self.files)


def _hidden(part: str) -> bool:
    return part.startswith(".")


def collect(source: Path, entrypoint: str | None = None) -> Program:
    """The script, or the folder's files (no hidden files or folders: a `.env` or `.git` has
    no business in a ConfigMap; no `__pycache__`, `*.pyc`; no symbolic links)."""
    if not source.exists():
        raise TfmwError(f"{source}: no such file or folder", "name the training script or its folder")
    if source.is_file():
        if entrypoint and entrypoint != source.name:
            raise TfmwError(f"--entrypoint {entrypoint} is for a folder; {source} is a file")
        return Program((ProgramFile(source.name, source.read_bytes()),), source.name)
    files: list[ProgramFile] = []
    skipped: list[str] = []
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        parts = relative.parts
        if any(_hidden(p) for p in parts) or any(p in SKIPPED_DIRS for p in parts[:-1]):
            continue
        if path.is_symlink():
            skipped.append(f"{relative.as_posix()} (a symbolic link)")
            continue
        if path.is_dir() or path.suffix == ".pyc" or path.name in SKIPPED_DIRS:
            continue
        if not path.is_file():
            skipped.append(f"{relative.as_posix()} (not a regular file)")
            continue
        files.append(ProgramFile(relative.as_posix(), path.read_bytes()))
    present = {f.path for f in files}
    if entrypoint:
        entry = Path(entrypoint).as_posix().removeprefix("./")
        if entry not in present:
            raise TfmwError(
                f"--entrypoint {entrypoint} is not a file of {source}",
                f"name a script inside the folder, relative to it (found: {', '.join(sorted(present)[:10])})",
            )
    else:
        entry = next((e for e in ENTRYPOINTS if e in present), "")
        if not entry:
            raise TfmwError(
                f"{source} has no {', '.join(ENTRYPOINTS[:-1])} or {ENTRYPOINTS[-1]} to run",
                "name the script to run with --entrypoint PATH (relative to the folder)",
            )
    if not files:
        raise TfmwError(f"{source} holds no file to submit")
    return Program(tuple(files), entry, tuple(skipped))


def program_from_source(filename: str, text: str) -> Program:
    return Program((ProgramFile(filename, text.encode()),), filename)


def check_size(program: Program, launcher: bytes) -> None:
    """Refused beyond the ConfigMap's 1 MiB, naming the largest files."""
    total = program.size + len(launcher)
    if total <= CONFIGMAP_LIMIT:
        return
    largest = sorted(program.files, key=lambda f: len(f.content), reverse=True)[:5]
    shown = ", ".join(f"{f.path} ({_size(len(f.content))})" for f in largest)
    raise TfmwError(
        f"the program is {_size(total)}, more than a ConfigMap holds (1 MiB); largest files: {shown}",
        "leave data and checkpoints out (put them on the shared volume or in object storage), "
        "or build an image FROM the trainer image with your code in it and pass --image",
    )


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / 1024 / 1024:.2f} MiB"


def key_for(path: str, taken: set[str]) -> str:
    """A ConfigMap key for a file's path: readable, valid and unique."""
    key = _KEY_UNSAFE.sub("_", path.replace("/", "__"))
    if len(key) > _KEY_MAX - 9:
        key = key[: _KEY_MAX - 9]
    if key in taken or key.startswith("."):
        key = f"{key.lstrip('.')}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"
    taken.add(key)
    return key


@dataclass(frozen=True)
class PackedProgram:
    data: dict[str, str]
    binary_data: dict[str, str]  # base64, as the API takes it
    items: list[dict[str, str]]  # the volume's key -> path


def pack(program: Program, launcher: bytes) -> PackedProgram:
    data: dict[str, str] = {LAUNCHER_KEY: launcher.decode()}
    binary: dict[str, str] = {}
    items: list[dict[str, str]] = []
    taken = {LAUNCHER_KEY}
    for file in program.files:
        key = key_for(file.path, taken)
        try:
            data[key] = file.content.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(file.content).decode()
        items.append({"key": key, "path": file.path})
    return PackedProgram(data, binary, items)
