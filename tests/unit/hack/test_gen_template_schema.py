"""The CRD's pod template schema (hack/gen_template_schema.py): the names it reserves."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import yaml
from kube import REPO
from tfmw_operator.api.names import FOLDER_CHECK_CONTAINER


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_template_schema", REPO / "hack" / "gen_template_schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_template_schema"] = module
    spec.loader.exec_module(module)
    return module


def test_the_folder_checks_name_is_the_operators() -> None:
    assert generator().FOLDER_CHECK_CONTAINER == FOLDER_CHECK_CONTAINER


def test_every_template_refuses_an_init_container_named_as_the_folder_check() -> None:
    crd = yaml.safe_load((REPO / "crds" / "tfmwjobs.tfmw.dev.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for path in generator().TEMPLATES:
        node = spec
        for field in path:
            node = node["properties"][field]
        items = node["properties"]["spec"]["properties"]["initContainers"]["items"]
        (rule,) = items["x-kubernetes-validations"]
        assert rule["rule"] == "self.name != 'tfmw-folder-check'", path
        assert "rename this one" in rule["message"]
