"""A MultiWorkerMirroredStrategy program that ends by its exit code alone: no marker, no shared folder."""

import os
import signal
import threading

# PID 1 in its container: make SIGTERM end it at once, even while TensorFlow waits in C++.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # before any other thread starts
threading.Thread(target=lambda: (signal.sigwait({signal.SIGTERM}), os._exit(143)), daemon=True).start()
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf-keras: Keras 3 refuses fit under this strategy

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG; before any other TF op
features = np.random.default_rng(0).normal(size=(2048, 8)).astype("float32")
labels = (features.sum(axis=1) > 0).astype("int32")
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
global_batch = 32 * strategy.num_replicas_in_sync
data = (
    tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(global_batch).with_options(options)
)
with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(2)]
    )
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss, metrics=["accuracy"])
history = model.fit(data, epochs=3, steps_per_epoch=20, verbose=0)
task = strategy.cluster_resolver
print(f"{task.task_type}-{task.task_id} done loss={history.history['loss'][-1]:.4f}", flush=True)
# Falls off the end: exit code 0. Under completion.policy ChiefExitCode, the chief's 0 is the job's success.
