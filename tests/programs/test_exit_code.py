"""deploy/samples/programs/exit_code.py as local processes: two MultiWorkerMirroredStrategy
workers that end by their exit code alone, with no shared volume (completion.policy
ChiefExitCode or AllWorkersExitCode)."""

from __future__ import annotations

from pathlib import Path

import pytest
from programs.local_job import PROGRAMS, WORKER, LocalJob, Task

pytestmark = pytest.mark.programs

STARTUP = 180  # s: two processes importing TensorFlow at once on two cores, then 60 steps


def test_both_workers_train_and_exit_0_writing_nothing(tmp_path: Path) -> None:
    workers = [Task(WORKER, 0), Task(WORKER, 1)]
    with LocalJob(PROGRAMS / "exit_code.py", tmp_path, workers=2, shared_volume=False) as job:
        assert "TFMW_SHARED_DIR" not in job.environment(workers[0], 0)
        job.start_all()
        assert [job.wait_exit(worker, STARTUP) for worker in workers] == [0, 0], job.outputs()
        for worker in workers:
            assert job.lines(worker, rf"^worker-{worker.index} done loss=\d")
        assert [p.name for p in tmp_path.iterdir()] == ["logs"]  # the test's own copy of the output
