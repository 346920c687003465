"""A stand-in for TensorFlow Datasets in the example images: `load("mnist")` from the
image's local MNIST-shaped file (tfjob_offline_data.LOCAL_MNIST), and `disable_progress_bar`.

Kubeflow's multi_worker_strategy-with-keras.py uses TensorFlow Datasets only to download
and read MNIST (`tfds.load(name="mnist", with_info=True, as_supervised=True)`), which needs
the internet. This module gives the same splits with the same element structure
(image uint8 [28, 28, 1], label int64) and nothing else; any other dataset is refused by name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

SUPPORTED = "mnist"


@dataclass(frozen=True)
class SplitInfo:
    num_examples: int


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    splits: dict[str, SplitInfo] = field(default_factory=dict)


def disable_progress_bar() -> None:
    """There is no download, so no progress bar."""


def load(
    name: str,
    *,
    split: str | None = None,
    with_info: bool = False,
    as_supervised: bool = False,
    **_ignored: Any,
) -> Any:
    if name.split(":")[0] != SUPPORTED:
        raise ValueError(f"this image has no dataset {name!r} (no internet here): only {SUPPORTED!r}")
    import numpy as np
    import tensorflow as tf

    offline = importlib.import_module("tfjob_offline_data")  # beside this package in the image
    (x_train, y_train), (x_test, y_test) = offline.load_data(offline.LOCAL_MNIST)
    arrays = {"train": (x_train, y_train), "test": (x_test, y_test)}

    def dataset(images: Any, labels: Any) -> Any:
        images = images[..., np.newaxis]  # tfds' mnist images are [28, 28, 1]
        labels = labels.astype(np.int64)
        if as_supervised:
            return tf.data.Dataset.from_tensor_slices((images, labels))
        return tf.data.Dataset.from_tensor_slices({"image": images, "label": labels})

    splits = {key: dataset(*value) for key, value in arrays.items()}
    chosen = splits if split is None else splits[split]
    if not with_info:
        return chosen
    info = DatasetInfo(SUPPORTED, {key: SplitInfo(len(value[1])) for key, value in arrays.items()})
    return chosen, info
