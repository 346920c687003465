"""`python -m tfmw_trainer`: train on generated data under MultiWorkerMirroredStrategy."""

from __future__ import annotations

import argparse
import os
import sys

from tfmw_trainer.cluster import ConfigError, placement


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tfmw-trainer", description=__doc__)
    parser.add_argument("--mode", choices=["loop", "fit"], default="loop", help="custom loop or Keras fit")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16, help="per worker")
    parser.add_argument("--steps-per-epoch", type=int, default=8)
    parser.add_argument("--width", type=int, default=16, help="units per hidden layer")
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--learning-rate", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--crash-at-epoch", type=int, default=0, help="testing: exit after this epoch")
    parser.add_argument("--crash-worker", type=int, default=0, help="testing: which worker exits")
    parser.add_argument("--crash-exit-code", type=int, default=137)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    # Before TensorFlow is imported: Keras 3 cannot run fit under MultiWorkerMirroredStrategy.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    try:
        place = placement()
    except ConfigError as error:
        sys.exit(f"tfmw-trainer: {error}")

    from tfmw_trainer.train import TrainConfig, train

    config = TrainConfig(
        mode=args.mode,
        epochs=args.epochs,
        batch_size=args.batch_size,
        steps_per_epoch=args.steps_per_epoch,
        width=args.width,
        samples=args.samples,
        learning_rate=args.learning_rate,
        seed=args.seed,
        crash_at_epoch=args.crash_at_epoch,
        crash_worker=args.crash_worker,
        crash_exit_code=args.crash_exit_code,
    )
    train(place, config)


if __name__ == "__main__":
    main()
