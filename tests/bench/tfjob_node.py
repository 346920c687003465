"""The TFJob API on the real node (issue 36.5): one TFJob manifest, a 2-worker
MultiWorkerMirroredStrategy job of the trainer image (deploy/samples/mnist-2-workers.yaml's
pods as TFJob workers), run by tfmw's operator serving TFJobs (`--tfjobs all`, out of
cluster, the deployed operator's folder-check and supervisor images) and by Kubeflow's
training-operator (tuned, out of cluster, as bench.felt runs it), with the floor: a bare
client creating the pods and Service tfmw would and restarting the gang itself
(bench.felt.FloorSide). The bench's part of bench.tfjob_api; `make bench-tfjob`.

Each contender's TFJob is the same manifest (tfjob_manifest) plus what it needs to run the
trainer: tfmw, the annotation naming the namespace's claim (it mounts it and sets the
TFMW_* variables itself); Kubeflow's, the claim mounted and the TFMW_* variables set in the
template by hand (bench.felt.tfjob_template).

Each measure runs the TFJob twice over, its workers' template giving only `args` (the image's
entrypoint runs, as in the sample) and giving the trainer's command too (as every example of
Kubeflow's examples/tensorflow does). tfmw re-creates a TFJob's gang either way (a TFJob's
pods keep Kubeflow's shape: no in-pod supervisor, api/kinds.py); the command changes what
runs as the container's first process.

Measured, the contenders taking turns:
  - a short job, RUNS times: create call -> every worker pod Running (the watch's first
    sight of phase Running), and -> the chief's first training step (its log's runtime
    timestamp); the API writes the whole job cost, create to every pod gone (the API
    server's request counters; the bench's own create and delete of the job left out,
    leases and nodes left out: what the controller, the kubelet and the endpoint
    controllers wrote for it);
  - a longer job per restart policy (ExitCode and OnFailure) and template (the floor, one:
    the sample's pods, the gang re-created), DEATH_RUNS times: once it has a checkpoint, worker 1's training process is SIGKILLed on the node;
    the kill -> every worker's TensorFlow cluster up again (its `start cluster_workers=`
    line after the kill: the new attempt's workers all joined) and -> the chief's next
    `first_step` line (training again). Kubeflow replaces or restarts only the dead worker
    (ExitCode: deletes its pod for a new one; OnFailure: the kubelet restarts its container
    in place); what its chief then does is printed. tfmw under ExitCode restarts the gang
    (every pod of the attempt gone, the next attempt's pods created); under OnFailure it gives
    the pods Kubeflow's restartPolicy and the kubelet restarts the containers in place.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import statistics
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from bench.control_plane import api_writes
from bench.felt import (
    DEATH_ARGS,
    FIRST_STEP,
    SHORT_ARGS,
    START_TIMEOUT,
    STRATEGY_UP,
    TFJOB_JOB_LABEL,
    WORKERS,
    ControllerSide,
    FloorSide,
    JobWatch,
    LogLine,
    PodRecord,
    Side,
    Started,
    TFJobSide,
    brief,
    folder_check_image,
    gone_at,
    kill_worker,
    namespace_with_storage,
    pod_story,
    progress_epoch,
    quiet_machine,
    rel,
    tear_down,
    tfjob_template,
    tfmw_manifest,
    wait_first_step,
)
from bench.peer import TFJob, TfmwTFJob, scratch_log
from bench.stats import percentile, say
from kube import SHARED_DIR, ClusterClient, kubectl, wait_for
from tfmw_operator.api.tfjob import (
    ANNOTATION_SHARED_CLAIM,
    ANNOTATION_SHARED_MOUNT_PATH,
    GROUP,
    PLURAL,
    VERSION,
)

Json = dict[str, Any]
RUNS = int(os.environ.get("TFMW_BENCH_RUNS", "6"))
DEATH_RUNS = int(os.environ.get("TFMW_BENCH_DEATH_RUNS", "3"))
POLICIES = ("ExitCode", "OnFailure")
# The workers' template as the sample gives it (only `args`: the image's entrypoint runs), or
# also giving its command, as every TFJob of Kubeflow's examples/tensorflow does.
TEMPLATES = ("args", "command")
COMMAND = ("python3", "-m", "tfmw_trainer")  # the program of the trainer image's entrypoint
DEATHS = tuple(f"{policy}, {template}" for template in TEMPLATES for policy in POLICIES)
CONTENDERS = ("tfmw-tfjob", "tfjob-tuned", "floor")
DEATH_BOUND = float(os.environ.get("TFMW_BENCH_TFJOB_BOUND", "180"))
CLAIM = "tfmw-shared"
# Not the job's: the control plane's own lease renewals and node heartbeats, and the
# training-operator's certificate rotation.
IGNORED_WRITES = frozenset({"leases", "nodes", "nodes/status", "secrets", "validatingwebhookconfigurations"})
# The bench's own calls: the job's create and delete (the floor's stand-in for a job, a ConfigMap).
BENCH_WRITES = frozenset({"POST tfjobs", "DELETE tfjobs", "POST configmaps", "DELETE configmaps"})


# ---- pure: the manifest, the figures ----


def tfjob_manifest(job: str, args: Sequence[str], restart_policy: str, command: bool = False) -> Json:
    """The one TFJob every contender runs: the 2-worker sample's pod template as TFJob's
    Worker replicas (giving the trainer's command too, if `command`), its runPolicy where
    TFJob has the field, cleanPodPolicy Running."""
    sample = tfmw_manifest(job, args)
    if command:
        sample["spec"]["template"]["spec"]["containers"][0]["command"] = list(COMMAND)
    manifest = TFJob.manifest(job, WORKERS, restart_policy, sample["spec"]["template"])
    run = sample["spec"]["runPolicy"]
    manifest["spec"]["runPolicy"].update(
        backoffLimit=run["backoffLimit"], activeDeadlineSeconds=run["activeDeadlineSeconds"]
    )
    return manifest


def for_tfmw(manifest: Json) -> Json:
    """What tfmw needs beside the manifest: the annotation naming the namespace's claim."""
    manifest = copy.deepcopy(manifest)
    annotations = manifest["metadata"].setdefault("annotations", {})
    annotations[ANNOTATION_SHARED_CLAIM] = CLAIM
    annotations[ANNOTATION_SHARED_MOUNT_PATH] = "/shared"
    return manifest


def for_kubeflow(manifest: Json, namespace: str, uid: str) -> Json:
    """What Kubeflow's controller needs beside the manifest: the claim and the trainer's
    TFMW_* variables in the workers' template, by hand."""
    manifest = copy.deepcopy(manifest)
    worker = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    worker["template"] = tfjob_template(worker["template"], manifest["metadata"]["name"], namespace, uid)
    return manifest


def job_writes(before: dict[tuple[str, str, str], float], after: dict[tuple[str, str, str], float]) -> Json:
    """The writes between two counts that the job cost: by "VERB resource[/sub]", the bench's
    own and the control plane's housekeeping left out; with their total, and the total
    without Events (the kubelet's and the controllers' words, not their work)."""
    made: dict[str, int] = {}
    for (verb, resource, sub), value in after.items():
        name = f"{resource}/{sub}" if sub else resource
        delta = round(value - before.get((verb, resource, sub), 0))
        key = f"{verb} {name}"
        if delta > 0 and not {resource, name} & IGNORED_WRITES and key not in BENCH_WRITES:
            made[key] = delta
    events = sum(n for key, n in made.items() if key.split(" ", 1)[1] == "events")
    return {
        "total": sum(made.values()),
        "without_events": sum(made.values()) - events,
        **dict(sorted(made.items())),
    }


def after(lines: Iterable[LogLine], pattern: Any, since: float) -> float | None:
    """The earliest line matching `pattern` stamped after `since` (lines of several
    containers, not in time order)."""
    return min((at for at, text in lines if at > since and pattern.match(text)), default=None)


def back_after(logs: dict[int, list[list[LogLine]]], since: float) -> tuple[float | None, float | None]:
    """From each worker index's logs (one list per pod of it): when every worker's
    TensorFlow cluster was up again after `since` (the later of the workers' first
    `start cluster_workers=` line after it), and when the chief (worker 0) logged its next
    `first_step`."""
    ups = [
        min(filter(None, (after(log, STRATEGY_UP, since) for log in pods)), default=None)
        for pods in logs.values()
    ]
    all_up = None if not ups or None in ups else max(u for u in ups if u is not None)
    step = min(filter(None, (after(log, FIRST_STEP, since) for log in logs.get(0, []))), default=None)
    return all_up, step


def describe(values: Sequence[float | None]) -> Json:
    """Median and p90 (nearest rank) of the runs that got there, min and max, and how many
    did not."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"n": 0, "missing": len(values)}
    return {
        "n": len(known),
        "missing": len(values) - len(known),
        "median_s": round(statistics.median(known), 3),
        "p90_s": round(percentile(known, 90), 3),
        "min_s": round(known[0], 3),
        "max_s": round(known[-1], 3),
    }


def show(summary: Json) -> str:
    if not summary.get("n"):
        return f"none of {summary.get('missing', 0)}" if summary.get("missing") else "-"
    text = f"{summary['median_s']:.2f} / {summary['p90_s']:.2f}"
    return text + (f" ({summary['missing']} missed)" if summary.get("missing") else "")


def ratio(ours: Json, theirs: Json, key: str = "median_s") -> str:
    if not ours.get(key) or not theirs.get(key):
        return "-"
    return f"{ours[key] / theirs[key]:.3f}"


def node_rows(summary: Json) -> list[tuple[str, list[str], str]]:
    """The table's rows: each contender's median / p90 (writes: median), and tfmw's ratio of
    medians to Kubeflow's."""
    rows: list[tuple[str, list[str], str]] = []

    def row(label: str, cells: dict[str, Json], fmt: Any = show) -> None:
        rows.append(
            (
                label,
                [fmt(cells.get(n, {})) for n in CONTENDERS],
                ratio(cells.get(CONTENDERS[0], {}), cells.get(CONTENDERS[1], {})),
            )
        )

    start = summary.get("start", {})
    for template in TEMPLATES:
        shown = "only args" if template == "args" else "its command"
        # The floor's pods are the sample's (only args).
        cells = {
            n: start.get(n, {}).get(template, {}) for n in CONTENDERS if n != "floor" or template == "args"
        }
        row(
            f"create -> all pods Running (s), template gives {shown}",
            {n: c.get("all_running", {}) for n, c in cells.items()},
        )
        row(
            f"create -> first training step (s), template gives {shown}",
            {n: c.get("first_step", {}) for n, c in cells.items()},
        )
        for kind in ("total", "without_events"):
            label = "API writes per job" + (" (without Events)" if kind == "without_events" else "")
            row(
                f"{label}, template gives {shown}",
                {n: c.get(f"writes_{kind}", {}) for n, c in cells.items()},
                lambda s: f"{s['median_s']:.0f}" if s.get("n") else "-",
            )
    death = summary.get("death", {})
    floor = death.get("floor", {}).get("-", {})
    for variant in DEATHS:
        policy, template = variant.split(", ")
        cells = {n: death.get(n, {}).get(variant, {}) for n in CONTENDERS[:2]}
        cells["floor"] = floor  # one gang restart, re-created: no policy, no template
        shown = "only args" if template == "args" else "its command"
        for key, what in (("all_up", "every worker's cluster up"), ("training_again", "training again")):
            row(
                f"death -> {what} (s), {policy}, template gives {shown}",
                {n: c.get(key, {}) for n, c in cells.items()},
            )
    return rows


def node_table(summary: Json) -> str:
    header = (
        f"{'measure (median / p90)':<82}" + "".join(f"{n:>20}" for n in CONTENDERS) + f"{'tfmw / tfjob':>14}"
    )
    lines = [header, "-" * len(header)]
    for label, cells, to_tfjob in node_rows(summary):
        lines.append(f"{label:<82}" + "".join(f"{c:>20}" for c in cells) + f"{to_tfjob:>14}")
    return "\n".join(lines)


def node_markdown(summary: Json) -> str:
    lines = [
        "| measure (median / p90) | " + " | ".join(CONTENDERS) + " | tfmw / tfjob |",
        "| --- |" + " --- |" * 4,
    ]
    for label, cells, to_tfjob in node_rows(summary):
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {to_tfjob} |")
    return "\n".join(lines)


# ---- the contenders ----


class TfmwTFJobSide(ControllerSide):
    """tfmw's operator serving TFJobs for its namespace, out of cluster, with the deployed
    operator's images for the folder check and the supervisor, as users run it."""

    name = "tfmw-tfjob"
    job_label = TFJOB_JOB_LABEL
    restart_policy = "ExitCode"
    command = False

    def __init__(self, kube: ClusterClient, namespace: str, images: tuple[str, str]) -> None:
        super().__init__(kube, namespace)
        self.controller = TfmwTFJob(namespace, SHARED_DIR)
        folder_check, supervisor = images
        self.controller.command += ["--folder-check-image", folder_check, "--supervisor-image", supervisor]
        self.controller.prepare(kube, namespace)
        log = scratch_log("tfjob-node-tfmw")
        log.unlink(missing_ok=True)
        self.controller.start(log)

        def started() -> bool:
            self.controller.check_alive()
            return "tfmw operator started" in log.read_text(errors="replace")

        wait_for("tfmw's operator started", started, timeout=60, interval=0.2)
        self.jobs = JobWatch(kube, namespace, self.controller.api)

    def create(self, job: str, args: Sequence[str]) -> Started:
        manifest = for_tfmw(tfjob_manifest(job, args, self.restart_policy, self.command))
        self.controller.check_alive()
        at = time.time()
        created = self.kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, manifest
        )
        return Started(job, created["metadata"]["uid"], at)


class KubeflowSide(TFJobSide):
    """Kubeflow's training-operator, tuned, given the same manifest (bench.felt.TFJobSide)."""

    restart_policy = "ExitCode"
    command = False

    def create(self, job: str, args: Sequence[str]) -> Started:
        uid = f"tfjob-{uuid.uuid4()}"
        folder = self.folder(job)  # as tfmw's operator makes it: any user may write there
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)
        manifest = for_kubeflow(
            tfjob_manifest(job, args, self.restart_policy, self.command), self.namespace, uid
        )
        self.controller.check_alive()
        at = time.time()
        self.kube.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, manifest)
        return Started(job, uid, at)


# ---- one job ----


def worker_index(job: str, record: PodRecord) -> int | None:
    prefix = f"{job}-worker-"
    return int(record.name[len(prefix) :]) if record.name.startswith(prefix) else None


def start_job(side: Side, job: str) -> Json:
    """Create -> all pods Running and -> first step; the API writes of the whole job."""
    quiet_machine()
    time.sleep(1)  # the last job's trailing writes counted there, not here
    before = api_writes()
    started = side.create(job, SHORT_ARGS)

    def all_running() -> float | None:
        records = [r for r in side.timeline.records(job, side.job_label) if "running" in r.marks]
        return max(r.marks["running"] for r in records) if len(records) >= WORKERS else None

    running_at = wait_for(f"{side.name}: {job}'s pods Running", all_running, START_TIMEOUT, 0.05)
    step_at = wait_first_step(side, job, 0, started.created_at, START_TIMEOUT)
    wait_for(f"{side.name}: {job} Succeeded", lambda: side.succeeded_at(job), START_TIMEOUT, 0.1)
    wait_for(
        f"{side.name}: {job}'s workers gone",
        lambda: gone_at(side.timeline.records(job, side.job_label)),
        START_TIMEOUT,
        0.1,
    )
    pods = [pod_story(side, r, started.created_at) for r in side.timeline.records(job, side.job_label)]
    side.delete(job)
    time.sleep(3)  # the Services' endpoints, the last Events
    writes = job_writes(before, api_writes())
    out: Json = {
        "job": job,
        "all_running": round(running_at - started.created_at, 3),
        "first_step": round(step_at - started.created_at, 3),
        "writes": writes,
        "pods": pods,
    }
    say(
        f"  {side.name} {job}: all Running {out['all_running']:.2f} s, first step {out['first_step']:.2f} s, "
        f"{writes['total']} writes ({writes['without_events']} without Events)"
    )
    return out


def death_job(side: Side, job: str) -> Json:
    """Kill worker 1's training process once the job has a checkpoint; the kill -> every
    worker's cluster up again and -> the chief training again, within DEATH_BOUND."""
    quiet_machine()
    started = side.create(job, DEATH_ARGS)
    wait_first_step(side, job, 0, started.created_at, START_TIMEOUT)
    wait_for(
        f"{side.name}: {job} checkpointed (progress epoch >= 1)",
        lambda: progress_epoch(side.folder(job), started.uid) >= 1,
        START_TIMEOUT,
        0.05,
    )
    killed = kill_worker(started.uid, 1)
    all_up = step = None
    deadline = killed + DEATH_BOUND
    while time.time() < deadline:
        logs: dict[int, list[list[LogLine]]] = {i: [] for i in range(WORKERS)}
        for record in side.timeline.records(job, side.job_label):
            index = worker_index(job, record)
            if index is not None:
                logs[index].append(side.timeline.log(record.uid))
        all_up, step = back_after(logs, killed)
        if all_up is not None and step is not None:
            break
        if isinstance(side, (TfmwTFJobSide, KubeflowSide)) and side.jobs.condition(job, "Failed"):
            break
        time.sleep(0.25)
    time.sleep(1)
    stories = [
        pod_story(side, r, killed)
        for r in side.timeline.records(job, side.job_label)
        if (r.stopped_at or float("inf")) >= killed - 1
    ]
    out: Json = {
        "job": job,
        "all_up": rel(all_up, killed),
        "training_again": rel(step, killed),
        "pods": stories,
    }
    if isinstance(side, (TfmwTFJobSide, KubeflowSide)):
        conditions, _ = side.jobs.snapshot(job)
        out["conditions"] = {
            kind: {"at": rel(at, killed), "reason": reason, "message": message[:300]}
            for kind, (at, reason, message) in sorted(conditions.items(), key=lambda c: c[1][0])
            if at >= killed
        }
    say(
        f"  {side.name} {job}: worker 1 killed; every worker's cluster up {out['all_up']} s, "
        f"training again {out['training_again']} s later"
    )
    for story in stories:
        say(f"    {brief(story)}")
    for kind, seen in (out.get("conditions") or {}).items():
        say(f"    condition {kind} at {seen['at']:+.2f} s: {seen['reason']} {seen['message'][:160]}")
    side.delete(job)
    return out


def attempt(measure: Any, side: Side, job: str) -> Json:
    try:
        result: Json = measure(side, job)
        return result
    except AssertionError as error:
        say(f"  {side.name} {job}: FAILED: {error}")
        with contextlib.suppress(Exception):
            side.delete(job)
        return {"job": job, "error": str(error)[:2000]}


def deployed_images() -> tuple[str, str]:
    """The deployed operator's folder-check and supervisor images."""
    deployment = json.loads(
        kubectl("-n", "tfmw-system", "get", "deployment", "tfmw-operator", "-o", "json").stdout
    )
    env = {
        e.get("name"): str(e.get("value", ""))
        for c in deployment["spec"]["template"]["spec"]["containers"]
        for e in c.get("env") or []
    }
    folder_check = folder_check_image()
    return folder_check, env.get("TFMW_SUPERVISOR_IMAGE") or folder_check


def summarise(runs: list[Json]) -> Json:
    """Per contender: per template, the start's figures; per restart (policy and template;
    the floor's "-"), the death's."""
    start: Json = {}
    death: Json = {}
    for r in runs:
        for name, by_template in (r.get("start") or {}).items():
            for template, result in by_template.items():
                slot = start.setdefault(name, {}).setdefault(template, {})
                for key in ("all_running", "first_step"):
                    slot.setdefault(key, []).append(result.get(key))
                for kind in ("total", "without_events"):
                    slot.setdefault(f"writes_{kind}", []).append((result.get("writes") or {}).get(kind))
        for name, by_variant in (r.get("death") or {}).items():
            for variant, result in by_variant.items():
                slot = death.setdefault(name, {}).setdefault(variant, {})
                for key in ("all_up", "training_again"):
                    slot.setdefault(key, []).append(result.get(key))
    return {
        phase: {
            name: {variant: {k: describe(v) for k, v in slot.items()} for variant, slot in by.items()}
            for name, by in figures.items()
        }
        for phase, figures in (("start", start), ("death", death))
    }


def real_node(kube: ClusterClient, binary: str) -> Json:
    """The phase: its contenders in namespaces with storage, RUNS short jobs and DEATH_RUNS
    deaths per restart policy, taking turns; the summary and every run."""
    namespaces: list[str] = []
    sides: list[Side] = []
    runs: list[Json] = []
    try:
        for contender in ("tfmwtfjob", "kubeflow", "floor"):
            namespaces.append(namespace_with_storage(kube, contender))
        images = deployed_images()
        tfmw = TfmwTFJobSide(kube, namespaces[0], images)
        sides.append(tfmw)
        kubeflow = KubeflowSide(kube, namespaces[1], binary)
        sides.append(kubeflow)
        floor = FloorSide(kube, namespaces[2], images[0])
        sides.append(floor)
        say(f"real node: {', '.join(f'{s.name} {s.namespace}' for s in sides)}; images {images}")
        for run in range(max(RUNS, DEATH_RUNS)):
            this: Json = {}
            if run < RUNS:
                say(f"run {run + 1}: short jobs ({' '.join(SHORT_ARGS)}), the contenders in turn ...")
                this["start"] = {"floor": {"args": attempt(start_job, floor, f"short-{run}")}}
                for template in TEMPLATES:
                    for served in (tfmw, kubeflow):
                        served.command = template == "command"
                        job = f"short-{template}-{run}"
                        this["start"].setdefault(served.name, {})[template] = attempt(start_job, served, job)
            if run < DEATH_RUNS:
                this["death"] = {}
                for template in TEMPLATES:
                    for policy in POLICIES:
                        say(
                            f"run {run + 1}: worker 1 killed, restartPolicy {policy}, template {template} ..."
                        )
                        for served in (tfmw, kubeflow):
                            served.restart_policy, served.command = policy, template == "command"
                            job = f"death-{policy.lower()}-{template}-{run}"
                            result = attempt(death_job, served, job)
                            this["death"].setdefault(served.name, {})[f"{policy}, {template}"] = result
                say(f"run {run + 1}: worker 1 killed, the floor ...")
                this["death"]["floor"] = {"-": attempt(death_job, floor, f"death-{run}")}
            runs.append(this)
    finally:
        tear_down(kube, sides, namespaces)
    return {"runs": RUNS, "death_runs": DEATH_RUNS, "summary": summarise(runs), "per_run": runs}
