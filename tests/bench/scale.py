"""Scale benchmark: N gangs of 8 workers on simulated nodes (kwok), one contender at a time.

    make bench-scale [JOBS=1000] [NODES=100]
    (or, with the control plane and `hack/kwok.sh up` running:
     TFMW_BENCH_JOBS=200 PYTHONPATH=tests python3 -m bench.scale)

Each contender (tfmw, Kubeflow's TFJob controller tuned, and as shipped) runs alone on the
same cluster, from an empty namespace, against kwok's nodes: its pods are scheduled by the
real scheduler and become Running. The runs, per contender:
  1. N jobs x 8 workers created at once -> every gang's 8 pods Running (per job, from the
     burst's start: the floor's own creates are its work); then, once every job's status
     says Running and the contender has stopped writing (its last Events), its idle CPU;
  2. 10 % of the jobs lose one worker (its pod Failed, exit code 137, as a kubelet reports
     a SIGKILL) -> the gang's 8 pods Running again, the dead one replaced;
  3. with N jobs running, one job at a time, the chief's completion -> Succeeded (tfmw:
     the marker on the shared folder; TFJob: worker 0's container exits 0);
  4. every other chief completes at once -> Succeeded, and -> cleaned (no pod of the job
     left Running or Pending).
Steps 2 and 3 come before 4 (not after, as the issue lists them) so that they happen with
N jobs running, from one creation. Over 1 to 4: the contender's CPU seconds and peak RSS,
its API writes per job (from the API server's counters, without what the scheduler, kwok
and the benchmark itself write), and the API server's own request latency (its
apiserver_request_duration_seconds histogram). A contender that does not reach a
milestone within its timeout is reported as such, with how far it got, and not run
further. The floor (no controller: the benchmark creates tfmw's own objects, remakes a
gang the moment a worker dies, deletes it the moment its chief completes) runs 1, 2, 4.
Prints progress as it goes, then one table with tfmw's ratios to each other contender;
writes bench/results/scale.json (bench/results/scale-<N>.json when N is not 1000).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.control_plane import RESULTS, THREADS, terminating_namespaces
from bench.peer import (
    CERT_DIR,
    Contender,
    TFJob,
    Tfmw,
    TfmwInPlace,
    check_baseline,
    cpu_seconds,
    install_tfjob_crd,
    machine_busy_percent,
    machine_ticks,
    peak_rss_mb,
    pod_template,
    remove_tfjob_crd,
    run_queue_seconds,
    scratch_log,
)
from bench.stats import (
    histogram_between,
    latency_summary,
    ratio,
    request_durations,
    say,
    summary,
    write_counts,
    writes_between,
)
from bench.supervisors import MARKS as IN_PLACE_MARKS
from bench.supervisors import EmulatedSupervisors
from kube import (
    LOCAL_KUBECONFIG,
    REPO,
    ClusterClient,
    SimulatedKubelet,
    kubectl,
    pause_deployed_operator,
    wait_for,
)
from kubernetes.client.exceptions import ApiException
from tfmw_operator.api.spec import JobSpec, Member, parse_spec
from tfmw_operator.core.builders import build_pod, build_service
from watching import follow_in_thread
from wrappers import JobWrapper, write_marker

Json = dict[str, Any]
JOBS = int(os.environ.get("TFMW_BENCH_JOBS", "1000"))
WORKERS = 8
LOSS_FRACTION = 0.1
STEADY_MARKERS = min(30, max(1, JOBS // 10))  # step 3's jobs, one at a time
# The idle window: as long as the operator's slowest periodic work (its job audit, 60 s), so
# the window holds one of each whenever it opens.
IDLE_SECONDS = float(os.environ.get("TFMW_BENCH_IDLE_SECONDS", "60"))
# The idle window opens once the contender has written nothing for this long (its Events
# held back in the launch come after it), or after WRITES_SETTLE_TIMEOUT in any case.
WRITES_QUIET_SECONDS = 5.0
WRITES_SETTLE_TIMEOUT = 180.0
# Graceful deletions the benchmark's kubelet confirms at once (the integration tests': 8).
KUBELETS_CONFIRMING = 32
RSS_SAMPLE_SECONDS = 0.25
# Per milestone: tfmw and TFJob tuned get this long; TFJob as shipped its own (shorter) bound.
TIMEOUT = float(os.environ.get("TFMW_BENCH_TIMEOUT", str(max(300, JOBS * 0.9))))
SHIPPED_TIMEOUT = float(os.environ.get("TFMW_BENCH_SHIPPED_TIMEOUT", "300"))
# Bare pods made Running and deleted before any contender, unmeasured (warm_up).
WARM_UP_PODS = int(os.environ.get("TFMW_BENCH_WARM_UP_PODS", str(JOBS * WORKERS // 2)))
BASELINE = os.environ.get("TFMW_BENCH_BASELINE", "")
# Only step 1, the launch: a design's launch measured against another's, quickly.
LAUNCH_ONLY = bool(os.environ.get("TFMW_BENCH_LAUNCH_ONLY"))
KWOK_LABEL = "tfmw.dev/kwok"  # hack/kwok.sh's nodes: the label and the taint
DEAD_EXIT_CODE = 137
CLAIM = "tfmw-shared"
# What others write while a contender works: the scheduler (bindings; its Events go to
# events.k8s.io, SCHEDULER_EVENTS), kwok as the kubelet (pod status, node leases), the controller-manager
# (Endpoints, EndpointSlices of the Services) and the benchmark (pod status, as kwok).
SCHEDULER_EVENTS = ("events.k8s.io",)
NOT_THE_CONTENDERS = frozenset(
    {"pods/status", "pods/binding", "nodes", "nodes/status", "leases", "endpoints", "endpointslices"}
)


def kwok_template() -> Json:
    """The benchmark's pod template, on kwok's nodes only."""
    template = pod_template()
    spec = template["spec"]
    del spec["schedulerName"]
    spec["nodeSelector"] = {KWOK_LABEL: "true"}
    spec["tolerations"] = [{"key": KWOK_LABEL, "operator": "Exists", "effect": "NoSchedule"}]
    return template


def warm_up(kube: ClusterClient, count: int) -> None:
    """`count` bare pods on kwok's nodes, Running, then deleted, before any contender and not
    measured. A cluster just brought up is slower for whoever comes first: the same tfmw
    launched 1,000 gangs in 361 s as the first contender on a new cluster and in 219 s on one
    that had seen a burst, and the contender after it had the warm one."""
    if count <= 0:
        return
    namespace = kube.new_namespace("warm-up")
    template = kwok_template()
    began = time.monotonic()
    say(f"warming the cluster up: {count} bare pods on kwok's nodes, Running, then deleted ...")

    def create(i: int) -> None:
        kube.core.create_namespaced_pod(namespace, {"metadata": {"name": f"warm-{i}"}, **template})

    def running() -> bool:
        pods = kube.core.list_namespaced_pod(namespace, field_selector="status.phase=Running").items
        return len(pods) >= count

    try:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(create, range(count)))
        wait_for("the warm-up pods Running", running, timeout=TIMEOUT, interval=2)
    finally:
        kube.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        kube.delete_namespace(namespace)
    say(f"warmed up in {time.monotonic() - began:.0f} s")


def with_shared_volume(template: Json) -> Json:
    """TFJob's pods mount the same claim as tfmw's (tfmw adds it itself): the same pods to
    schedule."""
    spec = template["spec"]
    spec["volumes"] = [{"name": "tfmw-shared", "persistentVolumeClaim": {"claimName": CLAIM}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "tfmw-shared", "mountPath": "/shared"}]
    return template


@dataclass
class Pod:
    uid: str
    phase: str
    ready: bool
    deleting: bool
    scheduled: bool = False


# Where a launch of step 1 got, in order.
LAUNCH_MARKS = ("job created", "pods all created", "pods all scheduled", "pods all Running")
# Where a restart of step 2 got, in order (TFJob, replacing the dead pod alone, deletes one).
RESTART_MARKS = (
    "an old pod deleting",
    "old pods gone",
    "a new pod created",
    "new pods all created",
    "new pods all Running",
)


def gang_running(pods: Collection[Pod], dead: Collection[str], workers: int = WORKERS) -> bool:
    """All `workers` pods Running and Ready, none being deleted, none a pod that died."""
    live = [p for p in pods if not p.deleting]
    return len(live) == workers and all(p.phase == "Running" and p.ready and p.uid not in dead for p in live)


def cleaned(pods: Collection[Pod]) -> bool:
    """No pod left Running or Pending (a finished one may stay, as cleanPodPolicy Running keeps it)."""
    return not any(p.phase in ("Running", "Pending") for p in pods)


@dataclass
class Milestones:
    """Per job, from its trigger to the first moment its predicate held."""

    predicates: dict[str, Callable[[str], bool]]
    triggered: dict[str, float] = field(default_factory=dict)
    reached: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))

    def done(self, name: str) -> int:
        return len(self.reached[name])


def says(status: Json, state: str) -> bool:
    """A job's status says `state`: tfmw's phase, or TFJob's condition."""
    return status.get("phase") == state or any(
        c.get("type") == state and c.get("status") == "True" for c in status.get("conditions") or []
    )


class Tracker:
    """A contender's pods and jobs in its namespace, from watches; times milestones."""

    def __init__(
        self, kube: ClusterClient, contender: Contender, namespace: str, kubelet: SimulatedKubelet
    ) -> None:
        self.contender = contender
        self.kubelet = kubelet
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.pods: dict[str, dict[str, Pod]] = defaultdict(dict)
        self.uids: dict[str, str] = {}
        self.attempts: dict[str, int] = {}  # tfmw's status.attempt
        self.succeeded: set[str] = set()
        self.said_running: set[str] = set()  # jobs whose own status says Running
        self.dead: set[str] = set()  # uids of pods the benchmark failed
        self.pods_gone = 0  # each deleted by the contender (or its garbage collection) once
        self.milestones: Milestones | None = None
        # Step 2's jobs: the pods each had when its worker died, and when the restart got
        # where (RESTART_MARKS), from that death.
        self.old_pods: dict[str, set[str]] = {}
        self.restart_marks: dict[str, dict[str, float]] = defaultdict(dict)
        # Step 1's jobs: when each job's pods were all created, scheduled, Running (LAUNCH_MARKS).
        self.launching = False
        self.launch_marks: dict[str, dict[str, float]] = defaultdict(dict)
        # A contender whose gangs restart in place: its pods' supervisors, emulated; told of
        # each pod of the first attempt once it is Running.
        self.supervisors: EmulatedSupervisors | None = None
        self.reported: set[str] = set()
        group, version, plural = contender.api
        follow_in_thread(
            kube.core.list_namespaced_pod,
            namespace,
            label_selector=contender.job_label,
            on_event=self._pod,
            stop=self.stop,
        )
        follow_in_thread(
            kube.custom.list_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            on_event=self._job,
            stop=self.stop,
        )

    def _pod(self, kind: str, obj: Json) -> None:
        meta, status = obj["metadata"], obj.get("status") or {}
        job = (meta.get("labels") or {}).get(self.contender.job_label, "")
        with self.lock:
            if kind == "DELETED":
                if self.pods[job].pop(meta["name"], None) is not None:
                    self.pods_gone += 1
            else:
                ready = any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or []
                )
                self.pods[job][meta["name"]] = Pod(
                    meta["uid"],
                    status.get("phase", ""),
                    ready,
                    bool(meta.get("deletionTimestamp")),
                    bool((obj.get("spec") or {}).get("nodeName")),
                )
            self._check(job)
            self._mark_restart(job)
            self._mark_launch(job)
            started = (
                kind != "DELETED" and status.get("phase") == "Running" and meta["uid"] not in self.reported
            )
            if self.supervisors is not None and started:
                self.reported.add(meta["uid"])
                owner = (meta.get("ownerReferences") or [{}])[0].get("uid", "")
                self.supervisors.pod_running(job, owner, meta["name"], meta["uid"])
        # kwok leaves deletions to us (hack/kwok.sh): confirmed by UID, as a kubelet does.
        self.kubelet.confirm_later(kind, obj)

    def _job(self, kind: str, obj: Json) -> None:
        name, status = obj["metadata"]["name"], obj.get("status") or {}
        with self.lock:
            self.uids[name] = obj["metadata"]["uid"]
            self.attempts[name] = int(status.get("attempt") or 0)
            if says(status, "Running"):
                self.said_running.add(name)
            else:
                self.said_running.discard(name)
            if says(status, "Succeeded"):
                self.succeeded.add(name)
            self._check(name)

    def _check(self, job: str) -> None:
        """Under the lock: record the milestones this job has just reached."""
        milestones = self.milestones
        if milestones is None or job not in milestones.triggered:
            return
        now = time.monotonic()
        for name, predicate in milestones.predicates.items():
            if job not in milestones.reached[name] and predicate(job):
                milestones.reached[name][job] = now - milestones.triggered[job]

    def mark_launch(self, job: str, mark: str) -> None:
        """A launch mark the benchmark itself reaches (its create call answered)."""
        with self.lock:
            milestones = self.milestones
            if milestones is not None and job in milestones.triggered:
                self.launch_marks[job].setdefault(mark, time.monotonic() - milestones.triggered[job])

    def _mark_launch(self, job: str) -> None:
        """Under the lock: in step 1, where the launch of `job` has got (LAUNCH_MARKS)."""
        milestones = self.milestones
        if not self.launching or milestones is None or job not in milestones.triggered:
            return
        marks = self.launch_marks[job]
        pods = self.pods[job].values()
        seen = {
            "pods all created": len(pods) >= WORKERS,
            "pods all scheduled": sum(1 for p in pods if p.scheduled) >= WORKERS,
            "pods all Running": sum(1 for p in pods if p.phase == "Running") >= WORKERS,
        }
        since = time.monotonic() - milestones.triggered[job]
        for mark, reached in seen.items():
            if reached and mark not in marks:
                marks[mark] = since

    def _mark_restart(self, job: str) -> None:
        """Under the lock: where step 2's restart of `job` has got (RESTART_MARKS)."""
        old = self.old_pods.get(job)
        milestones = self.milestones
        if old is None or milestones is None or job not in milestones.triggered:
            return
        since = time.monotonic() - milestones.triggered[job]
        marks = self.restart_marks[job]
        pods = self.pods[job].values()
        seen = {
            "an old pod deleting": any(p.uid in old and p.deleting for p in pods),
            "old pods gone": not any(p.uid in old for p in pods),
            "a new pod created": any(p.uid not in old for p in pods),
            "new pods all created": sum(1 for p in pods if p.uid not in old) >= WORKERS,
            "new pods all Running": sum(1 for p in pods if p.uid not in old and p.phase == "Running")
            >= WORKERS,
        }
        for mark, reached in seen.items():
            if reached and mark not in marks:
                marks[mark] = since

    # ---- predicates (called under the lock) ----

    def gang_running(self, job: str) -> bool:
        return gang_running(self.pods[job].values(), self.dead)

    def is_succeeded(self, job: str) -> bool:
        return job in self.succeeded

    def cleaned(self, job: str) -> bool:
        return job in self.succeeded and cleaned(self.pods[job].values())

    # ----

    def expect(self, predicates: dict[str, Callable[[str], bool]]) -> Milestones:
        with self.lock:
            self.milestones = Milestones(predicates)
            return self.milestones

    def trigger(self, job: str, before: Callable[[], None] | None = None) -> None:
        """The job's clock starts now; `before` runs first, under the lock (the dead pod
        is marked before its gang could look whole again)."""
        with self.lock:
            assert self.milestones is not None
            if before is not None:
                before()
            self.milestones.triggered[job] = time.monotonic()
        self._check_locked(job)

    def trigger_all(self, jobs: Collection[str]) -> float:
        """Every job's clock starts now, as when they all come at once; returns now."""
        began = time.monotonic()
        for job in jobs:
            self.trigger(job)
        return began

    def _check_locked(self, job: str) -> None:
        with self.lock:
            self._check(job)

    def pod_uid(self, job: str, name: str) -> str:
        with self.lock:
            return self.pods[job][name].uid

    def gang(self, job: str) -> dict[str, tuple[str, str]]:
        """The job's pods: stem (worker-<i>) -> (pod name, pod UID)."""
        with self.lock:
            return {name.removeprefix(f"{job}-"): (name, p.uid) for name, p in self.pods[job].items()}

    def reach(self, job: str, milestone: str, seconds: float) -> None:
        """A milestone the benchmark sees itself (the emulated supervisors' reports)."""
        with self.lock:
            milestones = self.milestones
            if milestones is not None and job in milestones.triggered:
                milestones.reached[milestone].setdefault(job, seconds)


def medians(marks: dict[str, dict[str, float]], names: Collection[str]) -> dict[str, float]:
    """Per mark, the median over the jobs that reached it."""
    return {
        mark: round(statistics.median(values), 3)
        for mark in names
        if (values := [m[mark] for m in marks.values() if mark in m])
    }


class RssSampler:
    """The contender's resident memory every RSS_SAMPLE_SECONDS, its peak per step of the run
    (the kernel's high-water mark says how high, not when)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.step = "start"
        self.peak: dict[str, float] = {}
        self.stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self.stop.wait(RSS_SAMPLE_SECONDS):
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            found = re.search(r"VmRSS:\s+(\d+)", status)
            if found:
                mb = int(found.group(1)) / 1024
                self.peak[self.step] = max(mb, self.peak.get(self.step, 0.0))

    def peaks(self) -> dict[str, float]:
        return {step: round(mb, 1) for step, mb in self.peak.items()}


class StepCpu:
    """The contender's CPU seconds per step of the run, where its total went, and its seconds
    waiting for a core, runnable (run_queue_seconds): a step slow at a low CPU figure was
    either waiting on others or not let run."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.marks: list[tuple[str, float, float]] = []

    def mark(self, step: str) -> None:
        """`step` begins now (the one before it ends)."""
        self.marks.append((step, cpu_seconds(self.pid), run_queue_seconds(self.pid)))

    def seconds(self) -> dict[str, float]:
        return self._spent([cpu for _, cpu, _ in self.marks], cpu_seconds(self.pid))

    def waits(self) -> dict[str, float]:
        return self._spent([waited for _, _, waited in self.marks], run_queue_seconds(self.pid))

    def _spent(self, at_marks: list[float], now: float) -> dict[str, float]:
        """Each step's share of a growing count, read at each mark (`at_marks`) and `now`."""
        ends = [*at_marks[1:], now]
        steps = [step for step, _, _ in self.marks]
        return {step: round(end - begin, 1) for step, begin, end in zip(steps, at_marks, ends, strict=True)}


class DidNotFinish(Exception):
    pass


def wait_milestone(
    tracker: Tracker, milestones: Milestones, name: str, total: int, timeout: float, what: str
) -> float:
    """Until `total` jobs reached `name`, printing progress; the seconds it took."""
    begin, last_said = time.monotonic(), 0.0
    while True:
        tracker.contender.check_alive()
        done = milestones.done(name)
        elapsed = time.monotonic() - begin
        if done >= total:
            return elapsed
        if elapsed > timeout:
            raise DidNotFinish(f"{done} of {total} {what} after {timeout:.0f} s")
        if elapsed - last_said >= 10:
            say(f"  {tracker.contender.name}: {done}/{total} {what} ({elapsed:.0f} s)")
            last_said = elapsed
        time.sleep(0.1)


def reached_by_all(
    tracker: Tracker, milestones: Milestones, name: str, total: int, began: float, timeout: float, what: str
) -> tuple[Json, float]:
    """Waits until `total` jobs reached `name`: their per-job times summed up with the
    seconds since `began` for all of them, and those seconds."""
    wait_milestone(tracker, milestones, name, total, timeout, what)
    took = time.monotonic() - began
    return {**summary(list(milestones.reached[name].values())), "all_s": round(took, 1)}, took


def launched(tracker: Tracker, milestones: Milestones, began: float, timeout: float, out: Json) -> float:
    """Step 1's end, for the floor as for a controller: waits until every gang is Running,
    puts the per-job times and where they went into `out`; the seconds since `began`."""
    out["create_to_gang_running"], took = reached_by_all(
        tracker, milestones, "running", JOBS, began, timeout, "gangs Running"
    )
    with tracker.lock:
        tracker.launching = False
        launches = dict(tracker.launch_marks)
    out["create_breakdown_median_s"] = medians(launches, LAUNCH_MARKS)
    return took


def profile_path(contender: Contender, step: str) -> Path:
    return RESULTS / f"pyspy-{contender.name}-{step}-{JOBS}.txt"


def start_profiler(contender: Contender, step: str) -> subprocess.Popen[bytes] | None:
    """With TFMW_BENCH_PYSPY naming py-spy, tfmw's stacks in a step ("launch": while its gangs
    launch; "restarts": from the deaths to every gang Running again; "idle": the idle window,
    idle threads left out), sampled from outside, in
    bench/results/pyspy-<contender>-<step>-<JOBS>.txt (collapsed stacks)."""
    pyspy = os.environ.get("TFMW_BENCH_PYSPY")
    if not pyspy or not isinstance(contender, Tfmw):
        return None
    out = profile_path(contender, step)
    pid = str(contender.pid)
    command = [
        pyspy,
        "record",
        "--pid",
        pid,
        "--format",
        "raw",
        "--rate",
        "100",
        "--nonblocking",
        "-o",
        str(out),
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profiler(
    profiler: subprocess.Popen[bytes] | None, out: dict[str, Any], contender: Contender, step: str
) -> None:
    if profiler is None:
        return
    profiler.send_signal(signal.SIGINT)
    profiler.wait(timeout=60)
    out[f"profile_{step}"] = str(profile_path(contender, step))


def metrics_text() -> str:
    return kubectl("get", "--raw", "/metrics").stdout


def contender_writes() -> float:
    """Every write the API server counted so far, but those of others (NOT_THE_CONTENDERS)."""
    counts = write_counts(metrics_text(), SCHEDULER_EVENTS)
    return float(sum(writes_between({}, counts, NOT_THE_CONTENDERS).values()))


def writes_settled() -> float:
    """Wait until the contender has written nothing for WRITES_QUIET_SECONDS; how long after
    the call its last write came (to the second: the counters are read once a second)."""
    began = time.monotonic()
    last, quiet_since = contender_writes(), began
    while time.monotonic() - began < WRITES_SETTLE_TIMEOUT:
        time.sleep(1)
        now_writes = contender_writes()
        if now_writes != last:
            last, quiet_since = now_writes, time.monotonic()
        elif time.monotonic() - quiet_since >= WRITES_QUIET_SECONDS:
            break
    return round(quiet_since - began, 1)


def create_claim(kube: ClusterClient, namespace: str) -> str:
    """A volume bound to the namespace's claim: kwok's pods never mount it, but the
    scheduler places a pod only once its claim is bound."""
    volume = f"bench-{namespace}"
    kube.core.create_persistent_volume(
        {
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "hostPath": {"path": "/nonexistent/tfmw-bench"},
                "claimRef": {"namespace": namespace, "name": CLAIM},
                "persistentVolumeReclaimPolicy": "Delete",
            },
        }
    )
    kube.core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": CLAIM},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": volume,
                "storageClassName": "",
            },
        },
    )
    kube.core.patch_persistent_volume(volume, {"spec": {"storageClassName": ""}})
    wait_for(
        "the claim bound",
        lambda: kube.core.read_namespaced_persistent_volume_claim(CLAIM, namespace).status.phase == "Bound",
        timeout=60,
        interval=0.2,
    )
    return volume


def complete_chief(tracker: Tracker, namespace: str, shared: Path, job: str) -> None:
    """The chief's completion as each contender learns of it: tfmw's marker on the shared
    folder; for TFJob, worker 0's container exiting 0 (as kwok's kubelet would say)."""
    if isinstance(tracker.contender, Tfmw):
        with tracker.lock:
            uid, attempt = tracker.uids[job], tracker.attempts[job]
        write_marker(shared / namespace / job, uid, attempt=attempt)
    else:
        tracker.kubelet.exit(namespace, f"{job}-worker-0", 0)


class Floor(Contender):
    """The physical limit: no controller. The benchmark creates each job as a user does (the
    same TFMultiWorkerJob, which nothing reconciles), then at once the very objects tfmw
    would create for it (tfmw's own builders, owned by the job); it restarts a gang the
    moment it kills a worker (every pod deleted with no grace, then created again), and
    deletes a gang's pods the moment its chief completes: what the scheduler, kwok and the
    API server allow, with nothing between."""

    def __init__(self, namespace: str) -> None:
        super().__init__("floor", [], "tfmw.dev/job-name", ("tfmw.dev", "v1alpha1", "tfmwjobs"))
        self.namespace = namespace
        self.specs: dict[str, JobSpec] = {}

    def start(self, log: Path) -> None:
        """Nothing runs: the benchmark's own threads act."""

    def create_gang(
        self, kube: ClusterClient, name: str, attempt: int = 0, created: Callable[[], None] = lambda: None
    ) -> None:
        if attempt == 0:
            group, version, plural = self.api
            manifest = JobWrapper(name, self.namespace, WORKERS).template(self.template).manifest()
            job = kube.custom.create_namespaced_custom_object(
                group, version, self.namespace, plural, manifest
            )
            created()
            spec = parse_spec(job)
            assert isinstance(spec, JobSpec), spec
            self.specs[name] = spec
            kube.core.create_namespaced_service(self.namespace, build_service(spec))
        spec = self.specs[name]
        for index in range(WORKERS):
            kube.core.create_namespaced_pod(self.namespace, build_pod(spec, Member.worker(index), attempt))

    def delete_gang(self, kube: ClusterClient, uids: dict[str, str]) -> None:
        for pod, uid in uids.items():
            with contextlib.suppress(ApiException):
                kube.core.delete_namespaced_pod(
                    pod, self.namespace, body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
                )


def run_floor(kube: ClusterClient, shared: Path, timeout: float) -> dict[str, Any]:
    """Steps 1, 2 and 4 with no controller (Floor); step 3 (the controller noticing the
    marker) has no floor."""
    wait_for("no terminating namespace", lambda: not terminating_namespaces(kube), timeout=600, interval=1)
    namespace = kube.new_namespace("scale", pod_security="baseline")
    floor = Floor(namespace)
    volume = create_claim(kube, namespace)
    floor.template = kwok_template()
    kubelet = SimulatedKubelet(kube, grace_cap_seconds=0, confirming_at_once=KUBELETS_CONFIRMING)
    tracker = Tracker(kube, floor, namespace, kubelet)
    out: dict[str, Any] = {"jobs": JOBS, "workers": WORKERS}
    names = [f"s{i}" for i in range(JOBS)]
    pool = ThreadPoolExecutor(THREADS)
    try:
        time.sleep(3)
        say(f"floor: {JOBS} gangs x {WORKERS} pods created by the benchmark at once ...")
        milestones = tracker.expect({"running": tracker.gang_running})
        tracker.launching = True

        # Every job's clock starts now, as when N jobs are applied at once: the floor's own
        # creates are the work measured (each job timed from its own first create call left
        # out the wait behind the others, and its "all" counted only after the last call).
        began, machine = tracker.trigger_all(names), machine_ticks()

        def create(name: str) -> None:
            floor.create_gang(kube, name, created=lambda: tracker.mark_launch(name, "job created"))

        list(pool.map(create, names))
        took = launched(tracker, milestones, began, timeout, out)
        out["machine_busy_percent_launch"] = machine_busy_percent(machine)
        say(
            f"floor: all {JOBS} gangs Running in {took:.1f} s; where the time went: {out['create_breakdown_median_s']}"
        )
        if LAUNCH_ONLY:
            return out

        losers = names[:: round(1 / LOSS_FRACTION)]
        say(f"floor: {len(losers)} gangs lose one worker and are made again at once ...")
        milestones = tracker.expect({"running": tracker.gang_running})

        gangs: dict[str, dict[str, str]] = {}

        def lose(i_name: tuple[int, str]) -> None:
            i, name = i_name
            pod = f"{name}-worker-{1 + i % (WORKERS - 1)}"
            with tracker.lock:
                gangs[name] = {n: p.uid for n, p in tracker.pods[name].items()}
            tracker.trigger(name, before=lambda: tracker.dead.add(gangs[name][pod]))
            kubelet.exit(namespace, pod, DEAD_EXIT_CODE)

        def remake(name: str) -> None:
            floor.delete_gang(kube, gangs[name])
            wait_for(f"{name}'s pods gone", lambda: not tracker.pods[name], timeout=timeout, interval=0.01)
            floor.create_gang(kube, name, attempt=1)

        # All the deaths first, as for the controllers; then the floor remakes the gangs.
        began, machine = time.monotonic(), machine_ticks()
        list(pool.map(lose, enumerate(losers)))
        list(pool.map(remake, losers))
        out["worker_death_to_gang_running"], took = reached_by_all(
            tracker, milestones, "running", len(losers), began, timeout, "gangs Running again"
        )
        out["machine_busy_percent_restarts"] = machine_busy_percent(machine)
        say(f"floor: all {len(losers)} gangs Running again in {took:.1f} s")

        # The same jobs as a controller's step 4 (all but step 3's), all ending now.
        steady = set(names[1 : 1 + STEADY_MARKERS])
        rest = [n for n in names if n not in steady]
        say(f"floor: {len(rest)} gangs deleted at once ...")
        milestones = tracker.expect({"cleaned": lambda job: cleaned(tracker.pods[job].values())})
        began = tracker.trigger_all(rest)

        def finish(name: str) -> None:
            with tracker.lock:
                uids = {n: p.uid for n, p in tracker.pods[name].items()}
            floor.delete_gang(kube, uids)

        list(pool.map(finish, rest))
        out["completion_to_cleaned"], took = reached_by_all(
            tracker, milestones, "cleaned", len(rest), began, timeout, "gangs cleaned"
        )
        say(f"floor: all {len(rest)} gangs cleaned in {took:.1f} s")
    except DidNotFinish as error:
        out["did_not_finish"] = str(error)
        say(f"floor: did not finish: {error}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        tracker.stop.set()
        kubelet.stop()
        with contextlib.suppress(ApiException):
            kube.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        kube.delete_namespace(namespace)
        with contextlib.suppress(ApiException):
            kube.core.delete_persistent_volume(volume)
    return out


def run_contender(
    kube: ClusterClient, make: Callable[[str], Contender], shared: Path, timeout: float
) -> dict[str, Any]:
    """The four steps for one contender, alone, from an empty namespace."""
    wait_for("no terminating namespace", lambda: not terminating_namespaces(kube), timeout=600, interval=1)
    namespace = kube.new_namespace("scale", pod_security="baseline")
    contender = make(namespace)
    volume = create_claim(kube, namespace)
    contender.template = kwok_template()
    if isinstance(contender, TFJob):
        contender.template = with_shared_volume(contender.template)
        contender.restart_policy = "ExitCode"
    contender.prepare(kube, namespace)
    # Deletions finished at once, as kwok's own stage did, but of that very pod; by as many
    # at once as KUBELETS_CONFIRMING (each of the 100 nodes' kubelets confirms its own).
    kubelet = SimulatedKubelet(kube, grace_cap_seconds=0, confirming_at_once=KUBELETS_CONFIRMING)
    tracker = Tracker(kube, contender, namespace, kubelet)
    supervisors = None
    if contender.in_place:
        # kwok runs no process: the bench writes each supervised pod's reports (bench.supervisors).
        supervisors = EmulatedSupervisors(
            shared, namespace, lambda job, seconds: tracker.reach(job, "running", seconds)
        )
        tracker.supervisors = supervisors
    out: dict[str, Any] = {"jobs": JOBS, "workers": WORKERS}
    names = [f"s{i}" for i in range(JOBS)]
    pool = ThreadPoolExecutor(THREADS)
    try:
        contender.start(scratch_log(contender.name))
        contender.after_start(kube, namespace)
        rss = RssSampler(contender.pid)
        steps = StepCpu(contender.pid)

        def step_begins(step: str) -> None:
            """The run's next step: its RSS peak and its CPU seconds counted apart."""
            rss.step = step
            steps.mark(step)

        time.sleep(3)
        writes_before, durations_before = (
            write_counts(metrics_text(), SCHEDULER_EVENTS),
            request_durations(metrics_text()),
        )
        cpu_before = cpu_seconds(contender.pid)
        begin = time.monotonic()
        profiler = start_profiler(contender, "launch")

        # 1. N jobs at once -> every gang Running
        step_begins("1 launch")
        say(f"{contender.name}: {JOBS} jobs x {WORKERS} workers at once ...")
        milestones = tracker.expect({"running": tracker.gang_running})
        tracker.launching = True
        group, version, plural = contender.api

        # Every job's clock starts now, the burst's start, as the floor's does (its own
        # creates are its work); the jobs' create calls follow from the benchmark's threads.
        began, machine = tracker.trigger_all(names), machine_ticks()

        def create(name: str) -> None:
            kube.custom.create_namespaced_custom_object(
                group, version, namespace, plural, contender.job(name, WORKERS)
            )
            tracker.mark_launch(name, "job created")

        list(pool.map(create, names))
        took = launched(tracker, milestones, began, timeout, out)
        out["machine_busy_percent_launch"] = machine_busy_percent(machine)
        say(
            f"{contender.name}:   where the time went (median s from the create): {out['create_breakdown_median_s']}"
        )
        # Busy or waiting: a controller near 100 % here is bound by its own CPU.
        out["cpu_s_to_all_running"] = round(cpu_seconds(contender.pid) - cpu_before, 1)
        out["cpu_percent_to_all_running"] = round(out["cpu_s_to_all_running"] / took * 100, 1)
        stop_profiler(profiler, out, contender, "launch")
        say(
            f"{contender.name}: all {JOBS} gangs Running in {took:.1f} s, "
            f"using {out['cpu_percent_to_all_running']} % of a core"
        )

        # Steady state begins when every job's status says Running: at 1,000 jobs the status
        # writes and Events trailed the last pod by more than the 5 s once waited here.
        said = time.monotonic()
        while time.monotonic() - said < 120:
            with tracker.lock:
                if len(tracker.said_running) >= JOBS:
                    break
            time.sleep(0.5)
        out["status_running_after_pods_s"] = round(time.monotonic() - said, 1)
        # The last status writes and the Events held back in the launch are launch work.
        out["writes_settled_after_statuses_s"] = writes_settled()
        profiler = start_profiler(contender, "idle")
        cpu_idle, idle_begin = cpu_seconds(contender.pid), time.monotonic()
        time.sleep(IDLE_SECONDS)
        out["idle_cpu_percent_with_all_running"] = round(
            (cpu_seconds(contender.pid) - cpu_idle) / (time.monotonic() - idle_begin) * 100, 2
        )
        stop_profiler(profiler, out, contender, "idle")
        say(
            f"{contender.name}: every status said Running {out['status_running_after_pods_s']} s after "
            f"the pods, its last write {out['writes_settled_after_statuses_s']} s after that; "
            f"then idle CPU with {JOBS} jobs running {out['idle_cpu_percent_with_all_running']} %"
        )

        if LAUNCH_ONLY:
            return out
        # 2. 10 % lose one worker -> every gang Running again
        step_begins("2 restarts")
        losers = names[:: round(1 / LOSS_FRACTION)]
        say(f"{contender.name}: {len(losers)} jobs lose one worker ...")
        # In place the pods stay: the gang runs again when its supervisors (emulated: kwok runs
        # no process) all run the new attempt's child.
        in_place = supervisors is not None
        milestones = tracker.expect({"running": (lambda job: False) if in_place else tracker.gang_running})

        def lose(i_name: tuple[int, str]) -> None:
            i, name = i_name
            stem = f"worker-{1 + i % (WORKERS - 1)}"
            pod = f"{name}-{stem}"
            uid = tracker.pod_uid(name, pod)

            def before() -> None:
                tracker.dead.add(uid)
                tracker.old_pods[name] = {p.uid for p in tracker.pods[name].values()}

            tracker.trigger(name, before=before)
            if supervisors is not None:
                supervisors.kill(name, tracker.uids[name], tracker.gang(name), stem)
            else:
                kubelet.exit(namespace, pod, DEAD_EXIT_CODE)

        machine = machine_ticks()
        writes_before_restarts, deletions_before_restarts = (
            write_counts(metrics_text(), SCHEDULER_EVENTS),
            kubelet.deletions_sent,
        )
        profiler = start_profiler(contender, "restarts")
        list(pool.map(lose, enumerate(losers)))
        took = wait_milestone(tracker, milestones, "running", len(losers), timeout, "gangs Running again")
        stop_profiler(profiler, out, contender, "restarts")
        out["worker_death_to_gang_running"] = {
            **summary(list(milestones.reached["running"].values())),
            "all_s": round(took, 1),
        }
        out["machine_busy_percent_restarts"] = machine_busy_percent(machine)
        with tracker.lock:
            marks = dict(tracker.restart_marks)
            tracker.old_pods.clear()
        if supervisors is not None:
            marks = supervisors.marks()
        out["worker_death_breakdown_median_s"] = medians(marks, IN_PLACE_MARKS if in_place else RESTART_MARKS)
        say(f"{contender.name}: all {len(losers)} gangs Running again in {took:.1f} s")
        say(
            f"{contender.name}:   where the time went (median s from the death): {out['worker_death_breakdown_median_s']}"
        )
        # The restarts' own writes: from the first death until the contender is quiet again
        # (its status writes and Events trail the pods).
        writes_settled()
        restart_writes = writes_between(
            writes_before_restarts, write_counts(metrics_text(), SCHEDULER_EVENTS), NOT_THE_CONTENDERS
        )
        restart_writes["DELETE pods"] = restart_writes.get("DELETE pods", 0) - (
            kubelet.deletions_sent - deletions_before_restarts
        )
        restart_writes = {k: v for k, v in sorted(restart_writes.items()) if v > 0}
        out["api_writes_restarts"] = restart_writes
        out["api_writes_per_restart"] = round(sum(restart_writes.values()) / len(losers), 1)
        say(f"{contender.name}: API writes per restart {out['api_writes_per_restart']}: {restart_writes}")
        if in_place:
            # Steps 3 and 4 are the re-created contender's own (its completion and clean-up
            # code): not run again, and no supervisor here would exit on the control file.
            return out

        # 3. with N jobs running, one chief at a time -> Succeeded
        step_begins("3 completions")
        steady = names[1 : 1 + STEADY_MARKERS]
        say(f"{contender.name}: {len(steady)} chiefs complete, one at a time, with {JOBS} jobs running ...")
        milestones = tracker.expect({"succeeded": tracker.is_succeeded})
        for name in steady:
            tracker.trigger(name)
            complete_chief(tracker, namespace, shared, name)
            wait_for(
                f"{name} Succeeded",
                lambda name=name: name in milestones.reached["succeeded"],  # type: ignore[misc]
                timeout=60,
                interval=0.005,
            )
        out["steady_completion_to_succeeded"] = summary(list(milestones.reached["succeeded"].values()))

        # 4. every other chief at once -> Succeeded, and cleaned
        step_begins("4 completions and cleanup")
        rest = [n for n in names if n not in set(steady)]
        say(f"{contender.name}: the {len(rest)} other chiefs complete at once ...")
        milestones = tracker.expect({"succeeded": tracker.is_succeeded, "cleaned": tracker.cleaned})

        def finish(name: str) -> None:
            tracker.trigger(name)
            complete_chief(tracker, namespace, shared, name)

        list(pool.map(finish, rest))
        took = wait_milestone(tracker, milestones, "succeeded", len(rest), timeout, "jobs Succeeded")
        cleaned = wait_milestone(tracker, milestones, "cleaned", len(rest), timeout, "jobs cleaned")
        out["completion_to_succeeded"] = {
            **summary(list(milestones.reached["succeeded"].values())),
            "all_s": round(took, 1),
        }
        out["completion_to_cleaned"] = {
            **summary(list(milestones.reached["cleaned"].values())),
            "all_s": round(took + cleaned, 1),
        }
        say(f"{contender.name}: all Succeeded in {took:.1f} s, cleaned {cleaned:.1f} s later")

        time.sleep(3)  # the last status writes and Events
        out["whole_run_s"] = round(time.monotonic() - begin, 1)
        out["cpu_s"] = round(cpu_seconds(contender.pid) - cpu_before, 1)
        out["peak_rss_mb"] = round(peak_rss_mb(contender.pid), 1)
        out["peak_rss_mb_by_step"] = rss.peaks()
        say(f"{contender.name}: peak RSS by step (MB): {out['peak_rss_mb_by_step']}")
        out["cpu_s_by_step"] = steps.seconds()
        say(f"{contender.name}: CPU by step (s): {out['cpu_s_by_step']}")
        out["run_queue_s_by_step"] = steps.waits()
        say(f"{contender.name}: waiting for a core, runnable, by step (s): {out['run_queue_s_by_step']}")
        writes = writes_between(
            writes_before, write_counts(metrics_text(), SCHEDULER_EVENTS), NOT_THE_CONTENDERS
        )
        # The benchmark's own creates, and its kubelet's DELETEs that finish graceful deletions.
        writes[f"POST {plural}"] = writes.get(f"POST {plural}", 0) - JOBS
        out["api_delete_pods_counted_by_the_api_server"] = writes.get("DELETE pods", 0)
        writes["DELETE pods"] = writes.get("DELETE pods", 0) - kubelet.deletions_sent
        with tracker.lock:
            out["pods_seen_gone"] = tracker.pods_gone
        writes = {k: v for k, v in sorted(writes.items()) if v > 0}
        out["api_writes"] = writes
        out["api_writes_per_job"] = round(sum(writes.values()) / JOBS, 1)
        out["apiserver_latency"] = latency_summary(
            histogram_between(durations_before, request_durations(metrics_text()))
        )
    except DidNotFinish as error:
        out["did_not_finish"] = str(error)
        say(f"{contender.name}: did not finish: {error}")
        out["cpu_s_until_then"] = round(cpu_seconds(contender.pid), 1)
        out["peak_rss_mb"] = round(peak_rss_mb(contender.pid), 1)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if "rss" in locals():
            rss.stop.set()
        contender.stop()
        tracker.stop.set()
        if supervisors is not None:
            supervisors.close()
        kubelet.stop()
        # No kubelet left to finish graceful deletions (kwok leaves them to it): at once.
        with contextlib.suppress(ApiException):
            kube.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        kube.delete_namespace(namespace)
        try:
            kube.core.delete_persistent_volume(volume)
        except ApiException as error:
            if error.status != 404:
                raise
    return out


def kwok_nodes(kube: ClusterClient) -> int:
    nodes = kube.core.list_node(label_selector=f"{KWOK_LABEL}=true").items
    return sum(
        1 for n in nodes if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    )


ROWS = (
    ("create -> gang Running, median (s)", "create_to_gang_running", "median_s"),
    ("create -> gang Running, p99 (s)", "create_to_gang_running", "p99_s"),
    ("create -> all N gangs Running (s)", "create_to_gang_running", "all_s"),
    ("machine busy in the launch (% of all cores)", "machine_busy_percent_launch", None),
    ("worker death -> gang Running again, median (s)", "worker_death_to_gang_running", "median_s"),
    ("worker death -> gang Running again, p99 (s)", "worker_death_to_gang_running", "p99_s"),
    ("machine busy in the restarts (% of all cores)", "machine_busy_percent_restarts", None),
    ("N running: completion -> Succeeded, median (s)", "steady_completion_to_succeeded", "median_s"),
    ("N running: completion -> Succeeded, p99 (s)", "steady_completion_to_succeeded", "p99_s"),
    ("all at once: completion -> Succeeded, median (s)", "completion_to_succeeded", "median_s"),
    ("all at once: completion -> Succeeded, p99 (s)", "completion_to_succeeded", "p99_s"),
    ("all at once: completion -> cleaned, median (s)", "completion_to_cleaned", "median_s"),
    ("all at once: completion -> cleaned, p99 (s)", "completion_to_cleaned", "p99_s"),
    ("controller CPU, steps 1-4 (s)", "cpu_s", None),
    ("controller peak RSS (MB)", "peak_rss_mb", None),
    ("controller writes go on after every status said Running (s)", "writes_settled_after_statuses_s", None),
    ("controller idle CPU, N running (% of a core)", "idle_cpu_percent_with_all_running", None),
    ("API writes per job", "api_writes_per_job", None),
    ("API writes per restart (step 2)", "api_writes_per_restart", None),
    ("API server latency, reads p50 (ms)", "apiserver_latency", "reads_p50_ms"),
    ("API server latency, reads p99 (ms)", "apiserver_latency", "reads_p99_ms"),
    ("API server latency, writes p50 (ms)", "apiserver_latency", "writes_p50_ms"),
    ("API server latency, writes p99 (ms)", "apiserver_latency", "writes_p99_ms"),
)


# Context, not a contest: how busy the machine was says whether a step was bound by it.
NOT_COMPARED = frozenset({"machine_busy_percent_launch", "machine_busy_percent_restarts"})


def compared(tfmw: float | None, other: float | None, key: str) -> float | None:
    return None if key in NOT_COMPARED else ratio(tfmw, other)


def figure(result: dict[str, Any], key: str, sub: str | None) -> float | None:
    value = result.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, dict) else None
    return value if isinstance(value, int | float) else None


def pairs(names: list[str]) -> list[tuple[str, str]]:
    """Which ratios a run shows: each tfmw side over each other contender, and tfmw in place
    over tfmw re-created."""
    ours = [n for n in names if n.startswith("tfmw")]
    theirs = [n for n in names if not n.startswith("tfmw")]
    found = [(a, b) for a in ours for b in theirs]
    if "tfmw-in-place" in names and "tfmw" in names:
        found.append(("tfmw-in-place", "tfmw"))
    return found


def ratios(side: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Each pair's figure over the other's, per row (pairs)."""
    return {
        f"{a}/{b}": {
            label: compared(figure(side[a], key, sub), figure(side[b], key, sub), key)
            for label, key, sub in ROWS
        }
        for a, b in pairs(list(side))
    }


def table(side: dict[str, dict[str, Any]]) -> str:
    names = list(side)
    rated = pairs(names)
    header = (
        f"{'measure':<50}"
        + "".join(f"{n:>15}" for n in names)
        + "".join(f"{a + '/' + b:>26}" for a, b in rated)
    )
    lines = [header, "-" * len(header)]
    for label, key, sub in ROWS:
        values = [figure(side[n], key, sub) for n in names]
        cells = "".join(f"{'-' if v is None else format(v, '.4g'):>15}" for v in values)
        rates = "".join(
            f"{'-' if (r := compared(figure(side[a], key, sub), figure(side[b], key, sub), key)) is None else format(r, '.3f'):>26}"
            for a, b in rated
        )
        lines.append(f"{label:<50}{cells}{rates}")
    for n in names:
        if "did_not_finish" in side[n]:
            lines.append(f"{n} did not finish: {side[n]['did_not_finish']}")
    return "\n".join(lines)


def markdown(side: dict[str, dict[str, Any]]) -> str:
    """The table as docs/benchmarks.md shows it."""
    names = list(side)
    rated = pairs(names)
    lines = [
        "| measure | " + " | ".join(names) + "".join(f" | {a} / {b}" for a, b in rated) + " |",
        "| --- |" + " --- |" * (len(names) + len(rated)),
    ]
    for label, key, sub in ROWS:
        values = [figure(side[n], key, sub) for n in names]
        cells = ["-" if v is None else format(v, ".4g") for v in values]
        rates = [compared(figure(side[a], key, sub), figure(side[b], key, sub), key) for a, b in rated]
        lines.append(
            f"| {label} | "
            + " | ".join(cells)
            + "".join(f" | {'-' if r is None else f'{r:.2f}'}" for r in rates)
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    if BASELINE:
        check_baseline(Path(BASELINE))  # before anything is started or paused
    known = [
        "tfmw",
        "tfmw-in-place",
        *(["tfmw-baseline"] if BASELINE else []),
        "tfjob-tuned",
        "tfjob-shipped",
        "floor",
    ]
    # TFMW_BENCH_CONTENDERS: these, run in this order (the one that goes first meets the
    # cluster right after the warm-up's deletions: swap them to see what that costs); the
    # tables keep the usual order, so a ratio is always tfmw's over its peer's.
    order = (
        os.environ["TFMW_BENCH_CONTENDERS"].split(",") if os.environ.get("TFMW_BENCH_CONTENDERS") else known
    )
    if unknown := sorted({n for n in order if n not in known}) or sorted(
        {n for n in order if order.count(n) > 1}
    ):
        raise SystemExit(f"TFMW_BENCH_CONTENDERS: {unknown} unknown or twice; each at most once of {known}")
    began = time.monotonic()
    kube = ClusterClient()
    nodes = kwok_nodes(kube)
    if not nodes:
        raise SystemExit("no kwok node is Ready: run `make kwok-up` (hack/kwok.sh up) first")
    kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds" / "tfmwjobs.tfmw.dev.yaml")
    )
    resume_deployed_operator = pause_deployed_operator()
    say(f"{JOBS} jobs x {WORKERS} workers on {nodes} kwok nodes; building the TFJob controller (once) ...")
    binary = install_tfjob_crd(kube)
    shared = Path(tempfile.mkdtemp(prefix="tfmw-bench-scale-"))
    contenders: dict[str, tuple[Callable[[str], Contender], float]] = {
        "tfmw": (lambda ns: Tfmw(ns, shared), TIMEOUT),
        "tfmw-in-place": (lambda ns: TfmwInPlace(ns, shared), TIMEOUT),
    }
    if BASELINE:
        # Another tree's operator (`git archive <commit> operator | tar -x -C DIR`, then
        # TFMW_BENCH_BASELINE=DIR/operator): a change's before and after in one run.
        contenders["tfmw-baseline"] = (
            lambda ns: Tfmw(ns, shared, Path(BASELINE), "tfmw-baseline"),
            TIMEOUT,
        )
    contenders |= {
        "tfjob-tuned": (lambda ns: TFJob(binary, ns, tuned=True), TIMEOUT),
        "tfjob-shipped": (lambda ns: TFJob(binary, ns, tuned=False), SHIPPED_TIMEOUT),
    }
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        name: (lambda make=make, timeout=timeout: run_contender(kube, make, shared, timeout))  # type: ignore[misc]
        for name, (make, timeout) in contenders.items()
    }
    runs["floor"] = lambda: run_floor(kube, shared, TIMEOUT)
    results: dict[str, Any] = {
        "jobs": JOBS,
        "workers": WORKERS,
        "kwok_nodes": nodes,
        "warm_up_pods": WARM_UP_PODS,
        "side_by_side": {},
    }
    # TFMW_BENCH_OUT: another name, so a partial run (TFMW_BENCH_CONTENDERS) keeps the full one.
    name = os.environ.get("TFMW_BENCH_OUT") or ("scale.json" if JOBS == 1000 else f"scale-{JOBS}.json")
    RESULTS.mkdir(parents=True, exist_ok=True)
    try:  # the deployed operator is resumed whatever happens
        if list(runs) != known:  # the names checked before anything started are the contenders'
            raise RuntimeError(f"contenders {list(runs)}, checked against {known}")
        warm_up(kube, WARM_UP_PODS)
        for contender_name in order:
            results["side_by_side"][contender_name] = runs[contender_name]()
            (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    finally:
        wait_for("bench namespaces gone", lambda: not terminating_namespaces(kube), timeout=600, interval=1)
        remove_tfjob_crd(kube)
        for cert in CERT_DIR.glob("*"):
            cert.unlink()
        resume_deployed_operator()
    results["side_by_side"] = {n: results["side_by_side"][n] for n in runs if n in results["side_by_side"]}
    results["ratios"] = ratios(results["side_by_side"])
    results["bench_seconds"] = round(time.monotonic() - began)
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(table(results["side_by_side"]))
    print()
    print(markdown(results["side_by_side"]))
    print(f"\nsaved to {RESULTS / name} ({results['bench_seconds']} s)")


if __name__ == "__main__":
    main()
