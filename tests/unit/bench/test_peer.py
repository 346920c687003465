"""The benchmarks' contenders: a baseline tree is taken only where it holds an operator."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.peer import Tfmw, check_baseline, image_malloc_env
from kube import REPO


def test_a_baseline_folder_without_the_operator_package_is_refused(tmp_path: Path) -> None:
    """Run scale-8 was given the tree's root, not its operator/ folder: PYTHONPATH found no
    package there and the installed one, this tree's, ran as the baseline."""
    for refused in (
        lambda: check_baseline(tmp_path),
        lambda: Tfmw("ns", tmp_path, tmp_path, "tfmw-baseline"),
    ):
        with pytest.raises(
            ValueError, match="holds no tfmw_operator package: give the tree's operator/ folder"
        ):
            refused()
    package = tmp_path / "operator" / "tfmw_operator"
    package.mkdir(parents=True)
    (package / "__main__.py").write_text("")
    with pytest.raises(ValueError, match="has no Dockerfile"):
        check_baseline(tmp_path / "operator")
    (tmp_path / "Dockerfile").write_text("ENV PYTHONUNBUFFERED=1 \\\n    MALLOC_ARENA_MAX=4\n")
    check_baseline(tmp_path / "operator")
    baseline = Tfmw("ns", tmp_path, tmp_path / "operator", "tfmw-baseline")
    assert baseline.env["PYTHONPATH"] == str(tmp_path / "operator")


def test_each_trees_operator_runs_with_the_malloc_settings_of_its_own_image(tmp_path: Path) -> None:
    package = tmp_path / "operator" / "tfmw_operator"
    package.mkdir(parents=True)
    (package / "__main__.py").write_text("")
    (tmp_path / "Dockerfile").write_text("ENV PYTHONUNBUFFERED=1 \\\n    MALLOC_ARENA_MAX=4\n")
    assert image_malloc_env(tmp_path) == {"MALLOC_ARENA_MAX": "4"}
    assert Tfmw("ns", tmp_path, tmp_path / "operator", "tfmw-baseline").env["MALLOC_ARENA_MAX"] == "4"
    ours = Tfmw("ns", tmp_path).env
    assert ours == image_malloc_env(REPO) and ours["MALLOC_MMAP_THRESHOLD_"] == "524288"
    assert ours["MALLOC_TRIM_THRESHOLD_"] == "1048576"
