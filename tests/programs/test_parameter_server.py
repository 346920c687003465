"""deploy/samples/programs/parameter_server.py as local processes: a chief (the coordinator),
two workers and a parameter server, each with the environment tfmw gives its pod."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from programs.local_job import CHIEF, JOB_UID, MARKER_FILE, PROGRAMS, PS, WORKER, LocalJob, Task

pytestmark = pytest.mark.programs

PROGRAM = PROGRAMS / "parameter_server.py"
THE_CHIEF, THE_PS = Task(CHIEF), Task(PS, 0)
WORKERS = [Task(WORKER, 0), Task(WORKER, 1)]
STARTUP = 180  # s: four processes importing TensorFlow at once on two cores take 10 to 20 s
EPOCH_LINE = r"^chief epoch=(\d+) step=(\d+) updates=(\d+) loss="


def ps_job(shared: Path, epochs: int, steps: int) -> LocalJob:
    env = {"EPOCHS": str(epochs), "STEPS_PER_EPOCH": str(steps)}
    return LocalJob(PROGRAM, shared, workers=2, chief=True, parameter_servers=1, extra_env=env)


def epochs_reported(job: LocalJob, attempt: int) -> list[tuple[int, int, int]]:
    """(epoch, steps done, updates applied) of each epoch the chief reported in that attempt."""
    return [(int(m[1]), int(m[2]), int(m[3])) for m in job.lines(THE_CHIEF, EPOCH_LINE, attempt)]


def test_trains_to_the_end_and_the_chief_writes_the_marker_last(tmp_path: Path) -> None:
    epochs, steps = 4, 50
    with ps_job(tmp_path, epochs, steps) as job:
        job.start_all()
        assert job.wait_exit(THE_CHIEF, STARTUP) == 0, job.outputs()

        assert epochs_reported(job, 0) == [(e, e * steps, e * steps) for e in range(1, epochs + 1)]
        marker = job.read_json(MARKER_FILE)
        assert marker is not None and marker["step"] == marker["updates"] == epochs * steps, marker
        assert (marker["jobUid"], marker["attempt"]) == (JOB_UID, 0)
        progress = job.read_json("progress.json")
        assert progress is not None
        assert {k: progress[k] for k in ("epoch", "totalEpochs", "step", "totalSteps")} == {
            "epoch": epochs,
            "totalEpochs": epochs,
            "step": epochs * steps,
            "totalSteps": epochs * steps,
        }
        assert (progress["checkpointEpoch"], progress["checkpointStep"]) == (epochs, epochs * steps)
        assert set(progress["metrics"]) == {"loss", "accuracy"}
        assert (tmp_path / "backup").is_dir()  # kept: a chief restarted after the end resumes there
        # The marker comes last: after the final progress report.
        assert os.stat(tmp_path / MARKER_FILE).st_mtime_ns >= os.stat(tmp_path / "progress.json").st_mtime_ns

        # Workers and parameter servers serve until tfmw stops their pods at the job's end;
        # SIGTERM (what a pod's deletion sends) ends each at once with 143, as PID 1 too.
        for task in [*WORKERS, THE_PS]:
            assert job.running[task].process.poll() is None, f"{task.stem} ended by itself"
            job.signal(task, signal.SIGTERM)
            assert job.wait_exit(task, 30) == 143


def test_killed_workers_replaced_one_after_the_other_cost_no_step(tmp_path: Path) -> None:
    """tfmw replaces a lost worker alone, at the same address. The coordinator moves the lost
    worker's steps to the others and takes the new one back. Both workers are replaced here,
    one after the other, so the training can only end on the replacements."""
    epochs, steps = 12, 50
    total = epochs * steps
    with ps_job(tmp_path, epochs, steps) as job:
        job.start_all()
        for worker, epoch in zip(reversed(WORKERS), (2, 5), strict=True):
            job.wait_line(THE_CHIEF, rf"^chief epoch={epoch} ", STARTUP)
            job.signal(worker, signal.SIGKILL)
            assert job.wait_exit(worker, 10) == -signal.SIGKILL
            job.start(worker)  # the replacement pod: same name, same address
        progress = job.read_json("progress.json")
        assert progress is not None and progress["step"] < total, "training ended before the last kill"
        assert job.wait_exit(THE_CHIEF, STARTUP) == 0, job.outputs()

        chief_output = job.running[THE_CHIEF].output
        for index in (1, 0):
            assert f"Worker /job:worker/replica:0/task:{index} failed with UnavailableError" in chief_output
        reported = epochs_reported(job, 0)
        assert [(epoch, step) for epoch, step, _ in reported] == [
            (e, e * steps) for e in range(1, epochs + 1)
        ]
        marker = job.read_json(MARKER_FILE)
        progress = job.read_json("progress.json")
        assert marker is not None and progress is not None
        assert marker["step"] == progress["step"] == progress["totalSteps"] == total, (marker, progress)
        # No update lost. ClusterCoordinator runs a step again when its worker was lost before
        # the step returned ("a function may be executed more than once"), so a step can be
        # applied twice: at most one more update than steps per worker killed.
        print(f"updates applied: {marker['updates']} for {total} steps")
        assert total <= marker["updates"] <= total + 2, marker


def test_a_killed_parameter_server_ends_the_chief_and_a_full_restart_resumes_from_the_backup(
    tmp_path: Path,
) -> None:
    epochs, steps = 8, 50
    with ps_job(tmp_path, epochs, steps) as job:
        job.start_all()
        job.wait_line(THE_CHIEF, r"^chief epoch=2 ", STARTUP)
        job.signal(THE_PS, signal.SIGKILL)
        # TensorFlow raises UnavailableError in model.fit (uncaught: exit 1); the program
        # exits 170 instead, the "peer lost, restart me" code of docs/training-program.md.
        assert job.wait_exit(THE_CHIEF, 60) == 170, job.outputs()
        (lost,) = job.lines(THE_CHIEF, r"^chief lost a parameter server, the job restarts: (.*)$")
        print(f"the chief's last words: {lost[0]}")
        progress = job.read_json("progress.json")
        assert progress is not None
        saved = progress["checkpointEpoch"]
        assert 2 <= saved < epochs and progress["checkpointStep"] == saved * steps, progress

        for task in WORKERS:  # tfmw restarts the whole job: every pod is stopped, then all start again
            job.signal(task, signal.SIGTERM)
            assert job.wait_exit(task, 30) == 143
        job.start_all(attempt=1)
        assert job.wait_exit(THE_CHIEF, STARTUP) == 0, job.outputs()

        resumed = epochs_reported(job, 1)
        # From the backup the progress named, or the one after it when the parameter server
        # died between the backup's write and the report of it.
        assert resumed[0][0] in (saved + 1, saved + 2), resumed
        assert resumed == [(e, e * steps, e * steps) for e in range(resumed[0][0], epochs + 1)]
        marker = job.read_json(MARKER_FILE)
        assert marker is not None and (marker["attempt"], marker["step"]) == (1, epochs * steps), marker
