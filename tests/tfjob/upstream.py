"""What the TFJob acceptance suite takes from Kubeflow's training-operator Go module, at
hack/versions.env's TFJOB_VERSION: the SDK's e2e test, the TFJob examples, the images they
name and the Dockerfile each image is built from. Everything is read from the module at run
time; nothing of it is copied into this repository.

The image a manifest names is found by its repository's last path segment in the module's
own image publishing workflow (.github/workflows/publish-example-images.yaml: component-name
-> dockerfile, built with the module root as context), so the names (registry hosts included)
are the module's, never written here.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MODULE = "github.com/kubeflow/training-operator"
E2E_TEST = Path("sdk/python/test/e2e/test_e2e_tfjob.py")
EXAMPLES = Path("examples/tensorflow")
PUBLISHING = Path(".github/workflows/publish-example-images.yaml")
Json = dict[str, Any]


def pinned_version() -> str:
    out = subprocess.run(
        ["bash", "-c", 'source "$1" && echo "$TFJOB_VERSION"', "-", str(REPO / "hack" / "versions.env")],
        check=True,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    return out.strip()


@cache
def module_dir(version: str | None = None) -> Path:
    """The module's source tree (read-only, in Go's module cache), downloaded if need be."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version or pinned_version()}"],
        cwd=REPO / "hack",
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    found: Json = json.loads(out)
    if "Error" in found:
        raise RuntimeError(f"go mod download {MODULE}: {found['Error']}")
    return Path(found["Dir"])


def repository_basename(image: str) -> str:
    """`host/path/name:tag` (or `@digest`) -> `name`."""
    return image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]


@dataclass(frozen=True)
class Manifest:
    """A TFJob of examples/tensorflow: its file and the document as written."""

    path: Path  # relative to the module root
    job: Json

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    def images(self) -> list[str]:
        return sorted(
            {
                container["image"]
                for spec in self.job["spec"]["tfReplicaSpecs"].values()
                for container in spec["template"]["spec"]["containers"]
            }
        )


def manifests(module: Path) -> list[Manifest]:
    """Every TFJob document in examples/tensorflow, in file order."""
    found = []
    for path in sorted((module / EXAMPLES).rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "TFJob":
                found.append(Manifest(path.relative_to(module), doc))
    return found


def notebooks(module: Path) -> list[Path]:
    return sorted(p.relative_to(module) for p in (module / EXAMPLES).rglob("*.ipynb"))


def notebook_code(module: Path, notebook: Path) -> list[str]:
    """The notebook's code cells, in order."""
    cells = json.loads((module / notebook).read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


IMAGE_ARGUMENT = re.compile(r"""\bimage\s*=\s*["']([^"']+)["']""")


def images_in_python(source: str) -> list[str]:
    """The `image="..."` arguments of Python source (the SDK test, a notebook's cells)."""
    return sorted(set(IMAGE_ARGUMENT.findall(source)))


def image_uses(module: Path) -> dict[str, list[str]]:
    """Every image the TFJob e2e test and examples name -> the files that name it."""
    uses: dict[str, list[str]] = {}
    for image in images_in_python((module / E2E_TEST).read_text()):
        uses.setdefault(image, []).append(str(E2E_TEST))
    for manifest in manifests(module):
        for image in manifest.images():
            uses.setdefault(image, []).append(str(manifest.path))
    for notebook in notebooks(module):
        for image in images_in_python("\n".join(notebook_code(module, notebook))):
            uses.setdefault(image, []).append(str(notebook))
    return uses


def published_dockerfiles(module: Path) -> dict[str, tuple[Path, Path]]:
    """component-name -> (Dockerfile, build context), from the module's publishing workflow."""
    workflow = yaml.safe_load((module / PUBLISHING).read_text())
    found = {}
    for job in workflow["jobs"].values():
        for entry in job.get("strategy", {}).get("matrix", {}).get("include", []):
            found[entry["component-name"]] = (Path(entry["dockerfile"]), Path(entry.get("context") or "."))
    return found


@dataclass
class Recipe:
    """An example image's Dockerfile, as applied on the local base instead of its FROM.

    ADD, COPY, ENV, WORKDIR, ENTRYPOINT and CMD are applied as written (sources from the
    module, the Dockerfile's build context). FROM and RUN are not: the base is the trainer
    image (TensorFlow 2.21, tf-keras) and their package installs are what it has or what
    tests/tfjob/offline replaces; they are listed in `replaced`. `legacy_keras` says which
    Keras the replaced base gave `tf.keras`: TensorFlow before 2.16 had Keras 2 (tf-keras
    here), 2.16 and later Keras 3; an ENV in the Dockerfile has the last word.
    """

    component: str
    dockerfile: Path
    context: Path
    names: list[str] = field(default_factory=list)
    steps: list[tuple[str, list[str]]] = field(default_factory=list)  # (ADD|COPY, [sources..., dest])
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    replaced: list[str] = field(default_factory=list)
    legacy_keras: bool | None = None


TENSORFLOW_VERSION = re.compile(r"tensorflow(?:/tensorflow:|==)(\d+)\.(\d+)")


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    out = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def exec_form(arguments: str) -> list[str]:
    parsed = json.loads(arguments) if arguments.startswith("[") else ["/bin/sh", "-c", arguments]
    return [str(a) for a in parsed]


def env_pairs(arguments: str) -> dict[str, str]:
    if "=" not in arguments.split(" ", 1)[0]:  # ENV KEY VALUE
        key, _, value = arguments.partition(" ")
        return {key: value.strip()}
    pairs = {}
    for item in re.findall(r'(\S+?)=("[^"]*"|\S+)', arguments):
        pairs[item[0]] = item[1].strip('"')
    return pairs


def recipe(module: Path, component: str, dockerfile: Path, context: Path) -> Recipe:
    made = Recipe(component, dockerfile, context)
    for keyword, arguments in instructions((module / dockerfile).read_text()):
        version = TENSORFLOW_VERSION.search(arguments)
        if keyword in ("FROM", "RUN"):
            made.replaced.append(f"{keyword} {arguments}")
            if version:
                made.legacy_keras = (int(version[1]), int(version[2])) < (2, 16)
        elif keyword in ("ADD", "COPY"):
            made.steps.append((keyword, arguments.split()))
        elif keyword == "ENV":
            made.env.update(env_pairs(arguments))
        elif keyword == "WORKDIR":
            made.workdir = arguments
        elif keyword == "ENTRYPOINT":
            made.entrypoint = exec_form(arguments)
        elif keyword == "CMD":
            made.cmd = exec_form(arguments)
        else:
            raise ValueError(f"{dockerfile}: {keyword} is not understood by this builder")
    return made


def recipes(module: Path) -> list[Recipe]:
    """One recipe per Dockerfile the e2e test and examples need, with every name it takes."""
    published = published_dockerfiles(module)
    by_component: dict[str, Recipe] = {}
    for image in sorted(image_uses(module)):
        component = repository_basename(image)
        if component not in published:
            raise ValueError(f"{image}: no Dockerfile for {component} in {PUBLISHING}")
        if component not in by_component:
            by_component[component] = recipe(module, component, *published[component])
        by_component[component].names.append(image)
    return sorted(by_component.values(), key=lambda r: r.component)
