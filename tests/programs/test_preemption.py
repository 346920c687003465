"""deploy/samples/programs/preemption.py as local processes: two MultiWorkerMirroredStrategy
workers with TensorFlow's PreemptionCheckpointHandler, told to stop mid-epoch by SIGTERM, as
a pod's eviction or deletion does."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from programs.local_job import JOB_UID, MARKER_FILE, PROGRAMS, WORKER, LocalJob, Task

pytestmark = pytest.mark.programs

PROGRAM = PROGRAMS / "preemption.py"
WORKERS = [Task(WORKER, 0), Task(WORKER, 1)]
ROLES = ["chief", "worker"]  # TFMW_ROLE: worker 0 is the chief
STARTUP = 180  # s: two processes importing TensorFlow at once on two cores, then the first steps
SAVED_AND_EXITED = 42  # PreemptionCheckpointHandler's exit outside Google Cloud (sys.exit(42))
EPOCHS, STEPS = 4, 100


def preemption_job(shared: Path) -> LocalJob:
    return LocalJob(
        PROGRAM, shared, workers=2, extra_env={"EPOCHS": str(EPOCHS), "STEPS_PER_EPOCH": str(STEPS)}
    )


def saved_steps(job: LocalJob, attempt: int) -> list[int]:
    """The step each worker says it saved before exiting, in the workers' order."""
    return [
        int(match[1])
        for worker, role in zip(WORKERS, ROLES, strict=True)
        for match in job.lines(worker, rf"^{role} preempted: saved step=(\d+)$", attempt)
    ]


def test_sigterm_to_both_mid_epoch_saves_one_step_and_the_restart_resumes_from_it(tmp_path: Path) -> None:
    with preemption_job(tmp_path) as job:
        job.start_all()
        job.wait_line(WORKERS[0], r"^chief epoch=1 ", STARTUP)
        for worker in WORKERS:  # an eviction: every pod of the job gets SIGTERM
            job.signal(worker, signal.SIGTERM)
        assert [job.wait_exit(worker, 60) for worker in WORKERS] == [SAVED_AND_EXITED] * 2, job.outputs()

        first, second = saved_steps(job, 0)
        assert first == second and STEPS < first < 2 * STEPS, (first, second)  # mid-epoch 2, agreed
        progress = job.read_json("progress.json")
        assert progress is not None
        assert (progress["checkpointStep"], progress["checkpointEpoch"], progress["step"]) == (
            first,
            1,
            first,
        )
        assert (tmp_path / "checkpoints" / "checkpoint").is_file()
        assert not (tmp_path / "workertemp_1").exists()  # where worker 1 saved: removed by the handler

        job.start_all(attempt=1)
        assert [job.wait_exit(worker, STARTUP) for worker in WORKERS] == [0, 0], job.outputs()
        for worker, role in zip(WORKERS, ROLES, strict=True):
            (start,) = job.lines(worker, rf"^{role} start step=(\d+)$", attempt=1)
            assert int(start[1]) == first  # the saved step, not the start of epoch 2
            epochs = [int(m[1]) for m in job.lines(worker, rf"^{role} epoch=(\d+) step=", attempt=1)]
            assert epochs == list(range(2, EPOCHS + 1))
        marker = job.read_json(MARKER_FILE)
        assert marker == {"jobUid": JOB_UID, "attempt": 1, "step": EPOCHS * STEPS}


def test_sigterm_to_one_worker_saves_and_stops_both(tmp_path: Path) -> None:
    """One pod evicted alone: its peer saves the same step and exits 42 with it."""
    with preemption_job(tmp_path) as job:
        job.start_all()
        job.wait_line(WORKERS[0], r"^chief epoch=1 ", STARTUP)
        job.signal(WORKERS[1], signal.SIGTERM)
        assert [job.wait_exit(worker, 60) for worker in WORKERS] == [SAVED_AND_EXITED] * 2, job.outputs()
        first, second = saved_steps(job, 0)
        assert first == second and first > STEPS


def test_a_worker_killed_without_notice_makes_its_peer_exit_170(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, a lost node) gives the handler nothing to save: the peer's
    step fails, and it exits with the "peer lost, restart the gang" code."""
    with preemption_job(tmp_path) as job:
        job.start_all()
        job.wait_line(WORKERS[0], r"^chief epoch=1 ", STARTUP)
        job.signal(WORKERS[1], signal.SIGKILL)
        assert job.wait_exit(WORKERS[0], 60) == 170, job.outputs()
        assert job.lines(WORKERS[0], r"^chief lost a peer, the gang restarts: ")
        assert not saved_steps(job, 0) and not (tmp_path / "checkpoints").exists()
