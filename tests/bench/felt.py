"""The seconds a user feels: tfmw, Kubeflow's TFJob tuned, and the floor, on the local
cluster's real node with the real trainer image.

    make bench-felt [RUNS=5]
    (or, with the cluster up and the operator deployed, `make deploy`:
     TFMW_BENCH_RUNS=1 PYTHONPATH=tests python3 -m bench.felt)

Three contenders, each in a namespace of its own given its storage by
hack/namespace-storage.sh, so every pod mounts the same kind of claim:
  - tfmw: the deployed operator, as users run it;
  - tfjob-tuned: Kubeflow's training-operator (hack/tfjob.sh), out of cluster and tuned, as
    tests/bench/peer.py runs it, restartPolicy ExitCode and cleanPodPolicy Running, with the
    TFMW_* variables the trainer reads set in its template by hand;
  - floor: a bare client creating the same headless Service and pods, built by tfmw's own
    builders, with no operator; on a worker's death it deletes the whole gang with grace 0,
    waits until none is left, and creates it again (attempt + 1, same names).
All run the same trainer image and arguments (deploy/samples/mnist-2-workers.yaml's pods).

Each run takes the contenders in turn, so a slow moment of the machine falls on all of them
alike, and each run begins with the next one (tfmw, TFJob, floor; then TFJob, floor, tfmw; ...),
so that none always follows the same contender's clean-up or starts the run, through two jobs
each:
  1. a short job: create call -> the first training step in the chief's log (the trainer's
     `first_step` line, timed by the container runtime's own timestamps against the bench's
     clock at the create call); then Succeeded -> no worker pod Running (tfmw and TFJob: the
     watch event of the Succeeded condition; the floor: the marker's modification time);
  2. a longer job: once it has a checkpoint (progress epoch >= 1) worker 1's training
     process is SIGKILLed on the node; the kill -> the chief's first step of the new attempt.
     TFJob replaces only the dead pod: what its MultiWorkerMirroredStrategy job then does
     (which pods exit, with what codes, which are replaced, whether its chief trains again,
     whether it succeeds) is watched for TFMW_BENCH_TFJOB_BOUND seconds (240) and printed.
Where each second goes (every pod's creation, scheduling, start, TensorFlow's cluster up,
first step, deletions, from watch events and log timestamps) is printed per job and kept in
bench/results/felt.json, with a table of the median, min and max of the runs per contender
and measure, and tfmw's ratios to TFJob tuned and to the floor.

It leaves the cluster as it found it: its namespaces, volumes, folders, the TFJob CRD and
controller are removed, also on failure; the deployed operator is only used, never paused.
Never run it beside the scale benchmark (which pauses the deployed operator): it waits
while a `bench.scale` process runs.
"""

from __future__ import annotations

import calendar
import contextlib
import copy
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import yaml
from bench.control_plane import RESULTS
from bench.peer import CERT_DIR, Contender, TFJob, install_tfjob_crd, remove_tfjob_crd, scratch_log
from bench.stats import say
from kube import LOCAL_KUBECONFIG, REPO, SHARED_DIR, ClusterClient, kubectl, wait_for
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from tfmw_operator.api.names import LABEL_ATTEMPT, LABEL_JOB_NAME
from tfmw_operator.api.spec import Member, parse_job
from tfmw_operator.contract import OWNER_FILE
from tfmw_operator.core.builders import build_pod, build_service
from tfmw_operator.core.pods import observe_pod
from watching import follow_in_thread

Json = dict[str, Any]
T = TypeVar("T")
RUNS = int(os.environ.get("TFMW_BENCH_RUNS", "5"))
WORKERS = 2
SHORT_ARGS = ("--epochs=4", "--steps-per-epoch=50", "--batch-size=8")
# Long enough that the kill lands mid-training and a gang that trains again has epochs left.
DEATH_ARGS = ("--epochs=20", "--steps-per-epoch=50", "--batch-size=8")
TFJOB_BOUND = float(os.environ.get("TFMW_BENCH_TFJOB_BOUND", "240"))
START_TIMEOUT = 300.0  # create -> first step, and the short job to its end
RESTART_TIMEOUT = 240.0  # tfmw's and the floor's death -> first step again
MAIN = "tensorflow"  # the trainer's container
SAMPLE = REPO / "deploy" / "samples" / "mnist-2-workers.yaml"
TFJOB_JOB_LABEL = "training.kubeflow.org/job-name"
TFJOB_INDEX_LABEL = "training.kubeflow.org/replica-index"
CONTENDERS = ("tfmw", "tfjob-tuned", "floor")
MEASURES = (
    ("apply -> first training step (s)", "apply_to_first_step"),
    ("worker death -> training again (s)", "death_to_training_again"),
    ("Succeeded -> workers gone (s)", "succeeded_to_workers_gone"),
)
# Beside the third: the same end from the trainer's side (its marker, written last), which
# tfmw reads and TFJob does not (it waits for the chief's exit code).
CONTEXT = (
    ("... marker written -> Succeeded (s)", "marker_to_succeeded"),
    ("... marker written -> workers gone (s)", "marker_to_workers_gone"),
)
# Which job each figure comes from.
PHASE = {
    "apply_to_first_step": "short",
    "death_to_training_again": "death",
    "succeeded_to_workers_gone": "short",
    "marker_to_succeeded": "short",
    "marker_to_workers_gone": "short",
}
# The issue's goals: every ratio to TFJob tuned at most 1.0; these two within 20 % of the floor.
# The end is judged from the marker, as docs/benchmarks.md does: TFJob says Succeeded only
# once its chief has exited, so its "Succeeded -> workers gone" is about 0 by construction
# (run felt-8: 0.02 s, a ratio of 103 that says nothing).
GOAL_MEASURES = (*MEASURES[:2], *(m for m in CONTEXT if m[1] == "marker_to_workers_gone"))
FLOOR_GOAL_MEASURES = ("apply_to_first_step", "death_to_training_again")
TFJOB_GOAL, FLOOR_GOAL = 1.0, 1.2

# ---- pure: logs, pods, jobs and figures ----

_STAMPED = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d) ?(.*)$", re.S
)
FIRST_STEP = re.compile(r"^worker=(\d+) first_step attempt=(\d+) step=(\d+)$")
EPOCH_LINE = re.compile(r"^worker=(\d+) epoch=(\d+) ")
STRATEGY_UP = re.compile(r"^worker=(\d+) start cluster_workers=")
LogLine = tuple[float, str]  # (Unix seconds from the runtime's timestamp, the line)


def parse_log_line(line: str) -> LogLine | None:
    """A line of `kubectl logs --timestamps` (RFC 3339 with up to nanoseconds, as Go's
    RFC3339Nano writes it: trailing zeros dropped) as (Unix seconds, text)."""
    match = _STAMPED.match(line.rstrip("\r\n"))
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction, zone, text = match.group(7) or "", match.group(8), match.group(9)
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds + (int(fraction[:9].ljust(9, "0")) / 1e9 if fraction else 0.0), text


def first_step(lines: Iterable[LogLine], attempt: int | None = None) -> tuple[float, int, int] | None:
    """The first `first_step` line (of `attempt`, if given): (time, attempt, step)."""
    for at, text in lines:
        match = FIRST_STEP.match(text)
        if match and (attempt is None or int(match.group(2)) == attempt):
            return at, int(match.group(2)), int(match.group(3))
    return None


def training_after(lines: Iterable[LogLine], since: float) -> LogLine | None:
    """The first line after `since` that says training runs: a `first_step` or an epoch's
    line (a process that trains on after a peer's death prints no new first step)."""
    for at, text in lines:
        if at > since and (FIRST_STEP.match(text) or EPOCH_LINE.match(text)):
            return at, text
    return None


def strategy_up(lines: Iterable[LogLine]) -> float | None:
    """When the trainer said its MultiWorkerMirroredStrategy was up (all workers joined)."""
    return next((at for at, text in lines if STRATEGY_UP.match(text)), None)


def main_container(pod: Json) -> Json:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((c for c in statuses if c.get("name") == MAIN), {})


def pod_marks(pod: Json) -> list[str]:
    """The milestones a pod's object shows now, in their usual order."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    conditions = {c.get("type"): c.get("status") == "True" for c in status.get("conditions") or []}
    state = main_container(pod).get("state") or {}
    marks = {
        "scheduled": bool(spec.get("nodeName")) or conditions.get("PodScheduled", False),
        "initialized": conditions.get("Initialized", False),
        "started": "running" in state or "terminated" in state,
        "running": status.get("phase") == "Running",
        "ready": conditions.get("Ready", False),
        "exited": "terminated" in state,
        "ended": status.get("phase") in ("Succeeded", "Failed"),
        "deleting": bool(meta.get("deletionTimestamp")),
    }
    return [name for name, shown in marks.items() if shown]


def restart_count(pod: Json) -> int:
    return int(main_container(pod).get("restartCount") or 0)


def needs_follow(pod: Json, started: bool, followed: int | None) -> bool:
    """Whether the main container's log must be followed now: it started and none of this
    pod's is followed yet, or the kubelet restarted it in place (restartPolicy OnFailure)
    since and it runs again: the new container's log is another stream."""
    if not started:
        return False
    if followed is None:
        return True
    return restart_count(pod) > followed and "running" in (main_container(pod).get("state") or {})


def exit_of(pod: Json) -> tuple[int, str] | None:
    """The main container's exit code and reason, once it has terminated."""
    terminated = (main_container(pod).get("state") or {}).get("terminated")
    if not terminated:
        return None
    return int(terminated.get("exitCode", -1)), str(terminated.get("reason") or "")


@dataclass
class PodRecord:
    """One pod (one UID), with when the bench first saw each of its milestones."""

    uid: str
    name: str
    labels: dict[str, str]
    marks: dict[str, float] = field(default_factory=dict)
    exit: tuple[int, str] | None = None

    @property
    def stopped_at(self) -> float | None:
        """When it stopped running: its phase became final, or it was deleted."""
        times = [self.marks[m] for m in ("ended", "deleted") if m in self.marks]
        return min(times) if times else None


def gone_at(records: Sequence[PodRecord]) -> float | None:
    """When the last of these pods stopped running; None while one still may."""
    stops = [r.stopped_at for r in records]
    if not records or any(s is None for s in stops):
        return None
    return max(s for s in stops if s is not None)


def pick_trainer(pids: dict[int, int]) -> int:
    """Of a container's trainer processes {pid: parent pid}, the training child (the
    trainer's first process forks it; under tfmw's in-pod supervisor, PID 1, that one is
    the supervisor's child): the one whose parent is also a trainer and that has no child
    among them."""
    parents = set(pids.values())
    children = [pid for pid, parent in pids.items() if parent in pids and pid not in parents]
    if len(children) != 1:
        raise AssertionError(f"expected one training child among {pids}, found {children}")
    return children[0]


def summarise(values: Sequence[float | None]) -> dict[str, Any]:
    """Median, min and max of the runs; a run that never got there (None) counts as
    infinitely long, so a median can be "more than the bound"."""
    known = [v for v in values if v is not None]
    ordered = sorted(float("inf") if v is None else v for v in values)
    if not ordered:
        return {"n": 0, "missing": 0, "median_s": None, "min_s": None, "max_s": None}
    median = statistics.median(ordered)

    def shown(value: float) -> float | None:
        return None if value == float("inf") else round(value, 3)

    return {
        "n": len(known),
        "missing": len(values) - len(known),
        "median_s": shown(median),
        "min_s": shown(ordered[0]),
        "max_s": shown(ordered[-1]),
    }


def ratio_of(ours: dict[str, Any], theirs: dict[str, Any], bound: float | None) -> tuple[float | None, str]:
    """tfmw's median over theirs, and how to show it: "<0.04" when theirs never got there
    within `bound` in most runs (a median of "more than the bound")."""
    mine, other = ours.get("median_s"), theirs.get("median_s")
    if mine is None:
        return None, "-"
    if other is None:
        if theirs.get("missing") and bound:
            limit = round(mine / bound, 3)
            return limit, f"<{limit:.3g}"
        return None, "-"
    if other == 0:
        return (1.0, "1.000") if mine == 0 else (None, "inf")
    value = round(mine / other, 3)
    return value, f"{value:.3f}"


def cell(summary: dict[str, Any], bound: float | None) -> str:
    def show(value: float | None) -> str:
        if value is None:
            return f">{bound:.0f}" if bound else "-"
        return f"{value:.2f}"

    if summary.get("n", 0) == 0 and not summary.get("missing"):
        return "-"
    return f"{show(summary['median_s'])} [{show(summary['min_s'])}-{show(summary['max_s'])}]"


def rows(
    results: dict[str, dict[str, dict[str, Any]]], bounds: dict[str, float]
) -> list[tuple[str, list[str], str, str]]:
    """Per measure (and context row): its label, each contender's cell, and tfmw's ratios
    to TFJob tuned and to the floor as shown."""
    out = []
    for label, key in (*MEASURES, *CONTEXT):
        row = {n: results.get(n, {}).get(key, {}) for n in CONTENDERS}
        _, to_tfjob = ratio_of(row["tfmw"], row["tfjob-tuned"], bounds.get("tfjob-tuned"))
        _, to_floor = ratio_of(row["tfmw"], row["floor"], None)
        out.append((label, [cell(row[n], bounds.get(n)) for n in CONTENDERS], to_tfjob, to_floor))
    return out


def table(results: dict[str, dict[str, dict[str, Any]]], bounds: dict[str, float]) -> str:
    """One row per measure: each contender's median [min-max] of the runs, then tfmw's
    ratios to TFJob tuned and to the floor."""
    header = f"{'measure':<40}" + "".join(f"{n:>24}" for n in CONTENDERS)
    header += f"{'tfmw / tfjob-tuned':>20}{'tfmw / floor':>15}"
    lines = [header, "-" * len(header)]
    for label, cells, to_tfjob, to_floor in rows(results, bounds):
        lines.append(f"{label:<40}" + "".join(f"{c:>24}" for c in cells) + f"{to_tfjob:>20}{to_floor:>15}")
    return "\n".join(lines)


def markdown(results: dict[str, dict[str, dict[str, Any]]], bounds: dict[str, float]) -> str:
    lines = [
        "| measure | " + " | ".join(CONTENDERS) + " | tfmw / tfjob-tuned | tfmw / floor |",
        "| --- |" + " --- |" * (len(CONTENDERS) + 2),
    ]
    for label, cells, to_tfjob, to_floor in rows(results, bounds):
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {to_tfjob} | {to_floor} |")
    return "\n".join(lines)


STARTING = ("created", "scheduled", "initialized", "started", "strategy_up", "first_step")
RESTARTING = (
    "first_exit_seen",
    "deletion_asked",
    "old_exited",
    "old_gone",
    *(f"new_{stage}" for stage in STARTING),
)


def gang_stages(pods: Sequence[Json]) -> dict[str, float | None]:
    """Each stage of a gang's start (pod stories' seconds): when its later worker got there."""
    return {
        stage: max((p[stage] for p in pods if p.get(stage) is not None), default=None) for stage in STARTING
    }


def death_stages(pods: Sequence[Json]) -> dict[str, float | None]:
    """A gang's restart, from the kill: the first old container's exit seen, the first
    deletion asked, the old pods' containers all exited and their pods all gone (deleted,
    else ended), then the new gang's start. Old pods are those created before the kill."""
    old = [p for p in pods if (p.get("created") or 0) < 0]
    new = [p for p in pods if (p.get("created") or 0) >= 0]
    gone = [p.get("deleted", p.get("ended")) for p in old]
    return {
        "first_exit_seen": min((p["exited"] for p in old if p.get("exited") is not None), default=None),
        "deletion_asked": min((p["deleting"] for p in old if p.get("deleting") is not None), default=None),
        "old_exited": max((p["exited"] for p in old if p.get("exited") is not None), default=None),
        "old_gone": None if not old or None in gone else max(g for g in gone if g is not None),
        **{f"new_{stage}": at for stage, at in gang_stages(new).items()},
    }


def stage_table(stages: dict[str, list[dict[str, float | None]]], keys: Sequence[str], origin: str) -> str:
    """The median over runs of each stage, per contender."""
    lines = [f"{'stage (median s from ' + origin + ')':<40}" + "".join(f"{n:>14}" for n in CONTENDERS)]
    for key in keys:
        cells = []
        for name in CONTENDERS:
            values = [v for run in stages.get(name, []) if (v := run.get(key)) is not None]
            cells.append(f"{statistics.median(values):>14.2f}" if values else f"{'-':>14}")
        lines.append(f"{key:<40}" + "".join(cells))
    return "\n".join(lines)


def goals(results: dict[str, dict[str, dict[str, Any]]], bounds: dict[str, float]) -> list[str]:
    """The issue's goals for this run, each met or missed."""
    said = []
    for label, key in GOAL_MEASURES:
        row = {n: results.get(n, {}).get(key, {}) for n in CONTENDERS}
        value, shown = ratio_of(row["tfmw"], row["tfjob-tuned"], bounds.get("tfjob-tuned"))
        met = value is not None and value <= TFJOB_GOAL
        said.append(
            f"{label}: tfmw / TFJob tuned {shown} (goal <= {TFJOB_GOAL}): {'met' if met else 'MISSED'}"
        )
        if key in FLOOR_GOAL_MEASURES:
            value, shown = ratio_of(row["tfmw"], row["floor"], None)
            met = value is not None and value <= FLOOR_GOAL
            said.append(f"{label}: tfmw / floor {shown} (goal <= {FLOOR_GOAL}): {'met' if met else 'MISSED'}")
    return said


def turn(run: int, sides: Sequence[T]) -> list[T]:
    """The contenders' order in `run`: the same cycle, begun by the next one each run."""
    shift = run % len(sides) if sides else 0
    return [*sides[shift:], *sides[:shift]]


# ---- the workload ----


def tfmw_manifest(name: str, args: Sequence[str]) -> Json:
    """The 2-worker sample with the bench's arguments: what a user applies."""
    job: Json = yaml.safe_load(SAMPLE.read_text())
    job["metadata"] = {"name": name}
    job["spec"]["workers"] = WORKERS
    job["spec"]["template"]["spec"]["containers"][0]["args"] = list(args)
    return job


def tfjob_template(template: Json, job_name: str, namespace: str, job_uid: str) -> Json:
    """tfmw's pod template for TFJob's workers, with by hand what tfmw gives each worker
    and the trainer reads: the job's folder on the namespace's claim at /shared, and the
    TFMW_* variables (the worker's index from TFJob's own label)."""
    template = copy.deepcopy(template)
    spec = template["spec"]
    container = spec["containers"][0]
    env = [
        {"name": "TFMW_JOB_NAME", "value": job_name},
        {"name": "TFMW_JOB_UID", "value": job_uid},
        {"name": "TFMW_NAMESPACE", "value": namespace},
        {
            "name": "TFMW_WORKER_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{TFJOB_INDEX_LABEL}']"}},
        },
        {"name": "TFMW_NUM_WORKERS", "value": str(WORKERS)},
        {"name": "TFMW_ATTEMPT", "value": "0"},
        {"name": "TFMW_SHARED_DIR", "value": "/shared"},
        {"name": "TFMW_MARKER_PATH", "value": "/shared/multiworker-complete.txt"},
        {"name": "TFMW_PROGRESS_PATH", "value": "/shared/progress.json"},
    ]
    container["env"] = [*(container.get("env") or []), *env]
    container["volumeMounts"] = [
        *(container.get("volumeMounts") or []),
        {"name": "tfmw-shared", "mountPath": "/shared", "subPath": job_name},
    ]
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": "tfmw-shared", "persistentVolumeClaim": {"claimName": "tfmw-shared"}},
    ]
    return template


def floor_objects(
    manifest: Json, namespace: str, owner: Json, attempt: int, folder_check_image: str
) -> tuple[Json, list[Json]]:
    """The headless Service and the pods tfmw's operator would create for `manifest`, built
    by its own builders, owned by `owner` (a ConfigMap standing in for the job: the
    garbage collector deletes what an absent owner holds) whose UID is the job's."""
    job = copy.deepcopy(manifest)
    job["metadata"] = {"name": manifest["metadata"]["name"], "namespace": namespace, "uid": owner["uid"]}
    spec = parse_job(job, folder_check_image)
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["name"],
        "uid": owner["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    service = build_service(spec)
    pods = [build_pod(spec, Member.worker(index), attempt) for index in range(spec.workers)]
    for obj in (service, *pods):
        obj["metadata"]["ownerReferences"] = [dict(reference)]
    return service, pods


# ---- watching: pods, jobs, logs ----


class Timeline:
    """A namespace's pods from a watch: when each milestone of each pod was first seen (the
    bench's clock), and each pod's trainer log with the runtime's timestamps (followed from
    when its container starts, by the log API)."""

    def __init__(self, kube: ClusterClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.pods: dict[str, PodRecord] = {}
        self.logs: dict[str, list[LogLine]] = {}
        self.followed: dict[str, int] = {}  # each pod's container restarts whose log is followed
        self.listeners: list[Callable[[PodRecord, Json], None]] = []
        follow_in_thread(kube.core.list_namespaced_pod, namespace, on_event=self._event, stop=self.stop)

    def _event(self, kind: str, pod: Json) -> None:
        now = time.time()
        meta = pod["metadata"]
        with self.lock:
            record = self.pods.get(meta["uid"])
            if record is None:
                record = PodRecord(
                    meta["uid"], meta["name"], dict(meta.get("labels") or {}), {"created": now}
                )
                self.pods[record.uid] = record
            for mark in [*pod_marks(pod), *(["deleted"] if kind == "DELETED" else [])]:
                record.marks.setdefault(mark, now)
            record.exit = exit_of(pod) or record.exit
            follow = needs_follow(pod, "started" in record.marks, self.followed.get(record.uid))
            if follow:
                self.logs.setdefault(record.uid, [])
                self.followed[record.uid] = restart_count(pod)
            listeners = list(self.listeners)
        if follow:
            threading.Thread(target=self._follow_log, args=(record.name, record.uid), daemon=True).start()
        for listener in listeners:
            listener(record, pod)

    def _follow_log(self, name: str, uid: str) -> None:
        """The container's whole log, then its lines as they come, until it stops."""
        for _ in range(5):
            try:
                response = self.kube.core.read_namespaced_pod_log(
                    name, self.namespace, container=MAIN, follow=True, timestamps=True, _preload_content=False
                )
            except ApiException:
                time.sleep(0.5)  # a container not quite started yet
                continue
            try:
                # As the client's watch reads its stream: chunk by chunk, never waiting for more.
                for line in iter_resp_lines(response):
                    parsed = parse_log_line(line)
                    if parsed is not None:
                        with self.lock:
                            self.logs[uid].append(parsed)
            except Exception:  # the pod went: what was read is kept
                pass
            finally:
                response.release_conn()
            return

    def records(self, job: str, label: str, attempt: int | None = None) -> list[PodRecord]:
        with self.lock:
            return sorted(
                (
                    copy.deepcopy(r)
                    for r in self.pods.values()
                    if r.labels.get(label) == job
                    and (attempt is None or r.labels.get(LABEL_ATTEMPT) == str(attempt))
                ),
                key=lambda r: (r.marks["created"], r.name),
            )

    def log(self, uid: str) -> list[LogLine]:
        with self.lock:
            return list(self.logs.get(uid, []))


class JobWatch:
    """When each condition of each job (tfmw's or TFJob's) first turned True, and tfmw's
    phases: the watch events, on the bench's clock."""

    def __init__(self, kube: ClusterClient, namespace: str, api: tuple[str, str, str]) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.conditions: dict[str, dict[str, tuple[float, str, str]]] = {}
        self.phases: dict[str, dict[str, float]] = {}
        group, version, plural = api
        follow_in_thread(
            kube.custom.list_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            on_event=self._event,
            stop=self.stop,
        )

    def _event(self, kind: str, job: Json) -> None:
        now, name, status = time.time(), job["metadata"]["name"], job.get("status") or {}
        with self.lock:
            seen = self.conditions.setdefault(name, {})
            for condition in status.get("conditions") or []:
                if condition.get("status") == "True":
                    seen.setdefault(
                        condition["type"], (now, condition.get("reason", ""), condition.get("message", ""))
                    )
            if status.get("phase"):
                self.phases.setdefault(name, {}).setdefault(status["phase"], now)

    def condition(self, job: str, kind: str) -> tuple[float, str, str] | None:
        with self.lock:
            return self.conditions.get(job, {}).get(kind)

    def snapshot(self, job: str) -> tuple[dict[str, tuple[float, str, str]], dict[str, float]]:
        with self.lock:
            return dict(self.conditions.get(job, {})), dict(self.phases.get(job, {}))


# ---- the contenders ----


@dataclass
class Started:
    job: str
    uid: str  # TFMW_JOB_UID in its pods
    created_at: float  # the bench's clock just before the create call


class Side:
    """A contender as this bench drives it: create a job, know when it Succeeded, delete it."""

    name = ""
    job_label = LABEL_JOB_NAME

    def __init__(self, kube: ClusterClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.timeline = Timeline(kube, namespace)

    def folder(self, job: str) -> Path:
        return SHARED_DIR / self.namespace / job

    def create(self, job: str, args: Sequence[str]) -> Started:
        raise NotImplementedError

    def succeeded_at(self, job: str) -> float | None:
        raise NotImplementedError

    def delete(self, job: str) -> None:
        raise NotImplementedError

    def attempt_of(self, record: PodRecord) -> int | None:
        """The attempt a pod belongs to; None where the contender has no such notion."""
        attempt = record.labels.get(LABEL_ATTEMPT)
        return None if attempt is None else int(attempt)

    def chiefs(self, job: str, attempt: int | None) -> list[PodRecord]:
        """Worker 0's pods of `attempt` (of any, where the contender has no attempts)."""

        def of_attempt(record: PodRecord) -> bool:
            its = self.attempt_of(record)
            return attempt is None or its is None or its == attempt

        return [
            r
            for r in self.timeline.records(job, self.job_label)
            if r.name == f"{job}-worker-0" and of_attempt(r)
        ]

    def wait_pods_gone(self, job: str, timeout: float = 180) -> None:
        wait_for(
            f"{self.name}: pods of {job} gone",
            lambda: (
                not self.kube.core.list_namespaced_pod(
                    self.namespace, label_selector=f"{self.job_label}={job}"
                ).items
            ),
            timeout=timeout,
            interval=0.5,
        )

    def close(self) -> None:
        self.timeline.stop.set()


class TfmwSide(Side):
    name = "tfmw"

    def __init__(self, kube: ClusterClient, namespace: str) -> None:
        super().__init__(kube, namespace)
        self.jobs = JobWatch(kube, namespace, ("tfmw.dev", "v1alpha1", "tfmwjobs"))

    def create(self, job: str, args: Sequence[str]) -> Started:
        manifest = tfmw_manifest(job, args)
        at = time.time()
        created = self.kube.create_job(self.namespace, manifest)
        return Started(job, created["metadata"]["uid"], at)

    def succeeded_at(self, job: str) -> float | None:
        seen = self.jobs.condition(job, "Succeeded")
        return seen[0] if seen else None

    def delete(self, job: str) -> None:
        with contextlib.suppress(ApiException):
            self.kube.delete_job(self.namespace, job)
        self.wait_pods_gone(job)

    def close(self) -> None:
        super().close()
        self.jobs.stop.set()


class ControllerSide(Side):
    """A side whose jobs a controller process of bench.peer reconciles, followed by a JobWatch
    of the controller's resource: when they Succeeded, their deletion, the controller's end."""

    controller: Contender
    jobs: JobWatch

    def succeeded_at(self, job: str) -> float | None:
        self.controller.check_alive()
        seen = self.jobs.condition(job, "Succeeded")
        return seen[0] if seen else None

    def delete(self, job: str) -> None:
        group, version, plural = self.controller.api
        with contextlib.suppress(ApiException):
            self.kube.custom.delete_namespaced_custom_object(group, version, self.namespace, plural, job)
        self.wait_pods_gone(job)

    def close(self) -> None:
        super().close()
        self.jobs.stop.set()
        self.controller.stop()


class TFJobSide(ControllerSide):
    name = "tfjob-tuned"
    job_label = TFJOB_JOB_LABEL
    backoff_limit: int | None = None  # the sample's unless set (Kubeflow counts every worker's retry)

    def __init__(self, kube: ClusterClient, namespace: str, binary: str) -> None:
        super().__init__(kube, namespace)
        self.controller = TFJob(binary, namespace, tuned=True)
        self.controller.restart_policy = "ExitCode"  # a worker that died of a signal is replaced
        self.controller.prepare(kube, namespace)
        self.controller.start(scratch_log("felt-tfjob-tuned"))
        self.controller.after_start(kube, namespace)
        self.jobs = JobWatch(kube, namespace, self.controller.api)

    def create(self, job: str, args: Sequence[str]) -> Started:
        uid = f"tfjob-{uuid.uuid4()}"
        folder = self.folder(job)  # as tfmw's operator makes it: any user may write there
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)
        sample = tfmw_manifest(job, args)
        self.controller.template = tfjob_template(sample["spec"]["template"], job, self.namespace, uid)
        manifest = self.controller.job(job, WORKERS)
        # The sample's run policy, where TFJob has the same field.
        run = sample["spec"]["runPolicy"]
        limit = run["backoffLimit"] if self.backoff_limit is None else self.backoff_limit
        manifest["spec"]["runPolicy"].update(
            backoffLimit=limit, activeDeadlineSeconds=run["activeDeadlineSeconds"]
        )
        self.controller.check_alive()
        group, version, plural = self.controller.api
        at = time.time()
        self.kube.custom.create_namespaced_custom_object(group, version, self.namespace, plural, manifest)
        return Started(job, uid, at)


@dataclass
class FloorJob:
    manifest: Json
    owner: Json  # {"name", "uid"} of the ConfigMap that stands in for the job
    attempt: int = 0
    active: bool = True  # restarts a dead gang; off once the bench deletes it
    restarts: list[dict[str, float]] = field(default_factory=list)


class FloorSide(Side):
    """No operator: the bench creates the pods and Service tfmw would, and restarts the gang
    itself on a worker's death: every pod deleted with grace 0, none left, all again."""

    name = "floor"

    def __init__(self, kube: ClusterClient, namespace: str, folder_check_image: str) -> None:
        super().__init__(kube, namespace)
        self.folder_check_image = folder_check_image
        # As tfmw's operator: once a worker's folder check passed through the namespace's
        # claim, the pods that follow, of this job or the next, are built without it.
        self.claim_checked = False
        self.jobs: dict[str, FloorJob] = {}
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(8)
        self.timeline.listeners.append(self._pod_changed)

    def create(self, job: str, args: Sequence[str]) -> Started:
        manifest = tfmw_manifest(job, args)
        created = self.kube.core.create_namespaced_config_map(self.namespace, {"metadata": {"name": job}})
        owner = {"name": job, "uid": created.metadata.uid}
        # What tfmw's operator does before a job's first pods: the folder, and its UID in it.
        folder = self.folder(job)
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)
        (folder / OWNER_FILE).write_text(owner["uid"] + "\n")
        state = FloorJob(manifest, owner)
        with self.lock:
            self.jobs[job] = state
        at = time.time()
        self._launch(state)
        return Started(job, owner["uid"], at)

    def _launch(self, state: FloorJob) -> None:
        check = "" if self.claim_checked else self.folder_check_image
        service, pods = floor_objects(state.manifest, self.namespace, state.owner, state.attempt, check)
        if state.attempt == 0:
            self.kube.core.create_namespaced_service(self.namespace, service)
        list(self.pool.map(lambda pod: self.kube.core.create_namespaced_pod(self.namespace, pod), pods))

    def _pod_changed(self, record: PodRecord, pod: Json) -> None:
        job = record.labels.get(LABEL_JOB_NAME, "")
        with self.lock:
            observed = observe_pod(pod)
            self.claim_checked = self.claim_checked or (observed is not None and observed.folder_checked)
            state = self.jobs.get(job)
            # A worker failed, or someone else deleted its pod (the floor's own deletions come
            # while it restarts or deletes the job, with the job inactive).
            failed = (pod.get("status") or {}).get("phase") == "Failed"
            deleted = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
            if (
                state is None
                or not state.active
                or record.labels.get(LABEL_ATTEMPT) != str(state.attempt)
                or not (failed or deleted)
            ):
                return
            state.active = False  # one restart at a time
            state.restarts.append({"failed_seen": time.time()})
        self.pool.submit(self._restart, job, state)

    def _restart(self, job: str, state: FloorJob) -> None:
        times = state.restarts[-1]
        selector = f"{LABEL_JOB_NAME}={job}"
        old = self.kube.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        times["delete_sent"] = time.time()
        list(
            self.pool.map(
                lambda pod: self._delete_now(pod.metadata.name, pod.metadata.uid),
                old,
            )
        )
        wait_for(
            f"floor: old pods of {job} gone",
            lambda: not self.kube.core.list_namespaced_pod(self.namespace, label_selector=selector).items,
            timeout=120,
            interval=0.02,
        )
        times["none_left"] = time.time()
        with self.lock:
            if job not in self.jobs:
                return
            state.attempt += 1
            state.active = True
        self._launch(state)
        times["created"] = time.time()

    def _delete_now(self, name: str, uid: str) -> None:
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        with contextlib.suppress(ApiException):
            self.kube.core.delete_namespaced_pod(name, self.namespace, body=body)

    def succeeded_at(self, job: str) -> float | None:
        """The floor's Succeeded: the marker on the shared folder, when it was written."""
        try:
            return (self.folder(job) / "multiworker-complete.txt").stat().st_mtime
        except FileNotFoundError:
            return None

    def delete(self, job: str) -> None:
        with self.lock:
            state = self.jobs.pop(job, None)
            if state is not None:
                state.active = False
        with contextlib.suppress(ApiException):
            self.kube.core.delete_namespaced_config_map(job, self.namespace)
        self.wait_pods_gone(job)

    def restarts_of(self, job: str) -> list[dict[str, float]]:
        with self.lock:
            state = self.jobs.get(job)
            return [dict(r) for r in state.restarts] if state else []

    def close(self) -> None:
        with self.lock:
            for state in self.jobs.values():
                state.active = False
        super().close()
        self.pool.shutdown(wait=False, cancel_futures=True)


# ---- the node: processes ----


def processes_with(*env: str) -> dict[int, int]:
    """Processes on this machine whose environment holds all of `env`: {pid: parent pid}."""
    found = {}
    for path in Path("/proc").glob("[0-9]*/environ"):
        try:
            environ = path.read_bytes().split(b"\0")
            if all(e.encode() in environ for e in env):
                stat = (path.parent / "stat").read_text()
                found[int(path.parent.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_worker(job_uid: str, index: int) -> float:
    """SIGKILL a worker's training process, as the OOM killer does (tests/faults'
    kill_worker); the bench's clock at the kill."""
    pids = wait_for(
        f"worker {index}'s trainer",
        lambda: processes_with(f"TFMW_JOB_UID={job_uid}", f"TFMW_WORKER_INDEX={index}") or None,
        timeout=60,
    )
    child = pick_trainer(pids)
    at = time.time()
    os.kill(child, signal.SIGKILL)
    return at


def progress_epoch(folder: Path, job_uid: str) -> int:
    try:
        document = json.loads((folder / "progress.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(document.get("epoch") or 0) if document.get("jobUid") == job_uid else 0


def operator_leading(kube: ClusterClient) -> bool:
    """The deployed operator leads and works: its lease held by a Running pod, renewed
    lately, and acquired a while ago (a leader that just took over is still starting)."""
    try:
        lease = client.CoordinationV1Api(kube.api_client).read_namespaced_lease(
            "tfmw-operator", "tfmw-system"
        )
    except ApiException:
        return False
    spec, now = lease.spec, time.time()
    if not spec.holder_identity or spec.renew_time is None or spec.acquire_time is None:
        return False
    if now - spec.renew_time.timestamp() > 15 or now - spec.acquire_time.timestamp() < 5:
        return False
    pod = spec.holder_identity.rsplit("-", 1)[0]
    try:
        return bool(kube.core.read_namespaced_pod(pod, "tfmw-system").status.phase == "Running")
    except ApiException:
        return False


def quiet_machine() -> None:
    """Wait while the scale benchmark runs: it pauses the deployed operator."""
    said = False
    while subprocess.run(["pgrep", "-f", "bench[.]scale"], capture_output=True, check=False).returncode == 0:
        if not said:
            say("a bench.scale process runs: waiting until it ends ...")
            said = True
        time.sleep(30)


# ---- one job, one contender ----


def wait_first_step(side: Side, job: str, attempt: int | None, since: float, timeout: float) -> float:
    """The runtime's timestamp of the chief's `first_step` line of `attempt`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for chief in side.chiefs(job, attempt):
            lines = side.timeline.log(chief.uid)
            found = first_step(lines, attempt)
            if found and found[0] >= since:
                return found[0]
            if any(EPOCH_LINE.match(text) for _, text in lines) and not found:
                raise SystemExit(
                    f"{side.name}: {job}'s chief trains but prints no first_step line: the node's "
                    "tfmw-trainer:dev predates it; rebuild it from this tree (TFMW_IMAGES=trainer hack/images.sh)"
                )
            if chief.exit is not None and chief.exit[0] != 0 and not found:
                raise AssertionError(f"{side.name}: {job}'s chief exited {chief.exit} before a step")
        time.sleep(0.2)
    raise AssertionError(f"{side.name}: no first step of {job} (attempt {attempt}) within {timeout:.0f} s")


def rel(at: float | None, origin: float) -> float | None:
    return None if at is None else round(at - origin, 3)


def pod_story(side: Side, record: PodRecord, origin: float) -> Json:
    """One pod's milestones, in seconds from `origin`, with what its log said."""
    lines = side.timeline.log(record.uid)
    step = first_step(lines)
    story: Json = {
        "pod": record.name,
        "uid": record.uid[:8],
        "attempt": side.attempt_of(record),
        **{mark: rel(at, origin) for mark, at in sorted(record.marks.items(), key=lambda m: m[1])},
        "strategy_up": rel(strategy_up(lines), origin),
        "first_step": rel(step[0] if step else None, origin),
    }
    if record.exit is not None:
        story["exit_code"], story["exit_reason"] = record.exit
        story["log_tail"] = [text for _, text in lines if text.strip()][-6:]
    return story


def brief(story: Json) -> str:
    keys = (
        "created",
        "scheduled",
        "initialized",
        "started",
        "strategy_up",
        "first_step",
        "exited",
        "ended",
        "deleting",
        "deleted",
    )
    shown = " ".join(f"{k} {story[k]:+.2f}" for k in keys if story.get(k) is not None)
    if "exit_code" in story:
        shown += f" exit {story['exit_code']} {story['exit_reason']}".rstrip()
    return f"{story['pod']}[{story['uid']}]: {shown}"


def ready(side: Side) -> None:
    """Before a job: no scale bench beside it, and the deployed operator leading."""
    quiet_machine()
    wait_for("the deployed operator leading", lambda: operator_leading(side.kube), timeout=300, interval=1)


def short_job(side: Side, job: str) -> Json:
    """Create -> first step; Succeeded -> no worker Running."""
    ready(side)
    started = side.create(job, SHORT_ARGS)
    step_at = wait_first_step(side, job, 0, started.created_at, START_TIMEOUT)
    out: Json = {"job": job, "apply_to_first_step": round(step_at - started.created_at, 3)}
    succeeded = wait_for(f"{side.name}: {job} Succeeded", lambda: side.succeeded_at(job), START_TIMEOUT, 0.1)
    gone = wait_for(
        f"{side.name}: {job}'s workers gone",
        lambda: gone_at(side.timeline.records(job, side.job_label)),
        START_TIMEOUT,
        0.1,
    )
    out["succeeded_to_workers_gone"] = round(max(0.0, gone - succeeded), 3)
    out["succeeded_to_workers_gone_raw"] = round(gone - succeeded, 3)
    out["succeeded_at"] = rel(succeeded, started.created_at)
    # The same end from the trainer's side: its marker, written last, for every contender.
    marker = (side.folder(job) / "multiworker-complete.txt").stat().st_mtime
    out["marker_to_succeeded"] = round(succeeded - marker, 3)
    out["marker_to_workers_gone"] = round(gone - marker, 3)
    out["pods"] = [pod_story(side, r, started.created_at) for r in side.timeline.records(job, side.job_label)]
    say(
        f"  {side.name} {job}: apply -> first step {out['apply_to_first_step']:.2f} s; "
        f"Succeeded -> workers gone {out['succeeded_to_workers_gone_raw']:+.2f} s; "
        f"marker -> Succeeded {out['marker_to_succeeded']:+.2f} s, -> workers gone {out['marker_to_workers_gone']:+.2f} s"
    )
    for story in out["pods"]:
        say(f"    {brief(story)}")
    out["stages"] = gang_stages(out["pods"])
    side.delete(job)
    return out


def death_job(side: Side, job: str) -> Json:
    """Kill worker 1 once the job has a checkpoint; the kill -> the chief's next first step
    (TFJob: what happens, within the bound)."""
    ready(side)
    started = side.create(job, DEATH_ARGS)
    step_at = wait_first_step(side, job, 0, started.created_at, START_TIMEOUT)
    out: Json = {"job": job, "apply_to_first_step": round(step_at - started.created_at, 3)}
    wait_for(
        f"{side.name}: {job} checkpointed (progress epoch >= 1)",
        lambda: progress_epoch(side.folder(job), started.uid) >= 1,
        START_TIMEOUT,
        0.05,
    )
    killed = kill_worker(started.uid, 1)
    out["killed_at"] = rel(killed, started.created_at)
    if isinstance(side, TFJobSide):
        out.update(tfjob_after_death(side, job, killed))
    else:
        again = wait_first_step(side, job, 1, killed, RESTART_TIMEOUT)
        out["death_to_training_again"] = round(again - killed, 3)
        # Settle: the new gang's records complete (its pods' marks) before they are read.
        time.sleep(1)
        say(
            f"  {side.name} {job}: worker 1 killed; training again {out['death_to_training_again']:.2f} s later"
        )
        out["pods"] = [pod_story(side, r, killed) for r in side.timeline.records(job, side.job_label)]
        if isinstance(side, TfmwSide):
            _, phases = side.jobs.snapshot(job)
            out["job_phases"] = {p: rel(at, killed) for p, at in phases.items()}
            out["events"] = tfmw_events(side, job)
        if isinstance(side, FloorSide):
            out["floor_restarts"] = [{k: rel(v, killed) for k, v in r.items()} for r in side.restarts_of(job)]
            say(f"    floor's restart: {out['floor_restarts']}")
        if isinstance(side, TfmwSide):
            say(f"    job phases first seen: {out['job_phases']}")
        for story in out["pods"]:
            say(f"    {brief(story)}")
    out["stages"] = death_stages(out["pods"])
    side.delete(job)
    return out


def tfmw_events(side: Side, job: str) -> list[Json]:
    return [
        {"reason": e.get("reason"), "message": e.get("message"), "time": e.get("firstTimestamp")}
        for e in side.kube.events(side.namespace, job)
    ]


def tfjob_after_death(side: TFJobSide, job: str, killed: float) -> Json:
    """Watch TFJob's gang after worker 1's death for TFJOB_BOUND seconds (less if the job
    finishes): which pods exit and how, which are replaced, whether the chief trains again,
    whether the job succeeds."""
    deadline = killed + TFJOB_BOUND
    again: LogLine | None = None
    while time.time() < deadline:
        side.controller.check_alive()
        chiefs = side.chiefs(job, None)
        found = [t for c in chiefs if (t := training_after(side.timeline.log(c.uid), killed))]
        if found and again is None:
            again = min(found)
        conditions, _ = side.jobs.snapshot(job)
        finished = "Succeeded" in conditions or "Failed" in conditions
        if finished and gone_at(side.timeline.records(job, side.job_label)) is not None:
            break
        time.sleep(0.5)
    time.sleep(1)
    conditions, _ = side.jobs.snapshot(job)
    pods = [
        pod_story(side, r, killed)
        for r in side.timeline.records(job, side.job_label)
        if (r.stopped_at or float("inf")) >= killed - 1
    ]
    out: Json = {
        "death_to_training_again": None if again is None else round(again[0] - killed, 3),
        "training_again_line": None if again is None else again[1],
        "bound_s": TFJOB_BOUND,
        "conditions": {
            kind: {"at": rel(at, killed), "reason": reason, "message": message[:300]}
            for kind, (at, reason, message) in sorted(conditions.items(), key=lambda c: c[1][0])
        },
        "pods": pods,
    }
    out["story"] = tfjob_story(out)
    for line in out["story"]:
        say(f"    {line}")
    return out


def secs(value: float | None) -> str:
    return "?" if value is None else f"{value:+.1f} s"


def telling_line(tail: Sequence[str]) -> str:
    """Of a log's last lines, the one that names what ended it: the exception, or the
    trainer's own last word."""
    for line in reversed(tail):
        if re.search(r"\b\w+Error: ", line) or line.startswith("tfmw-trainer:"):
            return line.strip()
    return tail[-1].strip() if tail else ""


def tfjob_story(out: Json) -> list[str]:
    """What TFJob's job did after the death, in words, from the measured record (times
    from the kill)."""
    lines = []
    for pod in out["pods"]:
        parts = [f"{pod['pod']}[{pod['uid']}]"]
        for mark, label in (("created", "created"), ("started", "started"), ("strategy_up", "strategy up")):
            if (pod.get(mark) or 0) > 0:
                parts.append(f"{label} {secs(pod[mark])}")
        if (pod.get("first_step") or 0) > 0:
            parts.append(f"first step {secs(pod['first_step'])}")
        if "exit_code" in pod:
            parts.append(f"exited {pod['exit_code']} {pod['exit_reason']} at {secs(pod.get('ended'))}")
            if pod["exit_code"] not in (0, 137) and pod.get("log_tail"):
                parts.append(f"(log: {telling_line(pod['log_tail'])[:200]})")
        if pod.get("deleting") is not None and pod["deleting"] > 0:
            parts.append(f"deletion asked {secs(pod['deleting'])}")
        if pod.get("deleted") is not None:
            parts.append(f"gone {secs(pod['deleted'])}")
        elif pod.get("ended") is None:
            parts.append("still running")
        lines.append("TFJob pod " + ", ".join(parts))
    for kind, seen in out["conditions"].items():
        if seen["at"] is not None and seen["at"] >= 0:
            lines.append(
                f"TFJob condition {kind} at {secs(seen['at'])}: {seen['reason']} {seen['message'][:160]}"
            )
    if out["death_to_training_again"] is None:
        lines.append(f"TFJob: the chief was not training again within {out['bound_s']:.0f} s of the death")
    else:
        lines.append(
            f"TFJob: the chief trained again {out['death_to_training_again']:.1f} s after the death "
            f"({out['training_again_line']})"
        )
    conditions = out["conditions"]
    verdict = "Succeeded" if "Succeeded" in conditions else "Failed" if "Failed" in conditions else None
    lines.append(f"TFJob: the job {'ended ' + verdict if verdict else 'had not finished'} within the bound")
    return lines


# ---- the run ----


def folder_check_image() -> str:
    """The image the deployed operator gives its workers' folder check: the floor's pods
    must be what tfmw's are."""
    deployment = json.loads(
        kubectl("-n", "tfmw-system", "get", "deployment", "tfmw-operator", "-o", "json").stdout
    )
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for env in container.get("env") or []:
            if env.get("name") == "TFMW_FOLDER_CHECK_IMAGE":
                return str(env.get("value", ""))
    return ""


def namespace_with_storage(kube: ClusterClient, contender: str) -> str:
    namespace = f"felt-{contender.split('-')[0]}-{uuid.uuid4().hex[:5]}"
    env = {**os.environ, "TFMW_SHARED_DIR": str(SHARED_DIR)}
    subprocess.run(
        [str(REPO / "hack" / "namespace-storage.sh"), namespace],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    kube.created_namespaces.append(namespace)
    wait_for("default service account", lambda: kube._has_default_sa(namespace), timeout=60)
    # A pod whose claim is not bound yet waits in the scheduler's backoff: bound first.
    wait_for(
        f"{namespace}'s claim bound",
        lambda: (
            kube.core.read_namespaced_persistent_volume_claim("tfmw-shared", namespace).status.phase
            == "Bound"
        ),
        timeout=60,
        interval=0.2,
    )
    return namespace


def remove_namespace(kube: ClusterClient, namespace: str) -> None:
    kubectl(
        "delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=180s", check=False
    )
    kubectl("delete", "pv", f"tfmw-shared-{namespace}", "--ignore-not-found", check=False)
    shutil.rmtree(SHARED_DIR / namespace, ignore_errors=True)


def tear_down(kube: ClusterClient, sides: Sequence[Side], namespaces: Sequence[str]) -> None:
    """The sides' watches and controllers stopped, then their namespaces and storage removed."""
    for side in sides:
        side.close()
    for namespace in namespaces:
        remove_namespace(kube, namespace)


def attempt(side: Side, measure: Callable[[Side, str], Json], job: str) -> Json:
    """One job's measures; a job that fails is reported as such (its measures missing), its
    objects deleted, and the run goes on."""
    try:
        return measure(side, job)
    except AssertionError as error:
        say(f"  {side.name} {job}: FAILED: {error}")
        with contextlib.suppress(Exception):
            side.delete(job)
        return {"job": job, "error": str(error)[:2000]}


def tfjob_crd_exists(kube: ClusterClient) -> bool:
    try:
        kube.apiext.read_custom_resource_definition("tfjobs.kubeflow.org")
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # the finally blocks clean up


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    signal.signal(signal.SIGTERM, on_sigterm)
    began, date = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    quiet_machine()
    kubectl("-n", "tfmw-system", "rollout", "status", "deployment/tfmw-operator", "--timeout=180s")
    kube = ClusterClient()
    sides: list[Side] = []
    namespaces: list[str] = []
    runs: list[Json] = []
    had_crd = True
    results: Json = {"date": date, "runs": RUNS, "short_args": SHORT_ARGS, "death_args": DEATH_ARGS}
    try:
        say(f"{RUNS} runs; building the TFJob controller (once) and creating its CRD ...")
        had_crd = tfjob_crd_exists(kube)  # then it is someone else's: left in place
        binary = install_tfjob_crd(kube)
        for contender in CONTENDERS:
            namespaces.append(namespace_with_storage(kube, contender))
        image = folder_check_image()
        sides = [
            TfmwSide(kube, namespaces[0]),
            TFJobSide(kube, namespaces[1], binary),
            FloorSide(kube, namespaces[2], image),
        ]
        say(
            f"namespaces: {', '.join(f'{s.name} {s.namespace}' for s in sides)}; folder check image {image!r}"
        )
        for run in range(RUNS):
            order = ", ".join(side.name for side in turn(run, sides))
            say(f"run {run + 1}/{RUNS}: short jobs ({' '.join(SHORT_ARGS)}), in turn: {order} ...")
            this: Json = {"short": {}, "death": {}}
            for side in turn(run, sides):
                this["short"][side.name] = attempt(side, short_job, f"short-{run}")
            say(f"run {run + 1}/{RUNS}: worker 1 killed once checkpointed ({' '.join(DEATH_ARGS)}) ...")
            for side in turn(run, sides):
                this["death"][side.name] = attempt(side, death_job, f"death-{run}")
            runs.append(this)
            results["per_run"] = runs
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "felt.json").write_text(json.dumps(results, indent=2) + "\n")
    finally:
        for side in sides:
            side.close()
        for namespace in namespaces:
            remove_namespace(kube, namespace)
        if not had_crd:
            remove_tfjob_crd(kube)
        for cert in CERT_DIR.glob("*"):
            cert.unlink()
    summary = {
        contender: {
            key: summarise([r[phase][contender].get(key) for r in runs]) for key, phase in PHASE.items()
        }
        for contender in CONTENDERS
    }
    stages = {
        phase: {
            contender: [r[phase][contender].get("stages") or {} for r in runs] for contender in CONTENDERS
        }
        for phase in ("short", "death")
    }
    bounds = {"tfjob-tuned": TFJOB_BOUND}
    results["summary"] = summary
    results["ratios"] = {
        f"tfmw/{other}": {
            key: ratio_of(summary["tfmw"][key], summary[other][key], bounds.get(other))[0]
            for _, key in MEASURES
        }
        for other in ("tfjob-tuned", "floor")
    }
    results["goals"] = goals(summary, bounds)
    results["bench_seconds"] = round(time.monotonic() - began)
    (RESULTS / "felt.json").write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(f"{date}, {RUNS} runs; median [min-max] of the runs, seconds")
    print(table(summary, bounds))
    print()
    print(markdown(summary, bounds))
    print()
    print("Where the time goes (the later of the two workers; tfmw and the floor: their pods'")
    print("watch events and log timestamps; TFJob: its pods replaced or created after the kill)")
    print(stage_table(stages["short"], STARTING, "create call"))
    print()
    print(stage_table(stages["death"], RESTARTING, "the kill"))
    print()
    for line in results["goals"]:
        print(line)
    print(f"\nsaved to {RESULTS / 'felt.json'} ({results['bench_seconds']} s)")


if __name__ == "__main__":
    main()
