"""Completion: the chief's marker on the shared storage, never exit codes, ends a job well."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
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
    """The chief exited 0 with no marker: wait `chiefExitGraceSeconds`, then fail.

    None while the chief has not exited 0.
    """
    chief = next((p for p in current if p.index == 0 and p.phase == "Succeeded"), None)
    if chief is None:
        return None
    # No finishedAt (a kubelet that lost it): the pod's latest change, else its creation.
    exited = chief.finished_at or chief.changed_at or chief.created or now
    deadline = later(exited, job.chief_exit_grace_seconds)
    if now < deadline:
        return WakeAt(deadline)
    return Fail(
        "MarkerMissing",
        f"worker 0 (pod {chief.name}) exited 0 but wrote no marker at "
        f"{job.marker_file} within chiefExitGraceSeconds={job.chief_exit_grace_seconds}; "
        "make the chief write TFMW_MARKER_PATH after training",
    )
