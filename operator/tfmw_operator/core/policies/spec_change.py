"""A TFJob's replica sets changed under its attempt. Each pod's TF_CONFIG names every task of
the gang when the pod is made, so a gang whose sets change as it runs would mix pods of two
specs: a new worker the others never list, a restart made from another image. The admission
policy `tfmw-tfjob-spec-held` refuses such a change unless the job is suspended before or
after it; this rule is for what reaches the operator anyway: a suspension undone before the
operator saw it (two quick patches, an operator restarting), or the policy turned off. The
attempt then ends as a suspension would have ended it: every pod made again from the new
spec, and not counted against backoffLimit.

Level: each pod says the generation and sets it was made from (its annotation,
JobSpec.sets_version); a pod of the attempt made from other sets at an older generation is
enough, launched whole or not (a launch cut short keeps its first pods). A difference at the
same generation is the API server's, not a user's (a default a newer CRD adds on read), and
is let be. A pod without the annotation (an older operator's, or edited) says nothing. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.tfjob import parse_sets_version
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.policies.verdicts import Cause, Restart

SPEC_CHANGED = "SpecChanged"


def judge_spec_change(job: JobSpec, pods: Sequence[ObservedPod]) -> Restart | None:
    """A restart of the whole gang, made again and not counted, when a pod of the attempt
    (`pods`) was made from other sets at an older generation; None otherwise, or for a
    TFMultiWorkerJob (no sets_version: its CRD holds its sets)."""
    now = parse_sets_version(job.sets_version)
    if now is None:
        return None
    generation, fingerprint = now
    for pod in pods:
        made_from = parse_sets_version(pod.sets_version)
        if pod.deleting or made_from is None:
            continue
        if made_from[0] < generation and made_from[1] != fingerprint:
            message = (
                f"the job's replica sets changed after pod {pod.name} was made (generation "
                f"{made_from[0]}, now {generation}): every pod is made again from the new spec, "
                "not counted as a failure (to change a TFJob, suspend it first)"
            )
            return Restart(
                message,
                counted=False,
                cause=Cause(SPEC_CHANGED, pod=pod.name, message="the job's replica sets changed"),
                reason=SPEC_CHANGED,
                remake=True,
                event=("Normal", SPEC_CHANGED),
            )
    return None
