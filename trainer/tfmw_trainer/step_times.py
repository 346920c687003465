"""Each worker's own compute time per step: the document that names a straggler.

In synchronous training every worker waits at the step's all-reduce for the slowest one, so
step times look the same on every worker; what differs is each worker's own work before the
collective. Each training pod writes its recent figures to TFMW_STEP_TIMES_PATH
(`$TFMW_SHARED_DIR/steps/<pod stem>.json`), atomically (a new file renamed over the old one),
at most once per `write_seconds`:

    {"jobUid": "...", "attempt": 0, "role": "worker", "index": 1, "step": 240,
     "computeSeconds": [0.0123, 0.0119, ...], "updatedAt": "2026-12-01T07:00:00.000Z"}

`computeSeconds` holds the last STEP_TIMES_MAX_SAMPLES (50) steps measured, newest last;
`step` is the last one. The operator compares the workers' figures.

How to measure, from a program of your own:

- a custom loop that computes its gradients in one call and all-reduces them in another:
  `with compute_timer(step): ...` around the first (make the block wait for its result, e.g.
  `.numpy()` on the loss, or the figure is only the time to dispatch it);
- a custom loop with one `tf.function` per step (the usual, and cheaper): take
  `tf.timestamp()` before the step's input and after the gradients, inside the function, and
  pass the difference to `record_compute_time(step, seconds)` (`train.py` does this);
- Keras `fit`: `tfmw_trainer.keras_step_times.ComputeTimeCallback`.

This module uses the standard library and the wire contract's names only, so any program can
copy it; a failed write is printed once and otherwise ignored: it must never slow or break
training.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path

from tfmw_operator import contract

from tfmw_trainer.progress import utc_now, write_atomically

# At most one write per second: a worker's figures are compared over tens of steps, and a
# write costs a file and a rename on the shared volume.
WRITE_SECONDS = 1.0


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else None


def _task_index(env: Mapping[str, str]) -> int | None:
    """This process's index in TF_CONFIG, when TF_CONFIG says it."""
    try:
        index = json.loads(env.get(contract.TF_CONFIG, ""))["task"]["index"]
    except (ValueError, KeyError, TypeError):
        return None
    return index if isinstance(index, int) and index >= 0 else None


class StepTimes:
    """Keeps the recent compute times and writes the document; silent where there is no path."""

    def __init__(
        self,
        path: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        write_seconds: float = WRITE_SECONDS,
    ) -> None:
        env = os.environ if env is None else env
        where = path if path is not None else env.get(contract.STEP_TIMES_PATH_ENV)
        self.path = Path(where) if where else None
        self.write_seconds = write_seconds
        self.seconds: deque[float] = deque(maxlen=contract.STEP_TIMES_MAX_SAMPLES)
        self.step: int | None = None
        self._written_at = float("-inf")
        self._warned = False
        index = _int_env(env, contract.REPLICA_INDEX_ENV)
        if index is None:
            index = _task_index(env)
        role = env.get(contract.ROLE_ENV) or None
        if role is None and index is not None:
            # Without TFMW_ROLE (an older operator, a run by hand): TF's rule, worker 0 is the chief.
            role = contract.CHIEF if index == 0 else contract.WORKER
        self.identity: dict[str, object] = {
            contract.STEP_TIMES_JOB_UID: env.get(contract.JOB_UID_ENV) or None,
            contract.STEP_TIMES_ATTEMPT: _int_env(env, contract.ATTEMPT_ENV),
            contract.STEP_TIMES_ROLE: role,
            contract.STEP_TIMES_INDEX: index,
        }

    def record(self, step: int, seconds: float, now: float | None = None) -> bool:
        """One step's compute time; writes the document when the last write is `write_seconds`
        old. Whether it wrote."""
        self.step = step
        self.seconds.append(max(0.0, float(seconds)))
        now = time.monotonic() if now is None else now
        if now - self._written_at < self.write_seconds:
            return False
        return self.flush(now)

    def document(self) -> dict[str, object]:
        document = {
            **self.identity,
            contract.STEP_TIMES_STEP: self.step,
            contract.STEP_TIMES_COMPUTE_SECONDS: [round(s, 6) for s in self.seconds],
            contract.STEP_TIMES_UPDATED_AT: utc_now(),
        }
        return {key: value for key, value in document.items() if value is not None}

    def flush(self, now: float | None = None) -> bool:
        """Write what is kept now (at the end of training, or an epoch); False if it could not be."""
        if self.path is None or not self.seconds:
            return False
        self._written_at = time.monotonic() if now is None else now
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, self.document())
        except (OSError, TypeError, ValueError) as error:
            if not self._warned:
                self._warned = True
                print(
                    f"tfmw-step-times: cannot write {self.path}: {error}; compute times are not reported",
                    file=sys.stderr,
                )
            return False
        return True


_default: StepTimes | None = None


def default() -> StepTimes:
    """The process's StepTimes, writing to TFMW_STEP_TIMES_PATH."""
    global _default
    if _default is None:
        _default = StepTimes()
    return _default


def record_compute_time(step: int, seconds: float) -> bool:
    """Record one step's compute time, measured however the program likes (see the module's doc)."""
    return default().record(step, seconds)


@contextlib.contextmanager
def compute_timer(step: int, times: StepTimes | None = None) -> Iterator[None]:
    """`with compute_timer(step): <this worker's work before the collective>`: the block's wall
    time is recorded as the step's compute time. The block must end only once the work has
    (fetch a result, e.g. `.numpy()`): TensorFlow may return before its kernels have run."""
    started = time.perf_counter()
    yield  # a block that raised measured nothing: no figure
    (times or default()).record(step, time.perf_counter() - started)
