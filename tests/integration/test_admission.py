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
    (
        # Kept whole, a template's metadata could hold megabytes of anything in every job held
        # in the operator's memory: refused under kubectl's strict validation, pruned otherwise.
        "a field of its own in a template's metadata",
        lambda m: m["spec"]["template"].update(metadata={"x": [{}]}),
        'unknown field "spec.template.metadata.x"',
    ),
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
    (
        "an init container named as the operator's folder check",
        lambda m: m["spec"]["template"]["spec"].update(
            initContainers=[{"name": "tfmw-folder-check", "image": "busybox", "command": ["true"]}]
        ),
        'spec.template.spec.initContainers[0]: Invalid value: "object": tfmw-folder-check is the name',
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
    (
        "the job's claim mounted again",
        lambda m: m["spec"]["template"]["spec"].update(
            volumes=[
                {"name": "scratch", "emptyDir": {}},
                {
                    "name": "again",
                    "persistentVolumeClaim": {"claimName": m["spec"]["sharedVolume"]["claimName"]},
                },
            ]
        ),
        "spec.template.spec.volumes: a volume mounts claim tfmw-shared again",
    ),
]


def both(*changes: Callable[[Json], None]) -> Callable[[Json], None]:
    def change(m: Json) -> None:
        for one in changes:
            one(m)

    return change


def template() -> Json:
    return {"spec": {"containers": [{"name": "tensorflow", "image": "tfmw-trainer:dev"}]}}


def rules(*listed: Json) -> Callable[[Json], None]:
    return run_policy(failureRules=list(listed))


INVALID += [
    ("chief without template", spec(chief={}), "spec.chief.template"),
    (
        "chief template without containers",
        spec(chief={"template": {"spec": {"containers": []}}}),
        "spec.chief.template.spec.containers",
    ),
    (
        "typo in the evaluator's template",
        spec(evaluator={"template": {"spec": {"containers": [{"name": "e", "image": "x", "imagee": "y"}]}}}),
        'unknown field "spec.evaluator.template.spec.containers[0].imagee"',
    ),
    (
        "zero parameter servers",
        spec(parameterServers={"replicas": 0, "template": template()}),
        "spec.parameterServers.replicas",
    ),
    (
        "65 parameter servers",
        spec(parameterServers={"replicas": 65, "template": template()}),
        "spec.parameterServers.replicas",
    ),
    (
        "workers and parameter servers past 1024",
        spec(workers=1000, parameterServers={"replicas": 25, "template": template()}),
        "spec.workers and spec.parameterServers.replicas together must be at most 1024",
    ),
    (
        "TF_CONFIG in the parameter servers' template",
        spec(
            parameterServers={
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "ps", "image": "x", "env": [{"name": "TF_CONFIG", "value": "{}"}]}
                        ]
                    }
                }
            }
        ),
        "TF_CONFIG",
    ),
    (
        "the job's claim mounted again by the chief",
        spec(
            chief={
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "image": "x"}],
                        "volumes": [{"name": "again", "persistentVolumeClaim": {"claimName": "tfmw-shared"}}],
                    }
                }
            }
        ),
        "spec.chief.template.spec.volumes: a volume mounts claim tfmw-shared again",
    ),
    (
        "name too long with an evaluator",
        lambda m: m.update(
            metadata={"name": "e" * 52}, spec={**m["spec"], "evaluator": {"template": template()}}
        ),
        "metadata.name",
    ),
    ("unknown completion policy", completion(policy="AnyExit"), "spec.completion.policy"),
    (
        "no shared volume under Marker",
        delete("spec", "sharedVolume"),
        "spec.sharedVolume is required: the chief writes its completion marker there",
    ),
    ("a rule without action", rules({"onExitCodes": [42]}), "spec.runPolicy.failureRules[0].action"),
    ("an unknown action", rules({"action": "Ignore"}), "spec.runPolicy.failureRules[0].action"),
    (
        "an exit code past 255",
        rules({"action": "Fail", "onExitCodes": [256]}),
        "spec.runPolicy.failureRules[0].onExitCodes[0]",
    ),
    (
        "an empty list of exit codes",
        rules({"action": "Fail", "onExitCodes": []}),
        "spec.runPolicy.failureRules[0].onExitCodes",
    ),
    (
        "exit code 0",
        rules({"action": "Fail", "onExitCodes": [0, 1]}),
        "exit code 0 is a success, never a failure",
    ),
    (
        "In and NotIn",
        rules({"action": "Fail", "onExitCodes": [1], "onExitCodesNotIn": [2]}),
        "takes onExitCodes or onExitCodesNotIn, not both",
    ),
    (
        "an unknown cause",
        rules({"action": "Fail", "onCauses": ["Sunspots"]}),
        "spec.runPolicy.failureRules[0].onCauses[0]",
    ),
    (
        "an unknown role",
        rules({"action": "Fail", "onRoles": ["coordinator"]}),
        "spec.runPolicy.failureRules[0].onRoles[0]",
    ),
    (
        "ps without parameter servers",
        rules({"action": "Fail", "onRoles": ["ps"]}),
        "spec.runPolicy.failureRules[0].onRoles names only roles the job does not have (ps: it has no",
    ),
    (
        "evaluator without an evaluator",
        rules({"action": "Restart", "onExitCodes": [1]}, {"action": "Fail", "onRoles": ["evaluator"]}),
        "spec.runPolicy.failureRules[1].onRoles names only roles the job does not have",
    ),
    (
        "a catch-all before other rules",
        rules(
            {"action": "Restart", "onExitCodes": [42]},
            {"action": "Fail"},
            {"action": "Restart", "onCauses": ["Evicted"]},
        ),
        "spec.runPolicy.failureRules[1] has no on... field, so it matches every failure",
    ),
    (
        "a rule shadowed by an earlier one",
        rules(
            {"action": "RestartNotCounted", "onExitCodes": [42, 43]},
            {"action": "Restart", "onCauses": ["OOMKilled"]},
            {"action": "Fail", "onExitCodes": [43, 42]},
        ),
        "spec.runPolicy.failureRules[2] could never match: an earlier rule matches every failure it matches",
    ),
    (
        "a rule covered by a broader earlier one",
        rules(
            {"action": "Fail", "onCauses": ["OOMKilled", "Evicted"]},
            {"action": "Restart", "onCauses": ["OOMKilled"], "onRoles": ["worker"], "onDisruption": False},
        ),
        "spec.runPolicy.failureRules[1] could never match: an earlier rule matches every failure it matches",
    ),
    (
        "a rule covered by an earlier one on exit codes alone",
        rules(
            {"action": "RestartNotCounted", "onExitCodes": [42]},
            {"action": "Fail", "onExitCodes": [42], "onRoles": ["chief"]},
        ),
        "spec.runPolicy.failureRules[1] could never match",
    ),
    (
        "ProgressStalled without a progress deadline",
        rules({"action": "Fail", "onCauses": ["ProgressStalled"]}),
        "spec.runPolicy.failureRules[0].onCauses is ProgressStalled, which only spec.runPolicy.progressDeadlineSeconds can cause",
    ),
    (
        "exit codes with a cause that has none",
        rules({"action": "Fail", "onCauses": ["ProgressStalled"], "onExitCodesNotIn": [1]}),
        "onCauses ProgressStalled comes with no exit code: with onExitCodes or onExitCodesNotIn",
    ),
    (
        "a disruption that is a stall",
        rules({"action": "Fail", "onCauses": ["ProgressStalled"], "onDisruption": True}),
        "a stall (onCauses ProgressStalled) never is one",
    ),
    (
        "no disruption, and causes that always are",
        rules({"action": "Fail", "onCauses": ["Evicted", "NodeLost"], "onDisruption": False}),
        "these onCauses are always pods taken away",
    ),
    (
        "a rule's name too long",
        rules({"action": "Fail", "name": "n" * 64}),
        "spec.runPolicy.failureRules[0].name",
    ),
    (
        "33 rules",
        rules(*({"action": "Fail", "onExitCodes": [c]} for c in range(1, 34))),
        "spec.runPolicy.failureRules",
    ),
    ("warm start of no module", run_policy(warmStart={"preload": []}), "spec.runPolicy.warmStart.preload"),
    (
        "warm start of something not a module",
        run_policy(warmStart={"preload": ["os; import shutil"]}),
        "spec.runPolicy.warmStart.preload[0]",
    ),
]

VALID: list[tuple[str, Callable[[Json], None]]] = [
    (
        # What `kubectl create --dry-run=client -o yaml` writes, and Kubeflow's TFJob CRD's set.
        "a template's metadata as generated manifests have it",
        lambda m: m["spec"]["template"].update(
            metadata={
                "creationTimestamp": None,
                "labels": {"team": "a"},
                "annotations": {"note": "b"},
                "name": "ignored",
                "namespace": "ignored",
                "finalizers": [],
            }
        ),
    ),
    ("a chief of its own", spec(chief={"template": template()})),
    ("a warm start, its modules the default", run_policy(warmStart={})),
    ("a warm start of named modules", run_policy(warmStart={"preload": ["tensorflow", "numpy.linalg"]})),
    (
        "chief, parameter servers and an evaluator",
        spec(
            chief={"template": template()},
            parameterServers={"replicas": 2, "template": template()},
            evaluator={"template": template()},
        ),
    ),
    (
        "no shared volume under ChiefExitCode",
        both(delete("spec", "sharedVolume"), completion(policy="ChiefExitCode")),
    ),
    ("AllWorkersExitCode with a shared volume", completion(policy="AllWorkersExitCode")),
    (
        # A supervised pod gone before its end was seen keeps the code its supervisor reported.
        "a deleted pod's exit code",
        rules({"action": "RestartNotCounted", "onCauses": ["PodDeleted"], "onExitCodes": [42]}),
    ),
    (
        # A pod deleted before its program ended is taken away, whatever it ended with.
        "a disruption that ended in an error",
        rules({"action": "Restart", "onCauses": ["Error", "OOMKilled"], "onDisruption": True}),
    ),
    (
        # A stall is decided only by a rule naming ProgressStalled: the later rule is reached.
        "a stall rule after a broader one and after a catch-all",
        both(
            run_policy(progressDeadlineSeconds=60),
            rules(
                {"action": "RestartNotCounted", "onDisruption": False},
                {"action": "Fail", "onDisruption": False, "onCauses": ["ProgressStalled"]},
                {"action": "Restart"},
                {"action": "Fail", "onCauses": ["ProgressStalled"]},
            ),
        ),
    ),
    (
        "the narrower rule first",
        rules(
            {"action": "Restart", "onCauses": ["OOMKilled"], "onRoles": ["worker"]},
            {"action": "Fail", "onCauses": ["OOMKilled"]},
            {"action": "Restart", "onExitCodes": [42], "onRoles": ["chief"]},
            {"action": "Fail", "onExitCodes": [42]},
        ),
    ),
    (
        "a rule on roles the job has beside ones it has not",
        rules({"action": "Fail", "onRoles": ["worker", "ps", "evaluator"]}),
    ),
    (
        "the PreemptionCheckpointHandler rule, as the issue writes it",
        rules({"onExitCodes": [42], "action": "RestartNotCounted"}),
    ),
    (
        "rules on every field, a catch-all last",
        both(
            spec(parameterServers={"template": template()}),
            run_policy(progressDeadlineSeconds=60),
            rules(
                {"name": "preempted", "action": "RestartNotCounted", "onExitCodes": [42]},
                {"action": "Fail", "onExitCodesNotIn": [137, 143], "onRoles": ["ps"]},
                {"action": "Restart", "onCauses": ["NodeLost"], "nodeFault": True},
                {"action": "Fail", "onCauses": ["ProgressStalled"]},
                {"action": "Restart", "onDisruption": True},
                {"action": "Fail"},
            ),
        ),
    ),
]

IMMUTABLE: list[tuple[str, Callable[[Json], None], str]] = [
    ("workers", spec(workers=3), "spec.workers is immutable"),
    (
        "chief",
        spec(chief={"template": template()}),
        "spec.chief, spec.parameterServers, spec.evaluator and spec.sharedVolume are immutable",
    ),
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


@pytest.mark.parametrize(("case", "change"), VALID, ids=[c[0] for c in VALID])
def test_valid_manifest_is_accepted(
    admission_namespace: str, case: str, change: Callable[[Json], None]
) -> None:
    result = apply(admission_namespace, mutate(change), "--dry-run=server")
    assert result.returncode == 0, f"{case}: {result.stderr}"


def test_run_policy_may_change(admission_namespace: str) -> None:
    original = mutate(name("mutable-policy"))
    assert apply(admission_namespace, original).returncode == 0
    changed = mutate(name("mutable-policy"))
    run_policy(backoffLimit=7, suspend=True, activeDeadlineSeconds=60)(changed)
    result = apply(admission_namespace, changed)
    assert result.returncode == 0, result.stderr


def test_a_template_may_mount_other_claims(admission_namespace: str) -> None:
    manifest = mutate(name("other-claim"))
    manifest["spec"]["template"]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "training-data", "readOnly": True}}
    ]
    result = apply(admission_namespace, manifest, "--dry-run=server")
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
