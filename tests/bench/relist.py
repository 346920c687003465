"""The operator's memory while it lists many pods: what an operator restart (or a watch that
cannot resume) costs with a cluster full of workers.

`PYTHONPATH=tests python3 -m bench.relist` creates TFMW_BENCH_PODS pods (8,000 unless told)
the way tfmw builds them (its builders, 8 workers a job), labelled as a job's, in a namespace
of its own, on the local cluster (hack/cluster.sh up --no-node is enough: the pods name a
scheduler that does not exist, so they stay Pending and nothing else writes them). Then it
lists them with the operator's own pod view, RUNS times, and prints the Python memory the
list took at its peak (tracemalloc) beside what the view holds afterwards. The namespace is
deleted at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

from bench.control_plane import THREADS
from bench.peer import NO_SCHEDULER
from bench.stats import say
from kube import LOCAL_KUBECONFIG, ClusterClient
from tfmw_operator.api.spec import JobSpec, Member, parse_spec
from tfmw_operator.core.builders import build_pod
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube.client import Kube, connection_info
from tfmw_operator.kube.informer import Informer, ignore_changes
from wrappers import JobWrapper

PODS = int(os.environ.get("TFMW_BENCH_PODS", "8000"))
RUNS = int(os.environ.get("TFMW_BENCH_RUNS", "3"))
WORKERS = 8


def job_spec(namespace: str, name: str) -> JobSpec:
    manifest = JobWrapper(name, namespace, WORKERS).manifest()
    manifest["metadata"] |= {"namespace": namespace, "uid": f"uid-{name}"}
    manifest["spec"]["template"]["spec"]["schedulerName"] = NO_SCHEDULER
    spec = parse_spec(manifest)
    assert isinstance(spec, JobSpec), spec
    return spec


def create_pods(kube: ClusterClient, namespace: str, count: int) -> None:
    specs = [job_spec(namespace, f"r{j}") for j in range((count + WORKERS - 1) // WORKERS)]
    pods = [build_pod(specs[i // WORKERS], Member.worker(i % WORKERS), 0) for i in range(count)]
    for pod in pods:
        pod["metadata"].pop("ownerReferences", None)  # no job exists: the garbage collector would take them
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda pod: kube.core.create_namespaced_pod(namespace, pod), pods))


async def list_once(namespace: str) -> tuple[float, float, float, int]:
    """Seconds, peak MB while listing, MB the view holds after, objects in the view."""
    kube = Kube(connection_info())
    try:
        informer = Informer(kube, f"/api/v1/namespaces/{namespace}/pods", Owned.pod_of, ignore_changes)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        began = time.perf_counter()
        watching = asyncio.ensure_future(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 300)
        took = time.perf_counter() - began
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        objects = sum(len(informer.of_job(key)) for key in informer.jobs())
        mb = 1024 * 1024
        return took, (peak - before) / mb, (held - before) / mb, objects
    finally:
        await kube.close()


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    kube = ClusterClient()
    namespace = kube.new_namespace("relist")
    try:
        say(f"creating {PODS} pods in {namespace} ...")
        began = time.monotonic()
        create_pods(kube, namespace, PODS)
        say(f"created in {time.monotonic() - began:.0f} s; listing them {RUNS} times")
        runs = []
        for run in range(RUNS):
            took, peak, held, objects = asyncio.run(list_once(namespace))
            assert objects == PODS, f"the view holds {objects} of {PODS} pods"
            say(f"run {run + 1}: {took:.2f} s, peak {peak:.1f} MB while listing, {held:.1f} MB held after")
            runs.append((took, peak, held))
        took, peak, held = (statistics.median(r[i] for r in runs) for i in range(3))
        print(
            f"{PODS} pods listed, median of {RUNS}: {took:.2f} s; Python memory at the peak of the list "
            f"{peak:.1f} MB, held by the view after {held:.1f} MB"
        )
    finally:
        kube.delete_namespace(namespace)


if __name__ == "__main__":
    main()
