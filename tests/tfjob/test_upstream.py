"""What the suite reads from training-operator's module (no cluster): every image the e2e
test, the examples and the notebook name has a Dockerfile in the module's publishing
workflow, and each Dockerfile is read into what the build applies and what it replaces."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfjob.upstream import (
    E2E_TEST,
    image_uses,
    instructions,
    module_dir,
    pinned_version,
    recipes,
    repository_basename,
)


@pytest.fixture(scope="module")
def module() -> Path:
    return module_dir(pinned_version())


def test_the_pinned_module_has_the_e2e_test_its_helpers_and_the_examples(module: Path) -> None:
    for path in (E2E_TEST, E2E_TEST.with_name("utils.py"), E2E_TEST.with_name("constants.py")):
        assert (module / path).is_file(), path
    assert (module / "sdk" / "python" / "test" / "conftest.py").is_file()
    assert (module / "examples" / "tensorflow").is_dir()


def test_every_image_named_is_built_from_a_published_dockerfile(module: Path) -> None:
    named = set(image_uses(module))
    built = {name for made in recipes(module) for name in made.names}
    assert built == named
    assert any(str(E2E_TEST) in files for files in image_uses(module).values())


def test_each_dockerfile_is_applied_with_its_from_and_runs_replaced(module: Path) -> None:
    by_component = {made.component: made for made in recipes(module)}
    for made in by_component.values():
        assert made.entrypoint and made.entrypoint[0] == "python", made
        assert made.steps, made  # the example's program is added from the module
        assert any(line.startswith("FROM ") for line in made.replaced)
        for _, arguments in made.steps:
            for source in arguments[:-1]:
                assert (module / made.context / source).exists(), source
    # Which Keras tf.keras was in the image each replaced: TensorFlow 2.11 (Keras 2) for the
    # multi-worker example, 2.17 (Keras 3) for the others; dist-mnist asks for tf-keras itself.
    legacy = {c: (m.legacy_keras, m.env.get("TF_USE_LEGACY_KERAS")) for c, m in by_component.items()}
    assert legacy == {
        "tf-dist-mnist-test": (False, "1"),
        "tf-mnist-with-summaries": (False, None),
        "tf-multi-worker-strategy": (True, None),
    }


def test_dockerfile_instructions_join_continuations_and_drop_comments() -> None:
    text = "# c\nFROM python:3.9\n\nRUN apt-get update && \\\n    apt-get install -y x\nENV A 1\n"
    assert instructions(text) == [
        ("FROM", "python:3.9"),
        ("RUN", "apt-get update &&  apt-get install -y x"),
        ("ENV", "A 1"),
    ]


@pytest.mark.parametrize(
    ("image", "basename"),
    [("host/a/b/name:tag", "name"), ("name", "name"), ("host:5000/x/name@sha256:00", "name")],
)
def test_repository_basename(image: str, basename: str) -> None:
    assert repository_basename(image) == basename
