"""Where this process stands in the job, from TF_CONFIG and the TFMW_* variables. Pure."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tfmw_operator.contract import (
    ATTEMPT_ENV,
    DEFAULT_MARKER_FILE,
    JOB_UID_ENV,
    MARKER_PATH_ENV,
    SHARED_DIR_ENV,
    TF_CONFIG,
)


@dataclass(frozen=True)
class Placement:
    index: int
    num_workers: int
    attempt: int
    job_uid: str
    shared_dir: Path
    marker_path: Path

    @property
    def is_chief(self) -> bool:
        return self.index == 0


class ConfigError(ValueError):
    pass


def placement(env: Mapping[str, str] | None = None) -> Placement:
    """Read the worker's place; without TF_CONFIG it is the only worker."""
    env = os.environ if env is None else env
    index, num_workers = 0, 1
    raw = env.get(TF_CONFIG)
    if raw:
        try:
            config = json.loads(raw)
            workers = config["cluster"]["worker"]
            task = config["task"]
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"TF_CONFIG is not a valid cluster description: {error}") from error
        if task.get("type") != "worker":
            raise ConfigError(f"TF_CONFIG task.type must be 'worker', got {task.get('type')!r}")
        index, num_workers = int(task["index"]), len(workers)
        if not 0 <= index < num_workers:
            raise ConfigError(f"TF_CONFIG task.index {index} is outside 0..{num_workers - 1}")
    shared_dir = Path(env.get(SHARED_DIR_ENV, "tfmw-output"))
    marker = Path(env.get(MARKER_PATH_ENV, str(shared_dir / DEFAULT_MARKER_FILE)))
    return Placement(
        index=index,
        num_workers=num_workers,
        attempt=int(env.get(ATTEMPT_ENV, "0")),
        job_uid=env.get(JOB_UID_ENV, ""),
        shared_dir=shared_dir,
        marker_path=marker,
    )
