"""Control-plane benchmark: tfmw's operator against the incumbent and against the limit.

    make bench            (or: PYTHONPATH=tests python3 -m bench.control_plane)

One run, one local API server, pods never scheduled (only the controllers work):
  - side by side, tfmw vs Kubeflow's TFJob controller (training-operator, as shipped and
    tuned), each in its own namespace. All three running, taking turns: ready after start
    (process start -> pods of a job waiting for it, median of 3 starts); create -> all
    pods, and -> all pods + Services, for 1/8/64 workers (median, p99) of lone jobs. Then
    one at a time, alone, from empty namespaces: API writes for one 8-worker job, and 100
    jobs x 8 workers at once. Controller CPU and peak RSS over all of it
  - a bare concurrent client's pod-creation rate, and tfmw's as a fraction of it
  - 500 jobs x 4 workers (simulated kubelet) until all Running; then their chiefs report
    progress every second for a minute; then markers -> Succeeded with 500 jobs running
  - 10,000 pods of another workload: what they cost the operator's memory
Prints progress as it goes, then one table with ratio columns; writes
bench/results/control-plane.json.

    TFMW_BENCH_LONE_ONLY=1 [TFMW_BENCH_REPEATS=10] [TFMW_BENCH_BASELINE=DIR/operator] \
        PYTHONPATH=tests python3 -m bench.control_plane

only the lone jobs of 1 and 8 workers, REPEATS each, tfmw against TFJob tuned (and another
tree's operator as tfmw-baseline: a change's before and after in the same run), taking
turns; medians and p99 side by side with the ratios, in bench/results/control-plane-lone.json.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peer import (
    CERT_DIR,
    Contender,
    TFJob,
    Tfmw,
    check_baseline,
    cpu_seconds,
    image_malloc_env,
    install_tfjob_crd,
    peak_rss_mb,
    remove_tfjob_crd,
    scratch_log,
)
from bench.stats import say, summary, write_counts
from kube import (
    LOCAL_KUBECONFIG,
    REPO,
    ClusterClient,
    SimulatedKubelet,
    kubectl,
    pause_deployed_operator,
    wait_for,
)
from kubernetes import client
from operator_process import OperatorProcess
from tfmw_operator.api.spec import JobSpec, parse_spec
from tfmw_operator.core.builders import build_service
from watching import follow_in_thread
from wrappers import simulated_job, write_marker

RESULTS = REPO / "bench" / "results"
THREADS = 32
SIZES = ((1, 15), (8, 10), (64, 6))
# Between lone jobs: the latency of a lone job, not of one queued behind the last one's
# status writes and Events (nor behind a client rate limiter the last one emptied).
LONE_JOB_PAUSE_SECONDS = 1.5
STARTS = 3  # each contender's start is timed this many times
BURST_JOBS, BURST_WORKERS = 100, 8
FOREIGN_PODS = 10_000
Json = dict[str, Any]


class Seen:
    """When each pod and Service of a namespace was first seen, per job (from watches)."""

    def __init__(self, kube: ClusterClient, namespace: str, job_label: str) -> None:
        self.job_label = job_label
        self.first: dict[str, dict[str, dict[str, float]]] = {
            "pods": defaultdict(dict),
            "services": defaultdict(dict),
        }
        self.lock = threading.Lock()
        self.stop = threading.Event()
        for kind, call in (
            ("pods", kube.core.list_namespaced_pod),
            ("services", kube.core.list_namespaced_service),
        ):
            follow_in_thread(
                call, namespace, label_selector=job_label, on_event=self._recorder(kind), stop=self.stop
            )

    def _recorder(self, kind: str) -> Any:
        def record(event: str, obj: Json) -> None:
            meta = obj["metadata"]
            job = (meta.get("labels") or {}).get(self.job_label, "")
            with self.lock:
                self.first[kind][job].setdefault(meta["name"], time.monotonic())

        return record

    def all_at(self, job: str, pods: int, services: int) -> tuple[float, float] | None:
        """(all pods seen, all pods and Services seen), once both are."""
        with self.lock:
            seen_pods = self.first["pods"].get(job, {})
            seen_services = self.first["services"].get(job, {})
            if len(seen_pods) < pods or len(seen_services) < services:
                return None
            last_pod = max(seen_pods.values())
            return last_pod, max([last_pod, *seen_services.values()])


def api_writes() -> dict[tuple[str, str, str], float]:
    """The API server's request counters for writes, by (verb, resource, subresource)."""
    return write_counts(kubectl("get", "--raw", "/metrics").stdout)


def create_jobs(
    kube: ClusterClient, contender: Contender, namespace: str, jobs: list[Json]
) -> dict[str, float]:
    """Create jobs concurrently; when each API create was sent."""
    group, version, plural = contender.api
    started: dict[str, float] = {}

    def create(job: Json) -> None:
        started[job["metadata"]["name"]] = time.monotonic()
        kube.custom.create_namespaced_custom_object(group, version, namespace, plural, job)

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(create, jobs))
    return started


def wait_all(
    seen: Seen, contender: Contender, name: str, workers: int, timeout: float = 600
) -> tuple[float, float]:
    services = contender.services(name, workers)

    def all_seen() -> tuple[float, float] | None:
        contender.check_alive()
        return seen.all_at(name, workers, services)

    return wait_for(f"pods and Services of {name}", all_seen, timeout, 0.002)


@dataclass
class Running:
    """A contender started in its own namespace, with the watchers that time it."""

    contender: Contender
    namespace: str
    seen: Seen
    out: dict[str, Any]
    starts: list[float] = field(default_factory=list)  # process start -> a waiting job's pods
    cpu_s: float = 0.0  # of its processes so far
    peak_rss_mb: float = 0.0

    def retire(self) -> None:
        """Stop its process, keeping what it cost."""
        process = self.contender.process
        if process is not None and process.poll() is None:
            self.cpu_s += cpu_seconds(process.pid)
            self.peak_rss_mb = max(self.peak_rss_mb, peak_rss_mb(process.pid))
        self.contender.stop()


def start_contender(kube: ClusterClient, make: Callable[[str], Contender]) -> Running:
    """Its namespace and its process; `restart` times each start."""
    wait_for("no terminating namespace", lambda: not terminating_namespaces(kube), timeout=300, interval=1)
    namespace = kube.new_namespace("vs", pod_security="baseline")
    contender = make(namespace)
    contender.prepare(kube, namespace)
    running = Running(contender, namespace, Seen(kube, namespace, contender.job_label), {})
    restart(kube, running)
    return running


def restart(kube: ClusterClient, running: Running) -> None:
    """(Re)start the contender with a job already waiting for it: from process start to
    that job's pods and Services."""
    contender, namespace = running.contender, running.namespace
    running.retire()
    name = f"early-{len(running.starts)}"
    create_jobs(kube, contender, namespace, [contender.job(name, 1)])
    contender.start(scratch_log(contender.name))
    contender.after_start(kube, namespace)
    _, ready = wait_all(running.seen, contender, name, 1, timeout=120)
    running.starts.append(ready - contender.started_at)


def lone_jobs(
    kube: ClusterClient, contenders: list[Running], sizes: tuple[tuple[int, int], ...] = SIZES
) -> None:
    """Lone jobs, one at a time, taking turns: each contender's are spread over the same
    minutes, so a slower or busier moment of the machine falls on all of them alike."""
    for workers, repeats in sizes:
        timings: dict[str, tuple[list[float], list[float]]] = {r.contender.name: ([], []) for r in contenders}
        for r in range(repeats):
            for running in contenders:
                contender, name = running.contender, f"c{workers}-{r}"
                started = create_jobs(kube, contender, running.namespace, [contender.job(name, workers)])[
                    name
                ]
                pods_at, all_at = wait_all(running.seen, contender, name, workers)
                timings[contender.name][0].append(pods_at - started)
                timings[contender.name][1].append(all_at - started)
                time.sleep(LONE_JOB_PAUSE_SECONDS)
        for running in contenders:
            pods_only, with_services = timings[running.contender.name]
            running.out[f"pods_{workers}_workers"] = summary(pods_only)
            running.out[f"pods_and_services_{workers}_workers"] = summary(with_services)
        say(
            f"{workers} workers, median to all pods + Services: "
            + ", ".join(
                f"{r.contender.name} {r.out[f'pods_and_services_{workers}_workers']['median_s'] * 1000:.0f} ms"
                for r in contenders
            )
        )


def under_load(kube: ClusterClient, running: Running) -> None:
    """One contender's API writes for a job, then a burst of jobs at once."""
    contender, namespace, seen, out = running.contender, running.namespace, running.seen, running.out
    time.sleep(2)
    before = api_writes()
    create_jobs(kube, contender, namespace, [contender.job("writes", 8)])
    wait_all(seen, contender, "writes", 8)
    time.sleep(3)  # status writes and events that follow the pods
    after = api_writes()
    # The peer's certificate rotation, and the control plane's own lease renewals.
    ignored = {"secrets", "validatingwebhookconfigurations", "leases"}
    writes = {
        f"{verb} {resource}{'/' + sub if sub else ''}": round(after[key] - before.get(key, 0))
        for key in after
        if (verb := key[0], resource := key[1], sub := key[2])
        and after[key] > before.get(key, 0)
        and resource not in ignored
        and not (verb == "POST" and resource == contender.api[2] and not sub)  # the bench's own create
    }
    out["api_writes_one_8_worker_job"] = {"total": sum(writes.values()), **writes}
    cpu_before = cpu_seconds(contender.pid)
    jobs = [contender.job(f"burst-{i}", BURST_WORKERS) for i in range(BURST_JOBS)]
    begin = time.monotonic()
    create_jobs(kube, contender, namespace, jobs)
    for job in jobs:
        wait_all(seen, contender, job["metadata"]["name"], BURST_WORKERS)
    elapsed = time.monotonic() - begin
    out["burst_100_jobs_x_8_workers"] = {
        "all_pods_and_services_s": round(elapsed, 3),
        "pods_per_s": round(BURST_JOBS * BURST_WORKERS / elapsed, 1),
        "controller_cpu_s": round(cpu_seconds(contender.pid) - cpu_before, 2),
    }
    say(f"{contender.name}: 100 jobs x 8 workers in {elapsed:.1f} s")


def clear(kube: ClusterClient, contenders: list[Running]) -> None:
    """Delete the contenders' jobs and wait until their pods and Services are gone too: the
    next measure starts from the same empty namespaces, whoever it measures."""
    for each in contenders:
        group, version, plural = each.contender.api
        kube.custom.delete_collection_namespaced_custom_object(group, version, each.namespace, plural)

    # The Services' Endpoints and EndpointSlices too: the controller-manager deletes them
    # after the Services, and would still be at it during the next measure.
    slices = client.DiscoveryV1Api(kube.api_client).list_namespaced_endpoint_slice
    calls = (
        kube.core.list_namespaced_pod,
        kube.core.list_namespaced_service,
        kube.core.list_namespaced_endpoints,
        slices,
    )

    def left() -> int:
        return sum(
            len(call(each.namespace, label_selector=each.contender.job_label, limit=1).items)
            for each in contenders
            for call in calls
        )

    wait_for("the contenders' pods, Services and Endpoints gone", lambda: not left(), timeout=300, interval=1)


def side_by_side(
    kube: ClusterClient, contenders: dict[str, Callable[[str], Contender]]
) -> tuple[dict[str, Any], tuple[float, float]]:
    """The same workload through each contender on the one API server; and the
    pod-creation rate of a bare client there.

    Starts and lone jobs with all of them running, taking turns; then each one's API
    writes and burst with it alone running, from empty namespaces, as the bare client's.
    """
    running: list[Running] = []
    try:
        for name, make in contenders.items():
            say(f"{name}: starting ...")
            running.append(start_contender(kube, make))
        for _ in range(STARTS - 1):  # taking turns, as the lone jobs do
            for each in running:
                restart(kube, each)
        for each in running:
            each.out["ready_after_start_s"] = round(statistics.median(each.starts), 3)
        say(
            f"ready after start, median of {STARTS}: "
            + ", ".join(f"{e.contender.name} {e.out['ready_after_start_s']:.2f} s" for e in running)
        )
        say("lone jobs, the contenders taking turns ...")
        lone_jobs(kube, running)
        for each in running:
            each.retire()
        clear(kube, running)
        for each in running:
            say(f"{each.contender.name}: API writes and a burst, alone ...")
            each.contender.start(scratch_log(each.contender.name))
            each.contender.after_start(kube, each.namespace)
            under_load(kube, each)
            each.retire()
            clear(kube, [each])
        bare_rates = bare_client_rate(kube, 400), bare_client_rate(kube, 400, gang=BURST_WORKERS)
        say(
            f"bare client: {bare_rates[0]:.0f} pods/s; with a Service per {BURST_WORKERS}: {bare_rates[1]:.0f}"
        )
        for each in running:
            each.out["controller_cpu_s_whole_run"] = round(each.cpu_s, 2)
            each.out["controller_peak_rss_mb"] = round(each.peak_rss_mb, 1)
    finally:
        for each in running:
            each.contender.stop()
            each.seen.stop.set()
            kube.delete_namespace(each.namespace)
    return {each.contender.name: each.out for each in running}, bare_rates


def terminating_namespaces(kube: ClusterClient) -> list[str]:
    return [n.metadata.name for n in kube.core.list_namespace().items if n.status.phase == "Terminating"]


def bare_client_rate(kube: ClusterClient, count: int, gang: int = 0, runs: int = 3) -> float:
    """Pods per second that concurrent creates from a bare client reach: the ceiling.

    With `gang`, it also creates the headless Service a job of that many workers has, one
    per `gang` pods, as tfmw's operator must. Measured as the contenders are: the same
    pods, with the same watchers looking on (on two cores, their CPU is part of what the
    API server gets)."""
    namespace = kube.new_namespace("bare")
    seen = Seen(kube, namespace, "tfmw.dev/job-name")
    job = Tfmw(namespace, Path()).job("bare", gang or 1)
    spec = job["spec"]["template"]["spec"]
    job_spec = parse_spec(job)
    assert isinstance(job_spec, JobSpec), job_spec
    service = build_service(job_spec)
    rates = []

    def create(i: int) -> None:
        group = f"bare-{i // gang}" if gang else "bare"
        labels = {"tfmw.dev/job-name": "bare", "bare-gang": group}
        kube.core.create_namespaced_pod(
            namespace, {"metadata": {"name": f"bare-{i}", "labels": labels}, "spec": spec}
        )
        if gang and i % gang == 0:
            meta = {"name": group, "labels": {"bare-gang": group}}
            body = {"metadata": meta, "spec": {**service["spec"], "selector": {"bare-gang": group}}}
            kube.core.create_namespaced_service(namespace, body)

    try:
        for run in range(runs):
            begin = time.monotonic()
            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(create, range(run * count, (run + 1) * count)))
            total = (run + 1) * count
            wait_for("the bare pods seen", lambda: seen.all_at("bare", total, 0), 60, 0.002)  # noqa: B023
            rates.append(count / (time.monotonic() - begin))
    finally:
        seen.stop.set()
        kube.delete_namespace(namespace)
    return statistics.median(rates)


def start_operator(namespace: str, shared_root: Path) -> OperatorProcess:
    return OperatorProcess(namespace, shared_root, env=image_malloc_env(REPO)).start()


def write_progress(job_dir: Path, uid: str, step: int) -> None:
    """As the trainer's helper writes it: a new file renamed over the old one."""
    now = time.time()
    document = {
        "epoch": step // 60,
        "totalEpochs": 100,
        "step": step,
        "totalSteps": 6000,
        "metrics": {"loss": round(1 / (1 + step), 5), "accuracy": round(step / 6000, 5)},
        "examplesPerSecond": 512.0,
        "updatedAt": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z",
        "jobUid": uid,
        "attempt": 0,
    }
    partial = job_dir / ".progress.json.partial"
    partial.write_text(json.dumps(document))
    os.replace(partial, job_dir / "progress.json")


def progress_load(
    kube: ClusterClient, namespace: str, shared_root: Path, operator: OperatorProcess, seconds: float = 60
) -> dict[str, float]:
    """Every running job's chief writes progress once a second; what that costs."""
    items = kube.custom.list_namespaced_custom_object("tfmw.dev", "v1alpha1", namespace, "tfmwjobs")["items"]
    jobs = [(shared_root / namespace / j["metadata"]["name"], j["metadata"]["uid"]) for j in items]
    print(f"{len(jobs)} jobs report progress every second for {seconds:.0f}s ...", flush=True)
    before, cpu_before = api_writes(), operator.cpu_seconds()
    begin = time.monotonic()
    step = 0
    while time.monotonic() - begin < seconds:
        tick = time.monotonic()
        step += 1
        for job_dir, uid in jobs:
            write_progress(job_dir, uid, step)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    elapsed = time.monotonic() - begin
    after = api_writes()
    patches = after[("PATCH", "tfmwjobs", "status")] - before.get(("PATCH", "tfmwjobs", "status"), 0)
    recorded = sum(
        1
        for j in kube.custom.list_namespaced_custom_object("tfmw.dev", "v1alpha1", namespace, "tfmwjobs")[
            "items"
        ]
        if ((j.get("status") or {}).get("progress") or {}).get("step")
    )
    return {
        "jobs": len(jobs),
        "jobs_with_progress_in_status": recorded,
        "status_writes_per_job_per_minute": round(patches / len(jobs) * 60 / elapsed, 2),
        "operator_cpu_s_per_minute": round((operator.cpu_seconds() - cpu_before) * 60 / elapsed, 1),
        "operator_peak_rss_mb": round(operator.peak_rss_mb(), 1),
    }


def at_scale(kube: ClusterClient, kubelet: SimulatedKubelet, shared_root: Path) -> dict[str, Any]:
    """500 jobs of 4 workers, the simulated kubelet starting pods as they come; then their
    progress reports; then markers, with all of them running."""
    namespace = kube.new_namespace("bench500", pod_security="baseline")
    operator = start_operator(namespace, shared_root)
    stop_runner = threading.Event()
    results: dict[str, Any] = {}
    try:
        operator.wait_started()
        cpu_before = operator.cpu_seconds()
        pool = ThreadPoolExecutor(16)

        def start_pod(kind: str, pod: Json) -> None:
            if kind == "ADDED" and (pod.get("status") or {}).get("phase") == "Pending":
                pool.submit(kubelet.run, namespace, pod["metadata"]["name"])

        follow_in_thread(kube.core.list_namespaced_pod, namespace, on_event=start_pod, stop=stop_runner)
        begin = time.monotonic()
        manifests = [simulated_job(f"s{i}", workers=4).manifest() for i in range(500)]
        create_jobs(kube, Tfmw(namespace, shared_root), namespace, manifests)

        def running_count() -> int | None:
            items = kube.custom.list_namespaced_custom_object("tfmw.dev", "v1alpha1", namespace, "tfmwjobs")[
                "items"
            ]
            running = sum(1 for j in items if (j.get("status") or {}).get("phase") == "Running")
            return running if running == 500 else None

        wait_for("500 jobs Running", running_count, timeout=600, interval=1)
        results["500_jobs_x_4_workers"] = {
            "all_running_s": round(time.monotonic() - begin, 1),
            "operator_peak_rss_mb": round(operator.peak_rss_mb(), 1),
            "operator_cpu_s": round(operator.cpu_seconds() - cpu_before, 1),
        }
        say(f"500 jobs Running after {results['500_jobs_x_4_workers']['all_running_s']} s")
        stop_runner.set()
        results["500_jobs_reporting_progress_for_60_s"] = progress_load(
            kube, namespace, shared_root, operator
        )
        say("markers of 30 jobs, one at a time, with 500 jobs running ...")
        time.sleep(12)  # the last progress documents get their throttled writes
        cpu_before, idle_begin = operator.cpu_seconds(), time.monotonic()
        time.sleep(10)
        idle_cpu = (operator.cpu_seconds() - cpu_before) / (time.monotonic() - idle_begin)
        latencies = []
        for i in range(30):
            name = f"s{i}"
            uid = kube.get_job(namespace, name)["metadata"]["uid"]  # type: ignore[index]
            write_marker(shared_root / namespace / name, uid)
            written = time.monotonic()
            kube.wait_phase(namespace, name, "Succeeded", timeout=30)
            latencies.append(time.monotonic() - written)
        results["marker_to_succeeded_with_500_running"] = {
            **summary(latencies),
            "operator_idle_cpu_percent": round(idle_cpu * 100, 2),
        }
    finally:
        stop_runner.set()
        operator.stop()
        kube.delete_namespace(namespace)
    return results


def foreign_pods_cost(kube: ClusterClient, shared_root: Path) -> dict[str, Any]:
    """The operator's memory beside 10,000 pods that are not its own, against none."""
    namespace = kube.new_namespace("foreign")

    def settled_rss() -> float:
        operator = start_operator(namespace, shared_root)
        try:
            operator.wait_started()
            time.sleep(5)
            return operator.peak_rss_mb()
        finally:
            operator.stop()

    try:
        empty = settled_rss()
        template = Tfmw(namespace, Path()).job("x", 1)["spec"]["template"]["spec"]

        def create(i: int) -> None:
            pod = {"metadata": {"name": f"other-{i}", "labels": {"app": "other"}}, "spec": template}
            kube.core.create_namespaced_pod(namespace, pod)

        say(f"creating {FOREIGN_PODS} pods of another workload ...")
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(create, range(FOREIGN_PODS)))
        crowded = settled_rss()
    finally:
        kube.delete_namespace(namespace)
    return {
        "operator_rss_mb_empty": round(empty, 1),
        f"operator_rss_mb_beside_{FOREIGN_PODS}_foreign_pods": round(crowded, 1),
        "difference_mb": round(crowded - empty, 1),
    }


ROWS = (
    ("create -> all pods + Services, 1 worker, median (ms)", "pods_and_services_1_workers", "median_s", 1000),
    ("... pods only, 1 worker, median (ms)", "pods_1_workers", "median_s", 1000),
    ("... pods + Services, 8 workers, median (ms)", "pods_and_services_8_workers", "median_s", 1000),
    ("... pods + Services, 64 workers, median (ms)", "pods_and_services_64_workers", "median_s", 1000),
    ("... 64 workers, p99 (ms)", "pods_and_services_64_workers", "p99_s", 1000),
    (
        "100 jobs x 8 workers at once, all pods + Services (s)",
        "burst_100_jobs_x_8_workers",
        "all_pods_and_services_s",
        1,
    ),
    ("controller CPU for that burst (s)", "burst_100_jobs_x_8_workers", "controller_cpu_s", 1),
    ("API writes for one 8-worker job", "api_writes_one_8_worker_job", "total", 1),
    ("controller CPU, whole run (s)", "controller_cpu_s_whole_run", None, 1),
    ("controller peak RSS (MB)", "controller_peak_rss_mb", None, 1),
    ("ready after start (s)", "ready_after_start_s", None, 1),
)


def table(side: dict[str, dict[str, Any]]) -> str:
    names = list(side)
    header = (
        f"{'measure':<56}"
        + "".join(f"{n:>15}" for n in names)
        + "".join(f"{'tfmw/' + n:>20}" for n in names[1:])
    )
    lines = [header, "-" * len(header)]
    for label, key, sub, scale in ROWS:
        values = [(side[n][key][sub] if sub else side[n][key]) * scale for n in names]
        ratios = [values[0] / v if v else float("nan") for v in values[1:]]
        lines.append(
            f"{label:<56}" + "".join(f"{v:>15.4g}" for v in values) + "".join(f"{r:>20.3f}" for r in ratios)
        )
    return "\n".join(lines)


def save(results: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "control-plane.json").write_text(json.dumps(results, indent=2) + "\n")


LONE_ONLY = bool(os.environ.get("TFMW_BENCH_LONE_ONLY"))
LONE_REPEATS = int(os.environ.get("TFMW_BENCH_REPEATS", "10"))
BASELINE = os.environ.get("TFMW_BENCH_BASELINE", "")


def lone_only(kube: ClusterClient, binary: str, shared_root: Path) -> dict[str, Any]:
    """The lone jobs alone (TFMW_BENCH_LONE_ONLY): tfmw, its baseline and TFJob tuned."""
    contenders: dict[str, Callable[[str], Contender]] = {"tfmw": lambda ns: Tfmw(ns, shared_root)}
    if BASELINE:
        contenders["tfmw-baseline"] = lambda ns: Tfmw(ns, shared_root, Path(BASELINE), "tfmw-baseline")
    contenders["tfjob-tuned"] = lambda ns: TFJob(binary, ns, tuned=True)
    sizes = ((1, LONE_REPEATS), (8, LONE_REPEATS))
    running: list[Running] = []
    try:
        for name, make in contenders.items():
            say(f"{name}: starting ...")
            running.append(start_contender(kube, make))
        lone_jobs(kube, running, sizes)
    finally:
        for each in running:
            each.contender.stop()
            each.seen.stop.set()
            kube.delete_namespace(each.namespace)
    side = {each.contender.name: each.out for each in running}
    lines = []
    for workers, _ in sizes:
        for stat in ("median_s", "p99_s"):
            key = f"pods_and_services_{workers}_workers"
            values = {n: side[n][key][stat] for n in side}
            tuned = values["tfjob-tuned"]
            cells = ", ".join(f"{n} {v * 1000:.1f} ms ({v / tuned:.2f})" for n, v in values.items())
            lines.append(f"create -> all pods + Services, {workers} worker(s), {stat[:-2]}: {cells}")
    print("\n".join(lines))
    return {"repeats": LONE_REPEATS, "side_by_side": side, "lines": lines}


def main() -> None:
    if BASELINE:
        check_baseline(Path(BASELINE))  # before anything is started or paused
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    began = time.monotonic()
    kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds" / "tfmwjobs.tfmw.dev.yaml")
    )
    resume_deployed_operator = pause_deployed_operator()
    kube = ClusterClient()
    say("building the TFJob controller (once) and creating its CRD ...")
    binary = install_tfjob_crd(kube)
    SimulatedKubelet.register_node(kube)
    kubelet = SimulatedKubelet(kube).start()
    # Counting writes needs a quiet API server: no namespace of an earlier run still being
    # emptied (the simulated kubelet finishes their pods' deletions).
    wait_for("no terminating namespace", lambda: not terminating_namespaces(kube), timeout=300, interval=1)
    shared_root = Path(tempfile.mkdtemp(prefix="tfmw-bench-"))
    results: dict[str, Any] = {}
    try:
        if LONE_ONLY:
            RESULTS.mkdir(parents=True, exist_ok=True)
            lone = lone_only(kube, binary, shared_root)
            (RESULTS / "control-plane-lone.json").write_text(json.dumps(lone, indent=2) + "\n")
            return
        contenders: dict[str, Callable[[str], Contender]] = {
            "tfmw": lambda ns: Tfmw(ns, shared_root),
            "tfjob-shipped": lambda ns: TFJob(binary, ns, tuned=False),
            "tfjob-tuned": lambda ns: TFJob(binary, ns, tuned=True),
        }
        side, (rate, rate_with_services) = side_by_side(kube, contenders)
        results["side_by_side"] = side
        tfmw_rate = side["tfmw"]["burst_100_jobs_x_8_workers"]["pods_per_s"]
        results["bare_client_pods_per_s"] = round(rate, 1)
        results["tfmw_rate_fraction_of_bare_client"] = round(tfmw_rate / rate, 3)
        results["bare_client_with_a_service_per_8_pods_per_s"] = round(rate_with_services, 1)
        results["tfmw_rate_fraction_of_bare_client_with_services"] = round(tfmw_rate / rate_with_services, 3)
        save(results)  # each phase's figures are kept, whatever comes after

        results.update(at_scale(kube, kubelet, shared_root))
        save(results)
        results["foreign_pods"] = foreign_pods_cost(kube, shared_root)
    finally:
        # The simulated kubelet must outlive the namespaces: it confirms their pods' deletion.
        wait_for("bench namespaces gone", lambda: not terminating_namespaces(kube), timeout=600, interval=1)
        kubelet.stop()
        SimulatedKubelet.remove_node(kube)
        remove_tfjob_crd(kube)
        for cert in CERT_DIR.glob("*"):
            cert.unlink()
        resume_deployed_operator()

    results["bench_seconds"] = round(time.monotonic() - began)
    save(results)
    print()
    print(table(results["side_by_side"]))
    print()
    for key, value in results.items():
        if key != "side_by_side":
            print(f"{key:<48} {json.dumps(value)}")
    print(f"\nsaved to {RESULTS / 'control-plane.json'} ({results['bench_seconds']} s)")


if __name__ == "__main__":
    main()
