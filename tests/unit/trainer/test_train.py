"""Real multi-worker training: worker processes on localhost, TF_CONFIG as the operator writes it.

Marked `processes`: `make test-trainer` runs them (a stage of `make test`), not `make test-unit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ports import free_ports
from tfmw_trainer.data import ExampleStream, load

from .test_stacks import HEADER, thread_blocks

pytestmark = pytest.mark.processes

EPOCH_LINE = re.compile(r"^worker=(\d+) (epoch=\d+ loss=\S+ accuracy=\S+)$", re.M)
FIRST_STEP = re.compile(r"^worker=(\d+) first_step attempt=(\d+) step=(\d+)$", re.M)


def start_gang(
    shared: Path,
    workers: int,
    *args: str,
    attempt: int = 0,
    job_uid: str = "uid-test",
    new_session: bool = False,
) -> list[subprocess.Popen[str]]:
    """Start `workers` trainer processes."""
    addresses = [f"localhost:{p}" for p in free_ports(workers)]
    processes = []
    for index in range(workers):
        env = {
            **os.environ,
            "TF_CONFIG": json.dumps(
                {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
            ),
            "TFMW_SHARED_DIR": str(shared),
            "TFMW_MARKER_PATH": str(shared / "multiworker-complete.txt"),
            "TFMW_PROGRESS_PATH": str(shared / "progress.json"),
            "TFMW_JOB_UID": job_uid,
            "TFMW_ATTEMPT": str(attempt),
            "TFMW_STEP_TIMES_PATH": str(shared / "steps" / f"worker-{index}.json"),
            "TFMW_STACKS_PATH": str(shared / "logs" / f"attempt-{attempt}" / f"worker-{index}.stacks"),
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "tfmw_trainer", "--epochs", "3", "--data", "synthetic", *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=new_session,
            )
        )
    return processes


def finish_gang(processes: list[subprocess.Popen[str]], timeout: float = 240) -> tuple[list[int], list[str]]:
    """Their exit codes and outputs."""
    outputs = []
    for process in processes:
        try:
            out, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        outputs.append(out)
    return [p.returncode for p in processes], outputs


def run_gang(
    shared: Path, workers: int, *args: str, attempt: int = 0, timeout: float = 240, job_uid: str = "uid-test"
) -> tuple[list[int], list[str]]:
    """Start `workers` trainer processes; return their exit codes and outputs."""
    return finish_gang(start_gang(shared, workers, *args, attempt=attempt, job_uid=job_uid), timeout)


def epoch_lines(output: str) -> list[str]:
    return [m.group(2) for m in EPOCH_LINE.finditer(output)]


@pytest.mark.parametrize("mode", ["loop", "fit"])
def test_two_workers_train_in_sync_and_the_chief_writes_the_marker(tmp_path: Path, mode: str) -> None:
    codes, outputs = run_gang(tmp_path, 2, "--mode", mode)
    assert codes == [0, 0], outputs
    for index, output in enumerate(outputs):
        assert f"worker={index} start cluster_workers=2 replicas=2" in output
    lines = [epoch_lines(o) for o in outputs]
    assert len(lines[0]) == 3
    # Once per process, when its first step has completed (the felt bench times it).
    for index, output in enumerate(outputs):
        assert FIRST_STEP.findall(output) == [(str(index), "0", "1")], output
    assert lines[0] == lines[1], "workers must print identical per-epoch lines"
    marker = json.loads((tmp_path / "multiworker-complete.txt").read_text())
    assert marker["jobUid"] == "uid-test" and marker["replicas"] == 2 and marker["mode"] == mode
    assert marker["metrics"]["loss"] == float(lines[0][-1].split("loss=")[1].split()[0])
    assert "marker_written" in outputs[0] and "marker_written" not in outputs[1]
    assert not (tmp_path / ".worker-scratch" / "worker-1").exists()
    # The last progress document carries the marker's figures, so the status ends with them.
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["metrics"] == marker["metrics"] and progress["jobUid"] == "uid-test"
    assert (progress["epoch"], progress["totalEpochs"], progress["step"], progress["totalSteps"]) == (
        3,
        3,
        24,
        24,
    )
    assert marker["metrics"]["eval_accuracy"] > 0.7, "the synthetic task is learnable"
    # TensorBoard scalars in the job's folder itself (one run per job), from the chief only.
    assert list(tmp_path.glob("events.out.tfevents.*")), "no TensorBoard events in the job's folder"


def test_real_digits_are_learned_well_beyond_chance_on_held_out_data(tmp_path: Path) -> None:
    codes, outputs = run_gang(tmp_path, 2, "--data", "digits", "--epochs", "6", "--steps-per-epoch", "30")
    assert codes == [0, 0], outputs
    assert "data=digits train=1438 test=359 classes=10" in outputs[0]
    marker = json.loads((tmp_path / "multiworker-complete.txt").read_text())
    assert marker["data"] == "digits"
    assert marker["metrics"]["eval_accuracy"] > 0.8, marker  # chance is 0.1
    for output in outputs:  # every worker evaluates the same weights
        assert f"eval_accuracy={marker['metrics']['eval_accuracy']:.4f}" in output


def test_a_missing_mnist_file_fails_with_what_to_do(tmp_path: Path) -> None:
    codes, outputs = run_gang(tmp_path, 1, "--data", "mnist.npz", timeout=60)
    assert codes == [1]
    assert "mnist.npz does not exist; copy mnist.npz to the job's shared folder" in outputs[0]


def test_a_killed_gang_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    # Attempt 0: worker 1 dies after epoch 1 the way an OOM-killed process does; the
    # chief is then stuck in a collective, so the whole gang is stopped, as the operator does.
    codes, crashed = run_gang(tmp_path, 2, "--crash-at-epoch", "1", "--crash-worker", "1", timeout=60)
    assert "injected_crash epoch=1 exit_code=137" in crashed[1]
    assert codes[1] == 137
    assert not (tmp_path / "multiworker-complete.txt").exists()
    assert (tmp_path / "checkpoints" / "checkpoint").exists()
    # The chief's progress names the checkpoint it completed, which the operator shows.
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["epoch"], progress["checkpointEpoch"]) == (1, 1)
    assert progress["checkpointPath"] == "checkpoints/ckpt-1"

    codes, resumed = run_gang(tmp_path, 2, "--crash-at-epoch", "1", "--crash-worker", "1", attempt=1)
    assert codes == [0, 0], resumed
    for index, output in enumerate(resumed):
        assert "resumed_from_epoch=1" in output
        assert FIRST_STEP.findall(output) == [(str(index), "1", "9")], output  # epoch 2's first
        assert [line.split()[0] for line in epoch_lines(output)] == ["epoch=2", "epoch=3"]
    assert json.loads((tmp_path / "multiworker-complete.txt").read_text())["attempt"] == 1
    final = json.loads((tmp_path / "progress.json").read_text())
    assert (final["attempt"], final["checkpointEpoch"], final["checkpointPath"]) == (
        1,
        3,
        "checkpoints/ckpt-3",
    )


def test_checkpoints_of_an_earlier_job_with_the_same_name_are_not_resumed(tmp_path: Path) -> None:
    codes, _ = run_gang(tmp_path, 2, job_uid="uid-earlier")
    assert codes == [0, 0]
    codes, outputs = run_gang(tmp_path, 2, job_uid="uid-later")
    assert codes == [0, 0], outputs
    for output in outputs:
        assert "resumed_from_epoch=0" in output
        assert [line.split()[0] for line in epoch_lines(output)] == ["epoch=1", "epoch=2", "epoch=3"]


def test_a_worker_exits_promptly_on_sigterm_even_while_its_peer_is_gone(tmp_path: Path) -> None:
    # Only worker 0 of two is started: it blocks waiting for its peer, deep in TF, as a
    # gang member does when another worker died. Training never began, so there is nothing
    # to save: SIGTERM ends it at once, without spending the save budget (20 s by default).
    address = f"localhost:{free_ports(2)[0]}"
    env = {
        **os.environ,
        "TF_CONFIG": json.dumps(
            {"cluster": {"worker": [address, "localhost:1"]}, "task": {"type": "worker", "index": 0}}
        ),
        "TFMW_SHARED_DIR": str(tmp_path),
        "TFMW_MARKER_PATH": str(tmp_path / "multiworker-complete.txt"),
    }
    env.pop("TFMW_SAVE_SECONDS", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "tfmw_trainer", "--epochs", "100"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(8)  # long enough to be inside TensorFlow's start-up handshake
    assert process.poll() is None, "the lone worker should be waiting for its peer"
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 143, out
    assert time.monotonic() - sent < 5
    assert "SIGTERM before training began, nothing to save: exiting with 143" in out


def test_a_chief_whose_peer_froze_exits_with_the_retryable_peer_lost_code(tmp_path: Path) -> None:
    """SIGSTOP stops a worker's heartbeats too: TensorFlow's coordination service notices in
    about 10 s and aborts the chief's all-reduce with UnavailableError. The trainer exits 170,
    not 1, so restartPolicy ExitCode restarts the gang instead of failing the job."""
    addresses = [f"localhost:{p}" for p in free_ports(2)]
    processes = []
    for index in range(2):
        env = {
            **os.environ,
            "TF_CONFIG": json.dumps(
                {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
            ),
            "TFMW_SHARED_DIR": str(tmp_path),
            "TFMW_MARKER_PATH": str(tmp_path / "multiworker-complete.txt"),
            "TFMW_PROGRESS_PATH": str(tmp_path / "progress.json"),
            "TFMW_JOB_UID": "uid-test",
        }
        args = ["--epochs", "200", "--data", "synthetic", "--steps-per-epoch", "50"]
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "tfmw_trainer", *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    chief, peer = processes
    try:
        deadline = time.monotonic() + 120
        while (
            not (tmp_path / "progress.json").exists()
            or '"epoch":1' not in (tmp_path / "progress.json").read_text()
        ):
            assert time.monotonic() < deadline and chief.poll() is None, "no epoch reported"
            time.sleep(0.2)
        os.killpg(peer.pid, signal.SIGSTOP)  # the parent and the training child alike
        out, _ = chief.communicate(timeout=90)
        assert chief.returncode == 170, out[-3000:]
        assert "a peer was lost" in out and "exiting 170" in out
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


SAVED = re.compile(r"worker=(\d) sigterm_checkpoint step=(\d+) epoch=(\d+) told=(yes|no) save_seconds=\S+")


def test_sigterm_to_one_worker_mid_epoch_saves_the_step_on_both_and_the_gang_resumes_there(
    tmp_path: Path,
) -> None:
    """Worker 1 alone is told (its pod deleted) while worker 0 trains on: both save the same
    step, worker 1 exits 143 first, worker 0 waits for its own SIGTERM (the gang restart),
    and the next attempt starts at that step, in the middle of epoch 2."""
    # A step takes at least 10 ms, so epoch 2 lasts at least 4 s: its first interim report
    # (2 s in) comes before step 800 however fast the machine is.
    args = ("--epochs", "2", "--steps-per-epoch", "400", "--batch-size", "4", "--step-pause", "0.01")
    processes = start_gang(tmp_path, 2, *args)

    def reported_step() -> int:
        with contextlib.suppress(OSError, ValueError):
            return int(json.loads((tmp_path / "progress.json").read_text()).get("step", 0))
        return 0

    deadline = time.monotonic() + 180
    while reported_step() <= 420 and time.monotonic() < deadline:
        time.sleep(0.2)
    seen = reported_step()
    assert 420 < seen < 800, "the gang should be inside epoch 2"
    processes[1].send_signal(signal.SIGTERM)
    out1, _ = processes[1].communicate(timeout=60)
    assert processes[1].returncode == 143, out1
    assert processes[0].poll() is None, "worker 0 waits for its own SIGTERM"
    processes[0].send_signal(signal.SIGTERM)
    out0, _ = processes[0].communicate(timeout=60)
    assert processes[0].returncode == 143, out0
    peer, told = SAVED.search(out0), SAVED.search(out1)
    assert peer and told, (out0[-2000:], out1[-2000:])
    assert (peer[4], told[4]) == ("no", "yes") and peer[2] == told[2]
    saved = int(peer[2])
    assert saved >= seen and peer[3] == "2"
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["checkpointEpoch"], progress["checkpointStep"]) == (1, saved), progress
    assert progress["checkpointPath"] == f"checkpoints/ckpt-{saved}"

    codes, outputs = run_gang(tmp_path, 2, *args, attempt=1)
    assert codes == [0, 0], outputs
    for output in outputs:
        assert f"resumed_from_epoch=1 resumed_from_step={saved}" in output
        assert [line.split()[0] for line in epoch_lines(output)] == ["epoch=2"]
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["step"], progress["checkpointStep"]) == (800, 800)


def reported_epoch(shared: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(json.loads((shared / "progress.json").read_text()).get("epoch", 0))
    return 0


def step_times(shared: Path, index: int) -> dict[str, object]:
    document = json.loads((shared / "steps" / f"worker-{index}.json").read_text())
    assert isinstance(document, dict)
    return document


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


@pytest.mark.parametrize("mode", ["loop", "fit"])
def test_each_worker_reports_its_own_compute_time_and_the_slowed_one_stands_out(
    tmp_path: Path, mode: str
) -> None:
    """Worker 1 sleeps 0.1 s in every step's compute, before the all-reduce. Worker 0 waits
    for it there, so its steps take as long, but its own compute stays a few milliseconds:
    the figure names the straggler. 15 examples over 2 workers: shares of 8 and 7."""
    slow = 0.1
    args = ("--mode", mode, "--epochs", "2", "--steps-per-epoch", "30", "--global-batch-size", "15")
    began = time.monotonic()
    codes, outputs = run_gang(tmp_path, 2, *args, "--slow-worker", "1", "--slow-seconds", str(slow))
    assert codes == [0, 0], outputs
    assert "worker_batch=8" in outputs[0] and "worker_batch=7" in outputs[1]
    assert "slowed_worker compute_sleep_seconds=0.1" in outputs[1]
    chief, slowed = step_times(tmp_path, 0), step_times(tmp_path, 1)
    for index, document in enumerate((chief, slowed)):
        assert set(document) == {"jobUid", "attempt", "role", "index", "step", "computeSeconds", "updatedAt"}
        assert (document["jobUid"], document["attempt"], document["index"], document["step"]) == (
            "uid-test",
            0,
            index,
            60,
        )
        seconds = document["computeSeconds"]
        assert isinstance(seconds, list) and len(seconds) == 50  # the last 50 of 60 steps
    assert (chief["role"], slowed["role"]) == ("chief", "worker")
    chief_seconds, slowed_seconds = chief["computeSeconds"], slowed["computeSeconds"]
    assert isinstance(chief_seconds, list) and isinstance(slowed_seconds, list)
    assert slow <= median(slowed_seconds) < slow + 0.1, slowed_seconds
    assert median(chief_seconds) < slow / 4, chief_seconds
    # Worker 0 did wait for its peer: its 60 steps took at least 60 x 0.1 s.
    assert time.monotonic() - began > 60 * slow


def test_four_workers_then_two_resume_with_the_same_global_batch_steps_and_examples(tmp_path: Path) -> None:
    """minWorkers: 4 workers train 2 of 4 epochs and the gang is lost (worker 3 exits 137);
    the next attempt has 2 workers. The global batch (16), the step count (40) and the
    examples seen stay those of a run never interrupted; progress goes on counting."""
    global_batch, spe = 16, 10
    args = (
        "--epochs", "4", "--steps-per-epoch", str(spe), "--global-batch-size", str(global_batch),
        "--crash-at-epoch", "2", "--crash-worker", "3", "--record-data",
    )  # fmt: skip
    codes, first = run_gang(tmp_path, 4, *args, timeout=120)
    assert codes[3] == 137 and "worker_batch=4" in first[0], first
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["step"], progress["totalSteps"], progress["checkpointStep"]) == (20, 40, 20)

    codes, second = run_gang(tmp_path, 2, *args, attempt=1)
    assert codes == [0, 0], second
    for output in second:
        assert "start cluster_workers=2 replicas=2 global_batch=16" in output and "worker_batch=8" in output
        assert "resumed_from_epoch=2 resumed_from_step=20 resumed_from_example=320" in output
        assert [line.split()[0] for line in epoch_lines(output)] == ["epoch=3", "epoch=4"]
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["attempt"], progress["epoch"], progress["step"], progress["totalSteps"]) == (
        1,
        4,
        40,
        40,
    )
    assert (progress["checkpointStep"], progress["checkpointPath"]) == (40, "checkpoints/ckpt-4")
    marker = json.loads((tmp_path / "multiworker-complete.txt").read_text())
    assert (marker["attempt"], marker["workers"], marker["globalBatch"]) == (1, 2, 16)
    assert not (tmp_path / ".worker-scratch" / "worker-3").exists(), "the larger gang's scratch is gone"

    # The examples of every step, as the workers recorded them: steps 1-20 by 4 workers,
    # 21-40 by 2, each step's shares in worker order make the global batch an uninterrupted
    # run trains at that step.
    trained: dict[int, list[int]] = {}
    for attempt, workers in ((0, 4), (1, 2)):
        for index in range(workers):
            ledger = tmp_path / "data-ledger" / f"attempt-{attempt}-worker-{index}.jsonl"
            for line in ledger.read_text().splitlines():
                record = json.loads(line)
                assert len(record["ids"]) == global_batch // workers
                trained.setdefault(record["step"], []).extend(record["ids"])
    assert sorted(trained) == list(range(1, 41))
    stream = ExampleStream(len(load("synthetic", tmp_path, seed=7).x_train), seed=7)
    for step, ids in trained.items():
        assert ids == stream.indices((step - 1) * global_batch, global_batch).tolist(), step


def test_stacks_of_a_gang_hung_in_an_all_reduce_name_the_frames_each_worker_is_in(tmp_path: Path) -> None:
    """Worker 1's training thread stops after epoch 1 (its process and heartbeats live on);
    worker 0 waits in its next collective, inside TensorFlow's C++, for ever. SIGUSR1 to each
    PID 1: the stacks say where worker 0's loop waits, and that worker 1 is in `maybe_hang`."""
    args = ("--epochs", "3", "--hang-at-epoch", "1", "--hang-worker", "1")
    processes = start_gang(tmp_path, 2, *args, new_session=True)
    try:
        deadline = time.monotonic() + 180
        while reported_epoch(tmp_path) < 1:
            assert time.monotonic() < deadline and processes[0].poll() is None, "no epoch reported"
            time.sleep(0.2)
        time.sleep(2)  # worker 0 is in the all-reduce of step 9
        for process in processes:
            process.send_signal(signal.SIGUSR1)
        paths = [tmp_path / "logs" / "attempt-0" / f"worker-{i}.stacks" for i in range(2)]
        deadline = time.monotonic() + 30
        while not all(HEADER.search(p.read_text()) and "\n  File" in p.read_text() for p in paths):
            assert time.monotonic() < deadline, "no stacks"
            time.sleep(0.1)
        time.sleep(0.5)  # the rest of the dump
        mains = []
        for path in paths:
            text = path.read_text()
            main_thread = HEADER.findall(text)[-1][1]
            mains.append(thread_blocks(text)[main_thread])
        # Worker 0 waits in the first collective after its peer stopped: resetting the
        # epoch's accuracy reads the metric across workers (a sync-on-read variable), so the
        # loop's frame is under TensorFlow's reduce, whose thread sits in the all-reduce op.
        assert "in _train_loop" in mains[0] and "in reduce" in mains[0], mains[0]
        assert "in all_reduce_v2" in paths[0].read_text()
        assert "in maybe_hang" in mains[1], mains[1]
        assert all(p.poll() is None for p in processes), "a dump ends no process"
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
