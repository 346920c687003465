"""Multi-worker training with MultiWorkerMirroredStrategy: a custom loop and a Keras `fit` path.

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

import tensorflow as tf

from tfmw_trainer.cluster import Placement
from tfmw_trainer.data import make_dataset

OWNER_FILE = "job.json"


@dataclass(frozen=True)
class TrainConfig:
    mode: str = "loop"  # loop | fit
    epochs: int = 3
    batch_size: int = 16  # per worker
    steps_per_epoch: int = 8
    width: int = 16
    features: int = 8
    samples: int = 1024
    learning_rate: float = 0.03
    seed: int = 7
    crash_at_epoch: int = 0  # fault injection for tests: exit after this epoch in attempt 0
    crash_worker: int = 0
    crash_exit_code: int = 137


def say(place: Placement, text: str) -> None:
    print(f"worker={place.index} {text}", flush=True)


def checkpoint_dir(place: Placement) -> Path:
    """Every worker takes part in saving; only the chief's copy is kept."""
    if place.is_chief:
        return place.shared_dir / "checkpoints"
    return place.shared_dir / ".worker-scratch" / f"worker-{place.index}"


def resumable_checkpoint(place: Placement) -> str | None:
    """The latest checkpoint, if this job wrote it: an earlier job of the same name may
    have left its own in the folder, and resuming from that would be silently wrong."""
    directory = place.shared_dir / "checkpoints"
    owner = directory / OWNER_FILE
    try:
        written_by = json.loads(owner.read_text()).get("job_uid")
    except (OSError, ValueError):
        return None
    if written_by != place.job_uid:
        return None
    latest: str | None = tf.train.latest_checkpoint(str(directory))
    return latest


def claim_checkpoints(place: Placement) -> None:
    owner = place.shared_dir / "checkpoints" / OWNER_FILE
    owner.write_text(json.dumps({"job_uid": place.job_uid}) + "\n")


def build_model(config: TrainConfig) -> Any:
    return tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(config.features,)),
            tf.keras.layers.Dense(config.width, activation="relu"),
            tf.keras.layers.Dense(config.width, activation="relu"),
            tf.keras.layers.Dense(1, activation="sigmoid"),
        ]
    )


def write_marker(place: Placement, content: dict[str, Any]) -> None:
    """Atomically: the operator must never see a half-written marker."""
    place.marker_path.parent.mkdir(parents=True, exist_ok=True)
    partial = place.marker_path.with_name(place.marker_path.name + ".partial")
    partial.write_text(json.dumps(content, indent=2) + "\n")
    os.replace(partial, place.marker_path)


def maybe_crash(place: Placement, config: TrainConfig, epoch: int) -> None:
    if config.crash_at_epoch == epoch and place.attempt == 0 and place.index == config.crash_worker:
        say(place, f"injected_crash epoch={epoch} exit_code={config.crash_exit_code}")
        os._exit(config.crash_exit_code)


def train(place: Placement, config: TrainConfig) -> dict[str, float]:
    # The strategy must exist before any other TensorFlow op: it configures the runtime.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replicas = int(strategy.num_replicas_in_sync)
    global_batch = config.batch_size * replicas
    say(
        place,
        f"start cluster_workers={place.num_workers} replicas={replicas} "
        f"global_batch={global_batch} mode={config.mode} attempt={place.attempt}",
    )
    place.shared_dir.mkdir(parents=True, exist_ok=True)
    if config.mode == "fit":
        metrics = _train_fit(strategy, place, config, global_batch)
    else:
        metrics = _train_loop(strategy, place, config, global_batch)
    if not place.is_chief:
        shutil.rmtree(checkpoint_dir(place), ignore_errors=True)
    say(place, "training_complete")
    if place.is_chief:
        write_marker(
            place,
            {
                "job_uid": place.job_uid,
                "attempt": place.attempt,
                "workers": place.num_workers,
                "replicas": replicas,
                "mode": config.mode,
                "epochs": config.epochs,
                "metrics": metrics,
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )
        say(place, f"marker_written path={place.marker_path}")
    return metrics


def _train_loop(strategy: Any, place: Placement, config: TrainConfig, global_batch: int) -> dict[str, float]:
    features, labels = make_dataset(config.samples, config.features, config.seed)

    def dataset_fn(context: Any) -> Any:
        batch = context.get_per_replica_batch_size(global_batch)
        dataset = tf.data.Dataset.from_tensor_slices((features, labels))
        dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        dataset = dataset.shuffle(len(features), seed=config.seed, reshuffle_each_iteration=False)
        return dataset.repeat().batch(batch).prefetch(2)

    with strategy.scope():
        model = build_model(config)
        optimizer = tf.keras.optimizers.Adam(learning_rate=config.learning_rate)
        accuracy = tf.keras.metrics.BinaryAccuracy()
        epochs_done = tf.Variable(0, dtype=tf.int64, trainable=False)
        loss_fn = tf.keras.losses.BinaryCrossentropy(reduction=tf.keras.losses.Reduction.NONE)

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epochs_done=epochs_done)
    manager = tf.train.CheckpointManager(checkpoint, str(checkpoint_dir(place)), max_to_keep=2)
    latest = resumable_checkpoint(place)
    if latest:
        checkpoint.restore(latest)
    first_epoch = int(epochs_done.numpy()) + 1
    say(place, f"resumed_from_epoch={first_epoch - 1}")

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function  # type: ignore[untyped-decorator]
    def train_step(iterator: Any) -> Any:
        def step(inputs: Any) -> Any:
            x, y = inputs
            with tf.GradientTape() as tape:
                predictions = model(x, training=True)
                loss = tf.nn.compute_average_loss(loss_fn(y, predictions), global_batch_size=global_batch)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            accuracy.update_state(y, predictions)
            return loss

        per_replica = strategy.run(step, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    writer = tf.summary.create_file_writer(str(place.shared_dir / "tensorboard")) if place.is_chief else None
    metrics = {"loss": float("nan"), "accuracy": float("nan")}
    for epoch in range(first_epoch, config.epochs + 1):
        accuracy.reset_state()
        total = 0.0
        for _ in range(config.steps_per_epoch):
            total += float(train_step(iterator))
        metrics = {
            "loss": round(total / config.steps_per_epoch, 4),
            "accuracy": round(float(accuracy.result()), 4),
        }
        say(place, f"epoch={epoch} loss={metrics['loss']:.4f} accuracy={metrics['accuracy']:.4f}")
        if writer is not None:
            with writer.as_default():
                tf.summary.scalar("loss", metrics["loss"], step=epoch)
                tf.summary.scalar("accuracy", metrics["accuracy"], step=epoch)
            writer.flush()
        epochs_done.assign(epoch)
        manager.save(checkpoint_number=epoch)
        if place.is_chief:
            claim_checkpoints(place)
        maybe_crash(place, config, epoch)
    return metrics


def _train_fit(strategy: Any, place: Placement, config: TrainConfig, global_batch: int) -> dict[str, float]:
    features, labels = make_dataset(config.samples, config.features, config.seed)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    dataset = dataset.shuffle(len(features), seed=config.seed, reshuffle_each_iteration=False)
    dataset = dataset.repeat().batch(global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)

    with strategy.scope():
        model = build_model(config)
        model.compile(
            optimizer=tf.keras.optimizers.Adam(learning_rate=config.learning_rate),
            loss=tf.keras.losses.BinaryCrossentropy(),
            metrics=[tf.keras.metrics.BinaryAccuracy(name="accuracy")],
        )

    metrics: dict[str, float] = {}

    class EpochLines(tf.keras.callbacks.Callback):  # type: ignore[misc]
        def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
            logs = logs or {}
            metrics.update(loss=round(float(logs["loss"]), 4), accuracy=round(float(logs["accuracy"]), 4))
            say(place, f"epoch={epoch + 1} loss={metrics['loss']:.4f} accuracy={metrics['accuracy']:.4f}")
            maybe_crash(place, config, epoch + 1)

    tensorboard_dir = (
        place.shared_dir / "tensorboard-fit" if place.is_chief else checkpoint_dir(place) / "tensorboard"
    )
    # Per job: a backup left by an earlier job of the same name is not ours to resume.
    backup_dir = place.shared_dir / f"backup-{place.job_uid or 'local'}"
    model.fit(
        dataset,
        epochs=config.epochs,
        steps_per_epoch=config.steps_per_epoch,
        verbose=0,
        callbacks=[
            # Per job: a backup left by an earlier job of the same name is not ours to resume.
            tf.keras.callbacks.BackupAndRestore(backup_dir=str(backup_dir)),
            tf.keras.callbacks.TensorBoard(log_dir=str(tensorboard_dir)),
            EpochLines(),
        ],
    )
    # Saving is collective under the strategy: every worker saves, the chief's copy is kept.
    final_dir = place.shared_dir / "final" if place.is_chief else checkpoint_dir(place) / "final"
    model.save_weights(str(final_dir / "weights"))
    return metrics
