"""The project's requirements for `pip install -r`, in two lists: those pip installs with
their dependencies, and those it installs without (`--no-deps`). Read by hack/install-deps.sh
(the project's .venv) and the Dockerfile (the images' venvs).

Without their dependencies: tf-keras. It requires the distribution `tensorflow` (a 572 MB
wheel, CUDA kernels included), but the trainer extra installs `tensorflow-cpu` (274 MB),
which puts the same `tensorflow` package in place under another name. Resolved as declared,
pip installs both TensorFlows, one unpacked over the other: 1.9 GB where tensorflow-cpu's
1.3 GB do, twice the download and the unpacking, and an image of 2.66 GB
(docs/benchmarks.md, "A newcomer's path"). tensorflow is the only requirement tf-keras has,
so nothing else is left out; `pip check` reports that one, and nothing else.

    python3 hack/pip_requirements.py pyproject.toml trainer              # with dependencies
    python3 hack/pip_requirements.py --no-deps pyproject.toml trainer    # tf-keras==...

Standard library only: it runs on the images' base Python before any package is there.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

# Distributions installed without their dependencies, by normalized name (PEP 503).
WITHOUT_DEPENDENCIES = frozenset({"tf-keras"})


def normalized_name(requirement: str) -> str:
    """The distribution a requirement string names, normalized: `TF_Keras==2.21` is tf-keras."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(pyproject: dict[str, object], extras: list[str]) -> list[str]:
    """The project's own dependencies, then each extra's, in order, each once."""
    project = pyproject.get("project")
    if not isinstance(project, dict):
        raise ValueError("pyproject.toml has no [project] table")
    optional = project.get("optional-dependencies", {})
    lists = [project.get("dependencies", [])]
    for extra in extras:
        if extra not in optional:
            raise ValueError(f"pyproject.toml has no extra {extra!r}")
        lists.append(optional[extra])
    seen: list[str] = []
    for requirement_list in lists:
        for requirement in requirement_list:
            if requirement not in seen:
                seen.append(requirement)
    return seen


def split(all_requirements: list[str]) -> tuple[list[str], list[str]]:
    """(with their dependencies, without)."""
    without = [r for r in all_requirements if normalized_name(r) in WITHOUT_DEPENDENCIES]
    return [r for r in all_requirements if r not in without], without


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-deps", action="store_true", help="print those installed without dependencies")
    parser.add_argument("pyproject", type=Path)
    parser.add_argument("extras", nargs="*")
    args = parser.parse_args(argv)
    with args.pyproject.open("rb") as file:
        pyproject = tomllib.load(file)
    with_dependencies, without = split(requirements(pyproject, args.extras))
    for requirement in without if args.no_deps else with_dependencies:
        print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
