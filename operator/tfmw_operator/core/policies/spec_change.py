"""A TFJob's replica sets changed under its running attempt. Each pod's TF_CONFIG names every
task of the gang when the pod is made, so a gang whose sets change as it runs would mix pods
of two specs: a new worker the others never list, a restart made from another image. The
admission policy `tfmw-tfjob-spec-held` refuses such a change unless the job is suspended
before or after it; this rule is for what reaches the operator anyway: a suspension undone
before the operator saw it (two quick patches, an operator restarting), or the policy turned
off. The attempt then ends as a suspension would have ended it: every pod made again from
the new spec, and not counted against backoffLimit. Level: the sets the attempt was launched
from (status.launchedSets, written at the launch) against the job's. Pure."""

from __future__ import annotations

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.status import JobStatus
from tfmw_operator.core.policies.verdicts import Cause, Restart

SPEC_CHANGED = "SpecChanged"


def judge_spec_change(job: JobSpec, status: JobStatus) -> Restart | None:
    """A restart of the whole gang, made again and not counted, when the running attempt was
    launched from other sets; None otherwise, or when either side is unknown (a TFMultiWorkerJob,
    whose CRD holds its sets; a status an older operator wrote)."""
    launched_from = status.launched_sets
    if job.sets_fingerprint is None or launched_from is None or not status.launched:
        return None
    if launched_from == job.sets_fingerprint:
        return None
    message = (
        "the job's replica sets changed while attempt "
        f"{status.attempt} ran: its pods are made again from the new spec (not counted as a failure; "
        "to change a running TFJob, suspend it first)"
    )
    return Restart(
        message,
        counted=False,
        cause=Cause(SPEC_CHANGED),
        reason=SPEC_CHANGED,
        remake=True,
    )
