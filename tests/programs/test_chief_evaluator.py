"""deploy/samples/programs/chief_evaluator.py as local processes: a MultiWorkerMirroredStrategy
chief of its own, two workers, and a side-car evaluator outside the cluster."""

from __future__ import annotations

import math
import signal
from datetime import datetime
from pathlib import Path

import pytest
from programs.local_job import CHIEF, EVALUATOR, JOB_UID, MARKER_FILE, PROGRAMS, WORKER, LocalJob, Task

pytestmark = pytest.mark.programs

PROGRAM = PROGRAMS / "chief_evaluator.py"
THE_CHIEF, THE_EVALUATOR = Task(CHIEF), Task(EVALUATOR)
WORKERS = [Task(WORKER, 0), Task(WORKER, 1)]
STARTUP = 240  # s: four processes importing TensorFlow at once on two cores, then training
EVALUATED = r"^evaluator checkpoint=ckpt-(\d+) step=(\d+) accuracy=(\S+)$"
# An epoch must take longer than an evaluation plus the evaluator's 1 s poll, or the
# evaluator skips to the newest checkpoint (SidecarEvaluator's documented behaviour).
EPOCHS, STEPS = 4, 100


def test_the_evaluator_evaluates_every_checkpoint_and_ends_after_the_last(tmp_path: Path) -> None:
    env = {"EPOCHS": str(EPOCHS), "STEPS_PER_EPOCH": str(STEPS)}
    with LocalJob(PROGRAM, tmp_path, workers=2, chief=True, evaluator=True, extra_env=env) as job:
        assert job.cluster.keys() == {"chief", "worker"}  # the evaluator is never in the cluster
        job.start_all()
        assert job.wait_exit(THE_CHIEF, STARTUP) == 0, job.outputs()
        assert [job.wait_exit(worker, 60) for worker in WORKERS] == [0, 0], job.outputs()
        marker = job.read_json(MARKER_FILE)
        assert marker is not None and (marker["jobUid"], marker["attempt"]) == (JOB_UID, 0), marker
        progress = job.read_json("progress.json")
        assert progress is not None
        assert (progress["epoch"], progress["checkpointEpoch"]) == (EPOCHS, EPOCHS), progress
        assert progress["checkpointPath"] == f"checkpoints/ckpt-{EPOCHS}"
        saved = sorted(int(p.name[5:-6]) for p in (tmp_path / "checkpoints").glob("ckpt-*.index"))
        assert saved == list(range(1, EPOCHS + 1))

        # The evaluator ends by itself once it has evaluated the final checkpoint
        # (SidecarEvaluator's max_evaluations), soon after the chief.
        assert job.wait_exit(THE_EVALUATOR, 60) == 0, job.outputs()
        evaluations = [(int(m[1]), int(m[2])) for m in job.lines(THE_EVALUATOR, EVALUATED)]
        print(f"checkpoints evaluated: {[c for c, _ in evaluations]} of {saved}")
        assert evaluations == [(epoch, epoch * STEPS) for epoch in saved]
        evaluation = job.read_json("evaluation.json")
        assert evaluation is not None
        assert {k: evaluation[k] for k in ("jobUid", "attempt", "checkpoint", "step", "epoch")} == {
            "jobUid": JOB_UID,
            "attempt": 0,
            "checkpoint": f"checkpoints/ckpt-{EPOCHS}",
            "step": EPOCHS * STEPS,
            "epoch": EPOCHS,
        }
        assert set(evaluation["metrics"]) == {"loss", "accuracy"}
        assert all(math.isfinite(value) for value in evaluation["metrics"].values())
        assert evaluation["metrics"]["accuracy"] > 0.8  # learned, on examples it never trained on
        datetime.fromisoformat(evaluation["updatedAt"])

        # An evaluator replaced after the training ended evaluates the final checkpoint and ends.
        job.start(THE_EVALUATOR)
        assert job.wait_exit(THE_EVALUATOR, STARTUP) == 0, job.outputs()
        again = [int(m[1]) for m in job.lines(THE_EVALUATOR, EVALUATED, attempt=0)][len(evaluations) :]
        assert again == [EPOCHS]


def test_the_evaluator_stops_at_once_on_sigterm_while_it_waits(tmp_path: Path) -> None:
    """Before any checkpoint exists it waits (SidecarEvaluator polls without end); tfmw stops it
    with SIGTERM when the job ends, and it exits 143 at once, PID 1 or not."""
    with LocalJob(PROGRAM, tmp_path, workers=2, chief=True, evaluator=True) as job:
        job.start(THE_EVALUATOR)
        job.wait_line(THE_EVALUATOR, r"^evaluator watching ", STARTUP)
        job.signal(THE_EVALUATOR, signal.SIGTERM)
        assert job.wait_exit(THE_EVALUATOR, 10) == 143


def test_a_lost_worker_stops_the_gang_with_170_and_its_restart_resumes_from_the_backup(
    tmp_path: Path,
) -> None:
    """MultiWorkerMirroredStrategy survives no lost replica: the chief and the other worker
    exit 170, tfmw restarts the gang (never the evaluator) and it resumes from the last epoch
    saved, while the evaluator goes on evaluating, to the final checkpoint."""
    epochs, steps = 5, 100
    env = {"EPOCHS": str(epochs), "STEPS_PER_EPOCH": str(steps)}
    with LocalJob(PROGRAM, tmp_path, workers=2, chief=True, evaluator=True, extra_env=env) as job:
        job.start_all()
        job.wait_line(THE_CHIEF, r"^chief epoch=2 ", STARTUP)
        job.signal(WORKERS[1], signal.SIGKILL)
        assert job.wait_exit(THE_CHIEF, 60) == 170, job.outputs()
        assert job.wait_exit(WORKERS[0], 60) == 170, job.outputs()
        (lost,) = job.lines(THE_CHIEF, r"^chief lost a peer, the gang restarts: (.*)$")
        print(f"the chief's last words: {lost[0]}")
        progress = job.read_json("progress.json")
        assert progress is not None
        saved = progress["checkpointEpoch"]
        assert 2 <= saved < epochs, progress

        assert job.running[THE_EVALUATOR].process.poll() is None  # untouched by the gang's end
        for task in [THE_CHIEF, *WORKERS]:
            job.start(task, attempt=1)
        assert job.wait_exit(THE_CHIEF, STARTUP) == 0, job.outputs()
        resumed = [int(m[1]) for m in job.lines(THE_CHIEF, r"^chief epoch=(\d+) ", attempt=1)]
        assert resumed[0] in (saved + 1, saved + 2) and resumed[-1] == epochs, resumed  # see the PS test
        marker = job.read_json(MARKER_FILE)
        assert marker is not None and marker["attempt"] == 1

        assert job.wait_exit(THE_EVALUATOR, 60) == 0, job.outputs()
        evaluated = [int(m[1]) for m in job.lines(THE_EVALUATOR, EVALUATED)]
        print(f"checkpoints evaluated across the restart: {evaluated}")
        assert evaluated == sorted(set(evaluated)) and evaluated[-1] == epochs
