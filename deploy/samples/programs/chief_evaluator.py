"""MultiWorkerMirroredStrategy with a chief of its own, and a side-car evaluator of its checkpoints."""

import json
import os
import signal
import sys
import threading
import time

# PID 1 in its container: make SIGTERM end it at once, even while TensorFlow waits in C++.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # before any other thread starts
threading.Thread(target=lambda: (signal.sigwait({signal.SIGTERM}), os._exit(143)), daemon=True).start()
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf-keras: Keras 3 has no SidecarEvaluator

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

env = os.environ
role = env["TFMW_ROLE"]  # chief, worker or evaluator
who = {"jobUid": env["TFMW_JOB_UID"], "attempt": int(env["TFMW_ATTEMPT"])}
EPOCHS = int(env.get("EPOCHS", "5"))  # the job's template may set these two
STEPS = int(env.get("STEPS_PER_EPOCH", "150"))
checkpoints = os.path.join(env["TFMW_SHARED_DIR"], "checkpoints")  # ckpt-<epoch>: what the evaluator reads


def write_json(path: str, document: dict) -> None:
    """Atomically (a new file renamed over the old one): never half a file for the operator."""
    with open(f"{path}.tmp", "w") as file:
        json.dump(document, file)
    os.replace(f"{path}.tmp", path)


def examples(seed: int) -> tf.data.Dataset:
    features = np.random.default_rng(seed).normal(size=(2048, 8)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((features, (features.sum(axis=1) > 0).astype("int32")))


def compiled_model() -> tf.keras.Model:
    model = tf.keras.Sequential(
        [tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(2)]
    )
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss, metrics=["accuracy"])
    return model


class Evaluated(tf.keras.callbacks.Callback):
    def on_test_end(self, logs: dict | None = None) -> None:
        step = int(self.model.optimizer.iterations.numpy())  # as restored from the checkpoint evaluated
        epoch, metrics = step // STEPS, {name: float(value) for name, value in logs.items()}
        print(f"evaluator checkpoint=ckpt-{epoch} step={step} accuracy={metrics['accuracy']:.4f}", flush=True)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        document = {"checkpoint": f"checkpoints/ckpt-{epoch}", "epoch": epoch, "step": step, "updatedAt": now}
        write_json(env["TFMW_EVALUATION_PATH"], {**document, "metrics": metrics, **who})


if role == "evaluator":  # not in the cluster: evaluate the newest checkpoint, until the final one
    held_out = examples(seed=1).batch(256)
    evaluator = tf.keras.utils.SidecarEvaluator(
        compiled_model(), held_out, checkpoints, max_evaluations=EPOCHS, callbacks=[Evaluated()]
    )
    print(f"evaluator watching {checkpoints}", flush=True)
    evaluator.start()  # returns once it has evaluated ckpt-<EPOCHS>
    raise SystemExit(0)


class Progress(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        print(f"{role} epoch={epoch + 1} loss={logs['loss']:.4f}", flush=True)
        if role == "chief":
            metrics = {"loss": float(logs["loss"]), "accuracy": float(logs["accuracy"])}
            saved = {"checkpointEpoch": epoch + 1, "checkpointPath": f"checkpoints/ckpt-{epoch + 1}"}
            document = {"epoch": epoch + 1, "totalEpochs": EPOCHS, "metrics": metrics, **saved, **who}
            write_json(env["TFMW_PROGRESS_PATH"], document)


strategy = tf.distribute.MultiWorkerMirroredStrategy()  # the chief and the workers, from TF_CONFIG
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
data = examples(seed=0).repeat().batch(32 * strategy.num_replicas_in_sync).with_options(options)
with strategy.scope():
    model = compiled_model()
callbacks = [
    tf.keras.callbacks.BackupAndRestore(backup_dir=os.path.join(env["TFMW_SHARED_DIR"], "backup")),
    tf.keras.callbacks.ModelCheckpoint(os.path.join(checkpoints, "ckpt-{epoch}"), save_weights_only=True),
    Progress(),
]
try:
    history = model.fit(data, epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0, callbacks=callbacks)
except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:  # a peer died or froze
    print(f"{role} lost a peer, the gang restarts: {error.message.splitlines()[0]}", flush=True)
    sys.exit(170)  # from 128 up: a restart from the last backup, not a program error
if role == "chief":  # last, once training is done: the job is Succeeded when this file appears
    write_json(env["TFMW_MARKER_PATH"], {**who, "metrics": {"loss": history.history["loss"][-1]}})
