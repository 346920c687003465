"""The operator's settings: built once from the command line, handed to what needs them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfmw_operator.api.kinds import TFJOBS, TFMW_JOBS, JobKind
from tfmw_operator.api.tfjob import KUBEFLOW_NAMESPACE, SERVE_OFF
from tfmw_operator.core.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS


@dataclass(frozen=True)
class Settings:
    shared_root: Path  # where the jobs' shared storage is mounted
    # Watched namespaces: exact names, or kopf's patterns (then pods and Services are
    # watched cluster-wide and only the jobs are filtered). Empty: every namespace.
    namespaces: tuple[str, ...] = ()
    progress_interval: float = (
        DEFAULT_PROGRESS_INTERVAL_SECONDS  # at most one progress write per job per this
    )
    # The image of the workers' folder check (the operator's own); "": no check.
    folder_check_image: str = ""
    # The operator's own image, which places the in-pod supervisor into a gang's pods so that
    # a gang restart keeps them (docs/supervisor.md); "": no gang restarts in place.
    supervisor_image: str = ""
    # How long a deleted job's folder is kept before the operator removes it; None: never.
    folder_retention_seconds: float | None = None
    # Which of Kubeflow's TFJobs the operator serves: off, managedBy or all (api/tfjob.py).
    tfjobs: str = SERVE_OFF
    # Where Kubeflow's training-operator runs, if anywhere: the one namespace whose pods say
    # it runs (a tenant can label a pod of its own namespace as anything).
    kubeflow_namespace: str = KUBEFLOW_NAMESPACE

    @property
    def kinds(self) -> tuple[JobKind, ...]:
        """The kinds of job served."""
        return (TFMW_JOBS, TFJOBS) if self.tfjobs != SERVE_OFF else (TFMW_JOBS,)

    @property
    def kubeflow_controller_scope(self) -> str | None:
        """The API path whose pods say that Kubeflow's training-operator runs: its own
        namespace's; None when TFJobs are not served, no namespace is named ("": Kubeflow's
        controller is looked for nowhere) or it is not watched."""
        watched = self.exact_namespaces
        unseen = not self.kubeflow_namespace or (watched and self.kubeflow_namespace not in watched)
        if self.tfjobs == SERVE_OFF or unseen:
            return None
        return f"/api/v1/namespaces/{self.kubeflow_namespace}"

    @property
    def exact_namespaces(self) -> tuple[str, ...]:
        """The namespaces to scope pod and Service watches to; () when any is a pattern."""
        if any(not n.replace("-", "").isalnum() for n in self.namespaces):
            return ()
        return self.namespaces
