"""Which pods run under the in-pod supervisor, and what their reports say of them. Pure.

A MultiWorkerMirroredStrategy gang can restart in place: each pod's main container runs the
template's command under a small supervisor (operator/tfmw_operator/supervisor.py, placed by
an init container of the operator's image), which restarts the command when the operator
raises the attempt in the job's control file, and reports each run's end in the job's
folder (docs/supervisor.md). A pod then outlives attempts, and what its command did is in
its supervisor's report rather than in its container's status: `with_reports` folds each
report into its own pod, so the rest of the core reads a supervised pod as it reads any.

Only a gang can be supervised: its pods restart together, as the control file (one per job)
speaks to all of them at once. The rules for when a job is, and why not, are here, where
the pods are built from them (builders.py); what the operator does with a supervised gang
is policies/in_place.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import JobSpec, Member, ReplicaType
from tfmw_operator.contract import REPORT_EXITED, REPORT_RUNNING
from tfmw_operator.core.pods import ObservedPod, main_container_index
from tfmw_operator.core.reports import MAX_LOG_TAIL_BYTES, PodReport

# The status condition that says whether gang restarts keep the pods, and its reasons.
SUPERVISED = "Supervised"
NO_SHARED_VOLUME = "NoSharedVolume"
PARAMETER_SERVERS = "ParameterServerTraining"
NO_SUPERVISOR_IMAGE = "NoSupervisorImage"
NO_COMMAND = "TemplateHasNoCommand"
KUBELET_RESTARTS = "KubeletRestartsContainers"
# The sets whose pods are supervised: the gang. The evaluator restarts alone and never with
# the gang, so a job-wide control file must not speak to it.
GANG = frozenset({ReplicaType.CHIEF, ReplicaType.WORKER})


@dataclass(frozen=True)
class Supervision:
    """Whether the job's gang restarts in place; `reason` and `message` say why (not)."""

    in_place: bool  # under the in-pod supervisor
    reason: str
    message: str
    # Not supervised, but the gang's pods restart a failed container themselves (pod
    # restartPolicy OnFailure: JobSpec.restart_containers); the operator counts the restarts.
    by_kubelet: bool = False

    @property
    def keeps_pods(self) -> bool:
        """A gang restart keeps the pods that run: the supervisor's or the kubelet's."""
        return self.in_place or self.by_kubelet

    def covers(self, member: Member) -> bool:
        """The member's pod runs under the supervisor."""
        return self.in_place and member.type in GANG


def template_command(template: Json) -> list[str] | None:
    """The main container's command and args, when it gives a command (a list of strings);
    None when the image's entrypoint would run, which the operator cannot know."""
    containers = (template.get("spec") or {}).get("containers") or []
    index = main_container_index(containers)
    main = containers[index] if index is not None else None
    if not isinstance(main, dict):
        return None
    command, args = main.get("command"), main.get("args") or []
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        return None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    return [*command, *args]


def supervision_of(job: JobSpec) -> Supervision:
    """The in-pod supervisor where it can be (_supervisor); else, for a TFJob whose gang
    restarts OnFailure, the kubelet's restart of a failed container inside its pod, as under
    Kubeflow's controller (a new pod costs a sandbox: docs/benchmarks.md, the TFJob API side by
    side); else every gang restart re-creates the pods."""
    said = _supervisor(job)
    if not said.in_place and job.run_policy.warm_start:
        # Said where the user looks for why the pods are not kept: the field asked for more.
        said = replace(
            said,
            message=f"{said.message}; runPolicy.warmStart has no effect: it warms a supervised pod's "
            "next attempt",
        )
    if said.in_place or not job.restart_containers or job.parameter_server_training:
        return said
    return Supervision(
        False,
        KUBELET_RESTARTS,
        "the TFJob's Chief and Worker restart OnFailure: the kubelet restarts a failed container in "
        "its pod, as under Kubeflow's controller, and each restart counts against backoffLimit; a pod "
        f"that is gone (deleted, evicted, on a lost node) re-creates the gang ({said.message})",
        by_kubelet=True,
    )


def _supervisor(job: JobSpec) -> Supervision:
    """A gang restarts in place when the job has a shared volume (where the control file and
    the reports are), trains a MultiWorkerMirroredStrategy gang (a ParameterServerStrategy
    worker is replaced alone), the operator runs with --supervisor-image (the switch that turns
    supervision on: it writes the supervisor into the job's folder) and every gang template
    gives its command (the image's entrypoint cannot be wrapped)."""
    kept = "gang restarts re-create every pod"
    if not job.shared:
        return Supervision(
            False,
            NO_SHARED_VOLUME,
            f"the job has no spec.sharedVolume, where the supervisor's control file and reports live: {kept}",
        )
    if job.parameter_server_training:
        return Supervision(
            False,
            PARAMETER_SERVERS,
            "ParameterServerStrategy: a worker is replaced alone and the job's control file would "
            f"restart every pod at once, so no pod is supervised: {kept}",
        )
    if not job.supervisor_image:
        return Supervision(
            False,
            NO_SUPERVISOR_IMAGE,
            "the operator runs without --supervisor-image (the switch that turns supervision on): " + kept,
        )
    for field, template in (("spec.chief.template", job.chief_template), ("spec.template", job.template)):
        if template is not None and template_command(template) is None:
            return Supervision(
                False,
                NO_COMMAND,
                f"{field} has no command: the image's entrypoint cannot be wrapped, so {kept}; give the "
                "main container's command (and args) to restart the gang in place",
            )
    return Supervision(
        True,
        SUPERVISED,
        "each pod's supervisor restarts its command in place: a gang restart re-creates only the pods "
        "that are gone (deleted, evicted, on a lost node)",
    )


def with_reports(
    pods: Sequence[ObservedPod], reports: Sequence[PodReport] | None, attempt: int
) -> tuple[ObservedPod, ...]:
    """Each supervised pod with its own supervisor's report folded in, for `attempt`.

    A report counts only for the pod whose UID it names. While that pod lives (not deleted,
    not ended): a command of `attempt` that ended makes the pod read as a container that
    ended (phase, exit code, reason, the end of its log); a command of `attempt` not yet
    running (waiting at the barrier, still the last attempt's, or no report yet) makes it a
    pod whose program has not started. `reports` None: they could not be read, and nothing
    is concluded from them (the StorageError condition says why).
    """
    if reports is None:
        return tuple(pods)
    by_stem = {r.stem: r for r in reports}
    merged = []
    for pod in pods:
        if not pod.supervised:
            merged.append(pod)
            continue
        report = by_stem.get(pod.member.stem)
        if report is not None and report.pod_uid != pod.uid:
            report = None  # an earlier pod's of the same name, or forged
        if pod.deleting or pod.terminated or pod.phase == "Pending":
            merged.append(replace(pod, report=report))
            continue
        if report is not None and report.attempt == attempt and report.state == REPORT_EXITED:
            merged.append(_ended(pod, report))
        elif report is not None and report.attempt == attempt and report.state == REPORT_RUNNING:
            merged.append(replace(pod, report=report))
        else:
            merged.append(replace(pod, report=report, awaiting_start=True))
    return tuple(merged)


def reported_ends(job: JobSpec, reports: Sequence[PodReport] | None, attempt: int) -> dict[Member, int]:
    """The nonzero exit codes of the attempt's commands, by member, as their supervisors
    reported them: what a gang member's pod that is gone ended with (failure.first_failure).
    Not checked against a pod's UID (the pod is gone); a report is the program's word on its
    own end either way, as its container's exit code would be."""
    if not reports or not supervision_of(job).in_place:
        return {}
    by_stem = {m.stem: m for m in job.members if m.type in GANG}
    ends = {}
    for report in reports:
        member = by_stem.get(report.stem)
        end = report.end
        if member is None or report.state != REPORT_EXITED or end is None:
            continue
        if report.attempt == attempt and end.exit_code != 0:  # an exited report's end is its attempt's
            ends[member] = end.exit_code
    return ends


def _ended(pod: ObservedPod, report: PodReport) -> ObservedPod:
    end = report.end
    assert end is not None  # parse_report gives every exited report its end
    code = end.exit_code
    reason = "OOMKilled" if end.oom_killed else ("Completed" if code == 0 else "Error")
    return replace(
        pod,
        report=report,
        child_ended=True,
        phase="Succeeded" if code == 0 else "Failed",
        exit_code=code,
        reason=reason,
        # As FallbackToLogsOnError: the end of its log, on an error.
        message=report.log_tail[-MAX_LOG_TAIL_BYTES:] if code != 0 else "",
        finished_at=end.finished_at or report.updated_at,
    )
