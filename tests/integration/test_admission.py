"""Admission: invalid manifests are refused by `kubectl apply` with a message naming the field."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import REPO, ClusterClient, kubectl
from wrappers import job

CRD = REPO / "crds" / "tfmwjobs.tfmw.dev.yaml"

Json = dict[str, Any]


def mutate(change: Callable[[Json], None]) -> Json:
    manifest = job("adm").manifest()
    change(manifest)
    return manifest


def spec(**fields: Any) -> Callable[[Json], None]:
    return lambda m: m["spec"].update(fields)


def run_policy(**fields: Any) -> Callable[[Json], None]:
    return lambda m: m["spec"].setdefault("runPolicy", {}).update(fields)


def completion(**fields: Any) -> Callable[[Json], None]:
    return lambda m: m["spec"].setdefault("completion", {}).update(fields)


def container(**fields: Any) -> Callable[[Json], None]:
    return lambda m: m["spec"]["template"]["spec"]["containers"][0].update(fields)


def delete(*path: str) -> Callable[[Json], None]:
    def change(m: Json) -> None:
        node = m
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


def name(value: str) -> Callable[[Json], None]:
    return lambda m: m["metadata"].update(name=value)


INVALID: list[tuple[str, Callable[[Json], None], str]] = [
    ("zero workers", spec(workers=0), "spec.workers"),
    ("too many workers", spec(workers=1025), "spec.workers"),
    ("workers as text", spec(workers="two"), "spec.workers"),
    ("workers missing", delete("spec", "workers"), "spec.workers"),
    ("port zero", spec(port=0), "spec.port"),
    ("port too high", spec(port=70000), "spec.port"),
    ("port as text", spec(port="grpc"), "spec.port"),
    ("sharedVolume missing", delete("spec", "sharedVolume"), "spec.sharedVolume"),
    ("claimName missing", spec(sharedVolume={"mountPath": "/shared"}), "spec.sharedVolume.claimName"),
    ("claimName empty", spec(sharedVolume={"claimName": ""}), "spec.sharedVolume.claimName"),
    (
        "relative mountPath",
        spec(sharedVolume={"claimName": "c", "mountPath": "shared"}),
        "spec.sharedVolume.mountPath",
    ),
    ("absolute markerFile", completion(markerFile="/tmp/done"), "spec.completion.markerFile"),
    ("markerFile climbing out", completion(markerFile="../done"), "spec.completion.markerFile"),
    (
        "markerFile climbing in the middle",
        completion(markerFile="a/../../done"),
        "spec.completion.markerFile",
    ),
    ("markerFile '.'", completion(markerFile="."), "spec.completion.markerFile"),
    ("markerFile with an empty segment", completion(markerFile="out//done"), "spec.completion.markerFile"),
    ("markerFile ending in a slash", completion(markerFile="out/"), "spec.completion.markerFile"),
    ("markerFile with a '.' segment", completion(markerFile="./done"), "spec.completion.markerFile"),
    ("claimName with capitals", spec(sharedVolume={"claimName": "Bad_Name"}), "spec.sharedVolume.claimName"),
    ("claimName with a slash", spec(sharedVolume={"claimName": "a/b"}), "spec.sharedVolume.claimName"),
    (
        "negative restart grace",
        run_policy(restartGracePeriodSeconds=-1),
        "spec.runPolicy.restartGracePeriodSeconds",
    ),
    ("negative grace", completion(chiefExitGraceSeconds=-1), "spec.completion.chiefExitGraceSeconds"),
    ("unknown restartPolicy", run_policy(restartPolicy="Always"), "spec.runPolicy.restartPolicy"),
    ("negative backoffLimit", run_policy(backoffLimit=-1), "spec.runPolicy.backoffLimit"),
    ("zero deadline", run_policy(activeDeadlineSeconds=0), "spec.runPolicy.activeDeadlineSeconds"),
    ("zero pending timeout", run_policy(pendingTimeoutSeconds=0), "spec.runPolicy.pendingTimeoutSeconds"),
    ("negative ttl", run_policy(ttlSecondsAfterFinished=-5), "spec.runPolicy.ttlSecondsAfterFinished"),
    ("unknown cleanPodPolicy", run_policy(cleanPodPolicy="Some"), "spec.runPolicy.cleanPodPolicy"),
    ("suspend as text", run_policy(suspend="yes"), "spec.runPolicy.suspend"),
    (
        "zero progress deadline",
        run_policy(progressDeadlineSeconds=0),
        "spec.runPolicy.progressDeadlineSeconds",
    ),
    (
        "unknown progressDeadlinePolicy",
        run_policy(progressDeadlineSeconds=60, progressDeadlinePolicy="Page"),
        "spec.runPolicy.progressDeadlinePolicy",
    ),
    (
        "progressDeadlinePolicy without a deadline",
        run_policy(progressDeadlinePolicy="Fail"),
        "spec.runPolicy.progressDeadlinePolicy needs spec.runPolicy.progressDeadlineSeconds",
    ),
    ("template missing", delete("spec", "template"), "spec.template"),
    ("template without spec", spec(template={"metadata": {}}), "spec.template.spec"),
    ("no containers", spec(template={"spec": {"containers": []}}), "spec.template.spec.containers"),
    ("containers missing", spec(template={"spec": {}}), "spec.template.spec.containers"),
    (
        "container without image",
        lambda m: m["spec"]["template"]["spec"].update(containers=[{"name": "tf"}]),
        "image",
    ),
    (
        "typo in a container field",
        container(imagePullPolicyy="Always"),
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy"',
    ),
    (
        "typo in the pod spec",
        lambda m: m["spec"]["template"]["spec"].update(restartPolicyy="Never"),
        'unknown field "spec.template.spec.restartPolicyy"',
    ),
    (
        "port as text in a container",
        container(ports=[{"containerPort": "http"}]),
        "spec.template.spec.containers[0].ports[0].containerPort",
    ),
    (
        "unknown restartPolicy in the pod spec",
        lambda m: m["spec"]["template"]["spec"].update(restartPolicy="Sometimes"),
        "spec.template.spec.restartPolicy",
    ),
    ("TF_CONFIG in env", container(env=[{"name": "TF_CONFIG", "value": "{}"}]), "TF_CONFIG"),
    ("TFMW_ variable in env", container(env=[{"name": "TFMW_WORKER_INDEX", "value": "3"}]), "TFMW_"),
    (
        "TFMW_ variable deep in a second container",
        lambda m: m["spec"]["template"]["spec"]["containers"].append(
            {
                "name": "side",
                "image": "busybox",
                "env": [{"name": "OK", "value": "1"}, {"name": "TFMW_X", "value": "1"}],
            }
        ),
        "spec.template.spec.containers[1].env[1]",
    ),
    (
        "TF_CONFIG in an init container",
        lambda m: m["spec"]["template"]["spec"].update(
            initContainers=[
                {"name": "init", "image": "busybox", "env": [{"name": "TF_CONFIG", "value": "x"}]}
            ]
        ),
        "initContainers",
    ),
    ("name too long for its pods", name("a" * 56), "metadata.name"),
    (
        "name too long for 100 workers",
        lambda m: m.update(metadata={"name": "b" * 54}, spec={**m["spec"], "workers": 100}),
        "metadata.name",
    ),
    ("name starting with a digit", name("1job"), "metadata.name"),
    ("name with a dot", name("my.job"), "metadata.name"),
    ("typo outside the template", spec(backofLimit=3), 'unknown field "spec.backofLimit"'),
    ("typo in runPolicy", run_policy(backofLimit=3), 'unknown field "spec.runPolicy.backofLimit"'),
    ("spec missing", delete("spec"), "spec: Required value"),
]

IMMUTABLE: list[tuple[str, Callable[[Json], None], str]] = [
    ("workers", spec(workers=3), "spec.workers is immutable"),
    ("port", spec(port=3333), "spec.port is immutable"),
    ("sharedVolume", spec(sharedVolume={"claimName": "other"}), "spec.sharedVolume is immutable"),
    ("template", container(image="other:1"), "spec.template is immutable"),
    ("completion", completion(markerFile="other.txt"), "spec.completion is immutable"),
]


def apply(namespace: str, manifest: Json, *extra: str) -> Any:
    return kubectl(
        "apply",
        "--validate=strict",
        "-n",
        namespace,
        *extra,
        "-f",
        "-",
        input=yaml.safe_dump(manifest),
        check=False,
    )


@pytest.fixture(scope="module")
def admission_namespace(kube: ClusterClient) -> Iterator[str]:
    namespace = kube.new_namespace("adm")
    yield namespace
    kube.delete_namespace(namespace)


@pytest.mark.parametrize(("case", "change", "field"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_manifest_is_refused_naming_the_field(
    admission_namespace: str, case: str, change: Callable[[Json], None], field: str
) -> None:
    result = apply(admission_namespace, mutate(change), "--dry-run=server")
    assert result.returncode != 0, f"{case}: accepted"
    assert field in result.stderr, f"{case}: message does not name {field}: {result.stderr}"


@pytest.mark.parametrize(("case", "change", "message"), IMMUTABLE, ids=[c[0] for c in IMMUTABLE])
def test_immutable_fields_cannot_change(
    admission_namespace: str, case: str, change: Callable[[Json], None], message: str
) -> None:
    original = mutate(name(f"imm-{case.lower()}"))
    assert apply(admission_namespace, original).returncode == 0
    changed = copy.deepcopy(original)
    change(changed)
    result = apply(admission_namespace, changed)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_run_policy_may_change(admission_namespace: str) -> None:
    original = mutate(name("mutable-policy"))
    assert apply(admission_namespace, original).returncode == 0
    changed = mutate(name("mutable-policy"))
    run_policy(backoffLimit=7, suspend=True, activeDeadlineSeconds=60)(changed)
    result = apply(admission_namespace, changed)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("sample", sorted((REPO / "deploy" / "samples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_sample_is_accepted(admission_namespace: str, sample: Path) -> None:
    result = apply(admission_namespace, yaml.safe_load(sample.read_text()), "--dry-run=server")
    assert result.returncode == 0, result.stderr


def test_the_crd_template_schema_is_the_api_servers_own(tmp_path: Path) -> None:
    """The CRD's pod template schema is generated from this API server's OpenAPI: current."""
    openapi = tmp_path / "openapi-v1.json"
    openapi.write_text(kubectl("get", "--raw", "/openapi/v3/api/v1").stdout)
    check = subprocess.run(
        [sys.executable, str(REPO / "hack" / "gen_template_schema.py"), "--check", str(openapi), str(CRD)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
