"""hack/pip_requirements.py: the lists pip installs the project's venvs from (hack/install-deps.sh,
the Dockerfile), with tf-keras apart so that pip installs one TensorFlow, not two."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "hack" / "pip_requirements.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pip_requirements", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pip_requirements = load()


def lines(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_the_trainer_extra_without_tf_keras_then_tf_keras_alone() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    trainer = project["optional-dependencies"]["trainer"]
    with_dependencies = lines(str(REPO / "pyproject.toml"), "trainer")
    without = lines("--no-deps", str(REPO / "pyproject.toml"), "trainer")
    assert [r for r in without if r.startswith("tf-keras")] == without and len(without) == 1
    assert with_dependencies == project["dependencies"] + [r for r in trainer if r not in without]
    assert any(r.startswith("tensorflow-cpu") for r in with_dependencies)


def test_extras_in_order_each_requirement_once_and_none_left_out_but_tf_keras() -> None:
    pyproject = {
        "project": {
            "dependencies": ["pyyaml>=6"],
            "optional-dependencies": {
                "a": ["kubernetes==37.0.2", "TF_Keras==2.21.0", "numpy"],
                "b": ["numpy", "pytest>=8"],
            },
        }
    }
    everything = pip_requirements.requirements(pyproject, ["a", "b"])
    assert everything == ["pyyaml>=6", "kubernetes==37.0.2", "TF_Keras==2.21.0", "numpy", "pytest>=8"]
    assert pip_requirements.split(everything) == (
        ["pyyaml>=6", "kubernetes==37.0.2", "numpy", "pytest>=8"],
        ["TF_Keras==2.21.0"],
    )


@pytest.mark.parametrize(
    ("requirement", "name"),
    [
        ("tf-keras==2.21.0", "tf-keras"),
        ("TF_Keras>=2", "tf-keras"),
        ("tf.keras", "tf-keras"),
        ("numpy", "numpy"),
    ],
)
def test_names_are_normalized(requirement: str, name: str) -> None:
    assert pip_requirements.normalized_name(requirement) == name


def test_an_unknown_extra_or_a_missing_project_table_is_an_error() -> None:
    with pytest.raises(ValueError, match="no extra 'gpu'"):
        pip_requirements.requirements({"project": {"optional-dependencies": {}}}, ["gpu"])
    with pytest.raises(ValueError, match=r"no \[project\]"):
        pip_requirements.requirements({}, [])
    with pytest.raises(ValueError, match="not a requirement"):
        pip_requirements.normalized_name("==1.0")
