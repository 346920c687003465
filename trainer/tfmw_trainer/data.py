"""A synthetic, learnable classification task: every worker generates the same data."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]


def make_dataset(samples: int, features: int, seed: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype(np.float32)
    weights = np.linspace(1.0, -1.0, features, dtype=np.float32)
    score = x @ weights + 0.1 * rng.normal(size=samples).astype(np.float32)
    y = (score > 0).astype(np.float32)[:, None]
    return x, y
