"""Control-plane benchmark: the operator against the local API server, pods simulated.

    make bench            (or: PYTHONPATH=tests python3 -m bench.control_plane)

Prints a table and writes bench/results/control-plane.json. Figures:
  - API create of a job -> all its pods created (watch ADDED), 1/8/64 workers: median, p99
  - the same with 100 jobs submitted at once
  - marker written -> phase Succeeded: median, p99
  - 500 jobs x 4 workers submitted at once: time until all Running, operator peak RSS, CPU s
  - then every chief of those 500 reports progress every second for a minute: status
    writes per job per minute, operator CPU and peak RSS
  - API write requests per job on the happy path (from the API server's own counters)
  - a bare client's concurrent pod-creation rate on the same server, and the operator's
    pod-creation rate as a fraction of it
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kube import (
    LOCAL_KUBECONFIG,
    REPO,
    ClusterClient,
    SimulatedKubelet,
    kubectl,
    pause_deployed_operator,
    wait_for,
)
from kubernetes import watch
from operator_process import OperatorProcess
from wrappers import simulated_job, write_marker

RESULTS = REPO / "bench" / "results"
THREADS = 32


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 4),
        "p99_s": round(percentile(values, 99), 4),
        "max_s": round(max(values), 4),
    }


class PodWatcher:
    """Records when each pod of the namespace was first seen, per job."""

    def __init__(self, kube: ClusterClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.first_seen: dict[str, dict[str, float]] = defaultdict(dict)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            stream = watch.Watch().stream(
                self.kube.core.list_namespaced_pod, self.namespace, timeout_seconds=5
            )
            for event in stream:
                if event["type"] != "ADDED":
                    continue
                pod = event["object"]
                job = (pod.metadata.labels or {}).get("tfmw.dev/job-name", "")
                with self.lock:
                    self.first_seen[job].setdefault(pod.metadata.name, time.monotonic())

    def all_created(self, job: str, count: int) -> float | None:
        with self.lock:
            seen = self.first_seen.get(job, {})
            return max(seen.values()) if len(seen) >= count else None


def start_operator(namespace: str, shared_root: Path) -> OperatorProcess:
    # As the operator image sets it: fewer malloc arenas, a smaller RSS.
    return OperatorProcess(namespace, shared_root, env={"MALLOC_ARENA_MAX": "2"}).start()


def api_writes() -> dict[tuple[str, str, str], float]:
    """The API server's request counters for writes, by (verb, resource, subresource)."""
    text = kubectl("get", "--raw", "/metrics").stdout
    counts: dict[tuple[str, str, str], float] = defaultdict(float)
    pattern = re.compile(r"^apiserver_request_total\{(.*)\} (\S+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if labels.get("verb") in ("POST", "PATCH", "PUT", "DELETE", "APPLY"):
            key = (labels["verb"], labels.get("resource", ""), labels.get("subresource", ""))
            counts[key] += float(match.group(2))
    return counts


def submit(kube: ClusterClient, namespace: str, jobs: list[dict[str, Any]]) -> dict[str, float]:
    """Create jobs concurrently; return when each API create returned."""
    started: dict[str, float] = {}

    def create(job: dict[str, Any]) -> None:
        started[job["metadata"]["name"]] = time.monotonic()
        kube.create_job(namespace, job)

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(create, jobs))
    return started


def pods_created(watcher: PodWatcher, name: str, workers: int) -> Callable[[], float | None]:
    return lambda: watcher.all_created(name, workers)


def creation_latency(
    kube: ClusterClient, watcher: PodWatcher, namespace: str, jobs: list[dict[str, Any]]
) -> list[float]:
    started = submit(kube, namespace, jobs)
    latencies = []
    for job in jobs:
        name, workers = job["metadata"]["name"], job["spec"]["workers"]
        done = wait_for(f"pods of {name}", pods_created(watcher, name, workers), timeout=300, interval=0.01)
        latencies.append(done - started[name])
    return latencies


def terminating_namespaces(kube: ClusterClient) -> list[str]:
    return [n.metadata.name for n in kube.core.list_namespace().items if n.status.phase == "Terminating"]


def bare_client_rate(kube: ClusterClient, namespace: str, count: int, offset: int) -> float:
    """Pods per second that concurrent creates from a bare client reach: the ceiling."""
    template = simulated_job("bare").manifest()["spec"]["template"]

    def create(i: int) -> None:
        pod = {"metadata": {"name": f"bare-{i}"}, "spec": template["spec"]}
        kube.core.create_namespaced_pod(namespace, pod)

    begin = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(create, range(offset, offset + count)))
    return count / (time.monotonic() - begin)


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


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    kubectl("apply", "-f", str(REPO / "crds" / "tfmwjobs.tfmw.dev.yaml"))
    resume_deployed_operator = pause_deployed_operator()
    kube = ClusterClient()
    SimulatedKubelet.register_node(kube)
    kubelet = SimulatedKubelet(kube).start()
    # Counting writes needs a quiet API server: no namespace of an earlier run still being
    # emptied (the simulated kubelet finishes their pods' deletions).
    wait_for("no terminating namespace", lambda: not terminating_namespaces(kube), timeout=300, interval=1)
    namespace = kube.new_namespace("bench")
    shared_root = Path(tempfile.mkdtemp(prefix="tfmw-bench-"))
    operator = start_operator(namespace, shared_root)
    watcher = PodWatcher(kube, namespace)
    scale_namespace = kube.new_namespace("bench500")
    results: dict[str, Any] = {}
    try:
        # Warm-up, and the operator's happy-path write count.
        before = api_writes()
        created = kube.create_job(namespace, simulated_job("writes", workers=4).manifest())
        kube.wait_pods(namespace, "writes", 4, timeout=60)
        kubelet.run_all(namespace, "writes")
        kube.wait_phase(namespace, "writes", "Running")
        # As the trainer does: the chief writes the marker, then the workers exit.
        write_marker(shared_root / namespace / "writes", created["metadata"]["uid"])
        kube.wait_phase(namespace, "writes", "Succeeded")
        for i in range(4):
            kubelet.exit(namespace, f"writes-worker-{i}", 0)
        time.sleep(2)
        after = api_writes()
        delta = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}
        operator_writes = {
            f"{verb} {resource}{'/' + sub if sub else ''}": n
            for (verb, resource, sub), n in delta.items()
            if (verb, resource, sub)
            in {
                ("POST", "pods", ""),
                ("DELETE", "pods", ""),
                ("POST", "services", ""),
                ("PATCH", "tfmwjobs", "status"),
                ("POST", "events", ""),
            }
        }
        results["happy_path_writes_per_4_worker_job"] = {
            "total": sum(operator_writes.values()),
            **operator_writes,
        }

        for workers, repeats in ((1, 20), (8, 15), (64, 10)):
            jobs = [simulated_job(f"c{workers}-{r}", workers=workers).manifest() for r in range(repeats)]
            latencies = []
            for job in jobs:  # one at a time: the latency of a lone job
                latencies += creation_latency(kube, watcher, namespace, [job])
            results[f"create_to_all_pods_{workers}_workers"] = summary(latencies)

        for workers in (1, 8):
            jobs = [simulated_job(f"burst{workers}-{r}", workers=workers).manifest() for r in range(100)]
            begin = time.monotonic()
            latencies = creation_latency(kube, watcher, namespace, jobs)
            elapsed = time.monotonic() - begin
            results[f"create_to_all_pods_100_jobs_x_{workers}_workers"] = {
                **summary(latencies),
                "all_pods_s": round(elapsed, 3),
                "operator_pods_per_s": round(100 * workers / elapsed, 1),
            }

        bare_namespace = kube.new_namespace("bare")
        rates = [bare_client_rate(kube, bare_namespace, 400, offset=400 * run) for run in range(3)]
        rate = statistics.median(rates)
        operator_rate = results["create_to_all_pods_100_jobs_x_8_workers"]["operator_pods_per_s"]
        results["bare_client_pods_per_s"] = round(rate, 1)
        results["operator_rate_fraction_of_bare_client"] = round(operator_rate / rate, 3)
        kube.delete_namespace(bare_namespace)

        marker_latencies = []
        for r in range(30):
            name = f"marker-{r}"
            job = kube.create_job(namespace, simulated_job(name, workers=2).manifest())
            kube.wait_pods(namespace, name, 2)
            kubelet.run_all(namespace, name)
            kube.wait_phase(namespace, name, "Running")
            write_marker(shared_root / namespace / name, job["metadata"]["uid"])
            written = time.monotonic()
            kube.wait_phase(namespace, name, "Succeeded", timeout=30)
            marker_latencies.append(time.monotonic() - written)
        results["marker_to_succeeded"] = summary(marker_latencies)

        # 500 jobs of 4 workers at once, the simulated kubelet starting pods as they come.
        operator.stop()
        operator = start_operator(scale_namespace, shared_root)
        cpu_before = operator.cpu_seconds()
        stop_runner = threading.Event()

        def start_pods() -> None:
            with ThreadPoolExecutor(16) as pool:
                while not stop_runner.is_set():
                    stream = watch.Watch().stream(
                        kube.core.list_namespaced_pod, scale_namespace, timeout_seconds=5
                    )
                    for event in stream:
                        pod = event["object"]
                        if event["type"] == "ADDED" and pod.status.phase == "Pending":
                            pool.submit(kubelet.run, scale_namespace, pod.metadata.name)
                        if stop_runner.is_set():
                            return

        runner = threading.Thread(target=start_pods, daemon=True)
        runner.start()
        begin = time.monotonic()
        submit(kube, scale_namespace, [simulated_job(f"s{i}", workers=4).manifest() for i in range(500)])

        def running_count() -> int | None:
            items = kube.custom.list_namespaced_custom_object(
                "tfmw.dev", "v1alpha1", scale_namespace, "tfmwjobs"
            )["items"]
            running = sum(1 for j in items if (j.get("status") or {}).get("phase") == "Running")
            return running if running == 500 else None

        wait_for("500 jobs Running", running_count, timeout=600, interval=1)
        results["500_jobs_x_4_workers"] = {
            "all_running_s": round(time.monotonic() - begin, 1),
            "operator_peak_rss_mb": round(operator.peak_rss_mb(), 1),
            "operator_cpu_s": round(operator.cpu_seconds() - cpu_before, 1),
        }
        stop_runner.set()
        results["500_jobs_reporting_progress_for_60_s"] = progress_load(
            kube, scale_namespace, shared_root, operator
        )
    finally:
        operator.stop()
        watcher.stop.set()
        for bench_namespace in (namespace, scale_namespace):
            kube.delete_namespace(bench_namespace)
        # The simulated kubelet must outlive the namespaces: it confirms their pods' deletion.
        wait_for("bench namespaces gone", lambda: not terminating_namespaces(kube), timeout=600, interval=1)
        kubelet.stop()
        SimulatedKubelet.remove_node(kube)
        resume_deployed_operator()

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "control-plane.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\n{'measure':<48} value")
    for key, value in results.items():
        print(f"{key:<48} {json.dumps(value)}")
    print(f"\nsaved to {RESULTS / 'control-plane.json'}")


if __name__ == "__main__":
    main()
