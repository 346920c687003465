"""The objects the client creates, built as plain JSON: a submitted program's ConfigMap and
job, and the short-lived pod that reads saved logs from the shared volume. Pure functions."""

from __future__ import annotations

import re
import secrets
import shlex
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfmw_client import names
from tfmw_client.errors import TfmwError
from tfmw_client.package import LAUNCHER_KEY, PackedProgram

Json = dict[str, Any]
PROGRAM_DIR = "/program"  # the program's files, read-only
LAUNCHER_DIR = "/tfmw-launcher"
PIP_DIR = "/tfmw-pip"  # --pip installs here, per pod (an emptyDir): no two workers write one folder
MANAGED_BY = {"app.kubernetes.io/managed-by": "tfmw-cli"}
ANNOTATION_PROGRAM = "tfmw.dev/program"
# The user the trainer image runs as; the operator writes the job's folder as the same user.
DEFAULT_UID = 1000
_NAME_UNSAFE = re.compile(r"[^a-z0-9-]+")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~*+ ;:/@'\"]*\Z")
_RANDOM = string.ascii_lowercase + string.digits


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_RANDOM) for _ in range(length))


def job_name_from(stem: str, suffix: str | None = None) -> str:
    """`Train_MNIST.py` -> `train-mnist-x7k2p`: a DNS-1035 label short enough for its pods."""
    base = _NAME_UNSAFE.sub("-", stem.lower()).strip("-") or "job"
    if not base[0].isalpha():
        base = f"job-{base}"
    tail = suffix if suffix is not None else random_suffix()
    return f"{base[: names.JOB_NAME_MAX - len(tail) - 1].rstrip('-')}-{tail}"


def check_job_name(name: str) -> str:
    if not names.is_job_name(name):
        raise TfmwError(f"{name!r} cannot name a job", names.JOB_NAME_RULE)
    return name


def parse_env(pairs: Sequence[str]) -> list[Json]:
    """--env NAME=VALUE, as a container's env; the operator's own names are refused here."""
    env = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise TfmwError(
                f"--env {pair!r} is not NAME=VALUE", "for example --env PIP_INDEX_URL=https://..."
            )
        if key == "TF_CONFIG" or key.startswith("TFMW_"):
            raise TfmwError(f"--env {key}: TF_CONFIG and TFMW_* are set by the operator in every worker")
        env.append({"name": key, "value": value})
    return env


def check_packages(packages: Sequence[str]) -> list[str]:
    for package in packages:
        if not _PACKAGE.match(package) or package.startswith("-"):
            raise TfmwError(
                f"--pip {package!r} is not a package requirement",
                "name a package as pip takes it: tensorflow-datasets, pandas==2.2.3, 'scikit-learn>=1.5'",
            )
    return list(packages)


@dataclass(frozen=True)
class JobOptions:
    name: str
    namespace: str
    image: str
    workers: int = 1
    claim: str = names.DEFAULT_CLAIM
    args: Sequence[str] = ()
    packages: Sequence[str] = ()
    env: Sequence[Json] = ()
    cpu: str | None = None
    memory: str | None = None
    marker: str = "auto"  # auto: the launcher writes the marker when the chief's program returns
    labels: Mapping[str, str] = field(default_factory=dict)


def configmap_name(job: str) -> str:
    return f"{job}-program"


def program_configmap(options: JobOptions, packed: PackedProgram) -> Json:
    configmap: Json = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(options.name),
            "namespace": options.namespace,
            "labels": {**MANAGED_BY, names.LABEL_JOB_NAME: options.name},
        },
        "data": dict(packed.data),
    }
    if packed.binary_data:
        configmap["binaryData"] = dict(packed.binary_data)
    return configmap


def command_for(entrypoint: str, options: JobOptions) -> list[str]:
    """python3 launch.py MARKER /program/<entrypoint> ARGS; with --pip, a shell installs first.

    Either way the last process is exec'd, so the program is PID 1 and gets SIGTERM itself."""
    run = [
        "python3",
        f"{LAUNCHER_DIR}/launch.py",
        options.marker,
        f"{PROGRAM_DIR}/{entrypoint}",
        *options.args,
    ]
    if not options.packages:
        return run
    install = " ".join(
        [
            "python3 -m pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location",
            f"--target {PIP_DIR}",
            *(shlex.quote(p) for p in options.packages),
        ]
    )
    script = f'{install} && export PYTHONPATH="{PIP_DIR}${{PYTHONPATH:+:$PYTHONPATH}}" && exec "$@"'
    return ["sh", "-c", script, "tfmw-pip", *run]


def program_job(options: JobOptions, entrypoint: str, items: Sequence[Mapping[str, str]]) -> Json:
    """The job that runs the program: restricted Pod Security, the job's folder as the working
    directory (a program that writes its marker or checkpoints by a relative name then writes
    them there; the image's own working directory may not be writable)."""
    resources: Json = {}
    if options.cpu:
        resources.setdefault("requests", {})["cpu"] = options.cpu
    if options.memory:
        resources.setdefault("requests", {})["memory"] = options.memory
        resources.setdefault("limits", {})["memory"] = options.memory
    mounts: list[Json] = [
        {"name": "tfmw-program", "mountPath": PROGRAM_DIR, "readOnly": True},
        {"name": "tfmw-launcher", "mountPath": LAUNCHER_DIR, "readOnly": True},
    ]
    configmap = configmap_name(options.name)
    volumes: list[Json] = [
        {"name": "tfmw-program", "configMap": {"name": configmap, "items": [dict(i) for i in items]}},
        {
            "name": "tfmw-launcher",
            "configMap": {"name": configmap, "items": [{"key": LAUNCHER_KEY, "path": "launch.py"}]},
        },
    ]
    if options.packages:
        mounts.append({"name": "tfmw-pip", "mountPath": PIP_DIR})
        volumes.append({"name": "tfmw-pip", "emptyDir": {}})
    container: Json = {
        "name": names.MAIN_CONTAINER,
        "image": options.image,
        "command": command_for(entrypoint, options),
        "workingDir": names.DEFAULT_MOUNT_PATH,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    if options.env:
        container["env"] = [dict(e) for e in options.env]
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {
            "name": options.name,
            "namespace": options.namespace,
            "labels": {**MANAGED_BY, **options.labels},
            "annotations": {ANNOTATION_PROGRAM: configmap},
        },
        "spec": {
            "workers": options.workers,
            "sharedVolume": {"claimName": options.claim, "mountPath": names.DEFAULT_MOUNT_PATH},
            "template": {
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": DEFAULT_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": volumes,
                }
            },
        },
    }


def owner_reference(job: Json) -> Json:
    """The job as an owner (not a controller): deleting the job deletes what it owns."""
    meta = job["metadata"]
    return {"apiVersion": names.API_VERSION, "kind": names.KIND, "name": meta["name"], "uid": meta["uid"]}


# ---- the pod that reads saved logs ----

READER_MOUNT = "/job"
# Lists the attempt's folder, then prints each wanted file between two lines carrying a nonce
# the pod is given at creation: nothing written in the folder (file names, log lines) can
# forge them. Only POSIX sh, cat and tail: the job's own image has them.
READER_SCRIPT = r"""
folder="logs/attempt-$1"; nonce="$2"; lines="$3"; shift 3
if [ ! -d "$folder" ]; then echo "@@$nonce NOFOLDER"; exit 0; fi
for file in "$folder"/*; do [ -f "$file" ] && echo "@@$nonce FILE ${file##*/}"; done
for pattern in "$@"; do
  for file in "$folder"/$pattern; do
    [ -f "$file" ] || continue
    echo "@@$nonce BEGIN ${file##*/}"
    if [ "$lines" = all ]; then cat -- "$file"; else tail -n "$lines" -- "$file"; fi
    printf '\n@@%s END\n' "$nonce"
  done
done
echo "@@$nonce DONE"
""".strip()
_PATTERN = re.compile(r"^[a-z0-9*-]{1,64}\.log\Z")
READER_DEADLINE_SECONDS = 300


def reader_pod(
    job: Json, image: str, attempt: int, patterns: Sequence[str], nonce: str, tail: int | None
) -> Json:
    """A pod of restricted Pod Security that mounts the job's folder read-only (the claim,
    subPath the job's name), prints the wanted logs and exits; owned by the job, so it goes
    with the job even if the client never deletes it."""
    for pattern in patterns:
        if not _PATTERN.match(pattern):
            raise ValueError(f"not a log file pattern: {pattern!r}")
    meta, spec = job["metadata"], job.get("spec") or {}
    claim = str((spec.get("sharedVolume") or {}).get("claimName") or "")
    if not claim:
        raise TfmwError(f"job {meta['name']} has no spec.sharedVolume.claimName: no saved logs to read")
    name = f"tfmw-logs-{meta['name'][:40].rstrip('-')}-{random_suffix()}"
    lines = "all" if tail is None else str(max(0, tail))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {**MANAGED_BY, "app.kubernetes.io/name": "tfmw-log-reader"},
            "annotations": {"tfmw.dev/reads-logs-of": meta["name"]},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "activeDeadlineSeconds": READER_DEADLINE_SECONDS,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": DEFAULT_UID,
                "runAsGroup": DEFAULT_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "read",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [
                        "sh",
                        "-c",
                        READER_SCRIPT,
                        "tfmw-logs",
                        str(attempt),
                        nonce,
                        lines,
                        *patterns,
                    ],
                    "workingDir": READER_MOUNT,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"cpu": "500m", "memory": "64Mi"},
                    },
                    "volumeMounts": [
                        {
                            "name": "job-folder",
                            "mountPath": READER_MOUNT,
                            "subPath": meta["name"],
                            "readOnly": True,
                        }
                    ],
                }
            ],
            "volumes": [
                {"name": "job-folder", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
            ],
        },
    }


@dataclass
class SavedLogs:
    folder_exists: bool = True
    listing: list[str] = field(default_factory=list)  # every file in the attempt's folder
    files: dict[str, str] = field(default_factory=dict)  # file name -> the text printed
    complete: bool = False  # the reader got to its end


def parse_reader_output(text: str, nonce: str) -> SavedLogs:
    """The reader's output, split at its nonce lines; anything else is a file's content."""
    saved = SavedLogs()
    tag = f"@@{nonce} "
    current: str | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if current is not None:
            if line == f"@@{nonce} END":
                content = "\n".join(body)
                saved.files[current] = content[:-1] if content.endswith("\n") else content
                current, body = None, []
            else:
                body.append(line)
            continue
        if not line.startswith(tag):
            continue
        word, _, rest = line[len(tag) :].partition(" ")
        if word == "NOFOLDER":
            saved.folder_exists = False
        elif word == "FILE":
            saved.listing.append(rest)
        elif word == "BEGIN":
            current = rest
        elif word == "DONE":
            saved.complete = True
    if current is not None:  # cut short: keep what came
        saved.files[current] = "\n".join(body)
    return saved
