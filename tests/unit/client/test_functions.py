"""A function made into a job's program: what is refused before submission, with the name,
and that what is accepted runs alone in a fresh interpreter."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tfmw_client.errors import TfmwError
from tfmw_client.functions import function_program

LEARNING_RATE = 0.1


def trains(epochs: int, name: str = "x") -> None:
    """Uses only what it imports."""
    import json
    import os

    def helper(value: int) -> int:
        return value * 2

    squares = [i * i for i in range(epochs)]
    print(json.dumps({"epochs": helper(epochs), "name": name, "squares": squares, "cwd": bool(os.getcwd())}))
    if epochs < 0:
        trains(0)  # itself, by name: defined in the program


def uses_a_module_it_did_not_import() -> None:
    print(json.dumps({}))


def uses_a_notebook_global() -> None:
    print(LEARNING_RATE)


def uses_an_imported_function() -> None:
    print(Path("."))


def uses_nothing_defined() -> None:
    print(undefined_thing)  # type: ignore[name-defined]  # noqa: F821


def relative_import() -> None:
    from . import jobs  # noqa: F401


def local_module() -> None:
    import tfmw_local_helper  # type: ignore[import-not-found]  # noqa: F401


def generator() -> Iterator[int]:
    yield 1


async def coroutine() -> None:
    pass


@functools.lru_cache
def decorated(epochs: int) -> None:
    import sys

    print("decorated", epochs, file=sys.stdout)


def annotated(config: Path | None = None) -> None:
    def inner(value: LEARNING_RATE_TYPE) -> Iterator[int]:  # type: ignore[name-defined]  # noqa: F821
        yield value

    print("annotated", config, list(inner(1)))


class Trainer:
    def fit(self) -> None:
        pass


def refusal(fn: Any, parameters: dict[str, Any] | None = None) -> TfmwError:
    with pytest.raises(TfmwError) as raised:
        function_program(fn, parameters)
    return raised.value


def run(program: str, tmp_path: Path) -> str:
    script = tmp_path / "program.py"
    script.write_text(program)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_self_contained_function_runs_alone_with_its_parameters(tmp_path: Path) -> None:
    made = function_program(trains, {"epochs": 3, "name": "mnist"})
    assert made.filename == "trains.py" and made.warnings == ()
    printed = json.loads(run(made.source, tmp_path))
    assert printed == {"epochs": 6, "name": "mnist", "squares": [0, 1, 4], "cwd": True}


def test_decorators_are_left_out_and_annotations_never_evaluated(tmp_path: Path) -> None:
    made = function_program(decorated, {"epochs": 2})
    assert made.warnings == ("`decorated` runs in the job without its decorators",)
    assert run(made.source, tmp_path) == "decorated 2\n"
    assert run(function_program(annotated).source, tmp_path) == "annotated None [1]\n"


def test_a_module_used_without_import_is_refused_with_the_import_to_add() -> None:
    error = refusal(uses_a_module_it_did_not_import)
    assert "`json` (import it inside the function: `import json`)" in error.message
    assert "without the notebook's globals" in error.fix


def test_a_notebook_global_is_refused_with_the_way_to_pass_it() -> None:
    assert (
        "`LEARNING_RATE` (a global of the notebook: pass it in parameters="
        in refusal(uses_a_notebook_global).message
    )
    assert (
        "`Path` (import it inside the function: `from pathlib import Path`)"
        in refusal(uses_an_imported_function).message
    )
    assert "`undefined_thing` (defined nowhere)" in refusal(uses_nothing_defined).message


def test_lambdas_closures_methods_generators_and_coroutines_are_refused_by_name() -> None:
    assert "it is a lambda" in refusal(lambda: None).message
    factor = 3

    def closure() -> int:
        return factor

    assert "a closure over `factor`" in refusal(closure).message
    assert "it is a method" in refusal(Trainer().fit).message
    assert "a generator" in refusal(generator).message
    assert "it is async" in refusal(coroutine).message
    assert "not a function defined with def" in refusal(print).message


def test_imports_that_cannot_work_in_the_job_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "relative import" in refusal(relative_import).message
    (tmp_path / "tfmw_local_helper.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    error = refusal(local_module)
    assert "imports `tfmw_local_helper`, a module of your own folder" in error.message
    assert "tfmw submit FOLDER" in error.fix


def test_a_module_not_installed_here_is_a_warning_not_a_refusal() -> None:
    assert function_program(local_module).warnings == (
        "`local_module` imports `tfmw_local_helper`, which is not installed here: the image must have it, "
        "or name it in packages=[...]",
    )
    assert function_program(local_module, packages=["tfmw-local-helper"]).warnings == ()


def test_parameters_must_be_json_and_fit_the_signature() -> None:
    assert "not JSON" in refusal(trains, {"epochs": object()}).message
    assert "do not fit its signature" in refusal(trains, {"epoch": 3}).message
