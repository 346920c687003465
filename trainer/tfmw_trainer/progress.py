"""The progress document: how far training has got, for `kubectl get` and the job's status.

The operator injects TFMW_PROGRESS_PATH; the chief writes one small JSON object there,
atomically (a new file renamed over the old one), whenever it likes:

    {"epoch": 3, "totalEpochs": 10, "step": 240, "totalSteps": 800,
     "metrics": {"loss": 0.31, "accuracy": 0.91}, "examplesPerSecond": 5120.0,
     "updatedAt": "2026-12-01T07:00:00.000Z", "jobUid": "...", "attempt": 0,
     "checkpointEpoch": 3, "checkpointStep": 240, "checkpointPath": "checkpoints/ckpt-3"}

Every field is optional. This module uses the standard library and the wire contract
(tfmw_operator.contract) only, so any program can copy the two; a failed write is logged
once and otherwise ignored: progress must never slow or break training.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tfmw_operator import contract

PROGRESS_PATH_ENV = contract.PROGRESS_PATH_ENV
# Within an epoch, report at most this often; every epoch's end is reported as well.
INTERIM_REPORT_SECONDS = 2.0


def utc_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def progress_document(
    epoch: int | None = None,
    total_epochs: int | None = None,
    step: int | None = None,
    total_steps: int | None = None,
    metrics: Mapping[str, float] | None = None,
    examples_per_second: float | None = None,
    env: Mapping[str, str] | None = None,
    checkpoint_epoch: int | None = None,
    checkpoint_path: str | None = None,
    checkpoint_step: int | None = None,
) -> dict[str, object]:
    env = os.environ if env is None else env
    attempt = env.get(contract.ATTEMPT_ENV, "")
    document: dict[str, object] = {
        contract.PROGRESS_EPOCH: epoch,
        contract.PROGRESS_TOTAL_EPOCHS: total_epochs,
        contract.PROGRESS_STEP: step,
        contract.PROGRESS_TOTAL_STEPS: total_steps,
        contract.PROGRESS_METRICS: {
            k: float(v) for k, v in (metrics or {}).items() if math.isfinite(float(v))
        },
        contract.PROGRESS_EXAMPLES_PER_SECOND: examples_per_second,
        contract.PROGRESS_UPDATED_AT: utc_now(),
        contract.PROGRESS_JOB_UID: env.get(contract.JOB_UID_ENV),
        contract.PROGRESS_ATTEMPT: int(attempt) if attempt.isdigit() else None,
        contract.PROGRESS_CHECKPOINT_EPOCH: checkpoint_epoch,
        contract.PROGRESS_CHECKPOINT_STEP: checkpoint_step,
        contract.PROGRESS_CHECKPOINT_PATH: checkpoint_path,
    }
    return {key: value for key, value in document.items() if value is not None}


def write_atomically(path: Path, document: Mapping[str, object]) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(document, allow_nan=False, separators=(",", ":")) + "\n")
    os.replace(partial, path)


class ProgressReporter:
    """Writes the progress document; silent where there is nowhere to write it."""

    def __init__(self, path: str | Path | None = None, enabled: bool = True) -> None:
        where = path if path is not None else os.environ.get(PROGRESS_PATH_ENV)
        self.path = Path(where) if where and enabled else None
        self._warned = False
        # The last completed one: epochs and steps it holds, where it is.
        self.checkpoint: tuple[int, int | None, str] | None = None

    def checkpointed(self, epoch: int, path: str, step: int | None = None) -> None:
        """A checkpoint holding `epoch` whole epochs (and `step` steps: more, if it was saved
        mid-epoch) is complete at `path` (inside the job's folder, or a URI): every later
        report says so, and a restarted gang's status shows where it resumed."""
        self.checkpoint = (epoch, step, path)

    def report(
        self,
        epoch: int | None = None,
        total_epochs: int | None = None,
        step: int | None = None,
        total_steps: int | None = None,
        metrics: Mapping[str, float] | None = None,
        examples_per_second: float | None = None,
    ) -> bool:
        """Write the document; False (and one warning, the first time) if it could not be."""
        if self.path is None:
            return False
        try:
            saved_epoch, saved_step, saved_path = self.checkpoint or (None, None, None)
            document = progress_document(
                epoch,
                total_epochs,
                step,
                total_steps,
                metrics,
                examples_per_second,
                checkpoint_epoch=saved_epoch,
                checkpoint_path=saved_path,
                checkpoint_step=saved_step,
            )
            write_atomically(self.path, document)
        except (OSError, TypeError, ValueError) as error:
            if not self._warned:
                self._warned = True
                print(
                    f"tfmw-progress: cannot write {self.path}: {error}; progress is not reported",
                    file=sys.stderr,
                )
            return False
        return True


_reporters: dict[str, ProgressReporter] = {}


def report_progress(
    epoch: int | None = None,
    total_epochs: int | None = None,
    step: int | None = None,
    total_steps: int | None = None,
    metrics: Mapping[str, float] | None = None,
    examples_per_second: float | None = None,
) -> bool:
    """Report progress to TFMW_PROGRESS_PATH (call it on the chief only)."""
    path = os.environ.get(PROGRESS_PATH_ENV, "")
    reporter = _reporters.setdefault(path, ProgressReporter(path or None))
    return reporter.report(epoch, total_epochs, step, total_steps, metrics, examples_per_second)
