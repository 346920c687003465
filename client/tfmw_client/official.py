"""The parts of the official `kubernetes` client that tfmw uses, imported without the rest.

`import kubernetes` runs the package's `__init__`, which imports every part of it: the
kubeconfig loader (and with it `ApiClient`, pydantic, oauthlib and requests), the dynamic
client, watch, stream, leader election and informers. Importing any submodule runs it too,
since Python imports a package before its modules. tfmw talks JSON over the official REST
client (`kubernetes.client.rest`) with the official `Configuration`, and needs none of that
(docs/benchmarks.md, "The CLI's start time").

So `kubernetes`, `kubernetes.config` and `kubernetes.utils` are put in `sys.modules` as the
packages they are (their spec, their path) with their `__init__` not yet run; their modules
then import as usual. The first time anything else is asked of one of them (a program in the
same process that uses `kubernetes.watch`, `kubernetes.config.load_kube_config`...), its
`__init__` runs then, and the package is whole: nothing is taken away, only put off.
`kubernetes.client`'s own `__init__` is run as usual: it is lazy (PEP 562) since 35.0.
tests/unit/client/test_official.py fails when a heavy module is imported again.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

# Packages whose __init__ imports far more than tfmw uses (see above).
DEFERRED = ("kubernetes", "kubernetes.config", "kubernetes.utils")
_lock = threading.RLock()  # a package completed may complete another while it runs


def _defer(name: str) -> None:
    """`name` in sys.modules as its package, its __init__ run on the first other attribute asked."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an installed package")
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    completed = False

    def complete(attribute: str) -> Any:
        # PEP 562: asked only for what the module does not have yet.
        nonlocal completed
        with _lock:
            if not completed:
                completed = True
                del package.__dict__["__getattr__"]
                loader.exec_module(package)
        try:
            return package.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    package.__dict__["__getattr__"] = complete
    sys.modules[name] = package


def module(name: str) -> ModuleType:
    """A module of the official client (`kubernetes.client.rest`...), imported without the
    deferred packages' __init__ (those already imported are used as they are)."""
    with _lock:
        for package in DEFERRED:
            if package not in sys.modules:
                _defer(package)
    return importlib.import_module(name)
