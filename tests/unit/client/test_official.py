"""The official client's REST transport imported without the package's heavy `__init__`s,
and the package made whole again the moment anything else of it is asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HEAVY = (
    "pydantic",
    "oauthlib",
    "requests",
    "kubernetes.config.kube_config",
    "kubernetes.watch",
    "kubernetes.dynamic",
)


def _run(*code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "client")}
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_rest_client_comes_without_the_loader_the_models_or_their_dependencies() -> None:
    printed = _run(
        "import sys",
        "from tfmw_client import official",
        "rest = official.module('kubernetes.client.rest')",
        "configuration = official.module('kubernetes.client.configuration').Configuration()",
        "rest.RESTClientObject(configuration)",
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))",
    )
    assert printed == ["[]"]


def test_a_program_that_uses_the_rest_of_the_package_afterwards_gets_all_of_it() -> None:
    printed = _run(
        "from tfmw_client import official",
        "official.module('kubernetes.client.rest')",
        "import kubernetes",
        "from kubernetes import config, watch",  # the deferred __init__s run now
        "print(kubernetes.__version__, callable(config.load_kube_config), watch.Watch.__name__)",
        "print(callable(kubernetes.utils.create_from_yaml))",
    )
    version, loader, watcher = printed[0].split()
    assert version[0].isdigit() and (loader, watcher) == ("True", "Watch")
    assert printed[1] == "True"


def test_an_attribute_the_package_does_not_have_is_still_an_attribute_error() -> None:
    printed = _run(
        "from tfmw_client import official",
        "official.module('kubernetes.client.rest')",
        "import kubernetes",
        "try:",
        "    kubernetes.no_such_thing",
        "except AttributeError as error:",
        "    print(error)",
    )
    assert printed == ["module 'kubernetes' has no attribute 'no_such_thing'"]
