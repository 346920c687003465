"""The import contract (.importlinter): the real tree keeps it, and it fails on a wrong import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from kube import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PARTS = ("operator", "trainer", "client")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / ".importlinter"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": ":".join(str(tree / part) for part in PARTS), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_keeps_the_contract() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def copy_of_the_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for part in PARTS:
        shutil.copytree(REPO / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tree / ".importlinter")
    return tree


def test_an_import_running_up_a_layer_breaks_it(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    with (tree / "operator/tfmw_operator/storage/watch.py").open("a") as module:
        module.write("\nfrom tfmw_operator.shell import events  # noqa: E402\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "tfmw_operator.storage.watch -> tfmw_operator.shell.events" in result.stdout


def test_the_core_touching_the_filesystem_breaks_it(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    with (tree / "operator/tfmw_operator/core/policies/cleanup.py").open("a") as module:
        module.write("\nimport os  # noqa: E402\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "tfmw_operator.core is not allowed to import os" in result.stdout
