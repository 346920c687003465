"""The `tfmw` command on the local cluster, as a user runs it: a program submitted with
`tfmw submit` trains to Succeeded; `tfmw wait` ends at once with the reason on a failure;
after a gang restart, `tfmw logs --attempt 0 --worker 1` reads the dead worker's log from the
shared volume through a short-lived pod (and says so when the user may not create one); the
progress bar redraws in place on a terminal; `kubectl tfmw` works as a kubectl plugin."""

from __future__ import annotations

import copy
import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.test_training import TRAINING_TIMEOUT, sample
from integration.test_admission_policy import kubeconfig_for
from kube import REPO, ClusterClient, kubectl, wait_for

Json = dict[str, Any]
NAMESPACE = "default"  # where deploy/overlays/local puts the tfmw-shared claim
BIN = Path(sys.executable).parent  # the venv's bin: tfmw and kubectl-tfmw, as make install put them
TFMW = str(BIN / "tfmw")
IMAGE = "tfmw-trainer:dev"
READER_SELECTOR = "app.kubernetes.io/name=tfmw-log-reader"

# Two workers that find each other (a sum over both is 2.0), from a folder with a module of
# its own, writing by a relative name: the working directory is the job's folder.
PROGRAM = """\
import os
import sys

import tensorflow as tf

from helper import describe

strategy = tf.distribute.MultiWorkerMirroredStrategy()
epochs = int(sys.argv[sys.argv.index("--epochs") + 1])
worker = os.environ["TFMW_WORKER_INDEX"]


@tf.function
def count_replicas():
    return tf.distribute.get_replica_context().all_reduce("sum", tf.constant(1.0))


for epoch in range(1, epochs + 1):
    replicas = strategy.experimental_local_results(strategy.run(count_replicas))[0]
    print(describe(worker, epoch, float(replicas)), flush=True)
if worker == "0":
    with open("written-by-relative-name.txt", "w") as file:
        file.write(os.getcwd())
"""
HELPER = 'def describe(worker, epoch, replicas):\n    return f"worker={worker} epoch={epoch} replicas={replicas}"\n'


def count_workers(epochs: int) -> None:
    """Submitted by Client().train: runs alone on each worker, with only what it imports."""
    import os

    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    one = tf.function(lambda: tf.distribute.get_replica_context().all_reduce("sum", tf.constant(1.0)))

    for epoch in range(1, epochs + 1):
        replicas = float(strategy.experimental_local_results(strategy.run(one))[0])
        print(f"worker={os.environ['TFMW_WORKER_INDEX']} epoch={epoch} replicas={replicas}", flush=True)


def tfmw(
    *args: str, timeout: float = TRAINING_TIMEOUT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TFMW, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env or dict(os.environ),
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


def no_reader_pod_left(kube: ClusterClient) -> None:
    wait_for(
        "the log reader pod gone",
        lambda: not kube.core.list_namespaced_pod(NAMESPACE, label_selector=READER_SELECTOR).items,
        timeout=60,
    )


def test_a_submitted_folder_trains_to_succeeded(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    name = fresh_name("cli-submit")
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "train.py").write_text(PROGRAM)
    (folder / "helper.py").write_text(HELPER)
    (folder / ".env").write_text("SECRET=never-shipped\n")
    submitted = tfmw(
        "submit",
        str(folder),
        "--workers",
        "2",
        "--image",
        IMAGE,
        "--name",
        name,
        "-n",
        NAMESPACE,
        "--memory",
        "2Gi",
        "--wait",
        "--timeout",
        "8m",
        "--",
        "--epochs",
        "2",
    )
    output = ok(submitted)
    assert f"configmap/{name}-program created\ntfmwjob.tfmw.dev/{name} created\n" in output
    assert output.endswith(f"tfmwjob.tfmw.dev/{name} Succeeded\n"), output
    assert f"{name}  Succeeded" in output  # the quiet line of the last change (not a terminal)

    job = kube.get_job(NAMESPACE, name)
    assert job is not None
    folder_on_node = shared_dir / NAMESPACE / name
    marker = json.loads((folder_on_node / "multiworker-complete.txt").read_text())
    assert marker == {"jobUid": job["metadata"]["uid"], "writtenBy": "tfmw launcher", "attempt": 0}
    assert (folder_on_node / "written-by-relative-name.txt").read_text() == "/shared"
    configmap = kube.core.read_namespaced_config_map(f"{name}-program", NAMESPACE)
    assert [o.uid for o in configmap.metadata.owner_references] == [job["metadata"]["uid"]]
    assert not any(".env" in key or "SECRET" in value for key, value in (configmap.data or {}).items())

    assert "worker=0 epoch=2 replicas=2.0" in ok(tfmw("logs", name, "-n", NAMESPACE))
    every = ok(tfmw("logs", name, "-n", NAMESPACE, "--all")).splitlines()
    assert "[worker-1] worker=1 epoch=2 replicas=2.0" in every, every
    listed = json.loads(ok(tfmw("get", name, "-n", NAMESPACE, "-o", "json")))
    assert listed["status"]["phase"] == "Succeeded"
    described = ok(tfmw("describe", name, "-n", NAMESPACE))
    assert re.search(r"^Phase: +Succeeded \(attempt 0", described, re.M), described

    # Through kubectl's plugin mechanism: kubectl finds kubectl-tfmw on the PATH.
    plugin_path = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    plugin = subprocess.run(
        ["kubectl", "tfmw", "get", name, "-n", NAMESPACE],
        capture_output=True,
        text=True,
        env=plugin_path,
        timeout=60,
        check=False,
    )
    assert plugin.returncode == 0, plugin.stderr
    header, row = plugin.stdout.splitlines()
    assert header.split()[:2] == ["NAME", "PHASE"] and row.split()[:2] == [name, "Succeeded"]

    assert ok(tfmw("delete", name, "-n", NAMESPACE)) == f'tfmwjob.tfmw.dev "{name}" deleted\n'
    wait_for(
        "the program's ConfigMap collected with its job",
        lambda: (
            not kube.core.list_namespaced_config_map(
                NAMESPACE, field_selector=f"metadata.name={name}-program"
            ).items
        ),
        timeout=60,
    )


def test_a_function_submitted_from_python_trains_and_is_waited_for(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str]
) -> None:
    from tfmw_client import Client

    name = fresh_name("cli-train")
    client = Client(namespace=NAMESPACE)
    assert client.train(count_workers, {"epochs": 2}, workers=2, image=IMAGE, name=name, memory="2Gi") == name
    shown = io.StringIO()  # not a terminal, not a notebook: a line per change
    job = client.wait(name, timeout=TRAINING_TIMEOUT, out=shown)
    assert job["status"]["phase"] == "Succeeded", shown.getvalue()
    assert f"{name}  Succeeded" in shown.getvalue()
    logs = client.logs(name, all=True)
    assert logs.live and [stem for stem, _ in logs.entries] == ["worker-0", "worker-1"]
    assert "worker=1 epoch=2 replicas=2.0" in logs["worker-1"], logs.text()[-2000:]
    marker = json.loads((shared_dir / NAMESPACE / name / "multiworker-complete.txt").read_text())
    assert marker["writtenBy"] == "tfmw launcher" and marker["jobUid"] == job["metadata"]["uid"]


def test_a_program_larger_than_a_configmap_is_refused_before_anything_is_made(
    kube: ClusterClient, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    name = fresh_name("cli-large")
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "data.bin").write_bytes(os.urandom(1024 * 1024))
    refused = tfmw("submit", str(tmp_path), "--image", IMAGE, "--name", name, "-n", NAMESPACE, timeout=60)
    assert refused.returncode == 1
    assert "more than a ConfigMap holds (1 MiB)" in refused.stderr and "data.bin (1.00 MiB)" in refused.stderr
    assert kube.get_job(NAMESPACE, name) is None
    assert not kube.core.list_namespaced_config_map(
        NAMESPACE, field_selector=f"metadata.name={name}-program"
    ).items


def test_wait_ends_at_once_with_exit_1_and_the_reason_for_a_failing_job(
    kube: ClusterClient, fresh_name: Callable[[str], str], tmp_path: Path
) -> None:
    name = fresh_name("cli-fails")
    script = tmp_path / "broken.py"
    script.write_text(
        "print('loading the data', flush=True)\nraise SystemExit('cannot open the training data')\n"
    )
    ok(tfmw("submit", str(script), "--image", IMAGE, "--name", name, "-n", NAMESPACE, timeout=60))
    started = time.monotonic()
    waited = tfmw("wait", name, "-n", NAMESPACE, "--timeout", "10m")
    took = time.monotonic() - started
    assert waited.returncode == 1, (waited.stdout, waited.stderr)
    assert waited.stderr.startswith(
        f"error: {name} Failed: WorkerFailed: worker 0 (pod {name}-worker-0) exited with code 1"
    ), waited.stderr
    # The program's last lines (a supervised pod's log ends with the supervisor's own word).
    # Its stdout and stderr reach the pod's log through two streams that containerd copies
    # separately, so their order in `kubectl logs` is not promised (CI stop 44 saw them
    # swapped); each line is there, and nothing of the program's is missing.
    assert f"last lines of pod {name}-worker-0:\n" in waited.stderr
    tail = waited.stderr.split(f"last lines of pod {name}-worker-0:\n", 1)[1].split("\nthe whole log:")[0]
    program = [line for line in tail.splitlines() if "tfmw-supervisor" not in line]
    assert sorted(program) == ["  cannot open the training data", "  loading the data"], waited.stderr
    assert f"the whole log: tfmw logs {name} --attempt 0 --worker 0" in waited.stderr
    assert took < 180, f"took {took:.0f}s: a wait for Succeeded must end when the job fails"
    print(f"\n{name}: tfmw wait exited 1 after {took:.1f}s\n{waited.stderr}")


def run_in_terminal(
    argv: list[str], columns: int = 100, timeout: float = TRAINING_TIMEOUT
) -> tuple[int, str]:
    """The command with a pseudo-terminal as stdout and stderr (of `columns`); its exit code
    and everything it drew, escapes included."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm", LANG="C.UTF-8", PYTHONIOENCODING="utf-8")
    process = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True
    )
    os.close(follower)
    drawn = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command ended and closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    return process.wait(timeout=30), drawn.decode("utf-8", "replace")


@pytest.fixture
def reader_only(kube: ClusterClient, tmp_path: Path) -> Iterator[str]:
    """A kubeconfig of a user who may read jobs, pods, logs and Events in the namespace, and
    nothing more: not create pods, not read anything in tfmw-system."""
    account = "tfmw-cli-reader"
    kubectl("create", "serviceaccount", account, "-n", NAMESPACE)
    kubectl(
        "create",
        "role",
        account,
        "-n",
        NAMESPACE,
        "--verb=get,list,watch",
        "--resource=tfmwjobs.tfmw.dev,pods,pods/log,events",
    )
    kubectl(
        "create",
        "rolebinding",
        account,
        "-n",
        NAMESPACE,
        f"--role={account}",
        f"--serviceaccount={NAMESPACE}:{account}",
    )
    try:
        yield kubeconfig_for(NAMESPACE, account, tmp_path)
    finally:
        for kind in ("rolebinding", "role", "serviceaccount"):
            kubectl("delete", kind, account, "-n", NAMESPACE, "--ignore-not-found", check=False)


def test_after_a_gang_restart_the_dead_workers_log_is_read_from_the_volume(
    kube: ClusterClient, shared_dir: Path, fresh_name: Callable[[str], str], reader_only: str
) -> None:
    name = fresh_name("cli-restart")
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    manifest["metadata"]["name"] = name
    # Attempt 0 only: worker 1 exits 137 after epoch 2, as if the OOM killer took it; the
    # epochs are slowed so that the bar has progress to draw.
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [
        "--epochs=6",
        "--steps-per-epoch=8",
        "--crash-at-epoch=2",
        "--crash-worker=1",
        "--epoch-pause=2",
    ]
    kube.create_job(NAMESPACE, manifest)

    # On a terminal: one line, redrawn in place, until the job succeeds.
    code, drawn = run_in_terminal([TFMW, "wait", name, "-n", NAMESPACE, "--timeout", "10m"])
    assert code == 0, drawn[-3000:]
    frames = [frame for frame in drawn.split("\r\x1b[2K") if frame]
    print(f"\n{name}: {len(frames)} frames drawn; the last:\n{frames[-1]}")
    assert len(frames) >= 5, drawn[-3000:]
    assert drawn.count("\n") == 2, drawn[-3000:]  # the bar's one line ends once, then the result line
    assert frames[-1].endswith(f"\r\ntfmwjob.tfmw.dev/{name} Succeeded\r\n"), frames[-1]
    assert all(len(frame.split("\r\n")[0]) <= 99 for frame in frames)  # never wider than the terminal
    assert any("attempt 1" in frame for frame in frames)
    assert any(re.search(r"\[█+░*\] +\d+%", frame) for frame in frames), frames[-3:]
    assert len({frame.split("\r\n")[0] for frame in frames}) >= 3  # it moved

    # Attempt 0's pods are gone; its logs are on the volume, read through a short-lived pod.
    saved = (shared_dir / NAMESPACE / name / "logs" / "attempt-0" / "worker-1.log").read_text()
    assert "injected_crash epoch=2 exit_code=137" in saved
    assert not kube.core.list_namespaced_pod(
        NAMESPACE, label_selector=f"tfmw.dev/job-name={name},tfmw.dev/attempt=0"
    ).items
    read = tfmw("logs", name, "-n", NAMESPACE, "--attempt", "0", "--worker", "1", "--tail", "5", timeout=180)
    assert ok(read).splitlines() == saved.rstrip("\n").splitlines()[-5:], (read.stdout, saved[-2000:])
    assert "injected_crash epoch=2 exit_code=137" in read.stdout
    no_reader_pod_left(kube)
    whole = ok(tfmw("logs", name, "-n", NAMESPACE, "--attempt", "0", "--all", timeout=180))
    assert "[worker-0] " in whole and "[worker-1] " in whole
    no_reader_pod_left(kube)

    described = ok(tfmw("describe", name, "-n", NAMESPACE))
    assert f"tfmw logs {name} --attempt 0 --worker 1" in described, described
    assert re.search(r"^  0 +Restarted +\S+ +1 +\S+ +137 ", described, re.M), described

    # A user who may read the job but not create pods is told so, with the fix.
    refused = tfmw(
        "--kubeconfig",
        reader_only,
        "logs",
        name,
        "-n",
        NAMESPACE,
        "--attempt",
        "0",
        "--worker",
        "1",
        timeout=60,
    )
    assert refused.returncode == 1, refused.stdout
    assert "you may not create it there" in refused.stderr and "ask for `create` on pods" in refused.stderr, (
        refused.stderr
    )
    # ... while the live logs of the current attempt need no pod of their own.
    assert "attempt=1" in ok(tfmw("--kubeconfig", reader_only, "logs", name, "-n", NAMESPACE))


def test_version_names_both_sides_for_any_user_the_install_published_it(reader_only: str) -> None:
    """The install publishes the operator's version (deploy/base/version.yaml) where a user who
    may only read jobs in one namespace reads it too."""
    for kubeconfig in ((), ("--kubeconfig", reader_only)):
        shown = ok(tfmw(*kubeconfig, "version", timeout=60))
        lines = dict(line.split(": ", 1) for line in shown.splitlines())
        client = ok(tfmw("version", "--client", timeout=30)).split(": ", 1)[1].strip()
        assert lines["Client Version"] == client
        assert lines["API"] == "tfmw.dev v1alpha1"
        assert lines["Operator Version"] == f"{client} (ConfigMap tfmw-system/tfmw-version)", shown
        assert lines["Compatible"].startswith("yes"), shown


def test_a_kubeflow_tfjob_example_converted_by_tfmw_convert_trains(
    kube: ClusterClient, tmp_path: Path
) -> None:
    """Kubeflow's examples/tensorflow/distribution_strategy/multi_worker_tfjob.yaml, read from
    training-operator's module (tests/tfjob/README.md), through `tfmw convert`, applied, trains.
    Changed to run here, in the TFJob, before converting: the image is the trainer's, running
    deploy/samples/programs/exit_code.py (a MultiWorkerMirroredStrategy fit like the example's,
    which ends by its exit code) from a ConfigMap where the example mounts its claim; no GPU
    limit; the restricted Pod Security fields."""
    from tfjob.upstream import module_dir

    example = module_dir() / "examples/tensorflow/distribution_strategy/multi_worker_tfjob.yaml"
    tfjob: Json = yaml.safe_load(example.read_text())
    name = f"convert-{os.urandom(3).hex()}"
    tfjob["metadata"]["name"] = name
    pod = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = pod["containers"]
    container.update(
        image=IMAGE,
        imagePullPolicy="IfNotPresent",
        command=["python3", "/program/exit_code.py"],
        volumeMounts=[{"name": "training", "mountPath": "/program", "readOnly": True}],
        resources={"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
        securityContext={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    )
    pod["volumes"] = [{"name": "training", "configMap": {"name": name}}]
    pod["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    source = tmp_path / "multi_worker_tfjob.yaml"
    source.write_text(yaml.safe_dump(tfjob))
    converted = ok(tfmw("convert", "-f", str(source), timeout=60))
    assert "# spec.runPolicy.backoffLimit: unset: no limit, as TFJob has none" in converted
    program = REPO / "deploy/samples/programs/exit_code.py"
    kubectl("create", "configmap", name, "-n", NAMESPACE, f"--from-file={program}")
    try:
        kubectl("apply", "-n", NAMESPACE, "-f", "-", input=converted)
        ok(tfmw("wait", name, "-n", NAMESPACE, "--for", "Succeeded", "--timeout", f"{TRAINING_TIMEOUT}s"))
        job = kube.get_job(NAMESPACE, name)
        assert job is not None and job["spec"]["workers"] == 2 and job["status"]["phase"] == "Succeeded"
    finally:
        kubectl("delete", "tfmwjob", name, "-n", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
        kubectl("delete", "configmap", name, "-n", NAMESPACE, "--ignore-not-found", check=False)
