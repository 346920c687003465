"""Where a lone job's launch costs the API server more than a TFJob's: the two writes of it.

    PYTHONPATH=tests python3 -m bench.launch_cost [--rounds 120]

The control-plane bench (bench.control_plane) times create -> pods + Services for a lone
job under tfmw and under Kubeflow's TFJob controller. This one times the API server alone,
for the two writes on that path that differ between them, taking turns, medians:

  - the job's create: a lone TFMultiWorkerJob under our CRD as shipped, the same CRD
    without its CEL rules, without them and its defaults (the floor: a CRD that checks
    nothing), and a lone TFJob under Kubeflow's CRD. The scratch CRDs are copies under
    groups of their own, served by no controller, removed at the end;
  - the pod's create: the pod each controller really sends for that lone job (both
    controllers are run once to make one, then stopped), and ours without its
    environment (the floor: what the contract's variables cost).

Pods are never scheduled: only the API server works. Needs the local cluster; pauses a
deployed operator while it runs. Writes bench/results/launch-cost.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from bench.control_plane import start_contender
from bench.peer import TFJob, Tfmw, install_tfjob_crd, remove_tfjob_crd
from bench.stats import say
from kube import REPO, ClusterClient, pause_deployed_operator

Json = dict[str, Any]
RESULTS = REPO / "bench" / "results"
OUR_CRD = REPO / "crds" / "tfmwjobs.tfmw.dev.yaml"


def _without(key: str, node: Any) -> None:
    if isinstance(node, dict):
        node.pop(key, None)
        for value in node.values():
            _without(key, value)
    elif isinstance(node, list):
        for value in node:
            _without(key, value)


def scratch_crd(group: str, *, rules: bool, defaults: bool) -> Json:
    """Our CRD under another group, with or without its CEL rules and its defaults."""
    crd: Json = yaml.safe_load(OUR_CRD.read_text())
    crd["metadata"] = {"name": f"{crd['spec']['names']['plural']}.{group}"}
    crd["spec"]["group"] = group
    names = crd["spec"]["names"]
    names.pop("shortNames", None)
    names.pop("categories", None)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    if not rules:
        _without("x-kubernetes-validations", schema)
    if not defaults:
        _without("default", schema)
    return crd


def pod_body(pod: Json) -> Json:
    """A pod as its controller sent it: what the server added on create taken away (the
    service account's token volume too, which the server adds again)."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": pod["metadata"]["labels"]}}
    spec = copy.deepcopy(pod["spec"])
    spec.pop("serviceAccount", None)
    spec.pop("nodeName", None)
    tokens = {v["name"] for v in spec.get("volumes", []) if v["name"].startswith("kube-api-access-")}
    spec["volumes"] = [v for v in spec.get("volumes", []) if v["name"] not in tokens]
    for container in spec["containers"]:
        container["volumeMounts"] = [m for m in container.get("volumeMounts", []) if m["name"] not in tokens]
    body["spec"] = spec
    return body


def sent_pods(kube: ClusterClient) -> tuple[Json, Json]:
    """The pod tfmw's operator and Kubeflow's controller each send for a lone job."""
    binary = install_tfjob_crd(kube)
    shared_root = Path(tempfile.mkdtemp(prefix="tfmw-bench-"))
    makers: tuple[Callable[[str], Any], ...] = (
        lambda ns: Tfmw(ns, shared_root),
        lambda ns: TFJob(binary, ns, tuned=True),
    )
    pods = []
    for make in makers:
        running = start_contender(kube, make)
        try:
            found = kube.core.list_namespaced_pod(running.namespace, _preload_content=False)
            pods.append(pod_body(json.loads(found.data)["items"][0]))
        finally:
            running.contender.stop()
            running.seen.stop.set()
            kube.delete_namespace(running.namespace)
    return pods[0], pods[1]


Create = Callable[[str], Callable[[], Any]]  # makes the object named; returns its deletion


def timed(cases: dict[str, Create], rounds: int, warm_up: int = 5) -> dict[str, Json]:
    """Each case's create, taking turns, its deletion untimed; medians and p90 in ms, the
    warm-up left out."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(rounds + warm_up):
        for name, create in cases.items():
            began = time.perf_counter()
            delete = create(f"r{i}")
            if i >= warm_up:
                times[name].append(time.perf_counter() - began)
            delete()
    return {
        name: {
            "median_ms": round(statistics.median(values) * 1000, 3),
            "p90_ms": round(sorted(values)[int(len(values) * 0.9)] * 1000, 3),
        }
        for name, values in times.items()
    }


def jobs_side_by_side(kube: ClusterClient, namespace: str, rounds: int) -> dict[str, Json]:
    ours: Json = yaml.safe_load(OUR_CRD.read_text())
    version = ours["spec"]["versions"][0]["name"]
    plural = ours["spec"]["names"]["plural"]
    scratch = {
        "TFMultiWorkerJob, our CRD": scratch_crd(
            "as-shipped.launch-cost.tfmw.dev", rules=True, defaults=True
        ),
        "TFMultiWorkerJob, no CEL rules": scratch_crd(
            "no-rules.launch-cost.tfmw.dev", rules=False, defaults=True
        ),
        "TFMultiWorkerJob, no rules or defaults (floor)": scratch_crd(
            "floor.launch-cost.tfmw.dev", rules=False, defaults=False
        ),
    }
    for crd in scratch.values():
        kube.create_crd(crd)
    lone_job = Tfmw(namespace, Path("/shared")).job("x", 1)
    lone_tfjob = TFJob.manifest("x", 1, TFJob.restart_policy, Tfmw(namespace, Path("/shared")).template)

    def creating(group: str, version: str, plural: str, body: Json) -> Create:
        def create(name: str) -> Callable[[], Any]:
            job = {**copy.deepcopy(body), "apiVersion": f"{group}/{version}", "metadata": {"name": name}}
            kube.custom.create_namespaced_custom_object(group, version, namespace, plural, job)
            return lambda: kube.custom.delete_namespaced_custom_object(
                group, version, namespace, plural, name
            )

        return create

    try:
        cases = {
            name: creating(crd["spec"]["group"], version, plural, lone_job) for name, crd in scratch.items()
        }
        cases["TFJob, Kubeflow's CRD"] = creating("kubeflow.org", "v1", "tfjobs", lone_tfjob)
        return timed(cases, rounds)
    finally:
        for crd in scratch.values():
            kube.apiext.delete_custom_resource_definition(crd["metadata"]["name"])


def pods_side_by_side(
    kube: ClusterClient, namespace: str, ours: Json, theirs: Json, rounds: int
) -> dict[str, Json]:
    bare = copy.deepcopy(ours)
    for container in bare["spec"]["containers"]:
        container.pop("env", None)

    def creating(body: Json, prefix: str) -> Create:
        def create(name: str) -> Callable[[], Any]:
            pod = copy.deepcopy(body)
            pod["metadata"]["name"] = f"{prefix}-{name}"
            kube.core.create_namespaced_pod(namespace, pod, _preload_content=False).read()
            return lambda: kube.core.delete_namespaced_pod(
                f"{prefix}-{name}", namespace, grace_period_seconds=0, _preload_content=False
            )

        return create

    return timed(
        {
            "tfmw's pod": creating(ours, "tfmw"),
            "tfmw's pod without its env (floor)": creating(bare, "bare"),
            "TFJob's pod": creating(theirs, "tfjob"),
        },
        rounds,
    )


def table(title: str, rows: dict[str, Json], reference: str) -> str:
    lines = [f"{title:48s} median ms   p90 ms   / {reference}"]
    base = rows[reference]["median_ms"]
    for name, row in rows.items():
        lines.append(
            f"{name:48s} {row['median_ms']:9.2f} {row['p90_ms']:8.2f}   {row['median_ms'] / base:.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=120)
    rounds = parser.parse_args().rounds
    kube = ClusterClient()
    resume = pause_deployed_operator()
    namespace = kube.new_namespace("launch-cost", pod_security="baseline")
    try:
        say("running each controller once for the pod it sends ...")
        ours, theirs = sent_pods(kube)
        say(f"the jobs' creates, {rounds} rounds ...")
        jobs = jobs_side_by_side(kube, namespace, rounds)
        say(f"the pods' creates, {rounds} rounds ...")
        pods = pods_side_by_side(kube, namespace, ours, theirs, rounds)
    finally:
        kube.delete_namespace(namespace)
        remove_tfjob_crd(kube)
        resume()
    print()
    print(table("a lone job's create", jobs, "TFJob, Kubeflow's CRD"))
    print()
    print(table("its pod's create", pods, "TFJob's pod"))
    sizes = {"tfmw's pod": len(json.dumps(ours)), "TFJob's pod": len(json.dumps(theirs))}
    print(f"\nbodies sent (bytes): {sizes}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"rounds": rounds, "jobs": jobs, "pods": pods, "pod_bytes": sizes}
    (RESULTS / "launch-cost.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
