"""A Keras callback that writes the progress document (see `tfmw_trainer.progress`).

Import it after TF_USE_LEGACY_KERAS is set, like the rest of the Keras code.
"""

from __future__ import annotations

import time
from typing import Any

import tensorflow as tf

from tfmw_trainer.progress import INTERIM_REPORT_SECONDS, ProgressReporter


class ProgressCallback(tf.keras.callbacks.Callback):  # type: ignore[misc]
    """Reports at every epoch's end, and within an epoch at most every INTERIM_REPORT_SECONDS.

    `global_batch` turns steps into examples per second. Give `enabled=False` on every
    worker but the chief: one writer per job.
    """

    def __init__(
        self,
        global_batch: int,
        enabled: bool = True,
        reporter: ProgressReporter | None = None,
        checkpoint_path: str | None = None,
    ) -> None:
        """`checkpoint_path`: where a callback before this one checkpoints at every epoch's
        end (BackupAndRestore's folder); each epoch's report then names it."""
        super().__init__()
        self.checkpoint_path = checkpoint_path
        self.global_batch = global_batch
        self.reporter = reporter or ProgressReporter(enabled=enabled)
        self._epoch = 0
        self._epoch_started = 0.0
        self._last_report = 0.0
        self._metrics: dict[str, float] = {}

    def _totals(self) -> tuple[int | None, int | None, int | None]:
        params = self.params or {}
        epochs, steps = params.get("epochs"), params.get("steps")
        total_steps = epochs * steps if isinstance(epochs, int) and isinstance(steps, int) else None
        return epochs, steps, total_steps

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch
        self._epoch_started = time.monotonic()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.monotonic()
        if self.reporter.path is None or now - self._last_report < INTERIM_REPORT_SECONDS:
            return
        epochs, steps, total_steps = self._totals()
        done_in_epoch = batch + 1
        rate = done_in_epoch * self.global_batch / max(now - self._epoch_started, 1e-6)
        step = self._epoch * steps + done_in_epoch if steps else None
        self._report(now, self._epoch, epochs, step, total_steps, rate)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.monotonic()
        epochs, steps, total_steps = self._totals()
        self._metrics = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, (int, float))}
        rate = steps * self.global_batch / max(now - self._epoch_started, 1e-6) if steps else None
        step = (epoch + 1) * steps if steps else None
        if self.checkpoint_path is not None:
            self.reporter.checkpointed(epoch + 1, self.checkpoint_path)
        self._report(now, epoch + 1, epochs, step, total_steps, rate)

    def _report(
        self,
        now: float,
        epoch: int,
        epochs: int | None,
        step: int | None,
        total: int | None,
        rate: float | None,
    ) -> None:
        self.reporter.report(epoch, epochs, step, total, self._metrics, rate)
        self._last_report = now
