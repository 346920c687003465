"""`python -m tfmw_trainer`: train a digit classifier under MultiWorkerMirroredStrategy."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType

from tfmw_trainer import termination
from tfmw_trainer.cluster import ConfigError, placement


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tfmw-trainer", description=__doc__)
    parser.add_argument("--mode", choices=["loop", "fit"], default="loop", help="custom loop or Keras fit")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16, help="per worker")
    parser.add_argument("--steps-per-epoch", type=int, default=8)
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
    return parser.parse_args(argv)


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
    collective that never returns) keeps the older checkpoint. 0: kill at once.
    """
    budget = termination.save_seconds() if save_seconds is None else save_seconds
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(write_end)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        termination.install(read_end)
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
    terminated = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal terminated
        if terminated:
            return
        terminated = True
        print(
            f"tfmw-trainer: SIGTERM, saving within {budget:g} s, then exiting with {128 + signum}", flush=True
        )
        with contextlib.suppress(OSError):  # the child is gone already
            os.write(write_end, termination.NOTICE)
        killer = threading.Timer(budget, os.kill, (child, signal.SIGKILL))
        killer.daemon = True
        killer.start()

    signal.signal(signal.SIGTERM, forward)
    _, status = os.waitpid(child, 0)
    if os.WIFEXITED(status):
        sys.exit(os.WEXITSTATUS(status))
    sys.exit(SIGTERM_EXIT_CODE if terminated else 128 + os.WTERMSIG(status))


def main(argv: list[str] | None = None) -> None:
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

    from tfmw_trainer.data import DataError
    from tfmw_trainer.train import TrainConfig, train

    config = TrainConfig(
        mode=args.mode,
        epochs=args.epochs,
        batch_size=args.batch_size,
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
    )
    import tensorflow as tf

    try:
        train(place, config)
    except termination.Stopped as stopped:
        print(f"tfmw-trainer: {stopped}; exiting {stopped.exit_code}", flush=True)
        sys.exit(stopped.exit_code)
    except DataError as error:
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


if __name__ == "__main__":
    main()
