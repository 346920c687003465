"""What a late chief costs a worker's MultiWorkerMirroredStrategy, with gRPC's default
reconnect backoff and with the one the operator gives every container
(contract.GRPC_OPTIONS in TF_GRPC_DEFAULT_OPTIONS).

    PYTHONPATH=operator:tests .venv/bin/python -m bench.grpc_reconnect [--rounds 5] [--late 0.15]

Two real TensorFlow processes on this machine form a 2-worker cluster on localhost ports.
Both import TensorFlow first; then worker 1 makes its strategy at once and worker 0, the
chief (the coordination service's leader), `--late` seconds later, as when the chief's
import ends after a peer's. Printed: worker 1's seconds in `MultiWorkerMirroredStrategy()`,
median and max over the rounds, for each variable setting side by side, and the floor:
worker 1 made late instead (the chief already listening). No cluster is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import textwrap

from bench.stats import say
from tfmw_operator.contract import GRPC_OPTIONS, GRPC_OPTIONS_ENV

WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    import tensorflow as tf
    print("imported", flush=True)
    sys.stdin.readline()  # both imported: go
    time.sleep(float(sys.argv[1]))
    started = time.monotonic()
    tf.distribute.MultiWorkerMirroredStrategy()
    print(json.dumps({"strategy_s": time.monotonic() - started}), flush=True)
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def one_round(options: str | None, late_index: int, late_s: float) -> float:
    """Worker 1's seconds in MultiWorkerMirroredStrategy() with worker `late_index` late."""
    hosts = [f"localhost:{free_port()}", f"localhost:{free_port()}"]
    procs = []
    for index in (0, 1):
        env = {k: v for k, v in os.environ.items() if k != GRPC_OPTIONS_ENV}
        env |= {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "-1"}
        env["TF_CONFIG"] = json.dumps(
            {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}}
        )
        if options is not None:
            env[GRPC_OPTIONS_ENV] = options
        delay = late_s if index == late_index else 0.0
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(delay)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
    # Both import before either starts its clock: the race is the strategies' alone.
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "imported":
            raise RuntimeError("a worker did not import TensorFlow")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    return float(json.loads(outs[1].strip().splitlines()[-1])["strategy_s"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--late", type=float, default=0.15)
    args = parser.parse_args()
    cases = {
        "chief late, gRPC's defaults": (None, 0),
        f"chief late, {GRPC_OPTIONS}": (GRPC_OPTIONS, 0),
        "floor: worker 1 late, gRPC's defaults": (None, 1),
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(args.rounds):
        for name, (options, late_index) in cases.items():
            seconds = one_round(options, late_index, args.late)
            results[name].append(seconds)
            say(f"round {round_ + 1}/{args.rounds} {name}: {seconds:.3f} s")
    print(f"\nworker 1's MultiWorkerMirroredStrategy(), one side {args.late} s late, {args.rounds} rounds")
    print(f"{'case':<60} {'median s':>9} {'max s':>7}")
    for name, values in results.items():
        print(f"{name:<60} {statistics.median(values):>9.3f} {max(values):>7.3f}")


if __name__ == "__main__":
    main()
