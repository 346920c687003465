"""A job's spec too large to hold: measured, cut to why, and refused by either kind's parser."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.kinds import TFJOBS
from tfmw_operator.api.objects import MAX_SPEC_CHARACTERS, cut_spec_reason, held_job, oversized_spec
from tfmw_operator.api.spec import SpecError, parse_job
from tfmw_operator.api.tfjob import MANAGED_BY_TFMW, SERVE_MANAGED_BY, parse_tfjob, serves
from wrappers import job

Json = dict[str, Any]


def padded(manifest: Json, characters: int) -> Json:
    """The manifest with its worker template's environment grown by about `characters`."""
    template = manifest["spec"].get("template") or manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    container = template["spec"]["containers"][0]
    container["env"] = [{"name": f"PAD{i}", "value": "x" * 1000} for i in range(characters // 1000 + 1)]
    return manifest


def test_a_spec_at_most_the_limit_is_held_whole() -> None:
    manifest = job("fits").manifest()
    assert oversized_spec(manifest) is None
    assert held_job(manifest) is manifest
    assert cut_spec_reason(manifest) is None


def test_a_spec_above_the_limit_is_held_as_why_and_the_parser_refuses_it_naming_the_fix() -> None:
    manifest = padded(job("big").manifest(), MAX_SPEC_CHARACTERS)
    held = held_job(manifest)
    assert held["metadata"] == manifest["metadata"]
    assert list(held["spec"]) == ["tfmw.dev/oversized-spec"]
    with pytest.raises(SpecError, match=r"spec is 1\d\d,\d\d\d characters of JSON, more than the 131,072"):
        parse_job(held)
    with pytest.raises(SpecError, match="ConfigMap"):
        parse_job(held)


def test_a_spec_nested_beyond_the_encoders_depth_is_held_as_why() -> None:
    manifest = job("deep").manifest()
    deep: Json = {}
    for _ in range(5000):
        deep = {"a": deep}
    manifest["spec"]["template"]["metadata"] = {"annotations": deep}
    reason = cut_spec_reason(held_job(manifest))
    assert reason is not None and "nested too deeply" in reason


def tfjob(managed_by: str | None) -> Json:
    spec: Json = {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}},
            }
        }
    }
    if managed_by is not None:
        spec["runPolicy"] = {"managedBy": managed_by}
    meta = {"name": "dist", "namespace": "ns", "uid": "u"}
    return {"apiVersion": "kubeflow.org/v1", "kind": TFJOBS.kind, "metadata": meta, "spec": spec}


def test_a_cut_tfjob_is_still_served_by_who_it_names_and_refused_when_parsed() -> None:
    handed = held_job(padded(tfjob(MANAGED_BY_TFMW), MAX_SPEC_CHARACTERS))
    assert serves(SERVE_MANAGED_BY, handed, False, False).served
    with pytest.raises(SpecError, match="characters of JSON"):
        parse_tfjob(handed)
    kubeflows = held_job(padded(tfjob(None), MAX_SPEC_CHARACTERS))
    assert not serves(SERVE_MANAGED_BY, kubeflows, False, False).served  # never touched by tfmw


def test_characters_beyond_ascii_count_once_not_as_their_escapes() -> None:
    manifest = job("wide").manifest()
    manifest["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": f"V{i}", "value": "漢" * 1000} for i in range(100)
    ]  # 100,000 characters, 600,000 as \\u escapes
    assert oversized_spec(manifest) is None
