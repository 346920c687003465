"""The benchmarks' contenders: a baseline tree is taken only where it holds an operator; a
contender's wait for a core is counted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.peer import Tfmw, check_baseline, cpu_seconds, image_malloc_env, run_queue_seconds
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


def test_the_run_queue_wait_counts_a_thread_kept_from_a_core() -> None:
    """Two busy processes pinned to one core: each waits, runnable, about as long as it runs."""
    spin = [sys.executable, "-c", "while True: pass"]
    core = {min(os.sched_getaffinity(0))}
    busy = [subprocess.Popen(spin) for _ in range(2)]
    try:
        for process in busy:
            os.sched_setaffinity(process.pid, core)
        before = [(run_queue_seconds(p.pid), cpu_seconds(p.pid)) for p in busy]
        time.sleep(1.0)
        waited = [run_queue_seconds(p.pid) - b[0] for p, b in zip(busy, before, strict=True)]
        ran = [cpu_seconds(p.pid) - b[1] for p, b in zip(busy, before, strict=True)]
    finally:
        for process in busy:
            process.kill()
            process.wait()
    # One core for two: together they ran at most a second, so waited at least about one (more
    # when other work shares that core; a unit slip would be a thousandfold).
    assert 0.5 < sum(waited) < 5.0, (waited, ran)
