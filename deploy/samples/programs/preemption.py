"""MultiWorkerMirroredStrategy with PreemptionCheckpointHandler: on SIGTERM, all save one step and exit 42."""

import json
import os
import signal
import sys

# PID 1 in its container: SIGTERM ends it at once until the handler below takes SIGTERM over.
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf-keras

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG; before any other TF op
env = os.environ
chief = env["TFMW_ROLE"] == "chief"  # worker 0
who = {"jobUid": env["TFMW_JOB_UID"], "attempt": int(env["TFMW_ATTEMPT"])}
EPOCHS = int(env.get("EPOCHS", "4"))  # the job's template may set these two
STEPS = int(env.get("STEPS_PER_EPOCH", "100"))
GLOBAL_BATCH = 32 * strategy.num_replicas_in_sync


def write_json(path: str, document: dict) -> None:
    """Atomically (a new file renamed over the old one): never half a file for the operator."""
    with open(f"{path}.tmp", "w") as file:
        json.dump(document, file)
    os.replace(f"{path}.tmp", path)


features = np.random.default_rng(0).normal(size=(2048, 8)).astype("float32")
labels = (features.sum(axis=1) > 0).astype("int32")
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
data = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(GLOBAL_BATCH)
data = strategy.experimental_distribute_dataset(data.with_options(options))
with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(2)]
    )
    optimizer = tf.keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)  # its step counter, optimizer.iterations, is in the checkpoint
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


@tf.function
def train_step(iterator: tf.distribute.DistributedIterator) -> tf.Tensor:
    def step_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            losses = loss_fn(y, model(x, training=True))
            loss = tf.nn.compute_average_loss(losses, global_batch_size=GLOBAL_BATCH)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    return strategy.reduce("SUM", strategy.run(step_fn, args=next(iterator)), axis=None)


def report(step: int, **more: object) -> None:
    if chief:
        totals = {"epoch": step // STEPS, "totalEpochs": EPOCHS, "step": step, "totalSteps": EPOCHS * STEPS}
        write_json(env["TFMW_PROGRESS_PATH"], {**totals, **more, **who})


def saved_and_exit() -> None:
    """The handler calls this on each worker once it has saved the step they all agreed on after a SIGTERM."""
    step = int(optimizer.iterations.numpy())
    print(f"{env['TFMW_ROLE']} preempted: saved step={step}", flush=True)
    report(step, checkpointStep=step, checkpointEpoch=step // STEPS, checkpointPath="checkpoints")
    sys.exit(42)  # what TensorFlow itself exits with outside Google Cloud: restart me, I saved


handler = tf.distribute.experimental.PreemptionCheckpointHandler(  # restores the latest save, if any
    strategy.cluster_resolver,
    tf.train.Checkpoint(model=model, optimizer=optimizer),
    os.path.join(env["TFMW_SHARED_DIR"], "checkpoints"),  # the chief's; the others save to a scratch folder
    tf.distribute.experimental.TerminationConfig(exit_fn=saved_and_exit),  # SIGTERM is its signal
)
iterator = iter(data)
print(f"{env['TFMW_ROLE']} start step={int(optimizer.iterations.numpy())}", flush=True)
try:
    while (step := int(optimizer.iterations.numpy())) < EPOCHS * STEPS:
        loss = handler.run(train_step, iterator)  # one step; saves and exits when a worker was told to stop
        step += 1
        if step % STEPS == 0:
            print(f"{env['TFMW_ROLE']} epoch={step // STEPS} step={step} loss={float(loss):.4f}", flush=True)
            report(step, metrics={"loss": float(loss)})
except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:  # a peer died without notice
    print(f"{env['TFMW_ROLE']} lost a peer, the gang restarts: {error.message.splitlines()[0]}", flush=True)
    sys.exit(170)  # from 128 up: a restart from the last save, not a program error
if chief:  # last, once training is done: the job is Succeeded when this file appears
    write_json(env["TFMW_MARKER_PATH"], {**who, "step": int(optimizer.iterations.numpy())})
