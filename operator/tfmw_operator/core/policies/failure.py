"""A pod of the attempt failed: which one is the cause, whether a restart can cure it, and
what the restart takes: the whole attempt, or the failed pod alone where the strategy
survives that.

The job's failure rules, then its `restartPolicy`'s, decide (failure_rules.py): `Never`
fails the job, `OnFailure` restarts on any failure, `ExitCode` restarts only failures that
are not the program's own fault.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tfmw_operator.api.spec import JobSpec, Member, ReplicaType, RuleAction
from tfmw_operator.api.status import MAX_HISTORY_MESSAGE, AttemptRecord, JobStatus
from tfmw_operator.api.times import NEVER, format_time, later
from tfmw_operator.core.builders import member_pod_name
from tfmw_operator.core.pods import DISRUPTION_CAUSES, NODE_LOST, ObservedPod
from tfmw_operator.core.policies.failure_rules import Failure, rule_on
from tfmw_operator.core.policies.verdicts import Cause, Fail, Restart, WakeAt
from tfmw_operator.core.progress import MAX_CLOCK_AHEAD_SECONDS

# Exit codes from 128 up are deaths by signal (137 = SIGKILL, the OOM killer's too):
# something happened to the worker, not a bug in the program.
FIRST_SIGNAL_EXIT_CODE = 128
SIGTERM_EXIT_CODE = FIRST_SIGNAL_EXIT_CODE + 15
# The trainer's exit when TensorFlow lost a peer (docs/training-program.md): not a cause itself.
PEER_LOST_EXIT_CODE = 170
MESSAGE_TAIL_LINES = 5
# A worker whose kubelet has not reported for this long (phase Unknown) is taken as lost.
NODE_LOST_SECONDS = 60
# The cause of a worker's own exit that Kubernetes gave no reason of its own (not OOMKilled,
# Evicted ...): what a peer lost with its node explains. TensorFlow fails the all-reduce as
# soon as a peer's connection breaks (the trainer then exits 170), while the control plane
# reports the node not ready only after its grace period (50 s by default).
PEER_LOST = "PeerLost"
EXPLAINED_BY_A_LOST_PEER = frozenset({"Error", PEER_LOST})
# A node reported lost this long before the attempt ended did not end it (reported_before).
LOST_BEFORE_END_SECONDS = 15
# A PeerLost exit yields to any other failure stamped in the same second (finishedAt has
# whole seconds: a parameter server SIGKILLed at 10.9 s and the chief that lost it at 11.0 s
# can both read 11 s; stop 49's CI run gave that tie to the chief, first in member order), and
# to a death that can be the peer it lost (could_be_the_lost_peer) stamped up to this long
# after it: the second's boundary and the nodes' clocks, a few milliseconds apart.
PEER_LOST_SLACK_SECONDS = 1
# How long a PeerLost exit waits for the peer it lost to be reported, while a member of the
# training cluster still reads live: the kubelets report each pod on its own, and the
# noticer's status can come first. A peer that never reports (its node lost) costs this once.
PEER_LOST_HOLD_SECONDS = 5
# How long past its grace period a pod taken away whose exit is awaited (awaits_exit_code) may
# hold the failures that came after it: the kubelet kills the program at the end of the grace
# and reports it within seconds; a kubelet that never does leaves the pod judged as gone.
AWAITED_EXIT_SLACK_SECONDS = 30
# The longest grace period such a hold honours: the grace is the template's or the deleter's,
# and a day of it would leave a broken gang running that long.
MAX_AWAITED_GRACE_SECONDS = 300


@dataclass(frozen=True)
class MemberFailure:
    """A pod of the attempt that failed, was taken away, or went missing."""

    member: Member
    role: str  # chief, worker, ps, evaluator
    pod_name: str
    exit_code: int | None
    reason: str
    termination_message: str = ""
    disrupted: bool = False  # taken away (eviction, preemption, node loss), not the program's fault
    preempted: bool = False  # by Kueue: the queue gave the quota to another workload
    cause: str = ""  # in Kubernetes' words: OOMKilled, Evicted, Preempted, NodeLost, Error ...
    node: str = ""
    container: str = ""
    folder_mismatch: bool = False  # the operator's folder check refused the claim's folder

    @property
    def index(self) -> int:
        return self.member.index

    def describe(self) -> str:
        what = f"{self.member.type} {self.member.index} (pod {self.pod_name})"
        if self.exit_code is not None:
            what += f" exited with code {self.exit_code}"
        if self.reason:
            what += f" ({self.reason})" if self.exit_code is not None else f": {self.reason}"
        tail = self.tail
        return f"{what}: {tail}" if tail else what

    @property
    def tail(self) -> str:
        return "\n".join(self.termination_message.strip().splitlines()[-MESSAGE_TAIL_LINES:])

    def to_cause(self) -> Cause:
        return Cause(
            self.cause,
            self.member.index,
            self.pod_name,
            self.node or None,
            self.container or None,
            self.exit_code,
            self.tail,
            replica_type=str(self.member.type),
        )

    def seen_by_rules(self) -> Failure:
        return Failure(self.role, self.cause, self.exit_code, self.disrupted)


def cause_of(pod: ObservedPod) -> str:
    """Why the pod failed, in Kubernetes' own words where it has them; `PeerLost` for a
    program that exited saying TensorFlow lost a peer (PEER_LOST_EXIT_CODE)."""
    if pod.preempted:
        return "Preempted"
    if pod.reason in ("Evicted", NODE_LOST, "Shutdown", "Terminated", "DeadlineExceeded"):
        return pod.reason
    if pod.disruption in DISRUPTION_CAUSES:
        return DISRUPTION_CAUSES[pod.disruption]
    if pod.exit_code == PEER_LOST_EXIT_CODE and pod.reason in ("", "Error"):
        return PEER_LOST
    if pod.reason:  # the container's: OOMKilled, Error, ContainerCannotRun, StartError ...
        return pod.reason
    return "Error" if pod.exit_code else "Unknown"


def taken_away_at(pod: ObservedPod) -> datetime | None:
    """When the pod's deletion was asked for (its deletionTimestamp less its grace period)."""
    if pod.deleting_since is None:
        return None
    return later(pod.deleting_since, -pod.grace_seconds)


def failed_at(pod: ObservedPod) -> datetime | None:
    """When a failed pod's failure began: its program's end, or the request that took the pod
    away if that came first (the program then ended on the SIGTERM it got)."""
    times = [t for t in (pod.finished_at, taken_away_at(pod)) if t is not None]
    return min(times, default=None)


def failure_of(job: JobSpec, pod: ObservedPod) -> MemberFailure:
    # A pod whose deletion was asked for before its program ended was taken away, whether
    # Kubernetes said why (a DisruptionTarget condition) or a user deleted it.
    asked = taken_away_at(pod)
    taken_away = asked is not None and (pod.finished_at is None or asked <= pod.finished_at)
    return MemberFailure(
        pod.member,
        job.role(pod.member),
        pod.name,
        pod.exit_code,
        pod.reason,
        pod.message,
        pod.disrupted or taken_away,
        pod.preempted,
        cause_of(pod),
        pod.node,
        pod.containers[0] if pod.containers else "",
        folder_mismatch=pod.folder_mismatch,
    )


def vanished(
    job: JobSpec,
    member: Member,
    name: str,
    preempted: bool = False,
    node: str = "",
    disruption: str = "",
    exit_code: int | None = None,
) -> MemberFailure:
    """A pod gone or going while the job is active; `disruption` is the reason of its
    DisruptionTarget condition, when Kubernetes said why it takes the pod away; `exit_code`:
    its command's, when its supervisor reported the end before the pod was gone."""
    reason = (
        "pod deleted by Kueue, which evicted its Workload"
        if preempted
        else "pod disappeared while the job was active"
    )
    cause = "Preempted" if preempted else DISRUPTION_CAUSES.get(disruption, "PodDeleted")
    return MemberFailure(
        member,
        job.role(member),
        name,
        exit_code,
        reason,
        disrupted=True,
        preempted=preempted,
        cause=cause,
        node=node,
    )


def unknown_lost_at(pod: ObservedPod) -> datetime | None:
    """When a pod in phase Unknown (its kubelet silent) counts as on a lost node:
    NODE_LOST_SECONDS after its latest condition change; None for any other pod, or one
    whose change time is not known (never taken as lost)."""
    if pod.phase != "Unknown" or pod.changed_at is None:
        return None
    return later(pod.changed_at, NODE_LOST_SECONDS)


def lost_unknown(pod: ObservedPod, now: datetime) -> bool:
    """Its kubelet has not reported for NODE_LOST_SECONDS (phase Unknown): taken as lost."""
    lost_at = unknown_lost_at(pod)
    return lost_at is not None and now >= lost_at


def next_unknown_lost(current: Sequence[ObservedPod], now: datetime) -> datetime | None:
    """The next time a pod now Unknown counts as lost: nothing else may change meanwhile
    (its node is silent), so the job is looked at again then."""
    due = [at for at in map(unknown_lost_at, current) if at is not None and at > now]
    return min(due, default=None)


def first_failure(
    job: JobSpec,
    current: Sequence[ObservedPod],
    now: datetime,
    replacing: Collection[Member] = (),
    ended: Mapping[Member, int] | None = None,
) -> MemberFailure | WakeAt | None:
    """The pod that died first is the cause; the others usually fail because of it. Pods
    being replaced (`replacing`) are neither failures nor missing. `ended`: the exit codes
    the members' supervisors reported for the attempt's commands (supervision.reported_ends).
    A pod taken away can be gone before its container's end was seen (the kubelet's status
    and the deletion come milliseconds apart); its supervisor's word keeps the code, so a
    rule on exit codes (PreemptionCheckpointHandler's 42) still decides.

    A PeerLost exit says the cause is elsewhere: it yields to any other failure stamped in
    the same second, and to a death that can be the peer it lost up to PEER_LOST_SLACK_SECONDS
    after it; while another member of the training cluster still reads live, it waits
    (WakeAt) up to PEER_LOST_HOLD_SECONDS for that peer's end (peer_report_due)."""
    by_member = {p.member: p for p in current}
    failures: list[tuple[datetime, tuple[int, int], MemberFailure]] = []
    awaited: list[tuple[datetime, tuple[int, int], ObservedPod]] = []
    never = datetime.max.replace(tzinfo=UTC)
    for member in job.members:
        if member in replacing:
            continue
        pod = by_member.get(member)
        if pod is None:
            code = (ended or {}).get(member)
            failure = vanished(job, member, member_pod_name(job, member), exit_code=code)
            failures.append((never, member.order, failure))
        elif pod.phase == "Failed":
            failures.append((failed_at(pod) or never, member.order, failure_of(job, pod)))
        elif pod.deleting and pod.phase != "Succeeded":
            # deletionTimestamp is the request's time plus the grace period: a pod someone
            # deleted is the cause of the peer that failed for want of it afterwards.
            asked = taken_away_at(pod) or never
            if awaits_exit_code(job, pod):
                if member.type is not ReplicaType.EVALUATOR:  # never in the training cluster
                    awaited.append((asked, member.order, pod))
                continue
            failure = vanished(job, member, pod.name, pod.preempted, pod.node, pod.disruption)
            failures.append((asked, member.order, failure))
        elif pod.kubelet_restarts and pod.node_lost:
            # A pod whose kubelet restarts its peers in place, on a node reported lost: they
            # would end and restart for as long as the taint manager takes to delete it.
            lost = "its node was reported not ready or gone"
            failure = MemberFailure(
                member, job.role(member), pod.name, None, lost, disrupted=True, cause=NODE_LOST, node=pod.node
            )
            failures.append((pod.node_lost_at or never, member.order, failure))
        elif lost_unknown(pod, now):
            lost = f"its node has not reported for {NODE_LOST_SECONDS}s (phase Unknown)"
            failure = MemberFailure(
                member, job.role(member), pod.name, None, lost, disrupted=True, cause=NODE_LOST, node=pod.node
            )
            failures.append((never, member.order, failure))
    if not failures:
        return None
    when, _, chosen = min(failures, key=lambda item: (item[0], item[2].cause == PEER_LOST, item[1]))
    held = [item for item in awaited if item[0] <= when] if chosen.cause in EXPLAINED_BY_A_LOST_PEER else []
    if held:
        # A program's error exit after a pod was taken away may be that pod's doing (its
        # collective broke on it): the pod's exit code is awaited, and then it is judged first
        # (failed_at). A death of its own (a signal, OOM) is judged at once, as before.
        asked, _, first = min(held, key=lambda item: (item[0], item[1]))
        grace = min(first.grace_seconds, MAX_AWAITED_GRACE_SECONDS)
        due = later(asked if asked < never else now, grace + AWAITED_EXIT_SLACK_SECONDS)
        if now < due:
            return WakeAt(due)
        return vanished(job, first.member, first.name, first.preempted, first.node, first.disruption)
    if (
        chosen.cause in EXPLAINED_BY_A_LOST_PEER
        and _rules_on_exit_codes(job)
        and rule_on(job, chosen.seen_by_rules()).action is RuleAction.FAIL
    ):
        # A pod whose exit code was awaited is often gone by the time it is looked at again
        # (the kubelet's last status and the deletion come milliseconds apart): gone, it went
        # first, rather than fail the job for a peer's error exit on the collective it broke
        # (a training member; an evaluator breaks no collective). A peer's exit a rule
        # restarts on (PreemptionCheckpointHandler's 42 after saving) still decides.
        gone = [
            item
            for item in failures
            if item[0] == never
            and by_member.get(item[2].member) is None
            and item[2].member.type is not ReplicaType.EVALUATOR
        ]
        if gone:
            return min(gone, key=lambda item: item[1])[2]
    if chosen.cause != PEER_LOST:
        return chosen
    if when < never:
        until = later(when, PEER_LOST_SLACK_SECONDS)
        peers = [item for item in failures if item[0] <= until and could_be_the_lost_peer(item[2])]
        if peers:
            return min(peers, key=lambda item: (item[0], item[1]))[2]
    hold = peer_report_due(job, current, chosen, when, now, replacing)
    return chosen if hold is None else hold


def could_be_the_lost_peer(failure: MemberFailure) -> bool:
    """Whether a failure can be the peer a PeerLost exit lost: a death from outside the program
    (a signal, the OOM killer, a pod taken away or gone, a lost node). Not a program's own error
    exit, which may be how it took the same loss."""
    if failure.cause == PEER_LOST:
        return False
    return failure.disrupted or failure.exit_code is None or failure.exit_code >= FIRST_SIGNAL_EXIT_CODE


def peer_report_due(
    job: JobSpec,
    current: Sequence[ObservedPod],
    noticer: MemberFailure,
    ended_at: datetime,
    now: datetime,
    replacing: Collection[Member] = (),
) -> WakeAt | None:
    """When to judge a PeerLost exit, if not now: PEER_LOST_HOLD_SECONDS after it ended, while
    a member of the training cluster (not an evaluator, not being replaced) still reads live
    and may yet be reported as the peer that went first. None once the hold is over, when no
    such member is left, or when the end's time is unknown or ahead of the operator's clock:
    a node's clock minutes fast, or a supervisor's report (a file on the tenant's volume) with
    any date, holds nothing, so no hold lasts past PEER_LOST_HOLD_SECONDS from now.

    Live: running or starting, or being taken away while its exit code is awaited
    (awaits_exit_code: a save's exit 42 may come); not on a node reported lost, which will
    report nothing more."""
    due = later(ended_at, PEER_LOST_HOLD_SECONDS)
    if now >= due or due > later(now, PEER_LOST_HOLD_SECONDS):
        return None
    live = any(
        p.member != noticer.member
        and p.member.type is not ReplicaType.EVALUATOR
        and p.member not in replacing
        and p.phase not in ("Failed", "Succeeded")
        and (not p.deleting or awaits_exit_code(job, p))
        and not p.node_lost
        for p in current
    )
    return WakeAt(due) if live else None


def awaits_exit_code(job: JobSpec, pod: ObservedPod) -> bool:
    """Whether a pod being taken away (evicted, deleted) is judged only once its program has
    exited: when one of the job's own failure rules matches on exit codes. Its program got
    SIGTERM and may say what it made of it by its code: TensorFlow's PreemptionCheckpointHandler
    saves and exits 42, which a rule `{onExitCodes: [42], action: RestartNotCounted}` is
    about. Judged at the deletion request, the pod has no exit code yet and only the preset's
    rules (a disruption: a counted restart) could match. Kubernetes' Job waits for such pods to
    end before its podFailurePolicy rules too.

    Not for a pod Kueue preempted (no rule rules on it) nor one whose node was reported lost
    (no kubelet will report its exit); a pod gone before its exit was seen is judged as gone.
    The wait is bounded by the pod's grace period: the kubelet then kills the program."""
    if not pod.deleting or pod.terminated or pod.preempted or pod.node_lost:
        return False
    return _rules_on_exit_codes(job)


def _rules_on_exit_codes(job: JobSpec) -> bool:
    return any(
        r.exit_codes is not None or r.exit_codes_not_in is not None for r in job.run_policy.failure_rules
    )


def judge_failures(
    job: JobSpec,
    current: Sequence[ObservedPod],
    status: JobStatus,
    now: datetime,
    replacing: Collection[Member] = (),
    ended: Mapping[Member, int] | None = None,
) -> Fail | Restart | WakeAt | None:
    """For a launched attempt: None while no pod failed, else restart (all of the attempt,
    or the failed pod alone where the strategy survives that) or fail; WakeAt while a
    PeerLost exit waits for the peer it lost to be reported (first_failure)."""
    failure = first_failure(job, current, now, replacing, ended)
    if failure is None or isinstance(failure, WakeAt):
        return failure
    if failure.preempted:
        # Kueue took the quota back; it admits the gang again when quota frees. No fault of
        # the job's, so it costs no restart of the backoffLimit (and no rule applies).
        message = f"preempted by Kueue, not counted against backoffLimit: {failure.describe()}"
        return Restart(message, counted=False, cause=failure.to_cause(), reason="Preempted", kueue=True)
    if failure.folder_mismatch:
        # Every attempt would mount the same wrong folder: fail before anything trains.
        return Fail(
            "SharedVolumeMismatch",
            f"spec.sharedVolume.claimName {job.claim_name} (namespace {job.namespace}) does not reach the "
            f"folder the operator made for this job ({job.directory} under its shared root): "
            f"{failure.describe()}. Fix: give the namespace its storage as docs/storage.md says (the "
            f"claim must expose <shared root>/{job.namespace}), then create the job again",
            cause=failure.to_cause(),
        )
    ruling = rule_on(job, failure.seen_by_rules())
    why = failure.describe()
    if ruling.action is RuleAction.FAIL:
        said = f" ({ruling.told}: Fail)" if ruling.told else ""
        return Fail("WorkerFailed", why + said, cause=failure.to_cause())
    return restart_or_give_up(
        job,
        status,
        why,
        failure.to_cause(),
        counted=ruling.action is RuleAction.RESTART,
        rule=ruling.told,
        replace=alone(job, failure.member),
        survivors_can_save=survivors_can_save(failure),
        node_fault=ruling.node_fault,
    )


def alone(job: JobSpec, member: Member) -> tuple[Member, ...]:
    """What a restart of `member` takes: the pod alone where the strategy survives that (the
    evaluator, never in the training cluster; a ParameterServerStrategy worker, which the
    coordinator waits for); () for the whole attempt (a MultiWorkerMirroredStrategy gang,
    a parameter server, the chief)."""
    if member.type is ReplicaType.EVALUATOR:
        return (member,)
    if member.type is ReplicaType.WORKER and job.parameter_server_training:
        return (member,)
    return ()


def survivors_can_save(failure: MemberFailure) -> bool:
    """Whether the other workers get the restart grace period: when the failed worker was
    told to stop as they will be (its pod deleted, evicted or preempted, or it exited on
    SIGTERM), they can still save a checkpoint together. A worker whose process ended on
    its own (an error, the OOM killer) or whose node was lost cannot take part in a save,
    and a collective save waits for every worker: they are stopped at once.

    But a worker that exited because it lost a peer (PEER_LOST_EXIT_CODE) names no cause of
    its own: the peer's node may be gone, unreported for the next 40 s or so. The grace keeps
    that peer's pod terminating, unconfirmed, so the next attempt waits for the control plane
    to report the node instead of being scheduled onto it (and the lost node is found behind
    the exit, failure_policy.lost_node_behind)."""
    if failure.cause == NODE_LOST:
        return False
    if failure.exit_code is None:  # taken away while it ran: told by SIGTERM
        return True
    if failure.cause in EXPLAINED_BY_A_LOST_PEER and failure.exit_code < FIRST_SIGNAL_EXIT_CODE:
        # A program's own error exit (retried under OnFailure) may be how it took a lost
        # peer: most programs have no PEER_LOST_EXIT_CODE of their own.
        return True
    return failure.disrupted or failure.exit_code in (SIGTERM_EXIT_CODE, PEER_LOST_EXIT_CODE)


def restart_or_give_up(
    job: JobSpec,
    status: JobStatus,
    why: str,
    cause: Cause,
    reason: str = "WorkerFailed",
    survivors_can_save: bool = True,
    counted: bool = True,
    rule: str = "",
    replace: tuple[Member, ...] = (),
    node_fault: bool = False,
) -> Fail | Restart:
    """A restart, counted against backoffLimit unless a rule said not, or Failed once the
    limit is used up."""
    limit = job.run_policy.backoff_limit
    restarts = status.restarts
    said = f" ({rule}: {'Restart' if counted else 'RestartNotCounted'})" if rule else ""
    if counted and restarts >= limit:
        return Fail("BackoffLimitExceeded", f"{why}; backoffLimit {limit} reached", cause=cause)
    number = restarts + 1 if counted else restarts
    if replace:
        who = ", ".join(f"{m.type} {m.index}" for m in replace)
        counting = f"restart {number}/{limit}" if counted else "not counted against backoffLimit"
        message = f"{who} replaced alone ({counting}){said}: {why}"
    elif counted:
        message = restart_message(number, limit, why) + said
    else:
        message = f"gang restart not counted against backoffLimit{said}: {why}"
    return Restart(
        message,
        counted=counted,
        cause=cause,
        reason=reason,
        survivors_can_save=survivors_can_save,
        replace=replace,
        node_fault=node_fault,
        rule=rule,
    )


def restart_message(restart: int, limit: int, why: str) -> str:
    """What the Restarting condition says of gang restart number `restart`."""
    return f"gang restart {restart}/{limit}: {why}"


def lost_node_behind(record: AttemptRecord, pods: Sequence[ObservedPod], now: datetime) -> Cause | None:
    """The root cause of the attempt's end that `record` tells, found by a second look at its
    pods while they are being deleted: another worker of that attempt whose node was lost.
    The record's own worker merely noticed it first. None when the record's cause has a
    reason of its own (OOMKilled, Evicted, NodeLost already ...) or names no worker, or when
    no other worker's node was reported lost."""
    if record.cause not in EXPLAINED_BY_A_LOST_PEER or record.worker is None:
        return None
    noticer = Member(ReplicaType(record.replica_type or ReplicaType.WORKER), record.worker)
    others = [p for p in pods if p.attempt == record.attempt and p.member != noticer]
    lost = [p for p in others if p.node_lost and not reported_before(p, record.end_time, now)]
    if not lost:
        return None
    # The node reported first went first; its workers go by index. Its pods are reported
    # one by one, not always within one second: a worker on a node already reported lost is
    # lost with it, reported yet or not (the record, once NodeLost, is final).
    first_seen: dict[str, datetime] = {}
    for candidate in lost:
        seen = node_lost_at(candidate, now) or NEVER
        first_seen[candidate.node] = min(seen, first_seen.get(candidate.node, NEVER))
    on_lost_nodes = [p for p in others if p.node_lost or (p.node and p.node in first_seen)]
    pod = min(on_lost_nodes, key=lambda p: (first_seen[p.node], p.member.order))
    node = f"node {pod.node}" if pod.node else "its node"
    when = f" (seen at {format_time(first_seen[pod.node])})" if first_seen[pod.node] < NEVER else ""
    noticed = f"{noticer.type} {record.worker}" + (f" (pod {record.pod})" if record.pod else "")
    how = "failed" if record.exit_code is None else f"exited with code {record.exit_code}"
    told = f"{node} stopped reporting{when} with {pod.replica_type} {pod.index} (pod {pod.name}) on it; "
    told += f"{noticed} noticed first: {how}"
    # The noticer's log ends the message, cut from its start to fit: its last line says most.
    room = MAX_HISTORY_MESSAGE - len(told) - 2
    if record.message and room > 0:
        told += f": {record.message[-room:]}"
    return Cause(
        NODE_LOST,
        pod.index,
        pod.name,
        pod.node or None,
        pod.containers[0] if pod.containers else None,
        message=told[:MAX_HISTORY_MESSAGE],
        replica_type=str(pod.replica_type),
    )


def reported_before(pod: ObservedPod, end: datetime, now: datetime) -> bool:
    """Whether the pod's node was reported lost well before the attempt ended: a node that
    had been silent that long while its containers ran on (a stopped kubelet) did not end it;
    a node truly gone breaks the collective within seconds, before it is reported."""
    seen = node_lost_at(pod, now)
    return seen is not None and seen < later(end, -LOST_BEFORE_END_SECONDS)


def node_lost_at(pod: ObservedPod, now: datetime) -> datetime | None:
    """When the pod's node was reported lost, if it can have been then: not before the pod
    existed nor ahead of the operator's clock (a condition may say year 9999)."""
    seen = pod.node_lost_at
    if seen is None or seen > later(now, MAX_CLOCK_AHEAD_SECONDS):
        return None
    return None if pod.created is not None and seen < pod.created else seen
