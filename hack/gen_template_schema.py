"""Writes the full core/v1 PodSpec schema into the CRD's `spec.template.spec`, from the
API server's own OpenAPI, so that `kubectl apply` refuses a typo in a pod template.

    python3 hack/gen_template_schema.py openapi-v1.json crds/tfmwjobs.tfmw.dev.yaml
    python3 hack/gen_template_schema.py --check openapi-v1.json crds/tfmwjobs.tfmw.dev.yaml

The OpenAPI comes from `kubectl get --raw /openapi/v3/api/v1` on the pinned Kubernetes.
References are inlined, descriptions dropped (the CRD stays small enough to apply), the
Kubernetes-only markers the CRD schema does not allow removed, and tfmw's own rules (at
least one container, no TF_CONFIG/TFMW_* variables, bounded lists for CEL) kept.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

Json = dict[str, Any]
REF = "#/components/schemas/"
# Kept of the Kubernetes extensions: the list and map types only matter to server-side
# apply of the job itself, and map lists would need defaults for their keys.
KEEP_EXTENSIONS = {"x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields"}
DROP = {"description", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key", "x-kubernetes-unions"}
# CEL rules need bounded lists to fit the API server's cost budget.
MAX_CONTAINERS = 64
MAX_ENV = 256
MAX_VOLUMES = 256  # spec's rule refusing a second mount of the job's claim walks them
MAX_NAME = 253  # and compares their claim names
# On each variable, not on the whole PodSpec: a rule there cost a job's create 0.4 ms more
# in CEL (the API server's own metrics), and its error named no container.
NOT_INJECTED = "self.name != 'TF_CONFIG' && !self.name.startsWith('TFMW_')"
# api/names.py's FOLDER_CHECK_CONTAINER: this script runs without the operator's package
# (tests/unit/hack/test_gen_template_schema.py holds them equal).
FOLDER_CHECK_CONTAINER = "tfmw-folder-check"


def inline(node: Any, schemas: Json, seen: tuple[str, ...] = ()) -> Any:
    """The schema with every $ref replaced by its target, in CRD-schema form."""
    if isinstance(node, list):
        return [inline(item, schemas, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "allOf" in node and len(node["allOf"]) == 1:
        merged = {k: v for k, v in node.items() if k != "allOf"}
        return inline({**node["allOf"][0], **merged}, schemas, seen)
    if "$ref" in node:
        name = node["$ref"].removeprefix(REF)
        if name in seen:  # no recursion in PodSpec today; keep the schema finite regardless
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return inline(
            {**schemas[name], **{k: v for k, v in node.items() if k != "$ref"}}, schemas, (*seen, name)
        )
    if node.get("format") == "int-or-string" or _is_quantity(node):
        return {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    result: Json = {}
    for key, value in node.items():
        if key in DROP or (key.startswith("x-") and key not in KEEP_EXTENSIONS):
            continue
        if key == "default":
            continue  # the API server's own defaulting applies when the pod is created
        if key == "properties":
            result[key] = {name: inline(schema, schemas, seen) for name, schema in value.items()}
        else:
            result[key] = inline(value, schemas, seen)
    if result.get("type") == "object" and "properties" not in result and "additionalProperties" not in result:
        result["x-kubernetes-preserve-unknown-fields"] = True
    return result


def _is_quantity(node: Json) -> bool:
    return node.get("oneOf") == [{"type": "string"}, {"type": "number"}]


def pod_spec_schema(openapi: Json) -> Json:
    schemas = openapi["components"]["schemas"]
    spec: Json = inline({"$ref": REF + "io.k8s.api.core.v1.PodSpec"}, schemas)
    spec["required"] = ["containers"]
    containers = spec["properties"]["containers"]
    containers.update(minItems=1, maxItems=MAX_CONTAINERS)
    containers["items"]["required"] = ["name", "image"]  # a worker needs something to run
    containers["description"] = (
        'At least one container; the one named "tensorflow" (or the first) gets the port.'
    )
    for field in ("initContainers", "ephemeralContainers"):
        spec["properties"][field]["maxItems"] = MAX_CONTAINERS
    # The operator's own init container: its exit status is what the claim check trusts (a pod
    # built without the check would run the template's container of that name instead).
    spec["properties"]["initContainers"]["items"]["x-kubernetes-validations"] = [
        {
            "rule": f"self.name != '{FOLDER_CHECK_CONTAINER}'",
            "message": f"{FOLDER_CHECK_CONTAINER} is the name of the operator's own init container: "
            "rename this one",
        }
    ]
    volumes = spec["properties"]["volumes"]
    items = volumes.pop("items")
    volumes.update(maxItems=MAX_VOLUMES, items=items)
    items["properties"]["persistentVolumeClaim"]["properties"]["claimName"]["maxLength"] = MAX_NAME
    for field in ("containers", "initContainers"):
        env = spec["properties"][field]["items"]["properties"]["env"]
        env["maxItems"] = MAX_ENV
        env["items"]["x-kubernetes-validations"] = [
            {
                "rule": NOT_INJECTED,
                "message": "TF_CONFIG and TFMW_* variables are set by the operator: remove this one "
                "from the pod template",
            }
        ]
    return spec


# Every pod template of a job: the workers', and the chief's, parameter servers' and
# evaluator's of their own.
TEMPLATES = (
    ("template",),
    ("chief", "template"),
    ("parameterServers", "template"),
    ("evaluator", "template"),
)


def with_template_schema(crd: Json, spec: Json) -> Json:
    version = crd["spec"]["versions"][0]
    job_spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for path in TEMPLATES:
        node = job_spec
        for field in path:
            node = node["properties"][field]
        node["properties"]["spec"] = copy.deepcopy(spec)  # a copy each: no YAML anchors
    return crd


def render(crd: Json) -> str:
    header = "# Generated in part by hack/gen_template_schema.py (the pod template schemas); edit the rest by hand.\n"  # noqa: E501
    return header + yaml.safe_dump(crd, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only say whether the CRD is current")
    parser.add_argument("openapi", type=Path)
    parser.add_argument("crd", type=Path)
    args = parser.parse_args(argv)
    current = args.crd.read_text()
    crd = yaml.safe_load(current)
    wanted = render(with_template_schema(crd, pod_spec_schema(json.loads(args.openapi.read_text()))))
    if args.check:
        if wanted != current:
            print(f"{args.crd} is not current: run hack/gen-crd.sh", file=sys.stderr)
            return 1
        return 0
    args.crd.write_text(wanted)
    print(f"wrote {args.crd} ({len(wanted) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
