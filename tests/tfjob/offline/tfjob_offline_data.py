"""The example images' one replacement: MNIST is read from this image, not downloaded.

Kubeflow's TFJob examples call `tensorflow.keras.datasets.mnist.load_data()`, which downloads
mnist.npz from the internet (and re-downloads any local copy whose hash differs); this
machine has none. Installed with a .pth line, this module registers an import hook that,
once Keras' own mnist module has loaded (Keras 3's `keras.src.datasets.mnist` or tf-keras's
`tf_keras.src.datasets.mnist`), replaces its `load_data` with one returning the same
((x_train, y_train), (x_test, y_test)) uint8 arrays from LOCAL_MNIST (made by make_mnist.py
from scikit-learn's digits). Nothing else in Keras or in the examples changes. Importing this
module costs no more than the standard library: Keras is patched only if the program loads it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

LOCAL_MNIST = "/opt/tfjob-offline/mnist.npz"
PATCHED = ("keras.src.datasets.mnist", "tf_keras.src.datasets.mnist")


def load_data(path: str = "mnist.npz") -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """keras.datasets.mnist.load_data's signature and return value, from the local file."""
    import numpy as np

    print(f"tfjob-offline: MNIST from {LOCAL_MNIST} (scikit-learn's digits, not downloaded)", file=sys.stderr)
    with np.load(LOCAL_MNIST, allow_pickle=False) as data:
        return (data["x_train"], data["y_train"]), (data["x_test"], data["y_test"])


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.real.exec_module(module)
        module.load_data = load_data  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in PATCHED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
