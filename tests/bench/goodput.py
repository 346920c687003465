"""Goodput under failures: the share of wall-clock time a job keeps training when workers die,
tfmw restarting the gang in place against tfmw re-creating it, on the local cluster's real
node with the real trainer image (issue 39).

    make bench-goodput [FAULTS=2] [FAULT_EVERY=20]
    (or, with the cluster up and the operator deployed, `make deploy`:
     TFMW_BENCH_FAULTS=2 TFMW_BENCH_FAULT_EVERY=20 PYTHONPATH=tests python3 -m bench.goodput)

Three contenders, all the deployed operator and the same 2-worker trainer job in the default
namespace (its tfmw-shared claim), taken in turn:
  - tfmw-in-place: the template gives its command (`python3 -m tfmw_trainer`), so the gang
    runs under the in-pod supervisor and a gang restart keeps the pods that run;
  - tfmw-warm: the same, with `runPolicy.warmStart: {}`: each supervisor keeps the next
    attempt's Python ready, TensorFlow imported (docs/supervisor.md, "A warm start");
  - tfmw-recreate: the same job with only `args` (the image's entrypoint): every gang restart
    deletes and re-creates every pod, as before the supervisor.
Each runs the job twice: once without faults (its wall time, create call -> Succeeded, is the
reference), then with N faults, one every K seconds of training: the fault is waited for
training again (the new attempt's first progress report) before the next K seconds count.
Faults alternate between SIGKILL of worker 1's trainer (on the node, as the OOM killer would)
and deleting worker 1's pod (as a lost node or an eviction would).

Printed, and kept in bench/results/goodput.json: per contender the reference and faulted wall
times, goodput (reference / faulted), time lost per failure ((faulted - reference) / N), and
per fault the seconds from the fault to the restart decided and to training again, and the
steps lost (the progress at the fault minus the step the chief's next attempt resumed from).

Where each failure's time goes, from the container runtime's timestamps on every worker's
log (read once the gang trains again, while its pods are there): detect (the fault -> the
attempt raised in the status), start (-> every worker's process of the new attempt up:
survivors stopped, lost pods re-created), import (-> every worker's TensorFlow imported),
cluster up (-> every worker's MultiWorkerMirroredStrategy made), restore (-> the chief
resumed from its checkpoint), first step (-> the chief's first step), and redo (the steps
lost at the speed the job trained at the fault).

Then the peers, with the deployed operator paused (TFMW_BENCH_GOODPUT_PEERS=0 leaves them
out), each in a namespace with storage of its own and the same trainer, program and faults:
  - tfjob-tuned: Kubeflow's training-operator, tuned, out of cluster (bench.felt.TFJobSide),
    the sample's pods as TFJob Worker replicas, restartPolicy ExitCode: it replaces the worker
    that died (a SIGKILL's 137 and the survivor's PeerLost 170 are retryable codes) and makes
    a deleted pod again;
  - floor: no operator; the bench makes the pods and Service tfmw would (its own builders) and,
    on a worker's failure or deletion, deletes every pod with grace 0 and makes the gang
    again at once (bench.felt.FloorSide): a gang restart by a bare client, as fast as it can.
Their restart is seen in the workers' logs alone (no status says an attempt): "detect" is
then part of "start", and "training again" is the chief's first step after the fault.
Not part of make test. It waits for nothing else on the cluster: run it under the lock.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import signal
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from bench.control_plane import RESULTS
from bench.felt import (
    FIRST_STEP,
    STRATEGY_UP,
    FloorSide,
    LogLine,
    Side,
    TFJobSide,
    kill_worker,
    namespace_with_storage,
    parse_log_line,
    tear_down,
)
from bench.peer import install_tfjob_crd, remove_tfjob_crd
from bench.stats import say
from bench.tfjob_node import after, deployed_images, worker_index
from kube import REPO, SHARED_DIR, ClusterClient, kubectl, pause_deployed_operator, trainer_pids

Json = dict[str, Any]
NAMESPACE = "default"
FAULTS = int(os.environ.get("TFMW_BENCH_FAULTS", "2"))
FAULT_EVERY = float(os.environ.get("TFMW_BENCH_FAULT_EVERY", "20"))
EPOCHS = int(os.environ.get("TFMW_BENCH_EPOCHS", "30"))  # room for 2 faults 20 s apart
ARGS = [f"--epochs={EPOCHS}", "--steps-per-epoch=100", "--batch-size=8", "--step-pause=0.02"]
COMMAND = ["python3", "-m", "tfmw_trainer"]
SAMPLE = REPO / "deploy" / "samples" / "mnist-2-workers.yaml"
CONTENDERS = ("tfmw-in-place", "tfmw-warm", "tfmw-recreate")
PEERS = os.environ.get("TFMW_BENCH_GOODPUT_PEERS", "1") not in ("", "0")
# TFMW_BENCH_GOODPUT_ONLY=tfjob-tuned,floor: those contenders alone (a rerun of one part).
ONLY = set(filter(None, os.environ.get("TFMW_BENCH_GOODPUT_ONLY", "").split(","))) or {
    *CONTENDERS,
    "tfjob-tuned",
    "floor",
}
PEER_BOUND = 240.0  # a fault -> a peer's chief training again (TFJob's took 36.7 s in run G)
KINDS = ("SIGKILL", "pod deleted")
JOB_TIMEOUT = 600.0
POLL = 0.2
# The trainer's lines that mark a restart's phases (trainer/tfmw_trainer/cli.py, train.py).
PROCESS_UP = re.compile(r"^worker=(\d+) process_up attempt=(\d+)$")
IMPORTED = re.compile(r"^worker=(\d+) tensorflow_imported ")
RESUMED = re.compile(r"^worker=0 resumed_from_epoch=\d+ resumed_from_step=(\d+)")
GLOBAL_BATCH = re.compile(r"^worker=0 start .*global_batch=(\d+)")
PHASES = ("detect", "start", "import", "cluster up", "restore", "first step", "redo")


@dataclass
class Fault:
    kind: str
    at_step: int = 0
    decided_s: float = 0.0  # the fault -> the attempt raised in the status
    training_s: float = 0.0  # the fault -> the new attempt's first progress report
    resumed_step: int | None = None
    kept_pods: int = 0  # pods of the gang with the UID they had before the fault
    phases: dict[str, float | None] = field(default_factory=dict)  # PHASES, in seconds

    @property
    def steps_lost(self) -> int | None:
        return None if self.resumed_step is None else max(0, self.at_step - self.resumed_step)


@dataclass
class Result:
    contender: str
    reference_s: float = 0.0
    faulted_s: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    # The faulted job did not train again within PEER_BOUND after its last fault (what its
    # workers said then): it was deleted, and it has no goodput.
    stuck: str = ""

    @property
    def goodput(self) -> float:
        return self.reference_s / self.faulted_s if self.faulted_s and not self.stuck else 0.0

    @property
    def lost_per_failure_s(self) -> float:
        if self.stuck or not self.faults:
            return 0.0
        return (self.faulted_s - self.reference_s) / len(self.faults)


def manifest(name: str, contender: str) -> Json:
    job: Json = yaml.safe_load(SAMPLE.read_text())
    job = copy.deepcopy(job)
    job["metadata"] = {"name": name}
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["args"] = list(ARGS)
    if contender in ("tfmw-in-place", "tfmw-warm"):
        container["command"] = list(COMMAND)
    if contender == "tfmw-warm":
        job["spec"]["runPolicy"]["warmStart"] = {}  # TensorFlow imported ahead of each attempt
    job["spec"]["runPolicy"]["backoffLimit"] = FAULTS + 2
    return job


def read_progress(folder: Path) -> Json:
    """The job's progress.json in its folder on the shared storage; {} while there is none."""
    try:
        document = json.loads((folder / "progress.json").read_text())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def progress(name: str) -> Json:
    return read_progress(SHARED_DIR / NAMESPACE / name)


def until(what: str, probe: Any, timeout: float = JOB_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(POLL)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def uids(kube: ClusterClient, name: str) -> set[str]:
    return {p["metadata"]["uid"] for p in kube.pods(NAMESPACE, name)}


def kill_trainer(uid: str, index: int) -> None:
    """SIGKILL to worker `index`'s trainer processes (its command, not its supervisor)."""
    pids = trainer_pids(uid, index)
    if not pids:
        raise RuntimeError(f"worker {index}'s trainer is not on this node")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def worker_logs(kube: ClusterClient, name: str) -> dict[int, list[LogLine]]:
    """Every worker pod's log as the container runtime stamped it, by worker index."""
    logs: dict[int, list[LogLine]] = {}
    for pod in kube.pods(NAMESPACE, name):
        index = pod["metadata"]["name"].rsplit("-", 1)[-1]
        read = kubectl(
            "logs", "--timestamps", "-n", NAMESPACE, pod["metadata"]["name"], "-c", "tensorflow", check=False
        )  # fmt: skip
        parsed = (parse_log_line(line) for line in read.stdout.splitlines())
        logs[int(index)] = [line for line in parsed if line is not None]
    return logs


def first_after(lines: list[LogLine], pattern: re.Pattern[str], since: float | None) -> float | None:
    if since is None:
        return None
    return min((at for at, text in lines if at >= since and pattern.match(text)), default=None)


def split(
    fault_at: float,
    decided_at: float | None,
    logs: dict[int, list[LogLine]],
    attempt: int | None,
    steps_lost: int | None,
    step_seconds: float | None,
) -> dict[str, float | None]:
    """Where a failure's time went (PHASES). Each milestone is the gang's: the last worker to
    reach it (the chief alone for restore and first step); a phase is the gap between one
    milestone and the one before (never negative: the bench's poll of the status may see
    the restart after the new processes started). None where a line is missing, and every
    phase after it; `decided_at` None (a peer: no status says when the restart was decided):
    detect None, and start spans it. `attempt` None: the lines of any attempt after the
    fault (a peer's pods say none)."""

    def of(match: re.Match[str] | None) -> bool:
        return match is not None and (attempt is None or int(match[2]) == attempt)

    def every(found: list[float | None]) -> float | None:
        return None if not found or None in found else max(f for f in found if f is not None)

    up: dict[int, float | None] = {}
    for index, lines in logs.items():
        up[index] = min(
            (at for at, text in lines if at >= fault_at and of(PROCESS_UP.match(text))),
            default=None,
        )
    imported = {i: first_after(lines, IMPORTED, up[i]) for i, lines in logs.items()}
    cluster = {i: first_after(lines, STRATEGY_UP, imported[i]) for i, lines in logs.items()}
    chief = logs.get(0, [])
    restored = first_after(chief, RESUMED, cluster.get(0))
    stepped = min(
        (at for at, text in chief if at >= fault_at and of(FIRST_STEP.match(text))),
        default=None,
    )
    milestones = [
        fault_at, decided_at, every(list(up.values())), every(list(imported.values())),
        every(list(cluster.values())), restored, stepped,
    ]  # fmt: skip
    phases: dict[str, float | None] = {}
    last: float | None = fault_at
    for name, milestone in zip(PHASES, milestones[1:], strict=False):
        if milestone is None and name == "detect":
            phases[name] = None  # no status says when the restart was decided: start spans it
            continue
        if milestone is None or last is None:
            phases[name], last = None, None
            continue
        phases[name] = max(0.0, milestone - last)
        last = max(last, milestone)
    redo = None if steps_lost is None or step_seconds is None else steps_lost * step_seconds
    phases["redo"] = redo
    return phases


def resumed_step(logs: dict[int, list[LogLine]], fault_at: float) -> int | None:
    """The step the chief's next attempt resumed from, as its log says: the checkpoint it
    restored (a save on SIGTERM too, which the status's history, written at the restart's
    decision, cannot know yet)."""
    found = sorted(
        (at, int(m[1])) for at, text in logs.get(0, []) if at >= fault_at and (m := RESUMED.match(text))
    )
    return found[0][1] if found else None


def step_seconds(progress_at_fault: Json, logs: dict[int, list[LogLine]]) -> float | None:
    """A step's seconds as the job trained at the fault: its global batch over its examples
    per second."""
    speed = progress_at_fault.get("examplesPerSecond")
    batches = [int(m[1]) for _, text in logs.get(0, []) if (m := GLOBAL_BATCH.match(text))]
    if not batches or not isinstance(speed, (int, float)) or speed <= 0:
        return None
    return batches[-1] / float(speed)


def phase(kube: ClusterClient, name: str) -> str:
    return str(kube.status(NAMESPACE, name).get("phase") or "")


def run_job(kube: ClusterClient, contender: str, faults: int) -> tuple[float, list[Fault], Json]:
    """One job of `contender` with `faults` faults: its wall time, the faults, its status."""
    short = {"tfmw-in-place": "ip", "tfmw-warm": "warm", "tfmw-recreate": "rc"}[contender]
    name = f"goodput-{short}-{uuid.uuid4().hex[:5]}"
    try:
        started = time.monotonic()
        job = kube.create_job(NAMESPACE, manifest(name, contender))
        uid = job["metadata"]["uid"]
        done: list[Fault] = []
        for number in range(faults):
            attempt = number  # each fault before it raised the attempt by one
            until(
                "training",
                lambda a=attempt: progress(name).get("attempt") == a and progress(name).get("step"),
            )
            time.sleep(FAULT_EVERY)
            if phase(kube, name) in ("Succeeded", "Failed"):
                say(f"{name}: ended before fault {number + 1}; make the job longer (TFMW_BENCH_EPOCHS)")
                break
            at_fault = progress(name)
            fault = Fault(KINDS[number % len(KINDS)], at_step=int(at_fault.get("step") or 0))
            before = uids(kube, name)
            at, at_wall = time.monotonic(), time.time()
            if fault.kind == "SIGKILL":
                kill_trainer(uid, 1)
            else:
                kubectl("delete", "pod", f"{name}-worker-1", "-n", NAMESPACE, "--wait=false")
            until("restart", lambda a=attempt: int(kube.status(NAMESPACE, name).get("attempt") or 0) > a, 180)
            fault.decided_s = time.monotonic() - at
            until("training again", lambda a=attempt + 1: progress(name).get("attempt") == a)
            fault.training_s = time.monotonic() - at
            fault.kept_pods = len(before & uids(kube, name))
            logs = worker_logs(kube, name)
            fault.resumed_step = resumed_step(logs, at_wall)
            fault.phases = split(
                at_wall, at_wall + fault.decided_s, logs, attempt + 1, fault.steps_lost,
                step_seconds(at_fault, logs),
            )  # fmt: skip
            say(
                f"{name}: fault {number + 1}/{faults} ({fault.kind} at step {fault.at_step}): restart decided "
                f"{fault.decided_s:.1f} s, training again {fault.training_s:.1f} s after it; "
                f"{fault.kept_pods} pod(s) kept, {fault.steps_lost} step(s) lost; "
                + ", ".join(f"{k} {seconds(v)}" for k, v in fault.phases.items())
            )
            done.append(fault)
        until("Succeeded", lambda: phase(kube, name) in ("Succeeded", "Failed"))
        wall = time.monotonic() - started
        status = kube.status(NAMESPACE, name)
        if status.get("phase") != "Succeeded":
            raise RuntimeError(f"{name} failed: {status.get('message')}")
        say(f"{name}: Succeeded in {wall:.1f} s with {len(done)} fault(s), attempt {status.get('attempt')}")
        return wall, done, status
    finally:
        with contextlib.suppress(Exception):
            kube.delete_job(NAMESPACE, name)
        with contextlib.suppress(Exception):
            until("pods gone", lambda: not kube.pods(NAMESPACE, name), 120)
        shutil.rmtree(SHARED_DIR / NAMESPACE / name, ignore_errors=True)


def side_logs(side: Side, job: str) -> dict[int, list[LogLine]]:
    """Every worker's lines, from all its pods (a peer replaces pods), by worker index."""
    logs: dict[int, list[LogLine]] = {}
    for record in side.timeline.records(job, side.job_label):
        index = worker_index(job, record)
        if index is not None:
            logs.setdefault(index, []).extend(side.timeline.log(record.uid))
    return logs


def chief_stepped(side: Side, job: str, since: float) -> float | None:
    """The chief's first `first_step` line stamped after `since`, from any of its pods."""
    return after(side_logs(side, job).get(0, []), FIRST_STEP, since)


def side_uids(side: Side, job: str) -> set[str]:
    pods = side.kube.core.list_namespaced_pod(side.namespace, label_selector=f"{side.job_label}={job}")
    return {p.metadata.uid for p in pods.items}


def last_words(side: Side, job: str) -> str:
    """Each of the job's pods now (phase, restarts) and its log's last lines: why a peer's
    gang did not train again."""
    said = []
    for record in side.timeline.records(job, side.job_label):
        lines = side.timeline.log(record.uid)[-3:]
        marks = ", ".join(sorted(record.marks))
        said.append(
            f"{record.name} {record.uid[:8]} ({marks}; exit {record.exit}): "
            + " | ".join(t for _, t in lines)
        )
    return "\n    ".join(said)


def run_side_job(side: Side, faults: int) -> tuple[float, list[Fault], str]:
    """One job of a peer with `faults` faults, as run_job does it for tfmw: its wall time
    (the create call -> Succeeded as the side sees it), the faults, and, when it did not
    train again within PEER_BOUND after a fault, what its pods said then (the job is then
    deleted and its wall time is that of the give-up)."""
    job = f"goodput-{side.name.split('-')[0]}-{uuid.uuid4().hex[:5]}"
    started = side.create(job, ARGS)
    try:
        trained_at = until("training", lambda: chief_stepped(side, job, started.created_at))
        done: list[Fault] = []
        for number in range(faults):
            time.sleep(max(0.0, trained_at + FAULT_EVERY - time.time()))
            if side.succeeded_at(job) is not None:
                say(f"{job}: ended before fault {number + 1}; make the job longer (TFMW_BENCH_EPOCHS)")
                break
            at_fault = read_progress(side.folder(job))
            fault = Fault(KINDS[number % len(KINDS)], at_step=int(at_fault.get("step") or 0))
            before = side_uids(side, job)
            if fault.kind == "SIGKILL":
                at = kill_worker(started.uid, 1)
            else:
                at = time.time()
                kubectl("delete", "pod", f"{job}-worker-1", "-n", side.namespace, "--wait=false")

            def again(since: float = at) -> float | None:
                if isinstance(side, TFJobSide) and (failed := side.jobs.condition(job, "Failed")):
                    raise TimeoutError(f"Failed: {failed[1]}: {failed[2][:300]}")
                return chief_stepped(side, job, since)

            try:
                trained_at = until("training again", again, PEER_BOUND)
            except TimeoutError as error:
                stuck = f"not training again after fault {number + 1} ({fault.kind}): {error}\n    "
                stuck += last_words(side, job)
                say(f"{job}: {stuck}")
                done.append(fault)
                return time.time() - started.created_at, done, stuck
            fault.training_s = trained_at - at
            time.sleep(1)  # the other workers' lines of the same moment
            fault.kept_pods = len(before & side_uids(side, job))
            logs = side_logs(side, job)
            fault.resumed_step = resumed_step(logs, at)
            fault.phases = split(at, None, logs, None, fault.steps_lost, step_seconds(at_fault, logs))
            say(
                f"{job}: fault {number + 1}/{faults} ({fault.kind} at step {fault.at_step}): training again "
                f"{fault.training_s:.1f} s after it; {fault.kept_pods} pod(s) kept, {fault.steps_lost} step(s) "
                "lost; " + ", ".join(f"{k} {seconds(v)}" for k, v in fault.phases.items())
            )
            done.append(fault)
        succeeded = until("Succeeded", lambda: side.succeeded_at(job))
        wall = float(succeeded) - started.created_at
        say(f"{job}: Succeeded in {wall:.1f} s with {len(done)} fault(s)")
        return wall, done, ""
    finally:
        with contextlib.suppress(Exception):
            side.delete(job)


def run_peers(kube: ClusterClient) -> list[Result]:
    """TFJob tuned and the floor, each with its reference and faulted run, the deployed
    operator paused (it would serve neither, but must not share the node's time)."""
    images = deployed_images()
    resume = pause_deployed_operator()
    namespaces: list[str] = []
    sides: list[Side] = []
    results = []
    try:
        say("building the TFJob controller (once) and creating its CRD ...")
        binary = install_tfjob_crd(kube)
        for contender in ("tfjob", "floor"):
            namespaces.append(namespace_with_storage(kube, contender))
        tfjob = TFJobSide(kube, namespaces[0], binary)
        # Kubeflow counts each worker's retry (a fault costs it two: the dead one and its peer
        # exiting PeerLost); tfmw one per gang restart, with FAULTS + 2 (manifest): no job may
        # fail of its limit here, only be slow.
        tfjob.backoff_limit = 4 * FAULTS + 2
        sides = [tfjob, FloorSide(kube, namespaces[1], images[0])]
        for side in (s for s in sides if s.name in ONLY):
            result = Result(side.name)
            say(f"{side.name}: the reference run (no faults)")
            result.reference_s, _, _ = run_side_job(side, 0)
            say(f"{side.name}: {FAULTS} faults, one per {FAULT_EVERY:g} s of training")
            result.faulted_s, result.faults, result.stuck = run_side_job(side, FAULTS)
            results.append(result)
    finally:
        tear_down(kube, sides, namespaces)
        remove_tfjob_crd(kube)
        resume()
    return results


def table(results: list[Result]) -> str:
    rows = [
        f"| contender | reference (s) | with {FAULTS} faults, one per {FAULT_EVERY:g} s (s) | goodput | "
        "time lost per failure (s) | fault -> training again, median (s) | pods kept per fault | steps lost, median |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        trained = [f.training_s for f in r.faults if f.training_s]
        again = f"{statistics.median(trained):.1f}" if trained else "-"
        lost = [f.steps_lost for f in r.faults if f.steps_lost is not None]
        kept = ", ".join(str(f.kept_pods) for f in r.faults)
        if r.stuck:
            faulted, goodput, per_failure = f"stuck ({r.stuck.splitlines()[0]})", "-", "-"
        else:
            faulted, goodput, per_failure = (
                f"{r.faulted_s:.1f}",
                f"{r.goodput:.2f}",
                f"{r.lost_per_failure_s:.1f}",
            )
        rows.append(
            f"| {r.contender} | {r.reference_s:.1f} | {faulted} | {goodput} | "
            f"{per_failure} | {again} | {kept} | {statistics.median(lost) if lost else '-'} |"
        )
    return "\n".join(rows)


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def phase_table(results: list[Result]) -> str:
    """Where each failure's time went, by contender and kind of fault (the median of its faults)."""
    rows = [
        "| contender | fault | " + " | ".join(PHASES) + " | sum (s) |",
        "| --- | --- | " + " | ".join("---" for _ in PHASES) + " | --- |",
    ]
    for r in results:
        for kind in KINDS:
            faults = [f for f in r.faults if f.kind == kind]
            if not faults:
                continue
            cells = []
            for name in PHASES:
                values = [v for f in faults if (v := f.phases.get(name)) is not None]
                cells.append(statistics.median(values) if values else None)
            total = sum(c for c in cells if c is not None)
            rows.append(
                f"| {r.contender} | {kind} | " + " | ".join(seconds(c) for c in cells) + f" | {total:.2f} |"
            )
    return "\n".join(rows)


def main() -> None:
    kube = ClusterClient()
    contenders = [*CONTENDERS, *(("tfjob-tuned", "floor") if PEERS else ())]
    say(f"goodput: {', '.join(contenders)}; {FAULTS} faults (K={FAULT_EVERY:g} s), trainer args {ARGS}")
    results = []
    for contender in (c for c in CONTENDERS if c in ONLY):
        result = Result(contender)
        say(f"{contender}: the reference run (no faults)")
        result.reference_s, _, _ = run_job(kube, contender, 0)
        say(f"{contender}: {FAULTS} faults, one per {FAULT_EVERY:g} s of training")
        result.faulted_s, result.faults, _ = run_job(kube, contender, FAULTS)
        results.append(result)
    if PEERS and ONLY & {"tfjob-tuned", "floor"}:
        results += run_peers(kube)
    print(table(results), flush=True)
    print("\nWhere a failure's time goes, seconds (median of the faults of each kind):", flush=True)
    print(phase_table(results), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {
        "faults": FAULTS,
        "faultEverySeconds": FAULT_EVERY,
        "args": ARGS,
        "results": [
            {**asdict(r), "goodput": r.goodput, "lostPerFailureSeconds": r.lost_per_failure_s}
            for r in results
        ],
    }
    (RESULTS / "goodput.json").write_text(json.dumps(document, indent=2) + "\n")
    say(f"written {RESULTS / 'goodput.json'}")


if __name__ == "__main__":
    main()
