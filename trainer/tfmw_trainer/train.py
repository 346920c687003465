"""Multi-worker training with MultiWorkerMirroredStrategy: a custom loop and a Keras `fit` path.

Both classify the data `--data` names (real handwritten digits by default), report progress
to TFMW_PROGRESS_PATH from the chief, and end with an accuracy on held-out data that the
chief records in the marker.

Import this module only after TF_USE_LEGACY_KERAS is set (see __main__): Keras 3 refuses
MultiWorkerMirroredStrategy in `fit`, the legacy tf-keras does not.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tfmw_operator import contract

from tfmw_trainer import termination
from tfmw_trainer.cluster import Placement
from tfmw_trainer.data import DIGITS, Dataset, ExampleStream, load, worker_share
from tfmw_trainer.keras_progress import ProgressCallback
from tfmw_trainer.keras_step_times import ComputeTimeCallback
from tfmw_trainer.progress import INTERIM_REPORT_SECONDS, ProgressReporter
from tfmw_trainer.step_times import StepTimes

# Which job wrote the checkpoints beside it ({MARKER_JOB_UID: uid}); not the operator's
# contract.OWNER_FILE, which says which job a whole folder is.
CHECKPOINTS_JOB_FILE = "job.json"


@dataclass(frozen=True)
class TrainConfig:
    mode: str = "loop"  # loop | fit
    epochs: int = 3
    batch_size: int = 16  # per worker, when global_batch_size is 0
    # The examples of one step, over all workers, whatever their number (0: batch_size x workers).
    global_batch_size: int = 0
    steps_per_epoch: int = 8  # global steps: each trains one global batch
    width: int = 64
    data: str = DIGITS  # digits | synthetic | a path to mnist.npz
    samples: int = 1024  # synthetic only
    learning_rate: float = 0.01
    seed: int = 7
    epoch_pause: float = 0.0  # testing: seconds to wait after each epoch, so progress can be watched
    step_pause: float = 0.0  # testing: seconds to wait after each step, so an epoch outlasts its reports
    crash_at_epoch: int = 0  # fault injection for tests: exit after this epoch in attempt 0
    crash_worker: int = 0
    crash_exit_code: int = 137
    hang_at_epoch: int = 0  # fault injection for tests: stop training after this epoch in attempt 0
    hang_worker: int = 1
    slow_worker: int = -1  # testing: this worker sleeps slow_seconds in every step's compute
    slow_seconds: float = 0.0
    step_times: bool = True  # measure each step's compute time and write TFMW_STEP_TIMES_PATH
    record_data: bool = False  # testing: each worker writes the examples of each of its steps


def say(place: Placement, text: str) -> None:
    print(f"worker={place.index} {text}", flush=True)


def checkpoint_dir(place: Placement) -> Path:
    """Every worker takes part in saving; only the chief's copy is kept."""
    if place.is_chief:
        return place.shared_dir / "checkpoints"
    return scratch_dir(place) / f"worker-{place.index}"


def scratch_dir(place: Placement) -> Path:
    return place.shared_dir / ".worker-scratch"


class BatchError(ValueError):
    """The batch options cannot be used; the message says what to do."""


def global_batch_size(config: TrainConfig, replicas: int) -> int:
    """The examples of one step over all replicas: --global-batch-size, kept whatever the number
    of workers, else --batch-size per replica."""
    if config.global_batch_size:
        if config.global_batch_size < replicas:
            raise BatchError(
                f"--global-batch-size={config.global_batch_size} cannot be shared by {replicas} replicas: "
                "each needs at least one example"
            )
        return config.global_batch_size
    return config.batch_size * replicas


def resumable_checkpoint(place: Placement) -> str | None:
    """The latest checkpoint, if this job wrote it: an earlier job of the same name may
    have left its own in the folder, and resuming from that would be silently wrong."""
    directory = place.shared_dir / "checkpoints"
    owner = directory / CHECKPOINTS_JOB_FILE
    try:
        recorded = json.loads(owner.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or contract.marker_job_uid(recorded) != place.job_uid:
        return None
    latest: str | None = tf.train.latest_checkpoint(str(directory))
    return latest


def claim_checkpoints(place: Placement) -> None:
    owner = place.shared_dir / "checkpoints" / CHECKPOINTS_JOB_FILE
    owner.write_text(json.dumps({contract.MARKER_JOB_UID: place.job_uid}) + "\n")


def build_model(config: TrainConfig, data: Dataset) -> Any:
    """A small classifier; it outputs logits, one per class."""
    return tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(data.features,)),
            tf.keras.layers.Dense(config.width, activation="relu"),
            tf.keras.layers.Dense(config.width, activation="relu"),
            tf.keras.layers.Dense(data.classes),
        ]
    )


def evaluate(model: Any, data: Dataset) -> float:
    """Accuracy on the held-out split. Each worker reads the (mirrored) weights it holds: no
    collective, so no worker waits on another here."""
    logits = model(data.x_test, training=False).numpy()
    return round(float(np.mean(np.argmax(logits, axis=1) == data.y_test)), 4)


def write_marker(place: Placement, content: dict[str, Any]) -> None:
    """Atomically: the operator must never see a half-written marker."""
    place.marker_path.parent.mkdir(parents=True, exist_ok=True)
    partial = place.marker_path.with_name(place.marker_path.name + ".partial")
    partial.write_text(json.dumps(content, indent=2) + "\n")
    os.replace(partial, place.marker_path)


class Summaries:
    """The chief's TensorBoard scalars, in the job's folder itself: TensorBoard over the shared
    volume then shows each job as one run, named `<namespace>/<job>`."""

    def __init__(self, place: Placement) -> None:
        self.writer = tf.summary.create_file_writer(str(place.shared_dir)) if place.is_chief else None

    def write(self, step: int, values: dict[str, float]) -> None:
        if self.writer is None:
            return
        with self.writer.as_default():
            for name, value in values.items():
                tf.summary.scalar(name, value, step=step)
        self.writer.flush()


def maybe_crash(place: Placement, config: TrainConfig, epoch: int) -> None:
    if config.crash_at_epoch == epoch and place.attempt == 0 and place.index == config.crash_worker:
        say(place, f"injected_crash epoch={epoch} exit_code={config.crash_exit_code}")
        os._exit(config.crash_exit_code)


def maybe_hang(place: Placement, config: TrainConfig, epoch: int) -> None:
    """A worker whose training thread stops while the process lives on (a deadlocked input
    pipeline, a read that never returns): its peers wait in the next all-reduce for ever,
    and TensorFlow's heartbeats, sent by other threads, keep saying it is healthy."""
    if config.hang_at_epoch == epoch and place.attempt == 0 and place.index == config.hang_worker:
        say(place, f"injected_hang epoch={epoch}")
        while True:
            time.sleep(3600)


def slow_seconds(place: Placement, config: TrainConfig) -> float:
    """Testing's --slow-worker/--slow-seconds: how long this worker sleeps in each step's compute."""
    return config.slow_seconds if place.index == config.slow_worker and config.slow_seconds > 0 else 0.0


def injected_sleep(seconds: float) -> Any:
    """A graph op that sleeps `seconds` where it runs (a straggler's slower compute, for tests)."""

    def sleep() -> Any:
        time.sleep(seconds)
        return np.float64(seconds)

    return tf.py_function(sleep, [], tf.float64)


class DataLedger:
    """Testing's --record-data: the examples (their indices in the training set) this worker
    trained on at each step, one JSON line per step in data-ledger/attempt-<a>-worker-<i>.jsonl."""

    def __init__(self, place: Placement, enabled: bool) -> None:
        self.path = (
            place.shared_dir / "data-ledger" / f"attempt-{place.attempt}-worker-{place.index}.jsonl"
            if enabled
            else None
        )
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, step: int, ids: Any) -> None:
        if self.path is None:
            return
        examples = [int(i) for part in ids for i in part.numpy().tolist()]
        with self.path.open("a") as ledger:
            ledger.write(json.dumps({"step": step, "ids": examples}) + "\n")


class FirstStep:
    """Says `first_step` once, when this process's first training step has completed: how
    long a worker took from its start (or its gang's restart) to training, seen from its
    log. Optional for programs of your own (docs/training-program.md)."""

    def __init__(self, place: Placement) -> None:
        self.place = place
        self.said = False

    def passed(self, step: int) -> None:
        if not self.said:
            self.said = True
            say(self.place, f"first_step attempt={self.place.attempt} step={step}")


def pause(seconds: float) -> None:
    """Testing's --epoch-pause and --step-pause, cut short by a SIGTERM notice (the next step
    then stops)."""
    if seconds > 0:
        termination.notice().wait(seconds)


class Counters:
    """How far training has got, saved in every checkpoint: whole epochs, global steps, and the
    positions of the example stream consumed (`data.ExampleStream`), which lets a gang of
    another size, or another global batch, go on with the next examples."""

    def __init__(self) -> None:
        self.epochs = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.examples = tf.Variable(0, dtype=tf.int64, trainable=False)

    def assign(self, epochs: int, steps: int, examples: int) -> None:
        self.epochs.assign(epochs)
        self.steps.assign(steps)
        self.examples.assign(examples)

    def trackables(self) -> dict[str, Any]:
        return {"epochs_done": self.epochs, "steps_done": self.steps, "examples_done": self.examples}


def save_on_notice(
    place: Placement,
    manager: Any,
    counters: Counters,
    reporter: ProgressReporter,
    epoch: int,
    step: int,
    examples: int,
    config: TrainConfig,
    told: bool,
) -> None:
    """A worker was told to stop (SIGTERM) and the gang agreed on `step`: every worker saves
    (saving is collective), the chief reports the checkpoint, and training stops."""
    started = time.monotonic()
    counters.assign(epoch - 1, step, examples)
    # Numbered by the step: an epoch's own end (ckpt-<epoch>) is a different checkpoint.
    saved = manager.save(checkpoint_number=step)
    seconds = time.monotonic() - started
    if place.is_chief:
        claim_checkpoints(place)
        reporter.checkpointed(epoch - 1, os.path.relpath(saved, place.shared_dir), step)
        reporter.report(epoch - 1, config.epochs, step, config.epochs * config.steps_per_epoch)
    say(
        place,
        f"sigterm_checkpoint step={step} epoch={epoch} told={'yes' if told else 'no'} "
        f"save_seconds={seconds:.3f} path={os.path.relpath(saved, place.shared_dir)}",
    )
    raise termination.stop_after_save(told)


def train(place: Placement, config: TrainConfig) -> dict[str, float]:
    # The strategy must exist before any other TensorFlow op: it configures the runtime.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replicas = int(strategy.num_replicas_in_sync)
    global_batch = global_batch_size(config, replicas)
    _, worker_batch = worker_share(global_batch, place.num_workers, place.index)
    say(
        place,
        f"start cluster_workers={place.num_workers} replicas={replicas} "
        f"global_batch={global_batch} mode={config.mode} attempt={place.attempt} worker_batch={worker_batch}",
    )
    place.shared_dir.mkdir(parents=True, exist_ok=True)
    data = load(config.data, place.shared_dir, config.seed, config.samples)
    say(place, f"data={data.name} train={len(data.x_train)} test={len(data.x_test)} classes={data.classes}")
    # One writer per job: the chief.
    reporter = ProgressReporter(enabled=place.is_chief)
    summaries = Summaries(place)
    if config.mode == "fit":
        model, metrics = _train_fit(strategy, place, config, data, global_batch, reporter, summaries)
    else:
        model, metrics = _train_loop(strategy, place, config, data, global_batch, reporter, summaries)
    metrics["eval_accuracy"] = evaluate(model, data)
    say(
        place,
        f"eval_accuracy={metrics['eval_accuracy']:.4f} test_examples={len(data.x_test)} data={data.name}",
    )
    summaries.write(config.epochs, {"eval_accuracy": metrics["eval_accuracy"]})
    if not place.is_chief:
        shutil.rmtree(checkpoint_dir(place), ignore_errors=True)
    else:
        # Scratch of workers a larger gang had (an attempt with more workers than this one).
        for folder in scratch_dir(place).glob("worker-*"):
            index = folder.name.removeprefix("worker-")
            if index.isdigit() and int(index) >= place.num_workers:
                shutil.rmtree(folder, ignore_errors=True)
    say(place, "training_complete")
    if place.is_chief:
        # The final figures first, so the status the operator ends with equals the marker's.
        total_steps = config.epochs * config.steps_per_epoch
        reporter.report(config.epochs, config.epochs, total_steps, total_steps, metrics)
        write_marker(
            place,
            {
                contract.MARKER_JOB_UID: place.job_uid,
                contract.MARKER_ATTEMPT: place.attempt,
                "workers": place.num_workers,
                "replicas": replicas,
                "globalBatch": global_batch,
                "mode": config.mode,
                "epochs": config.epochs,
                "data": data.name,
                "metrics": metrics,
                "finishedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )
        say(place, f"marker_written path={place.marker_path}")
    return metrics


def _train_loop(
    strategy: Any,
    place: Placement,
    config: TrainConfig,
    data: Dataset,
    global_batch: int,
    reporter: ProgressReporter,
    summaries: Summaries,
) -> tuple[Any, dict[str, float]]:
    with strategy.scope():
        model = build_model(config, data)
        optimizer = tf.keras.optimizers.Adam(learning_rate=config.learning_rate)
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
        counters = Counters()
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE
        )

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, **counters.trackables())
    manager = tf.train.CheckpointManager(checkpoint, str(checkpoint_dir(place)), max_to_keep=2)
    latest = resumable_checkpoint(place)
    if latest:
        # The variables are mirrored: the same values on every worker, saved once, so a gang of
        # any size restores them (the optimizer's slots and step count included).
        checkpoint.restore(latest)
    spe = config.steps_per_epoch
    # Saved at an epoch's end, or mid-epoch on SIGTERM: the step says which.
    resumed_step = max(int(counters.steps.numpy()), int(counters.epochs.numpy()) * spe)
    first_epoch, skipped = resumed_step // spe + 1, resumed_step % spe
    # Where the example stream goes on; a checkpoint that did not record it: its steps at this
    # global batch.
    resumed_examples = int(counters.examples.numpy()) or resumed_step * global_batch
    say(
        place,
        f"resumed_from_epoch={first_epoch - 1} resumed_from_step={resumed_step} "
        f"resumed_from_example={resumed_examples}",
    )
    if resumed_examples != resumed_step * global_batch:
        say(
            place,
            f"note: the checkpoint's {resumed_step} steps trained {resumed_examples} examples, "
            f"not {resumed_step} x {global_batch}: the global batch changed",
        )
    if latest and resumed_step > 0:
        reporter.checkpointed(first_epoch - 1, os.path.relpath(latest, place.shared_dir), resumed_step)

    stream = ExampleStream(len(data.x_train), config.seed)
    replicas = int(strategy.num_replicas_in_sync)

    def dataset_fn(context: Any) -> Any:
        # Each worker's share of every global batch, from where the checkpoint left the stream;
        # a worker with several local replicas feeds them their shares in turn.
        local = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * local
        parts = [
            stream.worker_batches(resumed_examples, global_batch, replicas, first + j) for j in range(local)
        ]

        def batches() -> Any:
            while True:
                for part in parts:
                    ids = next(part)
                    yield data.x_train[ids], data.y_train[ids], ids

        signature = (
            tf.TensorSpec((None, data.features), tf.float32),
            tf.TensorSpec((None,), tf.int32),
            tf.TensorSpec((None,), tf.int64),
        )
        # repeat(): an infinite dataset, so the distributed iterator needs no collective per
        # step to agree that every worker still has data.
        return tf.data.Dataset.from_generator(batches, output_signature=signature).repeat().prefetch(2)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    slow = slow_seconds(place, config)
    if slow:
        say(place, f"slowed_worker compute_sleep_seconds={slow:g}")

    @tf.function  # type: ignore[untyped-decorator]
    def train_step(iterator: Any, told: Any) -> Any:
        def step(inputs: Any, started: Any) -> Any:
            x, y, ids = inputs
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = tf.nn.compute_average_loss(loss_fn(y, logits), global_batch_size=global_batch)
            gradients = tape.gradient(loss, model.trainable_variables)
            computed = [*gradients]
            if slow:
                with tf.control_dependencies(gradients):
                    computed.append(injected_sleep(slow))
            # This worker's own work ends here: the input and the gradients. The all-reduce in
            # apply_gradients, where it waits for its peers, starts after this timestamp.
            with tf.control_dependencies(computed):
                finished = tf.timestamp() if config.step_times else tf.constant(0.0, tf.float64)
            with tf.control_dependencies([finished]):
                optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            accuracy.update_state(y, logits)
            # The notice rides on the loss's all-reduce: every worker learns, at the same
            # step, whether any of them was told to stop.
            return tf.stack([loss, told]), finished - started, ids

        # Taken before the input: waiting for the input pipeline is this worker's own work too.
        started = tf.timestamp() if config.step_times else tf.constant(0.0, tf.float64)
        with tf.control_dependencies([started]):
            inputs = next(iterator)
        votes, compute, ids = strategy.run(step, args=(inputs, started))
        local = strategy.experimental_local_results
        return strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None), local(compute), local(ids)

    notice = termination.notice()
    first_step = FirstStep(place)
    times = StepTimes() if config.step_times else None
    ledger = DataLedger(place, config.record_data)
    total_steps = config.epochs * spe
    metrics = {"loss": float("nan"), "accuracy": float("nan")}

    def examples_at(step: int) -> int:
        return resumed_examples + (step - resumed_step) * global_batch

    termination.ready()
    for epoch in range(first_epoch, config.epochs + 1):
        accuracy.reset_state()
        total = 0.0
        first = skipped + 1 if epoch == first_epoch else 1
        started = last_report = time.monotonic()
        for done in range(first, spe + 1):
            told = notice.requested()
            reduced, compute, ids = train_step(iterator, tf.constant(1.0 if told else 0.0))
            loss, votes = reduced.numpy()
            total += float(loss)
            step = (epoch - 1) * spe + done
            if times is not None:
                times.record(step, max(float(c) for c in compute))
            ledger.write(step, ids)
            first_step.passed(step)
            if votes > 0:
                save_on_notice(
                    place, manager, counters, reporter, epoch, step, examples_at(step), config, told
                )
            pause(config.step_pause)
            now = time.monotonic()
            if now - last_report >= INTERIM_REPORT_SECONDS and done < spe:
                rate = (done - first + 1) * global_batch / (now - started)
                reporter.report(epoch - 1, config.epochs, step, total_steps, metrics, rate)
                last_report = now
        ran = spe - first + 1
        rate = ran * global_batch / max(time.monotonic() - started, 1e-6)
        metrics = {
            "loss": round(total / ran, 4),
            "accuracy": round(float(accuracy.result()), 4),
        }
        say(place, f"epoch={epoch} loss={metrics['loss']:.4f} accuracy={metrics['accuracy']:.4f}")
        summaries.write(epoch, metrics)
        counters.assign(epoch, epoch * spe, examples_at(epoch * spe))
        saved = manager.save(checkpoint_number=epoch)
        if place.is_chief:
            claim_checkpoints(place)
            reporter.checkpointed(epoch, os.path.relpath(saved, place.shared_dir), epoch * spe)
        reporter.report(epoch, config.epochs, epoch * spe, total_steps, metrics, round(rate, 1))
        maybe_crash(place, config, epoch)
        maybe_hang(place, config, epoch)
        pause(config.epoch_pause)
    if times is not None:
        times.flush()
    return model, dict(metrics)


def _train_fit(
    strategy: Any,
    place: Placement,
    config: TrainConfig,
    data: Dataset,
    global_batch: int,
    reporter: ProgressReporter,
    summaries: Summaries,
) -> tuple[Any, dict[str, float]]:
    dataset = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
    dataset = dataset.shuffle(len(data.x_train), seed=config.seed, reshuffle_each_iteration=True)
    dataset = dataset.repeat().batch(global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    with strategy.scope():
        model = build_model(config, data)
        model.compile(
            optimizer=tf.keras.optimizers.Adam(learning_rate=config.learning_rate),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
    slow = slow_seconds(place, config)
    if slow:
        say(place, f"slowed_worker compute_sleep_seconds={slow:g}")
        train_step = model.train_step

        def slowed_train_step(batch: Any) -> Any:
            # Before the forward pass, so inside the compute the callback below measures.
            with tf.control_dependencies([injected_sleep(slow)]):
                return train_step(batch)

        model.train_step = slowed_train_step

    metrics: dict[str, float] = {}
    first_step = FirstStep(place)

    class EpochLines(tf.keras.callbacks.Callback):  # type: ignore[misc]
        def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
            termination.ready()

        def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
            self.epoch = epoch

        def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
            logs = logs or {}
            metrics.update(loss=round(float(logs["loss"]), 4), accuracy=round(float(logs["accuracy"]), 4))
            say(place, f"epoch={epoch + 1} loss={metrics['loss']:.4f} accuracy={metrics['accuracy']:.4f}")
            summaries.write(epoch + 1, metrics)
            maybe_crash(place, config, epoch + 1)
            pause(config.epoch_pause)

        def on_train_batch_end(self, batch: int, logs: dict[str, float] | None = None) -> None:
            first_step.passed(self.epoch * config.steps_per_epoch + batch + 1)
            pause(config.step_pause)
            # No mid-epoch save here: the gang resumes from the last epoch's backup.
            if termination.notice().requested():
                raise termination.Stopped(termination.SIGTERM_EXIT_CODE, "SIGTERM in fit: no mid-epoch save")

    # Per job: a backup left by an earlier job of the same name is not ours to resume.
    backup_dir = place.shared_dir / f"backup-{place.job_uid or 'local'}"
    model.fit(
        dataset,
        epochs=config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        verbose=0,
        callbacks=[
            tf.keras.callbacks.BackupAndRestore(backup_dir=str(backup_dir)),
            # After BackupAndRestore's save: each epoch's report names the backup it completed.
            ProgressCallback(global_batch, reporter=reporter, checkpoint_path=backup_dir.name),
            EpochLines(),
            *([ComputeTimeCallback()] if config.step_times else []),
        ],
    )
    # Saving is collective under the strategy: every worker saves, the chief's copy is kept.
    final_dir = place.shared_dir / "final" if place.is_chief else checkpoint_dir(place) / "final"
    model.save_weights(str(final_dir / "weights"))
    return model, dict(metrics)
