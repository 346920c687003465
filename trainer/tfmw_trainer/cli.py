"""The trainer's command line and its two processes: PID 1, and the training process it forks.

`python -m tfmw_trainer` (`__main__`) holds the signals first, then runs `main`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType

from tfmw_trainer import stacks, termination
from tfmw_trainer.cluster import ConfigError, placement

# The signals PID 1 handles: held (blocked) from `__main__`'s first line until `run_as_child`
# has its handlers and its child (see __main__).
HANDLED_SIGNALS = {signal.SIGTERM, signal.SIGUSR1}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tfmw-trainer", description="Train a digit classifier under MultiWorkerMirroredStrategy."
    )
    parser.add_argument("--mode", choices=["loop", "fit"], default="loop", help="custom loop or Keras fit")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None, help="per worker (default 16)")
    parser.add_argument(
        "--global-batch-size",
        type=int,
        default=None,
        help="the examples of one step over all workers, kept when an attempt has fewer or more "
        "workers (each takes its share; the first global %% workers one more)",
    )
    parser.add_argument("--steps-per-epoch", type=int, default=8, help="global steps")
    parser.add_argument("--width", type=int, default=64, help="units per hidden layer")
    parser.add_argument(
        "--data",
        default="digits",
        help="digits (scikit-learn's 8x8 digits, no download), synthetic (fast tests), or a path to "
        "mnist.npz (relative: inside the job's shared folder)",
    )
    parser.add_argument("--samples", type=int, default=1024, help="synthetic data only")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--crash-at-epoch", type=int, default=0, help="testing: exit after this epoch")
    parser.add_argument("--crash-worker", type=int, default=0, help="testing: which worker exits")
    parser.add_argument("--crash-exit-code", type=int, default=137)
    parser.add_argument(
        "--hang-at-epoch", type=int, default=0, help="testing: a worker stops training after this epoch"
    )
    parser.add_argument("--hang-worker", type=int, default=1, help="testing: which worker hangs")
    parser.add_argument(
        "--epoch-pause", type=float, default=0.0, help="testing: seconds to wait after each epoch"
    )
    parser.add_argument(
        "--step-pause", type=float, default=0.0, help="testing: seconds to wait after each step"
    )
    parser.add_argument(
        "--slow-worker", type=int, default=-1, help="testing: this worker's compute is slower (a straggler)"
    )
    parser.add_argument(
        "--slow-seconds", type=float, default=0.0, help="testing: the slow worker's sleep in each step"
    )
    parser.add_argument(
        "--no-step-times",
        dest="step_times",
        action="store_false",
        help="measure no compute time per step and write no TFMW_STEP_TIMES_PATH",
    )
    parser.add_argument(
        "--record-data",
        action="store_true",
        help="testing: each worker writes the examples of each step to data-ledger/ (loop mode)",
    )
    args = parser.parse_args(argv)
    if args.batch_size is not None and args.global_batch_size is not None:
        parser.error("give --batch-size (per worker) or --global-batch-size, not both")
    for name in ("batch_size", "global_batch_size", "steps_per_epoch", "epochs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


SIGTERM_EXIT_CODE = termination.SIGTERM_EXIT_CODE
# TensorFlow lost a peer (UnavailableError: "tasks are unhealthy (stopped sending
# heartbeats)", a collective aborted).
PEER_LOST_EXIT_CODE = termination.PEER_LOST_EXIT_CODE


def run_as_child(work: Callable[[], None], save_seconds: float | None = None) -> None:
    """Run `work` in a child process and exit as it exits; SIGTERM asks it to save first.

    In a container the trainer is PID 1, and the kernel drops signals PID 1 has no handler
    for, so SIGTERM would be ignored for the whole grace period. A Python handler in the
    training process is no cure either: it runs only between bytecodes, and TensorFlow may
    sit for minutes in C++ waiting for a dead peer. So training runs in a child with
    SIGTERM's default action; on SIGTERM this parent writes a notice into a pipe the
    child's training loop reads between steps (`termination`: the gang agrees on a step,
    saves a checkpoint and exits 143), and kills the child if it has not exited within
    `save_seconds` (TFMW_SAVE_SECONDS): a save that cannot happen (a peer already dead, a
    collective that never returns) keeps the older checkpoint. 0: kill at once. A child that
    has not yet said training began (`termination.ready`) has nothing to save, and is killed
    at once too.

    SIGUSR1 is forwarded to the child, which dumps every thread's stack (`stacks`).
    """
    budget = termination.save_seconds() if save_seconds is None else save_seconds
    # Held from here (and from the module's first line when run as a program) until both
    # handlers are in place and the child exists: a signal in between waits, none is lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    stacks_fd = stacks.open_output()
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    started = termination.TrainingStarted(ready_read)
    child: int | None = None
    terminated = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal terminated
        if terminated or child is None:
            return
        terminated = True
        if not started():
            print(
                f"tfmw-trainer: SIGTERM before training began, nothing to save: exiting with {128 + signum}",
                flush=True,
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            return
        print(
            f"tfmw-trainer: SIGTERM, saving within {budget:g} s, then exiting with {128 + signum}", flush=True
        )
        with contextlib.suppress(OSError):  # the child is gone already
            os.write(write_end, termination.NOTICE)
        killer = threading.Timer(budget, os.kill, (child, signal.SIGKILL))
        killer.daemon = True
        killer.start()

    def dump_stacks(signum: int, frame: FrameType | None) -> None:
        stacks.request(stacks_fd, child)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGUSR1, dump_stacks)
    child = os.fork()
    if child == 0:
        os.close(write_end)
        os.close(ready_read)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        stacks.dump_on_signal(stacks_fd)
        termination.install(read_end, ready_write)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
        try:
            work()
        except SystemExit as exit_:
            code = exit_.code
            if isinstance(code, str):
                print(code, file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code if isinstance(code, int) else (1 if code else 0))
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    os.close(read_end)
    os.close(ready_write)
    # A SIGTERM or SIGUSR1 held since start-up is handled now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
    _, status = os.waitpid(child, 0)
    if os.WIFEXITED(status):
        sys.exit(os.WEXITSTATUS(status))
    sys.exit(SIGTERM_EXIT_CODE if terminated else 128 + os.WTERMSIG(status))


def main(argv: list[str] | None = None) -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)  # as __main__'s first lines (console script)
    try:
        budget = termination.save_seconds()
    except ValueError as error:
        sys.exit(f"tfmw-trainer: {error}")
    run_as_child(lambda: _main(argv), budget)


def _main(argv: list[str] | None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    # Before TensorFlow is imported: Keras 3 cannot run fit under MultiWorkerMirroredStrategy.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    try:
        place = placement()
    except ConfigError as error:
        sys.exit(f"tfmw-trainer: {error}")
    # Where a restart's seconds go (tests/bench/goodput.py): the process up, then TensorFlow
    # imported, each stamped by the container runtime.
    print(f"worker={place.index} process_up attempt={place.attempt}", flush=True)
    importing = time.monotonic()

    from tfmw_trainer.data import DataError
    from tfmw_trainer.train import BatchError, TrainConfig, train

    print(f"worker={place.index} tensorflow_imported seconds={time.monotonic() - importing:.3f}", flush=True)

    config = TrainConfig(
        mode=args.mode,
        epochs=args.epochs,
        batch_size=16 if args.batch_size is None else args.batch_size,
        global_batch_size=args.global_batch_size or 0,
        steps_per_epoch=args.steps_per_epoch,
        width=args.width,
        data=args.data,
        samples=args.samples,
        learning_rate=args.learning_rate,
        seed=args.seed,
        crash_at_epoch=args.crash_at_epoch,
        crash_worker=args.crash_worker,
        crash_exit_code=args.crash_exit_code,
        epoch_pause=args.epoch_pause,
        step_pause=args.step_pause,
        hang_at_epoch=args.hang_at_epoch,
        hang_worker=args.hang_worker,
        slow_worker=args.slow_worker,
        slow_seconds=args.slow_seconds,
        step_times=args.step_times,
        record_data=args.record_data,
    )
    import tensorflow as tf

    try:
        train(place, config)
    except termination.Stopped as stopped:
        print(f"tfmw-trainer: {stopped}; exiting {stopped.exit_code}", flush=True)
        sys.exit(stopped.exit_code)
    except (DataError, BatchError) as error:
        sys.exit(f"tfmw-trainer: {error}")
    except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
        # Unavailable: a peer stopped answering. Aborted: a collective gave up, as when a
        # restarted peer "tried to connect with a different incarnation". Neither is this
        # program's fault: exit where ExitCode restarts the gang, not where it fails the job.
        traceback.print_exc()
        lost = error.message.splitlines()[0][:200] if error.message else type(error).__name__
        print(f"tfmw-trainer: a peer was lost ({lost}); exiting {PEER_LOST_EXIT_CODE}")
        sys.stdout.flush()
        os._exit(PEER_LOST_EXIT_CODE)
