"""The TFJob API side by side (issue 36.5): the same TFJob manifests under tfmw's operator
serving them (`--tfjobs all`) and under Kubeflow's TFJob controller (training-operator, as
shipped and tuned), with a bare client's floor, in one run on one API server.

    make bench-tfjob [RUNS=6 DEATH_RUNS=3]   (or, the cluster up with its node and images:
    TFMW_BENCH_RUNS=6 TFMW_BENCH_DEATH_RUNS=3 PYTHONPATH=tests python3 -m bench.tfjob_api)

Two phases, the deployed operator paused for both:
  - on the real node (bench.tfjob_node, always): a 2-worker MultiWorkerMirroredStrategy
    TFJob of the trainer image under tfmw, Kubeflow's controller tuned, and the floor:
    create -> all pods Running and -> the first training step (median, p90), the API writes
    of a whole job, and a worker's death -> every worker's cluster up and -> training again
    per restartPolicy (ExitCode, OnFailure);
  - the control plane (TFMW_BENCH_CONTROL_PLANE=1): bench.control_plane's side-by-side phase
    driven through the TFJob API, pods naming a scheduler that does not exist, so only the
    controllers work. Each contender gets TFJob.manifest's job: Worker replicas N,
    restartPolicy Never, cleanPodPolicy Running, one container. Measured: ready after start;
    create -> all pods and -> all pods + Services for 1/8/64 workers; then each alone: API
    writes for one 8-worker job, 100 jobs x 8 workers at once; controller CPU and peak RSS;
    a bare concurrent client's pod-creation rate as the floor.
Prints the tables with tfmw's ratios to Kubeflow's; writes bench/results/tfjob-api.json.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.control_plane import RESULTS, side_by_side, table, terminating_namespaces
from bench.peer import CERT_DIR, Contender, TFJob, TfmwTFJob, install_tfjob_crd, remove_tfjob_crd
from bench.stats import say
from bench.tfjob_node import DEATH_RUNS, RUNS, node_markdown, node_table, real_node
from kube import LOCAL_KUBECONFIG, REPO, ClusterClient, pause_deployed_operator, wait_for

OUT = RESULTS / "tfjob-api.json"
CONTROL_PLANE = os.environ.get("TFMW_BENCH_CONTROL_PLANE", "") not in ("", "0")


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    began, date = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    resume_deployed_operator = pause_deployed_operator()
    kube = ClusterClient()
    say("building the TFJob controller (once) and creating its CRD ...")
    binary = install_tfjob_crd(kube)
    wait_for("no terminating namespace", lambda: not terminating_namespaces(kube), timeout=300, interval=1)
    results: dict[str, Any] = {"date": date}
    try:
        results["real_node"] = real_node(kube, binary)
        RESULTS.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(results, indent=2) + "\n")
        if CONTROL_PLANE:
            control_plane(kube, binary, results)
    finally:
        wait_for("bench namespaces gone", lambda: not terminating_namespaces(kube), timeout=600, interval=1)
        remove_tfjob_crd(kube)
        for cert in CERT_DIR.glob("*"):
            cert.unlink()
        resume_deployed_operator()
    results["bench_seconds"] = round(time.monotonic() - began)
    RESULTS.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    summary = results["real_node"]["summary"]
    print()
    print(f"{date}: the real node, {RUNS} short jobs and {DEATH_RUNS} deaths per restartPolicy")
    print(node_table(summary))
    print()
    print(node_markdown(summary))
    if CONTROL_PLANE:
        print()
        print(table(results["side_by_side"]))
        print()
        for key, value in results.items():
            if key not in ("side_by_side", "real_node", "date"):
                print(f"{key:<56} {json.dumps(value)}")
    print(f"\nsaved to {OUT} ({results['bench_seconds']} s)")


def control_plane(kube: ClusterClient, binary: str, results: dict[str, Any]) -> None:
    """The control-plane phase: bench.control_plane's side by side through the TFJob API."""
    shared_root = Path(tempfile.mkdtemp(prefix="tfmw-bench-tfjob-"))
    contenders: dict[str, Callable[[str], Contender]] = {
        "tfmw-tfjob": lambda ns: TfmwTFJob(ns, shared_root),
        "tfjob-shipped": lambda ns: TFJob(binary, ns, tuned=False),
        "tfjob-tuned": lambda ns: TFJob(binary, ns, tuned=True),
    }
    side, (rate, rate_with_services) = side_by_side(kube, contenders)
    results["side_by_side"] = side
    tfmw_rate = side["tfmw-tfjob"]["burst_100_jobs_x_8_workers"]["pods_per_s"]
    results["bare_client_pods_per_s"] = round(rate, 1)
    results["tfmw_tfjob_rate_fraction_of_bare_client"] = round(tfmw_rate / rate, 3)
    results["bare_client_with_a_service_per_8_pods_per_s"] = round(rate_with_services, 1)
    results["tfmw_tfjob_rate_fraction_of_bare_client_with_services"] = round(
        tfmw_rate / rate_with_services, 3
    )


if __name__ == "__main__":
    main()
