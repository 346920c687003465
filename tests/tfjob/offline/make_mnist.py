"""Writes the local stand-in for MNIST that the example images read instead of downloading
it: scikit-learn's 1,797 handwritten 8x8 digits (shipped inside its wheel, read the way the
trainer reads them: tfmw_trainer.data), each scaled up 3x to 24x24 and centred in 28x28, pixel
values 0..255 as uint8, labels uint8: MNIST's shapes and types (keras.datasets.mnist's
mnist.npz: x_train, y_train, x_test, y_test), with 1,438 training and 359 test images.

Run once at image build time: python3 make_mnist.py /opt/tfjob-offline/mnist.npz
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
from tfmw_trainer.data import digits_file

SCALE = 3  # 8 x 3 = 24 pixels, then a 2-pixel border as MNIST's digits have
TEST_SHARE = 0.2


def mnist_shaped() -> dict[str, np.ndarray]:
    with gzip.open(digits_file(), "rt") as text:
        table = np.loadtxt(text, delimiter=",", dtype=np.float64)
    small = table[:, :-1].reshape(-1, 8, 8) / 16.0  # 0..16 in the file
    large = np.kron(small, np.ones((SCALE, SCALE)))
    images = np.pad(np.rint(large * 255), ((0, 0), (2, 2), (2, 2))).astype(np.uint8)
    labels = table[:, -1].astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(images))
    held_out = int(len(images) * TEST_SHARE)
    test, train = order[:held_out], order[held_out:]
    return {
        "x_train": images[train],
        "y_train": labels[train],
        "x_test": images[test],
        "y_test": labels[test],
    }


def main() -> None:
    target = Path(sys.argv[1])
    target.parent.mkdir(parents=True, exist_ok=True)
    arrays = mnist_shaped()
    np.savez_compressed(target, **arrays)  # type: ignore[arg-type]
    print(f"wrote {target}: " + ", ".join(f"{k} {v.shape} {v.dtype}" for k, v in arrays.items()))


if __name__ == "__main__":
    main()
