"""A worker pod as the core needs it: read from the pod's JSON in one place. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tfmw_operator.api.names import (
    ANNOTATION_SETS_VERSION,
    FOLDER_CHECK_CONTAINER,
    KUEUE_ADMISSION_GATE,
    LABEL_ATTEMPT,
    LABEL_POD_GROUP,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    MAIN_CONTAINER,
)
from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import Member, ReplicaType
from tfmw_operator.api.times import NEVER, parse_time
from tfmw_operator.contract import FOLDER_CHECK_MISMATCH_EXIT_CODE, is_supervised_command
from tfmw_operator.core.reports import PodReport

# Waiting reasons that mean a worker cannot start until someone fixes something.
STALL_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
# Of those, the ones no amount of waiting fixes.
PERMANENT_STALL_REASONS = frozenset({"InvalidImageName", "ErrImageNeverPull"})


def attempt_started(pods: Sequence[ObservedPod], attempt: int) -> datetime | None:
    """When the attempt's first pod was created: its documents must be newer."""
    return min((p.created for p in pods if p.attempt == attempt and p.created), default=None)


@dataclass(frozen=True, slots=True)
class ContainerEnd:
    """How a container that the kubelet restarts (or is about to) last ended."""

    exit_code: int | None
    reason: str = ""
    message: str = ""
    finished_at: datetime | None = None
    container: str = ""  # its name: the main container's, or an init container's


# Slots: one is held per pod between reconciles, and past 29 attributes an instance's
# __dict__ no longer shares its keys with the others' (CPython 3.11's key-sharing limit):
# docs/benchmarks/history.md, "The operator's memory at 8,000 pods".
@dataclass(frozen=True, slots=True)
class ObservedPod:
    name: str
    index: int  # in its replica set
    attempt: int
    phase: str  # as the job sees it: Failed once the main container failed, sidecars or not
    uid: str = ""
    deleting: bool = False
    created: datetime | None = None
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    finished_at: datetime | None = None
    stall_reason: str = ""
    stall_message: str = ""
    disrupted: bool = False  # evicted, preempted, or its node went away: not the program's fault
    ready: bool = False  # the Ready condition: all containers up and passing their probes
    deleting_since: datetime | None = None
    grace_seconds: int = 30  # how long a deletion may take before the kubelet confirms it
    changed_at: datetime | None = None  # the pod's latest condition transition
    containers: tuple[str, ...] = ()  # names, the main container first
    gated: bool = False  # waits behind Kueue's admission gate
    preempted: bool = False  # Kueue evicted its Workload (preemption): not the job's fault, not counted
    pod_group: str | None = None  # the Kueue pod group (and Workload) it was created in, if any
    node: str = ""  # the node it was bound to
    disruption: str = ""  # the reason of its DisruptionTarget condition: PreemptionByScheduler ...
    # The operator's folder check failed: the claim does not reach the job's folder.
    folder_mismatch: bool = False
    folder_checked: bool = False  # the operator's folder check found the job's folder
    folder_checked_at: datetime | None = None  # when that check started
    folder_check_image: str = ""  # the image that check ran, when the kubelet says so
    # The control plane reported its node not ready or gone (see _node_lost): the kubelet
    # there can neither report on the worker nor confirm the pod's deletion.
    node_lost: bool = False
    node_lost_at: datetime | None = None  # when it said so, as written: may be absurd
    replica_type: ReplicaType = ReplicaType.WORKER  # its set: pods made before roles are workers
    # Its main container runs the in-pod supervisor (the init container that places it is
    # there): its command can be restarted in place (core/supervision.py).
    supervised: bool = False
    # Set from the supervisor's report of this very pod (core/supervision.py, with_reports):
    report: PodReport | None = None
    # The command of the current attempt ended (the report says so) while the pod runs on:
    # `phase`, `exit_code` and the rest then tell that end, as a container's would.
    child_ended: bool = False
    # The pod is up but its command of the current attempt has not started: it waits at the
    # barrier, or its supervisor has not reported yet.
    awaiting_start: bool = False
    # Its restartPolicy lets the kubelet restart a failed container in the pod (a TFJob gang's
    # under OnFailure, core/supervision.py): a container that ended is then no failure of the
    # pod. How many times its main and init containers ended to be restarted so far, and how
    # the latest of them ended.
    kubelet_restarts: bool = False
    container_restarts: int = 0
    last_end: ContainerEnd | None = None
    # Its hostname (immutable in the pod's spec), its first label in the job's DNS: the
    # pod's own name, or the attempt's it was made in (builders.member_host).
    hostname: str = ""
    # A TFJob's pod: the job's generation and sets it was made from (JobSpec.sets_version),
    # as its annotation says ("" when it has none).
    sets_version: str = ""

    @property
    def member(self) -> Member:
        return Member(self.replica_type, self.index)

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def active(self) -> bool:
        return self.phase in ("Pending", "Running", "Unknown") and not self.deleting

    @property
    def started(self) -> bool:
        """Its program of the current attempt runs, or ran (Unknown: its node has not
        reported lately; it may well run on)."""
        return self.phase in ("Running", "Succeeded", "Unknown") and not self.awaiting_start

    @property
    def gone(self) -> bool:
        """The pod itself is going or gone: deleted, or ended (its main container, or under a
        supervisor the supervisor itself: evicted, killed with its node's memory), or on a
        node reported lost. Not a pod whose command ended while its supervisor lives on: that
        one restarts in place."""
        return self.deleting or self.node_lost or (self.terminated and not self.child_ended)


NODE_LOST = "NodeLost"
# A pod's restartPolicy under which the kubelet restarts its failed containers itself.
KUBELET_RESTART_POLICIES = frozenset({"OnFailure", "Always"})
# Pod reasons and conditions that say the pod was taken away, whatever its containers did.
DISRUPTION_REASONS = frozenset({"Evicted", "Preempting", "Terminated", NODE_LOST, "Shutdown"})
# What a DisruptionTarget condition's reason means, in the words status.history uses.
DISRUPTION_CAUSES = {
    "PreemptionByScheduler": "Preempted",
    "DeletionByTaintManager": NODE_LOST,
    "EvictionByEvictionAPI": "Evicted",
    "TerminationByKubelet": "Evicted",
    "DeletionByPodGC": NODE_LOST,
}
# The kubelet's reason for a Ready condition that is False only for the pod's readiness gates.
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"


def main_container_index(containers: Sequence[object]) -> int | None:
    """The trainer's place among a pod's containers: the one named `tensorflow`, else the
    first; None when there is none."""
    names = [c.get("name") if isinstance(c, dict) else None for c in containers]
    if not names:
        return None
    return names.index(MAIN_CONTAINER) if MAIN_CONTAINER in names else 0


def main_container_name(pod_spec: Json) -> str:
    """The trainer's container's name ("" when it has none)."""
    containers = pod_spec.get("containers") or []
    index = main_container_index(containers)
    found = containers[index] if index is not None else None
    return str(found.get("name") or "") if isinstance(found, dict) else ""


def _terminated(status: Json) -> Json | None:
    terminated = (status.get("state") or {}).get("terminated")
    return terminated if isinstance(terminated, dict) else None


def _explaining_termination(pod: Json) -> tuple[str, Json] | None:
    """The termination that explains the pod, with its container's name: the main
    container's, else a failed init container's (the main one never ran), else none: a
    sidecar's exit explains nothing."""
    status = pod.get("status") or {}
    main = main_container_name(pod.get("spec") or {})
    for container in status.get("containerStatuses") or []:
        if container.get("name") == main and (terminated := _terminated(container)):
            return main, terminated
    for container in status.get("initContainerStatuses") or []:
        terminated = _terminated(container)
        if terminated and terminated.get("exitCode", 0) != 0:
            return str(container.get("name") or ""), terminated
    return None


def _disrupted(status: Json) -> bool:
    if status.get("reason") in DISRUPTION_REASONS:
        return True
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _disruption(status: Json) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return str(condition.get("reason") or "")
    return ""


def _node_lost(status: Json) -> tuple[bool, datetime | None]:
    """Whether the control plane reported the pod's node not ready or gone, and when, if it said.

    The node lifecycle controller marks the pods of a node that stopped reporting with Ready
    False and nothing else (MarkPodsNotReady): ContainersReady and the containers' own ready
    flags stay True, as the silent kubelet last wrote them. A kubelet never writes Ready False
    beside those but for readiness gates, so that combination is the node's, not the pod's.
    Later the taint manager (or the pod garbage collector) deletes the pod with a
    DisruptionTarget: a node's loss only on a pod left as the silent kubelet wrote it (not
    Ready, its containers still ready), as a NoExecute taint an admin puts on a live node
    evicts the same way. Phase Unknown and reason NodeLost are what older clusters wrote."""
    conditions = {
        c["type"]: c
        for c in status.get("conditions") or []
        if isinstance(c, dict) and isinstance(c.get("type"), str)
    }
    ready, containers_ready = conditions.get("Ready") or {}, conditions.get("ContainersReady") or {}
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    if (
        ready.get("status") == "False"
        and ready.get("reason") != READINESS_GATES_NOT_READY
        and containers_ready.get("status") == "True"
        and containers
        and all(c.get("ready") is True for c in containers)
    ):
        return True, parse_time(ready.get("lastTransitionTime"))
    disruption = conditions.get("DisruptionTarget") or {}
    disrupted_by = str(disruption.get("reason") or "")
    if (
        disruption.get("status") == "True"
        and DISRUPTION_CAUSES.get(disrupted_by) == NODE_LOST
        and ready.get("status") != "True"
        # As the silent kubelet left them: on a live node the kubelet reports the stopping
        # containers itself (a NoExecute taint an admin put there evicts the same way).
        and containers_ready.get("status") == "True"
    ):
        return True, parse_time(disruption.get("lastTransitionTime"))
    return status.get("phase") == "Unknown" or status.get("reason") == NODE_LOST, None


def _folder_check(spec: Json, status: Json) -> tuple[bool, datetime | None, str]:
    """Whether the folder check passed, when it started (None: not said, or absurd), and the
    image it ran: the spec's, when the kubelet reports having run that very image ("" when
    not: the image of a pod can be changed after it is made, so the spec alone says nothing
    of what ran)."""
    for container in status.get("initContainerStatuses") or []:
        if isinstance(container, dict) and container.get("name") == FOLDER_CHECK_CONTAINER:
            terminated = _terminated(container)
            if terminated is None or terminated.get("exitCode") != 0:
                return False, None, ""
            image = next(
                (
                    c.get("image")
                    for c in spec.get("initContainers") or []
                    if isinstance(c, dict) and c.get("name") == FOLDER_CHECK_CONTAINER
                ),
                None,
            )
            ran = container.get("image")
            same = isinstance(image, str) and isinstance(ran, str) and same_image(image, ran)
            return (
                True,
                parse_time(terminated.get("startedAt")),
                image if same and isinstance(image, str) else "",
            )
    return False, None, ""


def _supervised(spec: Json) -> bool:
    """Whether the pod's command runs under the supervisor: its main container's command is
    the one the operator writes for that (a pod's command cannot change once it is made)."""
    containers = spec.get("containers") or []
    index = main_container_index(containers)
    main = containers[index] if index is not None else None
    return isinstance(main, dict) and is_supervised_command(main.get("command"))


def same_image(written: str, reported: str) -> bool:
    """Whether the image a container status reports is the one written: as written, or as
    the runtime completes a short Docker Hub name (`x:1` is `docker.io/library/x:1`)."""
    if not written:
        return False
    forms = {written, f"docker.io/{written}"}
    if "/" not in written:
        forms.add(f"docker.io/library/{written}")
    if ":" not in written.rsplit("/", 1)[-1] and "@" not in written:
        forms |= {f"{form}:latest" for form in forms}
    return reported in forms


def _preempted(status: Json) -> bool:
    """Kueue marks the pods of a Workload it evicts (preemption, a stopped queue)."""
    return any(
        c.get("type") == "TerminationTarget" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _stall(pod_status: Json, statuses: list[Json]) -> tuple[str, str]:
    for condition in pod_status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("reason") or "Unschedulable", condition.get("message") or ""
    for status in statuses:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STALL_REASONS:
            return waiting["reason"], waiting.get("message") or ""
    return "", ""


def observe_pod(pod: Json) -> ObservedPod | None:
    """Reduce a worker pod to what the core needs; None for pods without our labels."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    try:
        index = int(labels[LABEL_REPLICA_INDEX])
        attempt = int(labels[LABEL_ATTEMPT])
        replica_type = ReplicaType(labels.get(LABEL_REPLICA_TYPE, ReplicaType.WORKER))
    except (KeyError, ValueError, TypeError):
        return None
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    explained = _explaining_termination(pod)
    terminated = explained[1] if explained else None
    phase = status.get("phase") or "Pending"
    exit_code = terminated.get("exitCode") if terminated else None
    kubelet_restarts = (pod.get("spec") or {}).get("restartPolicy") in KUBELET_RESTART_POLICIES
    container_restarts, last_end = _kubelet_restarts(pod) if kubelet_restarts else (0, None)
    if kubelet_restarts and phase in ("Pending", "Running") and isinstance(exit_code, int) and exit_code != 0:
        # The kubelet restarts the container (the main one, or an init container of a pod
        # still Pending): the pod runs on, and container_restarts counts the end.
        explained, terminated, exit_code = None, None, None
    refused = _folder_check_refused(status) if kubelet_restarts else None
    if refused is not None and phase in ("Pending", "Running"):
        # No restart mounts another folder: the pod has failed as far as the job goes.
        explained, terminated = (FOLDER_CHECK_CONTAINER, refused), refused
        phase, exit_code = "Failed", FOLDER_CHECK_MISMATCH_EXIT_CODE
    if phase == "Running" and isinstance(exit_code, int):
        # The trainer ended while a sidecar runs on: the pod is done as far as the job goes.
        phase = "Succeeded" if exit_code == 0 else "Failed"
    gated = any(
        g.get("name") == KUEUE_ADMISSION_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or []
    )
    # A gated pod is queued, not stuck: the scheduler reports it SchedulingGated on purpose.
    stall_reason, stall_message = _stall(status, statuses) if phase == "Pending" and not gated else ("", "")
    reason = status.get("reason") or ""
    message = status.get("message") or ""
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    # Only a pod bound to a node can lose it (the pod GC also deletes unscheduled ones).
    node_lost, node_lost_at = _node_lost(status) if node else (False, None)
    if terminated is not None:
        reason = reason or terminated.get("reason") or ""
        message = message or terminated.get("message") or ""
    folder_checked, folder_checked_at, folder_check_image = _folder_check(pod.get("spec") or {}, status)
    return ObservedPod(
        name=meta.get("name", ""),
        index=index,
        replica_type=replica_type,
        attempt=attempt,
        pod_group=str(labels[LABEL_POD_GROUP]) if labels.get(LABEL_POD_GROUP) else None,
        sets_version=str((meta.get("annotations") or {}).get(ANNOTATION_SETS_VERSION) or "")[:128],
        phase=phase,
        uid=meta.get("uid", ""),
        deleting=bool(meta.get("deletionTimestamp")),
        created=parse_time(meta.get("creationTimestamp")),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        reason=reason,
        message=message,
        finished_at=parse_time(terminated.get("finishedAt")) if terminated else None,
        stall_reason=stall_reason,
        stall_message=stall_message,
        disrupted=_disrupted(status) or _preempted(status),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        ),
        deleting_since=parse_time(meta.get("deletionTimestamp")),
        grace_seconds=_grace(meta, pod.get("spec") or {}),
        containers=_container_names(pod.get("spec") or {}),
        gated=gated,
        preempted=_preempted(status),
        node=node,
        disruption=_disruption(status),
        folder_mismatch=explained is not None
        and explained[0] == FOLDER_CHECK_CONTAINER
        and exit_code == FOLDER_CHECK_MISMATCH_EXIT_CODE,
        folder_checked=folder_checked,
        folder_checked_at=folder_checked_at,
        folder_check_image=folder_check_image,
        node_lost=node_lost,
        node_lost_at=node_lost_at,
        supervised=_supervised(pod.get("spec") or {}),
        kubelet_restarts=kubelet_restarts,
        container_restarts=container_restarts,
        last_end=last_end,
        hostname=_hostname((pod.get("spec") or {}).get("hostname")),
        changed_at=max(
            (t for c in status.get("conditions") or [] if (t := parse_time(c.get("lastTransitionTime")))),
            default=None,
        ),
    )


# A DNS label (RFC 1123), as the API server validates spec.hostname.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _hostname(value: object) -> str:
    """spec.hostname where it is a DNS label, else "" (the builders then name it)."""
    return value if isinstance(value, str) and _DNS_LABEL.fullmatch(value) else ""


def _end(terminated: Json, container: str) -> ContainerEnd:
    code = terminated.get("exitCode")
    return ContainerEnd(
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        str(terminated.get("reason") or ""),
        str(terminated.get("message") or ""),
        parse_time(terminated.get("finishedAt")),
        container,
    )


def _ends(container: Json) -> tuple[int, ContainerEnd | None]:
    """How many times one container ended to be restarted by the kubelet, and its latest such
    end. The kubelet's restartCount counts the restarts made; an end not yet restarted (the
    container terminated, or waiting out its CrashLoopBackOff) is one more."""
    count = container.get("restartCount")
    restarts = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0
    name = str(container.get("name") or "")
    state, last_state = (
        found if isinstance(found := container.get(key), dict) else {} for key in ("state", "lastState")
    )
    last, now = last_state.get("terminated"), _terminated(container)
    if now is not None and now.get("exitCode") != 0:
        return restarts + 1, _end(now, name)
    waiting = state.get("waiting")
    if isinstance(waiting, dict) and waiting.get("reason") == "CrashLoopBackOff" and isinstance(last, dict):
        return restarts + 1, _end(last, name)
    return restarts, _end(last, name) if restarts and isinstance(last, dict) else None


def _kubelet_restarts(pod: Json) -> tuple[int, ContainerEnd | None]:
    """How many times the pod's init containers and main container ended to be restarted by
    the kubelet (a sidecar's restarts are its own), and the latest such end. Kubeflow counts
    the init containers' too (pastBackoffLimit): one that fails for ever keeps the pod Pending."""
    status = pod.get("status") or {}
    main = main_container_name(pod.get("spec") or {})
    containers = [
        *(c for c in status.get("initContainerStatuses") or [] if isinstance(c, dict)),
        *(c for c in status.get("containerStatuses") or [] if isinstance(c, dict) and c.get("name") == main),
    ]
    total, latest = 0, None
    for container in containers:
        count, end = _ends(container)
        total += count
        if end is not None and (
            latest is None or (end.finished_at or NEVER) >= (latest.finished_at or NEVER)
        ):
            latest = end
    return total, latest


def _folder_check_refused(status: Json) -> Json | None:
    """The operator's folder check ended refusing the claim's folder, now or before the
    kubelet restarted it (a pod whose restartPolicy restarts it fails no other way)."""
    for container in status.get("initContainerStatuses") or []:
        if not isinstance(container, dict) or container.get("name") != FOLDER_CHECK_CONTAINER:
            continue
        for state in (container.get("state"), container.get("lastState")):
            terminated = state.get("terminated") if isinstance(state, dict) else None
            if isinstance(terminated, dict) and terminated.get("exitCode") == FOLDER_CHECK_MISMATCH_EXIT_CODE:
                return terminated
    return None


def _container_names(spec: Json) -> tuple[str, ...]:
    main = main_container_name(spec)
    others = [c.get("name", "") for c in spec.get("containers") or [] if isinstance(c, dict)]
    return (main, *(n for n in others if n and n != main)) if main else ()


def _grace(meta: Json, spec: Json) -> int:
    for value in (meta.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
        if isinstance(value, int) and value >= 0:
            return value
    return 30
