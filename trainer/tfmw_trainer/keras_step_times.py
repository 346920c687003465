"""Each worker's compute time per step under Keras `fit` (see `tfmw_trainer.step_times`).

What a callback alone can time under `fit` is a whole batch, from `on_train_batch_begin` to
`on_train_batch_end`: that includes the all-reduce, where every worker waits for the slowest,
so every worker would show the slowest one's time and no straggler could be named. This
callback measures inside the step instead: when `fit` hands it the model, it wraps the
model's `train_step` (a timestamp before it) and its optimizer's `apply_gradients` (a
timestamp once every gradient is computed, before the gradients are all-reduced and applied),
and keeps the difference in a variable of the worker's own, read after each batch. The cost is
two timestamps and one scalar read per batch.

What it does not cover: the input pipeline's `next()` (Keras fetches the batch outside
`train_step`); a `train_step` of your own that never calls `optimizer.apply_gradients` or
`minimize` (nothing is measured then, and the callback says so once); with
`steps_per_execution` above 1, only the last step of each execution is measured.

Import it after TF_USE_LEGACY_KERAS is set, like the rest of the Keras code.
"""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

from tfmw_trainer.step_times import StepTimes

_INSTRUMENTED = "_tfmw_compute_seconds"


def instrument(model: Any) -> Any:
    """Wrap `model.train_step` and its optimizer's `apply_gradients` so that each step keeps
    its compute time in the variable returned (this worker's value; -1 until measured)."""
    existing = getattr(model, _INSTRUMENTED, None)
    if existing is not None:
        return existing
    strategy = model.distribute_strategy
    with strategy.scope():
        # One value per replica, never synchronised: each worker keeps its own figure.
        seconds = tf.Variable(
            -1.0,
            dtype=tf.float64,
            trainable=False,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
    traced: dict[str, Any] = {}
    train_step = model.train_step
    apply_gradients = model.optimizer.apply_gradients

    def timed_apply_gradients(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
        pairs = list(grads_and_vars)
        with tf.control_dependencies([g for g, _ in pairs if g is not None]):
            traced["computed"] = tf.timestamp()
        # The all-reduce inside apply_gradients starts after the timestamp.
        with tf.control_dependencies([traced["computed"]]):
            return apply_gradients(pairs, *args, **kwargs)

    def timed_train_step(data: Any) -> Any:
        traced.pop("computed", None)
        started = tf.timestamp()
        with tf.control_dependencies([started]):
            outputs = train_step(data)
        if "computed" in traced:
            seconds.assign(traced["computed"] - started)
        return outputs

    model.train_step = timed_train_step
    model.optimizer.apply_gradients = timed_apply_gradients
    model.train_function = None  # built again, with the wrappers, by the next fit
    setattr(model, _INSTRUMENTED, seconds)
    return seconds


class ComputeTimeCallback(tf.keras.callbacks.Callback):  # type: ignore[misc]
    """Writes this worker's compute time per step to TFMW_STEP_TIMES_PATH, on every worker.

    Give it to `fit` on every worker (each writes its own document). `times`: a StepTimes of
    your own (another path); by default, TFMW_STEP_TIMES_PATH, written at most once a second.
    """

    def __init__(self, times: StepTimes | None = None) -> None:
        super().__init__()
        self.times = times or StepTimes()
        self._seconds: Any = None
        self._warned = False

    def set_model(self, model: Any) -> None:
        super().set_model(model)
        if self.times.path is not None and getattr(model, "optimizer", None) is not None:
            self._seconds = instrument(model)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._seconds is None:
            return
        strategy = self.model.distribute_strategy
        seconds = float(strategy.experimental_local_results(self._seconds)[0].numpy())
        if seconds < 0:
            if not self._warned:
                self._warned = True
                print(
                    "tfmw-step-times: this model's train_step never called optimizer.apply_gradients; "
                    "compute times are not reported",
                    file=sys.stderr,
                )
            return
        step = int(self.model.optimizer.iterations.numpy())
        self.times.record(step, seconds)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.times.flush()
