"""The launcher a submitted program runs under: as `python3 script args` would, from the job's
folder, and the marker written when the chief's program returns (in a real interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LAUNCHER = Path(__file__).resolve().parents[3] / "client" / "tfmw_client" / "launcher.py"


def launch(
    tmp_path: Path, program: str, *args: str, marker: str = "auto", **env: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    (tmp_path / "program").mkdir(exist_ok=True)
    script = tmp_path / "program" / "train.py"
    script.write_text(program)
    (tmp_path / "program" / "helper.py").write_text("VALUE = 'from a sibling module'\n")
    environment = {
        "PATH": os.environ["PATH"],
        "TFMW_JOB_UID": "uid-1",
        "TFMW_ATTEMPT": "2",
        "TFMW_WORKER_INDEX": "0",
        "TFMW_MARKER_PATH": str(shared / "multiworker-complete.txt"),
        **env,
    }
    result = subprocess.run(
        [sys.executable, str(LAUNCHER), marker, str(script), *args],
        cwd=shared,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result, shared / "multiworker-complete.txt"


def test_the_program_runs_as_main_with_its_arguments_and_its_folders_modules(tmp_path: Path) -> None:
    program = "import sys, helper\nif __name__ == '__main__':\n    print(sys.argv[1:], helper.VALUE)\n    open('relative.txt', 'w').write('x')\n"
    result, marker = launch(tmp_path, program, "--epochs", "3")
    assert result.returncode == 0, result.stderr
    assert "['--epochs', '3'] from a sibling module" in result.stdout
    assert (tmp_path / "shared" / "relative.txt").exists()  # a relative name lands in the job's folder
    assert json.loads(marker.read_text()) == {"jobUid": "uid-1", "writtenBy": "tfmw launcher", "attempt": 2}


@pytest.mark.parametrize("ending", ["", "import sys; sys.exit(0)", "import sys; sys.exit()"])
def test_a_chief_that_returns_or_exits_0_gets_the_marker(tmp_path: Path, ending: str) -> None:
    result, marker = launch(tmp_path, f"print('trained')\n{ending}\n")
    assert result.returncode == 0 and marker.exists()


def test_a_failing_program_keeps_its_exit_code_and_gets_no_marker(tmp_path: Path) -> None:
    result, marker = launch(tmp_path, "raise SystemExit(3)\n")
    assert result.returncode == 3 and not marker.exists()
    result, marker = launch(tmp_path, "raise RuntimeError('cannot open the training data')\n")
    assert result.returncode == 1 and "cannot open the training data" in result.stderr and not marker.exists()


def test_only_the_chief_writes_the_marker(tmp_path: Path) -> None:
    _, marker = launch(tmp_path, "pass\n", TFMW_WORKER_INDEX="1")
    assert not marker.exists()
    _, marker = launch(tmp_path, "pass\n", TFMW_WORKER_INDEX="1", TFMW_ROLE="chief")  # a separate chief
    assert marker.exists()
    marker.unlink()
    _, marker = launch(tmp_path, "pass\n", TFMW_WORKER_INDEX="0", TFMW_ROLE="worker")
    assert not marker.exists()


def test_a_marker_the_program_wrote_is_left_alone_and_program_mode_writes_none(tmp_path: Path) -> None:
    _, marker = launch(tmp_path, "import os\nopen(os.environ['TFMW_MARKER_PATH'], 'w').write('mine')\n")
    assert marker.read_text() == "mine"
    marker.unlink()
    _, marker = launch(tmp_path, "pass\n", marker="program")
    assert not marker.exists()


def test_sigterm_ends_the_program_with_143(tmp_path: Path) -> None:
    program = "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(30)\n"
    result, marker = launch(tmp_path, program)
    assert result.returncode == 143 and not marker.exists()
