"""The training data: real handwritten digits by default, MNIST from the shared volume, or a
synthetic task for fast tests. Every worker loads the same arrays and shards them itself.

- `digits`: the 1,797 8x8 digits that scikit-learn ships inside its wheel (read straight
  from the package's data folder, so nothing is downloaded and scikit-learn is not imported);
- a path to the standard `mnist.npz` (`x_train`, `y_train`, `x_test`, `y_test`), relative
  paths taken inside the job's shared folder;
- `synthetic`: a linearly separable two-class task, learnable in a few steps.
"""

from __future__ import annotations

import gzip
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
LabelArray = npt.NDArray[np.int32]

DIGITS = "digits"
SYNTHETIC = "synthetic"
TEST_FRACTION = 0.2
SYNTHETIC_FEATURES = 8


class DataError(ValueError):
    """The data named by --data cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: FloatArray
    y_train: LabelArray
    x_test: FloatArray  # held out: never trained on
    y_test: LabelArray
    classes: int

    @property
    def features(self) -> int:
        return int(self.x_train.shape[1])


def load(source: str, shared_dir: Path, seed: int, samples: int = 1024) -> Dataset:
    if source == DIGITS:
        return digits(seed)
    if source == SYNTHETIC:
        return synthetic(samples, SYNTHETIC_FEATURES, seed)
    path = Path(source)
    return mnist(path if path.is_absolute() else shared_dir / path)


def _split(name: str, x: FloatArray, y: LabelArray, classes: int, seed: int) -> Dataset:
    order = np.random.default_rng(seed).permutation(len(x))
    held_out = int(len(x) * TEST_FRACTION)
    test, train = order[:held_out], order[held_out:]
    return Dataset(name, x[train], y[train], x[test], y[test], classes)


def digits_file() -> Path:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("--data=digits needs scikit-learn installed (it ships the digits); or pass --data")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"


def digits(seed: int) -> Dataset:
    """scikit-learn's 8x8 digits (pixel values 0..16), scaled to 0..1."""
    with gzip.open(digits_file(), "rt") as text:
        table = np.loadtxt(text, delimiter=",", dtype=np.float32)
    x = (table[:, :-1] / 16.0).astype(np.float32)
    y = table[:, -1].astype(np.int32)
    return _split(DIGITS, x, y, 10, seed)


def mnist(path: Path) -> Dataset:
    """The standard mnist.npz, as Keras distributes it; pixels scaled to 0..1."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in ("x_train", "y_train", "x_test", "y_test")}
    except FileNotFoundError:
        raise DataError(f"--data: {path} does not exist; copy mnist.npz to the job's shared folder") from None
    except (KeyError, ValueError, OSError) as error:
        raise DataError(
            f"--data: {path} is not mnist.npz (x_train, y_train, x_test, y_test): {error}"
        ) from None

    def flat(images: npt.NDArray[np.generic]) -> FloatArray:
        return (images.reshape(len(images), -1).astype(np.float32) / 255.0).astype(np.float32)

    return Dataset(
        "mnist",
        flat(arrays["x_train"]),
        arrays["y_train"].astype(np.int32),
        flat(arrays["x_test"]),
        arrays["y_test"].astype(np.int32),
        10,
    )


def synthetic(samples: int, features: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype(np.float32)
    weights = np.linspace(1.0, -1.0, features, dtype=np.float32)
    score = x @ weights + 0.1 * rng.normal(size=samples).astype(np.float32)
    y = (score > 0).astype(np.int32)
    return _split(SYNTHETIC, x, y, 2, seed)


IndexArray = npt.NDArray[np.int64]


def worker_share(global_batch: int, workers: int, index: int) -> tuple[int, int]:
    """Where worker `index` of `workers` takes its part of every global batch, and how many
    examples: the global batch divided as evenly as it goes, the first `global_batch % workers`
    workers taking one more. Loss averaged over the global batch (`compute_average_loss` with
    `global_batch_size`) then weighs every example alike, whatever the parts."""
    if not 0 <= index < workers:
        raise ValueError(f"worker {index} is not one of {workers}")
    if global_batch < workers:
        raise DataError(
            f"the global batch of {global_batch} cannot be shared by {workers} workers: "
            "each needs at least one example; use a larger --global-batch-size"
        )
    base, extra = divmod(global_batch, workers)
    return index * base + min(index, extra), base + (1 if index < extra else 0)


class ExampleStream:
    """The order in which training sees the examples, the same whatever the number of workers.

    An endless sequence of passes over the training set, pass `r` a permutation seeded by
    (seed, r). Global step `k` (from 0) trains the examples at positions `k*G` to `k*G + G - 1`
    of it, G the global batch, each worker its share (`worker_share`). A checkpoint records
    the positions consumed, so a gang that resumes from it, with any number of workers, goes
    on at the next position: every example is seen as often as in a run never interrupted.
    """

    def __init__(self, size: int, seed: int) -> None:
        if size <= 0:
            raise DataError("the training set is empty")
        self.size = size
        self.seed = seed
        self._passes: dict[int, IndexArray] = {}

    def permutation(self, number: int) -> IndexArray:
        order = self._passes.get(number)
        if order is None:
            order = np.random.default_rng([self.seed, number]).permutation(self.size).astype(np.int64)
            if len(self._passes) >= 2:  # a batch spans at most two passes at a time
                self._passes.pop(min(self._passes))
            self._passes[number] = order
        return order

    def indices(self, start: int, count: int) -> IndexArray:
        """The examples at positions `start` .. `start + count - 1`."""
        parts = []
        position, end = start, start + count
        while position < end:
            number, offset = divmod(position, self.size)
            take = min(end - position, self.size - offset)
            parts.append(self.permutation(number)[offset : offset + take])
            position += take
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def worker_batches(self, start: int, global_batch: int, workers: int, index: int) -> Iterator[IndexArray]:
        """Worker `index`'s part of each global batch, from position `start` on, for ever."""
        offset, count = worker_share(global_batch, workers, index)
        position = start
        while True:
            yield self.indices(position + offset, count)
            position += global_batch
