"""Keeping a bad node out: `runPolicy.nodeExclusion`. Pure.

After an attempt ends for its node's fault (the node was lost, or a failure rule that says
`nodeFault: true` decided), the job's next attempts avoid that node: their pods get a
required node affinity that keeps them off it (builders.avoid_nodes). At most `maxNodes`
are kept out at once (a new one pushes the oldest out), each for `durationSeconds` from
the end it caused. `status.excludedNodes` lists the nodes the current attempt's pods avoid:
an entry whose time is up goes when the next attempt is launched (the pods that exist keep
their affinity: a pod cannot be changed). A gang that cannot be placed while nodes are kept
out gets the oldest back (policies/placement.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.spec import JobSpec
from tfmw_operator.api.status import ExcludedNode
from tfmw_operator.api.times import later
from tfmw_operator.core.pods import NODE_LOST
from tfmw_operator.core.policies.verdicts import Cause


@dataclass(frozen=True)
class Exclusion:
    """A node newly kept out, and what the list of them becomes."""

    node: ExcludedNode
    excluded: tuple[ExcludedNode, ...]
    pushed_out: tuple[ExcludedNode, ...] = ()  # the oldest, beyond maxNodes


def blamed_node(cause: Cause | None, node_fault: bool) -> str | None:
    """The node an attempt's end points at: a lost node's, or a failed pod's that a rule blamed."""
    if cause is None or not cause.node:
        return None
    return cause.node if cause.reason == NODE_LOST or node_fault else None


def exclude(
    job: JobSpec,
    excluded: tuple[ExcludedNode, ...],
    cause: Cause | None,
    attempt: int,
    now: datetime,
    node_fault: bool = False,
    rule: str = "",
) -> Exclusion | None:
    """The node to keep out after `attempt` ended with `cause`; None when the job does not
    exclude nodes, or the end points at no node."""
    policy = job.run_policy.node_exclusion
    node = blamed_node(cause, node_fault)
    if policy is None or node is None or cause is None:
        return None
    entry = ExcludedNode(
        node=node,
        cause=cause.reason,
        attempt=attempt,
        pod=cause.pod,
        rule=rule or None,
        since=now,
        until=later(now, policy.duration_seconds),
    )
    kept = [e for e in excluded if e.node != node]  # blamed again: from now on
    listed = [*kept, entry]
    over = max(0, len(listed) - policy.max_nodes)
    return Exclusion(entry, tuple(listed[over:]), tuple(listed[:over]))


def still_excluded(excluded: tuple[ExcludedNode, ...], now: datetime) -> tuple[ExcludedNode, ...]:
    """Those whose time is not up: what an attempt launched now avoids."""
    return tuple(e for e in excluded if e.until is None or e.until > now)


def excluded_message(excluded: tuple[ExcludedNode, ...]) -> str:
    nodes = "; ".join(e.describe() for e in excluded)
    return f"the pods of this job's attempts keep off {nodes}"
