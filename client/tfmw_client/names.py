"""The names the client shares with the operator, from the API's JSON and the wire contract.

The client reads and writes only what the API server and the shared volume show, never the
operator's modules (which change shape freely): these are the documented names, from
crds/tfmwjobs.tfmw.dev.yaml, docs/reference.md ("Labels and names") and the fourth-round
contract (replica sets, roles, pod stems, log files).
"""

from __future__ import annotations

import re
from typing import Final

GROUP: Final = "tfmw.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "TFMultiWorkerJob"
PLURAL: Final = "tfmwjobs"
RESOURCE: Final = f"{PLURAL}.{GROUP}"  # as kubectl names it: tfmwjob.tfmw.dev/<name>
SINGULAR_RESOURCE: Final = f"tfmwjob.{GROUP}"

# Labels the operator puts on every pod of a job.
LABEL_JOB_NAME: Final = "tfmw.dev/job-name"
LABEL_REPLICA_INDEX: Final = "tfmw.dev/replica-index"
LABEL_ATTEMPT: Final = "tfmw.dev/attempt"
LABEL_ROLE: Final = "tfmw.dev/role"
LABEL_REPLICA_TYPE: Final = "tfmw.dev/replica-type"
# On a job `tfmw submit` made: the UID of the ConfigMap holding its program.
PROGRAM_UID: Final = "tfmw.dev/program-configmap-uid"

# Roles, in the order a user reads them. `chief` is on the chief pod, or on worker 0 when the
# job has no separate chief (today's jobs: workers only).
CHIEF: Final = "chief"
WORKER: Final = "worker"
PS: Final = "ps"
EVALUATOR: Final = "evaluator"
ROLES: Final = (CHIEF, WORKER, PS, EVALUATOR)
REPLICA_TYPES: Final = ROLES  # the replica sets have the roles' names

# The job's folder on the shared volume, as a pod sees it by default.
DEFAULT_MOUNT_PATH: Final = "/shared"
DEFAULT_CLAIM: Final = "tfmw-shared"  # the claim docs/storage.md gives every namespace
DEFAULT_MARKER_FILE: Final = "multiworker-complete.txt"
MAIN_CONTAINER: Final = "tensorflow"

# Where the operator publishes its version for every user (see docs/cli.md, "tfmw version").
OPERATOR_NAMESPACE: Final = "tfmw-system"
VERSION_CONFIGMAP: Final = "tfmw-version"
OPERATOR_DEPLOYMENT: Final = "tfmw-operator"

# An object name: a DNS-1123 label (the job's name is stricter, DNS-1035: starts with a letter).
JOB_NAME_PATTERN: Final = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
JOB_NAME_MAX: Final = 54  # docs/reference.md: <name>-worker-<i> fits 63 characters (up to 10 workers)
# A namespace's name: a DNS-1123 label, as the API server checks it.
NAMESPACE_PATTERN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
NAMESPACE_MAX: Final = 63
JOB_NAME_RULE: Final = (
    "a job's name is a DNS-1035 label: lower-case letters, digits and '-', starting with a letter "
    f"and ending with a letter or digit, at most {JOB_NAME_MAX} characters"
)
NAMESPACE_RULE: Final = (
    "a namespace is a DNS-1123 label: lower-case letters, digits and '-', starting and ending with "
    f"a letter or digit, at most {NAMESPACE_MAX} characters"
)
_STEM = re.compile(r"^(chief|worker|ps|evaluator)-(\d{1,6})\Z")


def pod_stem(job: str, pod: str) -> str:
    """`mnist-worker-3` of job `mnist` is `worker-3`: logs and reports are named by it."""
    prefix = f"{job}-"
    return pod[len(prefix) :] if pod.startswith(prefix) else pod


def parse_stem(stem: str) -> tuple[str, int] | None:
    """`worker-3` -> ("worker", 3); None for anything else (a file name read from the volume)."""
    found = _STEM.match(stem)
    return (found.group(1), int(found.group(2))) if found else None


def attempt_log_folder(attempt: int) -> str:
    """The attempt's log folder, relative to the job's folder."""
    return f"logs/attempt-{attempt}"


def log_file(attempt: int, stem: str) -> str:
    """One pod's saved log, relative to the job's folder: logs/attempt-<a>/<stem>.log."""
    return f"{attempt_log_folder(attempt)}/{stem}.log"


def is_job_name(text: str) -> bool:
    """Whether the CRD would take `text` as a job's name. A name typed by a user is checked
    before it goes into a URL: `..`, `.` or a name a gateway decodes would reach another path."""
    return len(text) <= JOB_NAME_MAX and JOB_NAME_PATTERN.match(text) is not None


def is_namespace(text: str) -> bool:
    """Whether `text` can name a namespace (checked before it goes into a URL, as a job's name)."""
    return len(text) <= NAMESPACE_MAX and NAMESPACE_PATTERN.match(text) is not None
