"""Completion: what ends a job well (`spec.completion.policy`). Pure.

`Marker` (the default): the chief's marker on the shared storage, never exit codes; a
chief that exits 0 without one fails the job after `chiefExitGraceSeconds`.
`ChiefExitCode`: the chief's main container exits 0 (TFJob's default). `AllWorkersExitCode`:
the chief's and every worker's exit 0 (TFJob's `successPolicy: AllWorkers`). Parameter
servers and the evaluator never decide: they run until the job ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tfmw_operator.api.spec import CompletionPolicy, JobSpec, ReplicaType
from tfmw_operator.api.times import later
from tfmw_operator.core.observed import MarkerState
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.verdicts import Fail, MarkerVerdict, WakeAt


def judge_marker(marker: MarkerState, job_uid: str) -> MarkerVerdict:
    if not marker.exists:
        return MarkerVerdict.ABSENT
    if marker.job_uid in (None, job_uid):
        return MarkerVerdict.OURS
    return MarkerVerdict.FOREIGN


def chief_exit(job: JobSpec, current: Sequence[ObservedPod], now: datetime) -> Fail | WakeAt | None:
    """Under `Marker`: the chief exited 0 with no marker: wait `chiefExitGraceSeconds`, then
    fail. None while the chief has not exited 0, and under the exit-code policies."""
    if job.completion_policy is not CompletionPolicy.MARKER:
        return None
    chief = next((p for p in current if p.member == job.chief and p.phase == "Succeeded"), None)
    if chief is None:
        return None
    # No finishedAt (a kubelet that lost it): the pod's latest change, else its creation.
    exited = chief.finished_at or chief.changed_at or chief.created or now
    deadline = later(exited, job.chief_exit_grace_seconds)
    if now < deadline:
        return WakeAt(deadline)
    who = "worker 0" if chief.replica_type is ReplicaType.WORKER else "the chief"
    return Fail(
        "MarkerMissing",
        f"{who} (pod {chief.name}) exited 0 but wrote no marker at "
        f"{job.marker_file} within chiefExitGraceSeconds={job.chief_exit_grace_seconds}; "
        "make the chief write TFMW_MARKER_PATH after training (or let spec.completion.policy: "
        "ChiefExitCode end the job on the chief's exit)",
    )


def exit_completion(job: JobSpec, current: Sequence[ObservedPod]) -> tuple[str, str] | None:
    """Under the exit-code policies: (reason, message) once the job has succeeded."""
    succeeded = {p.member for p in current if p.phase == "Succeeded" and not p.deleting}
    if job.completion_policy is CompletionPolicy.CHIEF_EXIT_CODE:
        if job.chief not in succeeded:
            return None
        name = next(p.name for p in current if p.member == job.chief)
        return "ChiefSucceeded", f"the chief (pod {name}) exited 0"
    if job.completion_policy is CompletionPolicy.ALL_WORKERS_EXIT_CODE:
        deciding = [m for m in job.members if m.type in (ReplicaType.CHIEF, ReplicaType.WORKER)]
        if not all(m in succeeded for m in deciding):
            return None
        return "AllWorkersSucceeded", f"the chief and all {job.workers} workers exited 0"
    return None
