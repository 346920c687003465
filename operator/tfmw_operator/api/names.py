"""The API's names: the resource, the labels and annotations on what the operator
creates, and the names inside a worker pod. Each is stated here once."""

from __future__ import annotations

from typing import Final

GROUP: Final = "tfmw.dev"
VERSION: Final = "v1alpha1"
PLURAL: Final = "tfmwjobs"
KIND: Final = "TFMultiWorkerJob"
API_VERSION: Final = f"{GROUP}/{VERSION}"

LABEL_JOB_NAME: Final = "tfmw.dev/job-name"
LABEL_REPLICA_INDEX: Final = "tfmw.dev/replica-index"
LABEL_ATTEMPT: Final = "tfmw.dev/attempt"
LABEL_ROLE: Final = "tfmw.dev/role"
LABEL_REPLICA_TYPE: Final = "tfmw.dev/replica-type"

# Kueue's plain-pod groups: a job that names a LocalQueue runs its workers as one group.
LABEL_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
LABEL_POD_GROUP: Final = "kueue.x-k8s.io/pod-group-name"
ANNOTATION_POD_GROUP_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
# A TFJob's pods: the job's generation and the fingerprint of its replica sets they were made
# from, "<generation>:<fingerprint>" (core/policies/spec_change.py).
ANNOTATION_SETS_VERSION: Final = "tfmw.dev/sets-version"
KUEUE_ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"

# The trainer: the container of this name, else a pod's first container.
MAIN_CONTAINER: Final = "tensorflow"
PORT_NAME: Final = "tfmw"
SHARED_VOLUME_NAME: Final = "tfmw-shared"
# The operator's init container in every worker: does the claim reach the job's folder?
FOLDER_CHECK_CONTAINER: Final = "tfmw-folder-check"
