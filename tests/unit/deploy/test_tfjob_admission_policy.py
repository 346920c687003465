"""The TFJob admission policy's exception for Kueue holds every field of a TFJob but those
Kueue's TFJob integration writes (runPolicy.suspend; each pod set's node selector,
tolerations, scheduling gates, labels and annotations: RunWithPodSetsInfo), read from the
CRD itself: a field Kubeflow's CRD gains is held until someone decides otherwise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
COMPONENT = REPO / "deploy" / "overlays" / "tfjob" / "component"
POLICY = COMPONENT / "tfjob-admission-policy.yaml"
CHART = REPO / "charts" / "tfmw" / "templates" / "tfjob-admission-policy.yaml"
KUEUE_WRITES = {"nodeSelector", "tolerations", "schedulingGates"}


def crd_spec() -> dict[str, Any]:
    crd = yaml.safe_load((COMPONENT / "kubeflow.org_tfjobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    spec: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def kueue_exception() -> str:
    policy = next(yaml.safe_load_all(POLICY.read_text()))
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert policy["spec"]["validations"][0]["expression"] == (
        "variables.mayCreatePods || variables.kueueSchedulesASuspendedJob"
    )
    expression: str = variables["kueueSchedulesASuspendedJob"]
    return expression


def held(expression: str, path: str) -> bool:
    """Whether `<path>` is compared between the new object and the old."""
    return f"{path} == old" in expression.replace("\n", " ")


def test_every_pod_template_field_but_kueues_is_held() -> None:
    expression = kueue_exception()
    replica = crd_spec()["properties"]["tfReplicaSpecs"]["additionalProperties"]["properties"]
    pod_fields = set(replica["template"]["properties"]["spec"]["properties"])
    assert pod_fields >= KUEUE_WRITES
    for field in pod_fields - KUEUE_WRITES:
        assert held(expression, f"object.spec.tfReplicaSpecs[r].?template.?spec.?{field}"), field
    for field in KUEUE_WRITES:
        assert f"?spec.?{field}" not in expression, field
    for field in set(replica["template"]["properties"]["metadata"]["properties"]) - {"labels", "annotations"}:
        assert held(expression, f"object.spec.tfReplicaSpecs[r].?template.?metadata.?{field}"), field
    for field in set(replica) - {"template"}:
        assert held(expression, f"object.spec.tfReplicaSpecs[r].?{field}"), field


def test_every_other_field_of_the_job_is_held_and_only_a_suspended_job_moves() -> None:
    expression = kueue_exception()
    spec = crd_spec()["properties"]
    for field in set(spec) - {"tfReplicaSpecs", "runPolicy"}:
        assert held(expression, f"object.spec.?{field}"), field
    for field in set(spec["runPolicy"]["properties"]) - {"suspend"}:
        assert held(expression, f"object.spec.?runPolicy.?{field}"), field
    for field in ("labels", "annotations"):
        assert held(expression, f"object.metadata.?{field}"), field
    assert "request.operation == 'UPDATE'" in expression  # never a creation
    assert re.search(r"oldObject\.spec\.\?runPolicy\.\?suspend\.orValue\(false\)\s*\|\|", expression)


def test_the_chart_installs_the_same_policy() -> None:
    def policy_text(path: Path) -> str:
        text = path.read_text()
        return text[text.index("apiVersion:") : text.index("  validationActions:")]

    assert policy_text(CHART) == policy_text(POLICY)


def spec_held_policy(path: Path) -> str:
    """The second policy and its binding, from its `apiVersion:` on."""
    text = path.read_text()
    start = text.index("apiVersion:", text.index("name: tfmw-tfjob-spec-held") - 200)
    return text[start:]


def test_every_field_of_a_not_suspended_job_but_its_run_policy_is_held_and_managed_by_always() -> None:
    policy = [d for d in yaml.safe_load_all(POLICY.read_text()) if d["kind"] == "ValidatingAdmissionPolicy"][
        1
    ]
    assert policy["metadata"]["name"] == "tfmw-tfjob-spec-held"
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    named = variables["changedFields"]
    for field in set(crd_spec()["properties"]) - {"runPolicy", "tfReplicaSpecs"}:
        assert f"object.spec.?{field} == oldObject.spec.?{field}" in named, field
        assert f"'spec.{field}'" in named, field
    # Each set whole, and one that is gone.
    sets = " ".join(variables["changedSets"].split())
    assert "object.spec.tfReplicaSpecs[r] != oldObject.spec.tfReplicaSpecs[r]" in sets
    assert "oldObject.spec.?tfReplicaSpecs.orValue({}).filter(r, !(r in object.spec" in sets
    assert variables["suspended"] == (
        "oldObject.spec.?runPolicy.?suspend.orValue(false) || object.spec.?runPolicy.?suspend.orValue(false)"
    )
    managed_by, held_sets = (v["expression"] for v in policy["spec"]["validations"])
    assert managed_by == "object.spec.?runPolicy.?managedBy == oldObject.spec.?runPolicy.?managedBy"
    assert held_sets == "variables.suspended || variables.changedFields.size() == 0"
    (served,) = policy["spec"]["matchConditions"]
    assert served["expression"].startswith("[oldObject, object].exists(")  # before or after
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"]


def test_the_chart_installs_the_same_spec_policy_and_in_managed_by_mode_only_for_tfmws_jobs() -> None:
    overlay = spec_held_policy(POLICY).replace(
        "  validationActions: [Deny]",
        "  validationActions: {{ toJson .Values.admissionPolicy.validationActions }}",
    )
    chart = spec_held_policy(CHART).removesuffix("{{- end }}\n{{- end }}\n")
    served = "        in ['', 'tfmw.dev/tfjob-controller', 'kubeflow.org/training-operator'])\n"
    templated = (
        '        {{- if eq .Values.tfjob.serve "managedBy" }}\n'
        "        in ['tfmw.dev/tfjob-controller'])\n"
        "        {{- else }}\n" + served + "        {{- end }}\n"
    )
    assert chart == overlay.replace(served, templated)
    assert '{{- if ne .Values.tfjob.serve "off" }}' in CHART.read_text()
