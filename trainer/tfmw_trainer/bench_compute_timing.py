"""What measuring each step's compute time costs: `python -m tfmw_trainer.bench_compute_timing`.

Two worker processes on localhost (MultiWorkerMirroredStrategy, TF_CONFIG on 127.0.0.1) train
the demo's model (the digits, two hidden layers of 64, 8 examples per worker per step) with
three kinds of step, in turns, the same gang for all so that a busy machine weighs on each
alike:

- `none`: one `tf.function` per step, nothing measured;
- `graph`: the same with a `tf.timestamp()` before the input and one after the gradients,
  before the all-reduce (what the trainer does);
- `split`: the gradients in one `strategy.run` without any cross-replica reduction, timed on
  the host (waiting for the loss), then the all-reduce and the update in a second call.

Worker 0 prints, per kind: milliseconds per step (median of the rounds) and the median compute
time it measured. docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

KINDS = ("none", "graph", "split")


def free_port_addresses(count: int) -> list[str]:
    sockets = [socket.socket() for _ in range(count)]
    for each in sockets:
        each.bind(("127.0.0.1", 0))
    addresses = [f"127.0.0.1:{each.getsockname()[1]}" for each in sockets]
    for each in sockets:
        each.close()
    return addresses


def worker(index: int, addresses: list[str], steps: int, rounds: int) -> None:
    task = {"type": "worker", "index": index}
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": addresses}, "task": task})
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    import tensorflow as tf

    from tfmw_trainer.data import digits
    from tfmw_trainer.train import TrainConfig, build_model

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    data = digits(7)
    global_batch = 8 * int(strategy.num_replicas_in_sync)

    def dataset_fn(context: Any) -> Any:
        dataset = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
        dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        return dataset.repeat().batch(context.get_per_replica_batch_size(global_batch)).prefetch(2)

    with strategy.scope():
        model = build_model(TrainConfig(width=64), data)
        optimizer = tf.keras.optimizers.Adam(learning_rate=0.01)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE
        )
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    def gradients_of(inputs: Any) -> tuple[Any, Any]:
        x, y = inputs
        with tf.GradientTape() as tape:
            losses = loss_fn(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
        return tape.gradient(loss, model.trainable_variables), loss

    def apply(gradients: Any) -> None:
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))

    @tf.function  # type: ignore[untyped-decorator]
    def fused(iterator: Any) -> Any:
        def step(inputs: Any) -> Any:
            gradients, loss = gradients_of(inputs)
            apply(gradients)
            return loss

        return strategy.reduce("SUM", strategy.run(step, args=(next(iterator),)), axis=None)

    @tf.function  # type: ignore[untyped-decorator]
    def timed(iterator: Any) -> Any:
        def step(inputs: Any, started: Any) -> Any:
            gradients, loss = gradients_of(inputs)
            with tf.control_dependencies(gradients):
                finished = tf.timestamp()
            with tf.control_dependencies([finished]):
                apply(gradients)
            return loss, finished - started

        started = tf.timestamp()
        with tf.control_dependencies([started]):
            inputs = next(iterator)
        loss, compute = strategy.run(step, args=(inputs, started))
        return strategy.reduce("SUM", loss, axis=None), strategy.experimental_local_results(compute)[0]

    @tf.function  # type: ignore[untyped-decorator]
    def compute_only(iterator: Any) -> Any:
        return strategy.run(gradients_of, args=(next(iterator),))

    @tf.function  # type: ignore[untyped-decorator]
    def apply_only(gradients: Any, loss: Any) -> Any:
        def step(gradients: Any, loss: Any) -> Any:
            apply(gradients)
            return loss

        return strategy.reduce("SUM", strategy.run(step, args=(gradients, loss)), axis=None)

    def run(kind: str, count: int) -> list[float]:
        computes = []
        for _ in range(count):
            if kind == "none":
                fused(iterator).numpy()
            elif kind == "graph":
                loss, compute = timed(iterator)
                loss.numpy()
                computes.append(float(compute))
            else:
                started = time.perf_counter()
                gradients, loss = compute_only(iterator)
                strategy.experimental_local_results(loss)[0].numpy()
                computes.append(time.perf_counter() - started)
                apply_only(gradients, loss).numpy()
        return computes

    for kind in KINDS:
        run(kind, 50)  # traced, warm
    results: dict[str, list[float]] = {kind: [] for kind in KINDS}
    computes: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(rounds):
        for kind in KINDS:
            began = time.perf_counter()
            computes[kind] += run(kind, steps)
            results[kind].append((time.perf_counter() - began) / steps * 1000)
    if index == 0:
        for kind in KINDS:
            measured = f"{statistics.median(computes[kind]) * 1000:.2f}" if computes[kind] else "-"
            per_step = statistics.median(results[kind])
            rounds_text = " ".join(f"{value:.2f}" for value in results[kind])
            print(f"{kind:6} {per_step:8.2f} ms/step (rounds: {rounds_text})  compute: {measured} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps per kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--addresses", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.addresses.split(","), args.steps, args.rounds)
        return 0
    addresses = free_port_addresses(2)
    command = [sys.executable, "-m", "tfmw_trainer.bench_compute_timing", "--steps", str(args.steps)]
    command += ["--rounds", str(args.rounds), "--addresses", ",".join(addresses)]
    processes = [subprocess.Popen([*command, "--worker", str(index)]) for index in range(2)]
    return max(process.wait() for process in processes)


if __name__ == "__main__":
    sys.exit(main())
