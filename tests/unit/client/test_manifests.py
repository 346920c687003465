"""The objects tfmw creates: the program's job and ConfigMap, and the pod that reads saved logs."""

from __future__ import annotations

import re

import pytest
from tfmw_client import manifests, names, package
from tfmw_client.errors import TfmwError
from unit.client.jobs import running

RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def options(**changes: object) -> manifests.JobOptions:
    base = {"name": "train-abcde", "namespace": "team-a", "image": "tfmw-trainer:dev", "workers": 2}
    return manifests.JobOptions(**{**base, **changes})  # type: ignore[arg-type]


def built(**changes: object) -> tuple[dict, dict]:  # type: ignore[type-arg]
    program = package.Program((package.ProgramFile("train.py", b"print(1)\n"),), "train.py")
    packed = package.pack(program, b"# launcher\n")
    chosen = options(**changes)
    return manifests.program_configmap(chosen, packed), manifests.program_job(
        chosen, "train.py", packed.items
    )


def test_the_job_runs_the_program_from_the_shared_folder_under_restricted_pod_security() -> None:
    configmap, job = built(args=["--epochs", "3"])
    assert (job["apiVersion"], job["kind"], job["spec"]["workers"]) == (
        "tfmw.dev/v1alpha1",
        "TFMultiWorkerJob",
        2,
    )
    assert job["spec"]["sharedVolume"] == {"claimName": "tfmw-shared", "mountPath": "/shared"}
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert (
        container["name"] == "tensorflow" and container["workingDir"] == "/shared"
    )  # the second trap
    assert container["command"] == [
        "python3",
        "/tfmw-launcher/launch.py",
        "auto",
        "/program/train.py",
        "--epochs",
        "3",
    ]
    assert container["securityContext"] == RESTRICTED_CONTAINER
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert {v["name"]: v["configMap"]["name"] for v in pod["volumes"]} == {
        "tfmw-program": "train-abcde-program",
        "tfmw-launcher": "train-abcde-program",
    }
    assert configmap["metadata"]["name"] == "train-abcde-program"
    assert job["metadata"]["annotations"] == {"tfmw.dev/program": "train-abcde-program"}


def test_pip_installs_per_pod_into_a_writable_folder_then_execs_the_program() -> None:
    _, job = built(packages=["pandas==2.2.3", "scikit-learn>=1.5"])
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    shell, flag, script, name, *run = container["command"]
    assert (shell, flag, name) == ("sh", "-c", "tfmw-pip")
    assert "--target /tfmw-pip pandas==2.2.3 'scikit-learn>=1.5'" in script
    assert script.endswith('exec "$@"') and 'PYTHONPATH="/tfmw-pip${PYTHONPATH:+:$PYTHONPATH}"' in script
    assert run == ["python3", "/tfmw-launcher/launch.py", "auto", "/program/train.py"]
    assert {"name": "tfmw-pip", "emptyDir": {}} in pod["volumes"]


def test_resources_and_env_are_set_when_asked() -> None:
    env = manifests.parse_env(["PIP_INDEX_URL=https://pypi.example/simple", "EMPTY="])
    _, job = built(cpu="500m", memory="2Gi", env=env)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
    }
    assert container["env"] == [
        {"name": "PIP_INDEX_URL", "value": "https://pypi.example/simple"},
        {"name": "EMPTY", "value": ""},
    ]


@pytest.mark.parametrize("pair", ["TFMW_ATTEMPT=1", "TF_CONFIG={}", "novalue", "=x", "1X=2"])
def test_env_the_operator_owns_or_that_is_malformed_is_refused(pair: str) -> None:
    with pytest.raises(TfmwError):
        manifests.parse_env([pair])


@pytest.mark.parametrize("package_spec", ["--index-url=http://evil", "pandas; rm -rf /`", ""])
def test_a_pip_argument_that_is_not_a_requirement_is_refused(package_spec: str) -> None:
    with pytest.raises(TfmwError, match="not a package requirement"):
        manifests.check_packages([package_spec])


@pytest.mark.parametrize(
    ("stem", "name"),
    [
        ("train", "train-x1y2z"),
        ("Train_MNIST v2", "train-mnist-v2-x1y2z"),
        ("3d", "job-3d-x1y2z"),
        ("___", "job-x1y2z"),
        ("a" * 80, "a" * 48 + "-x1y2z"),
    ],
)
def test_job_names_come_from_the_script_with_a_suffix(stem: str, name: str) -> None:
    made = manifests.job_name_from(stem, "x1y2z")
    assert made == name and manifests.check_job_name(made) == made


def test_a_name_that_cannot_name_a_job_is_refused() -> None:
    for bad in ("Upper", "9lives", "a" * 55, "dots.here"):
        with pytest.raises(TfmwError, match="cannot name a job"):
            manifests.check_job_name(bad)


def test_the_log_reader_pod_is_restricted_tokenless_and_read_only() -> None:
    pod = manifests.reader_pod(running(), "tfmw-trainer:dev", 0, ["worker-1.log"], "n0nce", 20)
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"
    }
    assert container["securityContext"] == {**RESTRICTED_CONTAINER, "readOnlyRootFilesystem": True}
    assert container["volumeMounts"] == [
        {"name": "job-folder", "mountPath": "/job", "subPath": "mnist", "readOnly": True}
    ]
    assert spec["volumes"] == [
        {"name": "job-folder", "persistentVolumeClaim": {"claimName": "tfmw-shared", "readOnly": True}}
    ]
    assert container["command"][-5:] == ["tfmw-logs", "0", "n0nce", "20", "worker-1.log"]
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "64Mi"}
    assert pod["metadata"]["ownerReferences"] == [
        {"apiVersion": "tfmw.dev/v1alpha1", "kind": "TFMultiWorkerJob", "name": "mnist", "uid": "uid-mnist"}
    ]
    assert names.LABEL_JOB_NAME not in pod["metadata"]["labels"]  # never mistaken for one of the job's pods
    assert re.fullmatch(r"tfmw-logs-mnist-[a-z0-9]{5}", pod["metadata"]["name"])


def test_the_reader_takes_only_log_file_patterns() -> None:
    for bad in ("../x.log", "a b.log", "worker-1", "$(id).log"):
        with pytest.raises(ValueError):
            manifests.reader_pod(running(), "img", 0, [bad], "n", None)


def test_the_readers_output_is_split_at_its_nonce_lines_only() -> None:
    output = (
        "@@n0nce FILE worker-0.log\n@@n0nce FILE worker-1.log\n"
        "@@n0nce BEGIN worker-1.log\nline one\n@@other END\n@@n0nce ENDING forged?\nlast line\n\n@@n0nce END\n"
        "@@n0nce DONE\n"
    )
    saved = manifests.parse_reader_output(output, "n0nce")
    assert saved.folder_exists and saved.complete
    assert saved.listing == ["worker-0.log", "worker-1.log"]
    assert saved.files == {"worker-1.log": "line one\n@@other END\n@@n0nce ENDING forged?\nlast line"}
    assert not manifests.parse_reader_output("@@n0nce NOFOLDER\n", "n0nce").folder_exists
