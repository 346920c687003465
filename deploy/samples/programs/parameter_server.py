"""ParameterServerStrategy under tfmw: the chief coordinates, the workers and parameter servers serve."""

import json
import os
import signal
import sys
import threading

# PID 1 in its container: make SIGTERM end it at once, even while TensorFlow waits in C++.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # before any other thread starts
threading.Thread(target=lambda: (signal.sigwait({signal.SIGTERM}), os._exit(143)), daemon=True).start()
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf-keras, as TensorFlow's tutorial uses

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

env = os.environ
EPOCHS = int(env.get("EPOCHS", "6"))  # the job's template may set these two
STEPS = int(env.get("STEPS_PER_EPOCH", "50"))
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if resolver.task_type in ("worker", "ps"):  # run the coordinator's steps, or hold the variables
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id, start=True
    )
    print(f"{resolver.task_type}-{resolver.task_id} serving", flush=True)
    server.join()  # until the job ends and tfmw stops the pod

who = {"jobUid": env["TFMW_JOB_UID"], "attempt": int(env["TFMW_ATTEMPT"])}


def write_json(path: str, document: dict) -> None:
    """Atomically (a new file renamed over the old one): never half a file for the operator."""
    with open(f"{path}.tmp", "w") as file:
        json.dump(document, file)
    os.replace(f"{path}.tmp", path)


class Progress(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        step = (epoch + 1) * STEPS  # steps done: one lost with its worker was run again on another
        updates = int(self.model.optimizer.iterations.numpy())  # so a step can be applied twice
        print(f"chief epoch={epoch + 1} step={step} updates={updates} loss={logs['loss']:.4f}", flush=True)
        metrics = {"loss": float(logs["loss"]), "accuracy": float(logs["accuracy"])}
        totals = {"epoch": epoch + 1, "totalEpochs": EPOCHS, "step": step, "totalSteps": EPOCHS * STEPS}
        saved = {"checkpointEpoch": epoch + 1, "checkpointStep": step, "checkpointPath": "backup"}
        write_json(env["TFMW_PROGRESS_PATH"], {**totals, **saved, "metrics": metrics, **who})


strategy = tf.distribute.ParameterServerStrategy(resolver)  # fit coordinates with a ClusterCoordinator
features = np.random.default_rng(0).normal(size=(2048, 8)).astype("float32")
labels = (features.sum(axis=1) > 0).astype("int32")
data = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(2048).repeat().batch(32)
with strategy.scope():  # the variables live on the parameter servers
    model = tf.keras.Sequential(
        [tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(2)]
    )
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss, metrics=["accuracy"])
backup = os.path.join(env["TFMW_SHARED_DIR"], "backup")  # after each epoch; a restarted job resumes there
callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir=backup, delete_checkpoint=False), Progress()]
try:  # a worker lost is replaced by tfmw and taken back by the coordinator; a parameter server is not
    model.fit(data, epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0, callbacks=callbacks)
except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
    print(f"chief lost a parameter server, the job restarts: {error.message.splitlines()[0]}", flush=True)
    sys.exit(170)  # from 128 up: a restart from the last backup, not a program error
updates = int(model.optimizer.iterations.numpy())
print(f"chief done step={EPOCHS * STEPS} updates={updates}", flush=True)
write_json(env["TFMW_MARKER_PATH"], {**who, "step": EPOCHS * STEPS, "updates": updates})  # last
