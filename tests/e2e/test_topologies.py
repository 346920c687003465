"""Every topology of issue 35 on the local cluster, with real TensorFlow: the sample programs of
deploy/samples/programs/ delivered as docs/training-program.md's minimal program is (a
ConfigMap) and run by the jobs of deploy/samples/, and Kubeflow's own
multi_worker_strategy-with-keras.py from the image tests/tfjob builds of it.

- ParameterServerStrategy (a chief coordinating with Keras fit, 2 workers, 1 parameter
  server): a worker SIGKILLed mid-training is replaced alone, the parameter server SIGKILLed
  restarts the whole job from the chief's backup, and it ends Succeeded with every step done;
- MultiWorkerMirroredStrategy with a chief of its own and a SidecarEvaluator that evaluates
  every checkpoint: its figures in status.evaluation and the EVALUATION column;
- Kubeflow's multi_worker_strategy-with-keras.py as it is, ended by the chief's exit code;
- PreemptionCheckpointHandler evicted mid-epoch, restarted by a RestartNotCounted rule on 42
  from the step it saved;
- the exit-code program with no shared volume, ended by the chief's exit code.

Each stage's seconds are printed at the end of the run (pytest's terminal summary).
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import REPO, ClusterClient, kubectl, wait_for

Json = dict[str, Any]
NAMESPACE = "default"  # where deploy/overlays/local puts the tfmw-shared claim
SAMPLES = REPO / "deploy" / "samples"
PROGRAMS = SAMPLES / "programs"
STARTUP = 240  # s: up to five pods importing TensorFlow at once on two cores, then training
TRAINING_TIMEOUT = 420
KUBEFLOW_EXAMPLE = "examples/tensorflow/distribution_strategy/multi_worker_tfjob.yaml"
ROLE_TEMPLATES = ("chief", "parameterServers", "evaluator")
TIMINGS: list[tuple[str, str, float]] = []  # (test, stage, seconds), printed at the end


class Stages:
    """Seconds from one stage's end to the next's, for the run's summary."""

    def __init__(self, test: str) -> None:
        self.test = test
        self.started = self.last = time.monotonic()

    def done(self, stage: str) -> float:
        now = time.monotonic()
        seconds = now - self.last
        TIMINGS.append((self.test, stage, seconds))
        print(f"{self.test}: {stage}: {seconds:.1f}s", flush=True)
        self.last = now
        return seconds

    def total(self) -> None:
        TIMINGS.append((self.test, "whole test", time.monotonic() - self.started))


@pytest.fixture
def stages(request: pytest.FixtureRequest) -> Iterator[Stages]:
    timer = Stages(request.node.name.removeprefix("test_"))
    yield timer
    timer.total()


@pytest.fixture(scope="module", autouse=True)
def timings_summary(request: pytest.FixtureRequest) -> Iterator[None]:
    """The stages' seconds, written to the terminal once the module's tests have run."""
    started = time.monotonic()
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not TIMINGS:
        return
    reporter.write_sep("-", "tests/e2e/test_topologies.py: seconds per stage")
    for test, stage, seconds in TIMINGS:
        reporter.write_line(f"{seconds:7.1f}  {test}: {stage}")
    reporter.write_line(f"{time.monotonic() - started:7.1f}  the whole module, fixtures included")


@pytest.fixture(scope="module")
def programs(kube: ClusterClient) -> Iterator[dict[str, str]]:
    """Each sample program in a ConfigMap of its own, as the samples' comments say to make it
    (`kubectl create configmap ... --from-file=deploy/samples/programs/<program>`), under a
    name of this run's: program file name -> ConfigMap name."""
    suffix = uuid.uuid4().hex[:5]
    made = {}
    for path in sorted(PROGRAMS.glob("*.py")):
        name = f"{path.stem.replace('_', '-')}-program-{suffix}"
        kubectl("create", "configmap", name, "-n", NAMESPACE, f"--from-file={path}")
        made[path.name] = name
    yield made
    for name in made.values():
        kubectl("delete", "configmap", name, "-n", NAMESPACE, "--ignore-not-found", check=False)


def from_sample(sample: str, name: str, programs: dict[str, str], **env: str) -> Json:
    """deploy/samples/<sample> named `name`, its program's ConfigMap this run's, and `env` set
    in every role's main container (the programs read EPOCHS and STEPS_PER_EPOCH)."""
    manifest: Json = copy.deepcopy(yaml.safe_load((SAMPLES / sample).read_text()))
    manifest["metadata"]["name"] = name
    spec = manifest["spec"]
    templates = [spec["template"], *(spec[role]["template"] for role in ROLE_TEMPLATES if role in spec)]
    for template in templates:  # the samples' roles share one template (a YAML anchor): idempotent
        pod = template["spec"]
        for volume in pod.get("volumes") or []:
            if "configMap" in volume:
                program = Path(pod["containers"][0]["command"][-1]).name
                volume["configMap"]["name"] = programs[program]
        container = pod["containers"][0]
        given = {item["name"]: item for item in container.get("env") or []}
        given.update({key: {"name": key, "value": value} for key, value in env.items()})
        container["env"] = list(given.values())
    return manifest


def job_folder(shared_dir: Path, name: str) -> Path:
    return shared_dir / NAMESPACE / name


def read_json(path: Path) -> Json | None:
    try:
        document: Json = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return document


def progress_at(folder: Path, epoch: int) -> Json | None:
    """The chief's progress document once it reports `epoch` or later."""
    progress = read_json(folder / "progress.json")
    return progress if progress is not None and int(progress.get("epoch", 0)) >= epoch else None


def live_pods(kube: ClusterClient, name: str) -> dict[str, Json]:
    return {
        p["metadata"]["name"]: p
        for p in kube.pods(NAMESPACE, name)
        if not p["metadata"].get("deletionTimestamp")
    }


def uids(kube: ClusterClient, name: str) -> dict[str, str]:
    return {pod: p["metadata"]["uid"] for pod, p in live_pods(kube, name).items()}


def running(
    kube: ClusterClient, name: str, pod: str, attempt: int, replacing: str | None = None
) -> Json | None:
    """The pod `pod` of `attempt` if Running; with `replacing`, only a pod of another UID (the
    replaced pod can still read Running, without a deletion stamp, for a moment after the
    operator records the replacement: CI saw it once)."""
    found = live_pods(kube, name).get(f"{name}-{pod}")
    if found is None or found["metadata"]["labels"]["tfmw.dev/attempt"] != str(attempt):
        return None
    if found["metadata"]["uid"] == replacing:
        return None
    return found if found["status"].get("phase") == "Running" else None


def processes_with(*env: str) -> list[int]:
    """Processes on this machine whose environment holds all of `env` (KEY=value): a pod's
    containers run here, on the local node (or in kind's node container, on this kernel)."""
    found = []
    for path in Path("/proc").glob("[0-9]*/environ"):
        try:
            environ = path.read_bytes().split(b"\0")
        except OSError:
            continue
        if all(e.encode() in environ for e in env):
            found.append(int(path.parent.name))
    return found


def kill_program(uid: str, replica_type: str, index: int) -> None:
    """SIGKILL a pod's program, the way the OOM killer or a crash ends it: the sample programs
    run as their container's PID 1, with no child process."""
    wanted = (f"TFMW_JOB_UID={uid}", f"TFMW_REPLICA_TYPE={replica_type}", f"TFMW_REPLICA_INDEX={index}")
    (pid,) = wait_for(f"the {replica_type}-{index} process", lambda: processes_with(*wanted), timeout=60)
    os.kill(pid, signal.SIGKILL)


def pod_log(shared_dir: Path, name: str, stem: str, attempt: int) -> str:
    """A pod's log: from the pod while it exists in that attempt, else the copy the operator
    saved on the shared volume before deleting it."""
    pod = live_pods_any(name, stem)
    if pod is not None and pod["metadata"]["labels"]["tfmw.dev/attempt"] == str(attempt):
        live = kubectl("logs", "-n", NAMESPACE, f"{name}-{stem}", check=False)
        if live.returncode == 0 and live.stdout:
            return live.stdout
    try:
        return (job_folder(shared_dir, name) / "logs" / f"attempt-{attempt}" / f"{stem}.log").read_text()
    except OSError:
        return ""


def live_pods_any(name: str, stem: str) -> Json | None:
    found = kubectl("get", "pod", "-n", NAMESPACE, f"{name}-{stem}", "-o", "json", check=False)
    if found.returncode != 0:
        return None
    pod: Json = json.loads(found.stdout)
    return pod


def condition(status: Json, kind: str) -> Json:
    return next(c for c in status.get("conditions") or [] if c["type"] == kind)


def wide_row(name: str) -> dict[str, str]:
    """`kubectl get tfmw <name> -o wide`, as column -> value (columns split on 2+ spaces)."""
    lines = kubectl("get", "tfmw", name, "-n", NAMESPACE, "-o", "wide").stdout.splitlines()
    header = [m.start() for m in re.finditer(r"\S+", lines[0])]
    names = lines[0].split()
    values = [lines[1][start:end].strip() for start, end in zip(header, [*header[1:], None], strict=True)]
    return dict(zip(names, values, strict=True))


def wait_finished(kube: ClusterClient, name: str, timeout: float = TRAINING_TIMEOUT) -> Json:
    def probe() -> Json | None:
        status = kube.status(NAMESPACE, name)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    return wait_for(f"{name} finished", probe, timeout=timeout, interval=0.5)


# ---- ParameterServerStrategy ----

PS_EPOCHS, PS_STEPS = 14, 40
PS_EPOCH_LINE = re.compile(r"^chief epoch=(\d+) step=(\d+) updates=(\d+) loss=", re.M)


def test_parameter_server_worker_replaced_alone_parameter_server_restarts_the_job(
    kube: ClusterClient,
    shared_dir: Path,
    fresh_name: Callable[[str], str],
    programs: dict[str, str],
    stages: Stages,
) -> None:
    name = fresh_name("ps")
    env = {"EPOCHS": str(PS_EPOCHS), "STEPS_PER_EPOCH": str(PS_STEPS)}
    job = kube.create_job(NAMESPACE, from_sample("parameter-server.yaml", name, programs, **env))
    uid, folder, total = job["metadata"]["uid"], job_folder(shared_dir, name), PS_EPOCHS * PS_STEPS
    wait_for("the chief's first epoch", lambda: progress_at(folder, 1), timeout=STARTUP, interval=0.2)
    stages.done("created -> first epoch reported (a chief, 2 workers, 1 parameter server)")
    # The status follows the pods by one reconcile: waited for, not read once.
    status = kube.wait_phase(NAMESPACE, name, "Running")
    assert status["readyWorkers"] == "4/4", status
    # status.replicas: per set, {"chief": {"running": 1, ...}, ...}; restarts written when not 0
    assert {kind: r["running"] for kind, r in status["replicas"].items()} == {
        "chief": 1,
        "worker": 2,
        "ps": 1,
    }

    # A worker dies: replaced alone, in the same attempt; the others keep their pods.
    before = uids(kube, name)
    kill_program(uid, "worker", 1)
    killed_at = time.monotonic()

    def replaced() -> Json | None:
        history = kube.status(NAMESPACE, name).get("history") or []
        return history[0] if history and history[0]["outcome"] == "Replaced" else None

    record = wait_for("worker 1's Replaced record", replaced, timeout=60, interval=0.2)
    stages.done("worker 1 SIGKILLed -> Replaced in status.history")
    assert (record["attempt"], record["worker"], record.get("replicaType", "worker")) == (0, 1, "worker")
    assert (record["cause"], record["exitCode"]) == ("Error", 137), record
    old = before[f"{name}-worker-1"]
    new = wait_for(
        "the new worker 1 running",
        lambda: running(kube, name, "worker-1", 0, replacing=old),
        timeout=STARTUP,
    )
    stages.done("Replaced -> the new worker 1 Running")
    print(f"worker 1 killed -> its replacement Running: {time.monotonic() - killed_at:.1f}s")
    assert new["metadata"]["uid"] != old
    after = uids(kube, name)
    for pod in (f"{name}-chief-0", f"{name}-worker-0", f"{name}-ps-0"):
        assert after[pod] == before[pod], f"{pod} was replaced too"

    # The job's status follows its pods by one reconcile (the operator sees the pod's events,
    # then writes): read it once it says Running again, not the moment the pod does.
    status = kube.wait_phase(NAMESPACE, name, "Running")
    assert status["attempt"] == 0, status
    restarts = {kind: r.get("restarts", 0) for kind, r in status["replicas"].items()}
    assert restarts == {"chief": 0, "worker": 1, "ps": 0}, status["replicas"]
    assert "PodRestarted" in kube.wait_events(NAMESPACE, name, {"PodRestarted"})
    assert "GangRestart" not in {e["reason"] for e in kube.events(NAMESPACE, name)}

    # The parameter server dies: the chief loses its variables and exits 170; the whole job
    # restarts and the chief resumes from its last backup.
    reached = int((read_json(folder / "progress.json") or {}).get("epoch", 0))
    progress = wait_for(
        "an epoch after the replacement", lambda: progress_at(folder, reached + 1), timeout=120
    )
    assert progress["epoch"] < PS_EPOCHS, (
        f"training ended before the parameter server could be killed: {progress}"
    )
    stages.done("the new worker 1 Running -> the next epoch reported")
    kill_program(uid, "ps", 0)
    restarted = wait_for(
        "the whole job restarted", lambda: kube.status(NAMESPACE, name).get("attempt") == 1, timeout=60
    )
    assert restarted
    stages.done("parameter server SIGKILLed -> attempt 1")
    record = kube.status(NAMESPACE, name)["history"][0]
    assert (record["attempt"], record["outcome"], record["replicaType"], record["worker"]) == (
        0,
        "Restarted",
        "ps",
        0,
    ), record
    assert record["exitCode"] == 137 and record["checkpoint"]["epoch"] >= 1, record
    wait_for(
        "attempt 1 running", lambda: kube.status(NAMESPACE, name).get("phase") == "Running", timeout=STARTUP
    )
    stages.done("attempt 1 -> every pod of it Running")

    status = wait_finished(kube, name)
    stages.done("attempt 1 Running -> Succeeded")
    assert status["phase"] == "Succeeded", status
    assert (status["attempt"], status["restarts"], status.get("restartsNotCounted", 0)) == (1, 2, 0), status
    assert [(r["outcome"], r.get("replicaType", "worker")) for r in status["history"]] == [
        ("Restarted", "ps"),
        ("Replaced", "worker"),
    ]
    # The step count is intact: every epoch's steps done once; a step that was running on the
    # lost worker may have been applied twice (ClusterCoordinator runs it again elsewhere).
    marker = read_json(folder / "multiworker-complete.txt")
    assert marker is not None and (marker["jobUid"], marker["attempt"]) == (uid, 1), marker
    assert marker["step"] == total and total <= marker["updates"] <= total + 2, marker
    first_attempt = pod_log(shared_dir, name, "chief-0", 0)
    assert "Worker /job:worker/replica:0/task:1 failed with UnavailableError" in first_attempt
    assert "chief lost a parameter server, the job restarts" in first_attempt
    before_kill = [int(m[1]) for m in PS_EPOCH_LINE.finditer(first_attempt)]
    assert before_kill == list(range(1, len(before_kill) + 1)), before_kill
    resumed = [int(m[1]) for m in PS_EPOCH_LINE.finditer(pod_log(shared_dir, name, "chief-0", 1))]
    saved = record["checkpoint"]["epoch"]
    # From the backup the history names, or the one after it when the parameter server died
    # between the backup's write and the chief's report of it.
    assert resumed[0] in (saved + 1, saved + 2) and resumed == list(range(resumed[0], PS_EPOCHS + 1)), resumed
    print(f"{name}: epochs {before_kill} in attempt 0, {resumed} in attempt 1; updates {marker['updates']}")


# ---- MultiWorkerMirroredStrategy with a chief and a side-car evaluator ----

# An epoch must outlast an evaluation and the evaluator's 1 s poll, or SidecarEvaluator skips
# to the newest checkpoint (its documented behaviour).
EVAL_EPOCHS, EVAL_STEPS = 3, 100
EVALUATED = re.compile(r"^evaluator checkpoint=ckpt-(\d+) step=(\d+) accuracy=(\S+)$", re.M)


def test_chief_and_sidecar_evaluator_every_checkpoint_evaluated_into_the_status(
    kube: ClusterClient,
    shared_dir: Path,
    fresh_name: Callable[[str], str],
    programs: dict[str, str],
    stages: Stages,
) -> None:
    name = fresh_name("eval")
    env = {"EPOCHS": str(EVAL_EPOCHS), "STEPS_PER_EPOCH": str(EVAL_STEPS)}
    job = kube.create_job(NAMESPACE, from_sample("chief-evaluator.yaml", name, programs, **env))
    uid, folder = job["metadata"]["uid"], job_folder(shared_dir, name)
    wait_for("the chief's first epoch", lambda: progress_at(folder, 1), timeout=STARTUP, interval=0.2)
    stages.done("created -> first epoch reported (a chief, 2 workers, an evaluator)")
    status = wait_finished(kube, name)
    stages.done("first epoch -> Succeeded")
    assert status["phase"] == "Succeeded" and condition(status, "Succeeded")["reason"] == "MarkerWritten"
    assert "the chief wrote" in condition(status, "Succeeded")["message"]
    assert status["restarts"] == 0 and not status.get("history"), status

    def evaluated_last() -> Json | None:
        evaluation: Json | None = kube.status(NAMESPACE, name).get("evaluation")
        return evaluation if evaluation and evaluation.get("epoch") == EVAL_EPOCHS else None

    evaluation = wait_for("the final checkpoint's evaluation in the status", evaluated_last, timeout=60)
    stages.done("Succeeded -> the final evaluation in status.evaluation")
    assert evaluation["checkpoint"] == f"checkpoints/ckpt-{EVAL_EPOCHS}", evaluation
    assert evaluation["step"] == EVAL_EPOCHS * EVAL_STEPS and not evaluation.get("error"), evaluation
    assert set(evaluation["metrics"]) == {"loss", "accuracy"} and evaluation["metrics"]["accuracy"] > 0.8
    assert evaluation["summary"].startswith("loss=") and "accuracy=" in evaluation["summary"]
    row = wide_row(name)
    assert row["EVALUATION"] == evaluation["summary"], row
    print(f"kubectl get tfmw {name} -o wide: {row}")

    # Every checkpoint the chief saved was evaluated, in order, by the one evaluator.
    log = pod_log(shared_dir, name, "evaluator-0", 0)
    evaluated = [(int(m[1]), int(m[2])) for m in EVALUATED.finditer(log)]
    assert evaluated == [(e, e * EVAL_STEPS) for e in range(1, EVAL_EPOCHS + 1)], log[-2000:]
    document = read_json(folder / "evaluation.json")
    assert document is not None and document["jobUid"] == uid
    chief = pod_log(shared_dir, name, "chief-0", 0)
    assert [int(e) for e in re.findall(r"^chief epoch=(\d+) ", chief, re.M)] == list(
        range(1, EVAL_EPOCHS + 1)
    )
    replicas = kube.status(NAMESPACE, name)["replicas"]
    assert set(replicas) == {"chief", "worker", "evaluator"} and "restarts" not in replicas["evaluator"]


# ---- Kubeflow's multi_worker_strategy-with-keras.py ----


@pytest.fixture(scope="module")
def kubeflow_worker_template(kube: ClusterClient) -> Json:
    """The Worker template of Kubeflow's multi_worker_tfjob.yaml (training-operator's Go module
    at hack/versions.env's TFJOB_VERSION), its image built by hack/tfjob-images.sh (the
    example's own Dockerfile over the trainer image, only the MNIST download replaced:
    tests/tfjob/README.md). Built and imported only when its inputs changed."""
    from tfjob.upstream import manifests, module_dir  # the TFJob suite's reading of the module

    started = time.monotonic()
    script = REPO / "hack" / "tfjob-images.sh"
    subprocess.run([str(script)], check=True, stdout=subprocess.DEVNULL, timeout=1800)
    TIMINGS.append(("kubeflow image", "hack/tfjob-images.sh", time.monotonic() - started))
    (example,) = [m for m in manifests(module_dir()) if str(m.path) == KUBEFLOW_EXAMPLE]
    template: Json = copy.deepcopy(example.job["spec"]["tfReplicaSpecs"]["Worker"]["template"])
    return template


def test_kubeflow_multi_worker_strategy_with_keras_as_it_is_ends_by_the_chiefs_exit_code(
    kube: ClusterClient,
    shared_dir: Path,
    fresh_name: Callable[[str], str],
    kubeflow_worker_template: Json,
    stages: Stages,
) -> None:
    name = fresh_name("kubeflow")
    template = copy.deepcopy(kubeflow_worker_template)
    pod = template["spec"]
    (container,) = pod["containers"]
    # What differs from the TFJob, and why: no GPU here; the image exists only in the node's
    # containerd (a :latest tag would be pulled); restricted, as our samples are. The program,
    # its image, entrypoint and arguments are Kubeflow's.
    container["resources"]["limits"].pop("nvidia.com/gpu")
    container["resources"]["requests"] = {"cpu": "100m", "memory": "256Mi"}
    container["resources"]["limits"]["memory"] = "2Gi"
    container["imagePullPolicy"] = "IfNotPresent"
    container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    pod["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # Its claim (/train: checkpoints and the saved model) becomes a folder of each pod's own:
    # under ChiefExitCode nothing needs shared storage.
    (volume,) = pod["volumes"]
    pod["volumes"] = [{"name": volume["name"], "emptyDir": {}}]
    manifest = {
        "apiVersion": "tfmw.dev/v1alpha1",
        "kind": "TFMultiWorkerJob",
        "metadata": {"name": name},
        "spec": {"workers": 2, "completion": {"policy": "ChiefExitCode"}, "template": template},
    }
    kube.create_job(NAMESPACE, manifest)
    status = wait_finished(kube, name)
    stages.done("created -> finished (2 workers, 10 epochs of 70 steps)")
    log = kubectl("logs", "-n", NAMESPACE, f"{name}-worker-0").stdout
    assert status["phase"] == "Succeeded", (status, log[-3000:])
    succeeded = condition(status, "Succeeded")
    assert succeeded["reason"] == "ChiefSucceeded" and f"{name}-worker-0" in succeeded["message"]
    assert status["restarts"] == 0 and "progress" not in status and "marker" not in status, status
    assert "Learning rate for epoch 10 is" in log and "offline" in log.lower(), log[-3000:]
    assert not job_folder(shared_dir, name).exists()  # no shared volume: nothing of it on the storage


# ---- PreemptionCheckpointHandler ----

PREEMPT_EPOCHS, PREEMPT_STEPS = 3, 150


def test_preemption_evicted_mid_epoch_resumes_from_the_save_not_counted(
    kube: ClusterClient,
    shared_dir: Path,
    fresh_name: Callable[[str], str],
    programs: dict[str, str],
    stages: Stages,
) -> None:
    name = fresh_name("preempt")
    env = {"EPOCHS": str(PREEMPT_EPOCHS), "STEPS_PER_EPOCH": str(PREEMPT_STEPS)}
    manifest = from_sample("preemption.yaml", name, programs, **env)
    assert manifest["spec"]["runPolicy"]["failureRules"] == [
        {"action": "RestartNotCounted", "onExitCodes": [42]}
    ]
    job = kube.create_job(NAMESPACE, manifest)
    uid, folder = job["metadata"]["uid"], job_folder(shared_dir, name)
    wait_for("the first epoch", lambda: progress_at(folder, 1), timeout=STARTUP, interval=0.1)
    stages.done("created -> first epoch reported")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": f"{name}-worker-1"}}
    kube.core.create_namespaced_pod_eviction(f"{name}-worker-1", NAMESPACE, eviction)
    wait_for("attempt 1", lambda: kube.status(NAMESPACE, name).get("attempt") == 1, timeout=120)
    stages.done("worker 1 evicted -> attempt 1")
    status = wait_finished(kube, name)
    stages.done("attempt 1 -> Succeeded")
    assert status["phase"] == "Succeeded", status
    assert (status["restarts"], status.get("restartsNotCounted")) == (0, 1), status
    (record,) = status["history"]
    assert (record["attempt"], record["outcome"], record["exitCode"]) == (0, "Restarted", 42), record

    # Both workers saved the same step, in the middle of epoch 2, and attempt 1 started there.
    saved = set()
    for index, role in enumerate(("chief", "worker")):
        first = pod_log(shared_dir, name, f"worker-{index}", 0)
        (step,) = re.findall(rf"^{role} preempted: saved step=(\d+)$", first, re.M)
        saved.add(int(step))
    (step,) = saved
    assert PREEMPT_STEPS < step < 2 * PREEMPT_STEPS, step
    for index, role in enumerate(("chief", "worker")):
        second = pod_log(shared_dir, name, f"worker-{index}", 1)
        assert re.search(rf"^{role} start step={step}$", second, re.M), second[-2000:]
        epochs = [int(e) for e in re.findall(rf"^{role} epoch=(\d+) step=", second, re.M)]
        assert epochs == list(range(2, PREEMPT_EPOCHS + 1)), epochs
    marker = read_json(folder / "multiworker-complete.txt")
    assert marker == {"jobUid": uid, "attempt": 1, "step": PREEMPT_EPOCHS * PREEMPT_STEPS}, marker
    print(f"{name}: evicted mid-epoch 2, both saved step {step}; attempt 1 resumed there")


# ---- Exit code only ----


def test_exit_code_program_with_no_shared_volume_ends_by_the_chiefs_exit_code(
    kube: ClusterClient,
    shared_dir: Path,
    fresh_name: Callable[[str], str],
    programs: dict[str, str],
    stages: Stages,
) -> None:
    name = fresh_name("exit-code")
    manifest = from_sample("exit-code.yaml", name, programs)
    assert (
        "sharedVolume" not in manifest["spec"] and manifest["spec"]["completion"]["policy"] == "ChiefExitCode"
    )
    kube.create_job(NAMESPACE, manifest)
    status = wait_finished(kube, name)
    stages.done("created -> finished (2 workers)")
    assert status["phase"] == "Succeeded", status
    succeeded = condition(status, "Succeeded")
    assert succeeded["reason"] == "ChiefSucceeded" and f"{name}-worker-0" in succeeded["message"]
    assert status["restarts"] == 0 and "progress" not in status, status
    log = kubectl("logs", "-n", NAMESPACE, f"{name}-worker-0").stdout
    assert re.search(r"^worker-0 done loss=\d", log, re.M), log[-2000:]
    for pod in kube.pods(NAMESPACE, name):
        (container,) = pod["spec"]["containers"]
        given = {item["name"] for item in container["env"]}
        assert "TFMW_SHARED_DIR" not in given and "TFMW_MARKER_PATH" not in given, given
        assert not [v for v in pod["spec"].get("volumes") or [] if "persistentVolumeClaim" in v]
    assert not job_folder(shared_dir, name).exists()
