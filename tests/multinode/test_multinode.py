"""Several nodes (`make test-multinode`: kind with KIND_WORKERS=2): real TensorFlow spread
over two worker nodes with pod networking between them, a worker killed, a worker node
stopped mid-run, a stopped node kept out of the next attempts (runPolicy.nodeExclusion), a
job going on with fewer workers (spec.minWorkers), and the operator's leader's node stopped. Prints each worker's node and
the measured times (node stop -> the job acting, leader node stop -> takeover).

Run in the order written: the node-stop tests stop nodes (all but the last start theirs again).
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e.test_training import (
    NAMESPACE,
    TRAINING_TIMEOUT,
    assert_trained_in_sync,
    epoch_lines,
    logs,
    sample,
    submit,
)
from kube import ClusterClient, kubectl, wait_for

Json = dict[str, Any]
CLUSTER = os.environ.get("TFMW_KIND_CLUSTER", "tfmw")
SPREAD = "mnist-4-workers-spread.yaml"
# A stopped node: NotReady after the node monitor's grace (40 s at most here), its pods
# evicted 10 s later (the sample's tolerations); pods the operator is deleting are forced
# once their node is reported NotReady (else after their grace, 5 s, + 60 s); then the gang
# starts again on the nodes that are left.
NODE_STOP_BOUND_SECONDS = 240


@pytest.fixture(scope="module", autouse=True)
def several_nodes(kube: ClusterClient) -> list[str]:
    workers = worker_nodes()
    if len(workers) < 2:
        pytest.fail(f"make test-multinode needs 2 worker nodes (KIND_WORKERS=2); found {workers}")
    return workers


def worker_nodes() -> list[str]:
    out = kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}").stdout
    return sorted(n for n in out.split() if "control-plane" not in n)


def node_of_pods(name: str, namespace: str = NAMESPACE, attempt: int | None = None) -> dict[str, str]:
    """Each pod's node: the job's pods, or those of one attempt (old ones may linger, deleting)."""
    selector = f"tfmw.dev/job-name={name}" + (f",tfmw.dev/attempt={attempt}" if attempt is not None else "")
    out = kubectl(
        "get",
        "pods",
        "-n",
        namespace,
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{'\\n'}{end}",
    ).stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def trainer_pid(uid: str, index: int) -> int | None:
    """Worker `index`'s trainer, a process of this machine whatever node runs it."""
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = environ.read_bytes()
        except OSError:
            continue
        if f"TFMW_JOB_UID={uid}".encode() in env and f"TFMW_WORKER_INDEX={index}\0".encode() in env:
            cmdline = (environ.parent / "cmdline").read_bytes()
            if b"tfmw_trainer" in cmdline:
                return int(environ.parent.name)
    return None


def docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True, text=True)


def wait_node_ready(node: str, timeout: float = 240) -> None:
    kubectl("wait", f"node/{node}", "--for=condition=Ready", f"--timeout={int(timeout)}s")


def spread_manifest(args: list[str]) -> Json:
    manifest = copy.deepcopy(sample(SPREAD))
    manifest["spec"]["template"]["spec"]["containers"][0]["args"] = args
    return manifest


def progress_epoch(kube: ClusterClient, name: str) -> int:
    progress = kube.status(NAMESPACE, name).get("progress") or {}
    epoch = progress.get("epoch")
    return epoch if isinstance(epoch, int) else 0


def test_pods_on_different_nodes_reach_each_other_by_pod_address_and_name(several_nodes: list[str]) -> None:
    """Real pod networking between nodes: a server pod on one worker, a client on the other,
    by the server's pod IP and by its name under a headless Service, as TF_CONFIG names workers."""
    namespace = f"tfmw-net-{os.getpid()}"
    server, client = several_nodes[:2]
    kubectl("create", "namespace", namespace)
    try:
        manifests = [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "peers", "namespace": namespace},
                "spec": {"clusterIP": "None", "selector": {"app": "peer"}, "ports": [{"port": 2222}]},
            },
            net_pod(namespace, "server", server, ["python3", "-m", "http.server", "2222"], hostname=True),
        ]
        kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        )
        kubectl("wait", "-n", namespace, "pod/server", "--for=condition=Ready", "--timeout=120s")
        ip = kubectl("get", "pod", "-n", namespace, "server", "-o", "jsonpath={.status.podIP}").stdout
        fetch = (
            "import sys, urllib.request\n"
            "for url in sys.argv[1:]:\n"
            "    print(url, urllib.request.urlopen(url, timeout=10).status)\n"
        )
        urls = [f"http://{ip}:2222/", f"http://server.peers.{namespace}.svc:2222/"]
        pod = net_pod(namespace, "client", client, ["python3", "-c", fetch, *urls])
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        wait_for(
            "the client done",
            lambda: (
                kubectl("get", "pod", "-n", namespace, "client", "-o", "jsonpath={.status.phase}").stdout
                in ("Succeeded", "Failed")
            ),
            timeout=120,
        )
        out = kubectl("logs", "-n", namespace, "client").stdout
        print(f"\nserver on {server} ({ip}), client on {client}:\n{out}")
        assert out.count(" 200") == 2, out
        assert node_of(namespace, "server") == server and node_of(namespace, "client") == client
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def net_pod(namespace: str, name: str, node: str, command: list[str], hostname: bool = False) -> Json:
    spec: Json = {
        "nodeName": node,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "c",
                "image": "tfmw-operator:dev",
                "imagePullPolicy": "IfNotPresent",
                "command": command,
                "readinessProbe": {"tcpSocket": {"port": 2222}, "periodSeconds": 1} if hostname else None,
            }
        ],
    }
    if hostname:
        spec.update(hostname=name, subdomain="peers")
    else:
        del spec["containers"][0]["readinessProbe"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "peer"}},
        "spec": spec,
    }


def node_of(namespace: str, pod: str) -> str:
    return kubectl("get", "pod", "-n", namespace, pod, "-o", "jsonpath={.spec.nodeName}").stdout


def test_four_workers_spread_over_two_nodes_train_in_sync(
    kube: ClusterClient, fresh_name: Callable[[str], str]
) -> None:
    name = fresh_name("spread")
    submit(kube, spread_manifest(["--epochs=4", "--steps-per-epoch=30"]), name)
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    placement = node_of_pods(name)
    print(f"\n{name}: worker nodes {placement}")
    assert len(set(placement.values())) == 2, placement
    assert sorted(placement.values()).count(sorted(placement.values())[0]) == 2  # 2 and 2
    assert status["restarts"] == 0
    lines = assert_trained_in_sync(name, 4)
    print(f"{name}: identical epoch lines on every worker: {lines}")


def test_a_worker_killed_on_one_node_restarts_the_gang_across_nodes(
    kube: ClusterClient, fresh_name: Callable[[str], str]
) -> None:
    name = fresh_name("killed")
    # Epochs of about 6 s: the kill comes within the status's progress interval (10 s) of
    # epoch 1, well before the end (at 2 s an epoch the kill once came after the chief's
    # last epoch: its marker ended the job, rightly, before the new gang trained).
    job = submit(kube, spread_manifest(["--epochs=6", "--steps-per-epoch=20", "--epoch-pause=5"]), name)
    uid = job["metadata"]["uid"]
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    wait_for("a checkpointed epoch", lambda: progress_epoch(kube, name) >= 1, timeout=TRAINING_TIMEOUT)
    placement = node_of_pods(name)
    pid = wait_for("worker 1's trainer", lambda: trainer_pid(uid, 1), timeout=30)
    print(f"\n{name}: killing worker 1 (pid {pid}) on {placement[f'{name}-worker-1']}")
    os.kill(pid, signal.SIGKILL)
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    assert status["restarts"] == 1 and status["attempt"] == 1
    after = node_of_pods(name)
    print(f"{name}: attempt 1 on {after}")
    assert len(set(after.values())) == 2, after
    for index in range(4):
        output = logs(name, index)
        assert "attempt=1" in output and "resumed_from_epoch=" in output, output[-2000:]
        assert "epoch=1 " not in "\n".join(epoch_lines(output))  # resumed, not started over
    assert_trained_in_sync(name, 4)


def test_a_worker_node_stopped_mid_run_restarts_the_gang_on_the_nodes_left(
    kube: ClusterClient, fresh_name: Callable[[str], str], several_nodes: list[str]
) -> None:
    name = fresh_name("nodestop")
    submit(kube, spread_manifest(["--epochs=6", "--steps-per-epoch=20", "--epoch-pause=3"]), name)
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    wait_for("a checkpointed epoch", lambda: progress_epoch(kube, name) >= 1, timeout=TRAINING_TIMEOUT)
    placed = node_of_pods(name)
    victim = placed[f"{name}-worker-1"]
    # The workers on the stopped node; the lowest of them is named (worker 1, unless the
    # chief shares its node), whichever of its pods the control plane reported lost first.
    on_victim = sorted(int(pod.rsplit("-", 1)[1]) for pod, node in placed.items() if node == victim)
    print(f"\n{name}: stopping node {victim} (pods {placed})")
    stopped = time.monotonic()
    docker("stop", "-t", "0", victim)
    try:
        wait_for(
            "the job acting on the lost node",
            lambda: kube.status(NAMESPACE, name).get("phase") in ("Restarting", "Failed"),
            timeout=NODE_STOP_BOUND_SECONDS,
            interval=1,
        )
        acted = time.monotonic() - stopped
        status = kube.status(NAMESPACE, name)
        print(f"{name}: node stop -> {status['phase']} in {acted:.0f}s: {status.get('message')}")
        print(f"{name}: recorded first: {(status.get('history') or [{}])[0]}")
        # A peer notices at once and the gang restarts on its exit; the node is reported
        # not ready only after the node monitor's grace, while the old pods are being
        # deleted: then the record names the lost node's worker.
        record = wait_for(
            "the history to name the lost node",
            lambda: node_lost_record(kube, name),
            timeout=NODE_STOP_BOUND_SECONDS,
            interval=1,
        )
        print(f"{name}: node stop -> history NodeLost in {time.monotonic() - stopped:.0f}s: {record}")
        assert (record["node"], record["worker"]) == (victim, on_victim[0]), (record, placed)
        assert record.get("exitCode") is None and record["outcome"] == "Restarted"
        wait_for(
            "the new gang Running",
            lambda: new_gang_running(kube, name),
            timeout=TRAINING_TIMEOUT + NODE_STOP_BOUND_SECONDS,
            interval=1,
        )
        print(f"{name}: node stop -> new gang Running in {time.monotonic() - stopped:.0f}s")
        row = kubectl("get", "tfmw", name, "-n", NAMESPACE, "-o", "wide", "--no-headers").stdout
        assert row.split()[-1] == "NodeLost", row  # LAST CAUSE
        if "noticed first" in record.get("message", ""):  # found on the second look: told
            assert "RootCauseFound" in kubectl("describe", "tfmw", name, "-n", NAMESPACE).stdout
        status = kube.wait_phase(
            NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT + NODE_STOP_BOUND_SECONDS
        )
        print(f"{name}: node stop -> Succeeded in {time.monotonic() - stopped:.0f}s, on {node_of_pods(name)}")
        assert status["restarts"] >= 1
        assert victim not in node_of_pods(name).values()
        assert "resumed_from_epoch=" in logs(name, 0)
    finally:
        docker("start", victim)
        wait_node_ready(victim)


def node_lost_record(kube: ClusterClient, name: str) -> Json | None:
    history = kube.status(NAMESPACE, name).get("history") or []
    return next((h for h in history if h.get("cause") == "NodeLost"), None)


def new_gang_running(kube: ClusterClient, name: str) -> bool:
    status = kube.status(NAMESPACE, name)
    return status.get("phase") == "Running" and status.get("attempt", 0) >= 1


def lease_holder() -> str:
    return kubectl(
        "get", "lease", "-n", "tfmw-system", "tfmw-operator", "-o", "jsonpath={.spec.holderIdentity}"
    ).stdout.strip()


def operator_pods() -> dict[str, str]:
    out = kubectl(
        "get",
        "pods",
        "-n",
        "tfmw-system",
        "-l",
        "app.kubernetes.io/name=tfmw-operator",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{'\\n'}{end}",
    ).stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def node_ready(node: str) -> str:
    return kubectl(
        "get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"
    ).stdout.strip()


def spread_operator() -> dict[str, str] | None:
    pods = operator_pods()
    return pods if len(set(pods.values())) == 2 else None


def new_holder(leader: str) -> str | None:
    holder = lease_holder()
    return holder if holder and not holder.startswith(leader) else None


def excluded_nodes(kube: ClusterClient, name: str) -> list[Json]:
    excluded = kube.status(NAMESPACE, name).get("excludedNodes") or []
    return [e for e in excluded if isinstance(e, dict)]


def kept_off(pod: str) -> list[str]:
    """The nodes a pod's required node affinity keeps it off (runPolicy.nodeExclusion)."""
    spec = json.loads(kubectl("get", "pod", pod, "-n", NAMESPACE, "-o", "json").stdout)["spec"]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return sorted(
        value
        for term in required.get("nodeSelectorTerms") or []
        for field in term.get("matchFields") or []
        if field.get("key") == "metadata.name" and field.get("operator") == "NotIn"
        for value in field.get("values") or []
    )


def test_a_lost_node_is_kept_out_of_the_next_attempts_even_once_it_is_back(
    kube: ClusterClient, fresh_name: Callable[[str], str], several_nodes: list[str]
) -> None:
    """runPolicy.nodeExclusion: worker 1's node is stopped mid-run; the next attempts avoid it
    through their pods' node affinity, also the attempt started after it came back Ready."""
    name = fresh_name("exclude")
    manifest = spread_manifest(["--epochs=10", "--steps-per-epoch=20", "--epoch-pause=3"])
    manifest["spec"]["workers"] = 2
    manifest["spec"]["runPolicy"]["nodeExclusion"] = {"maxNodes": 1, "durationSeconds": 1800}
    submit(kube, manifest, name)
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    wait_for("a checkpointed epoch", lambda: progress_epoch(kube, name) >= 1, timeout=TRAINING_TIMEOUT)
    placed = node_of_pods(name)
    victim = placed[f"{name}-worker-1"]
    print(f"\n{name}: stopping node {victim} (pods {placed})")
    stopped = time.monotonic()
    docker("stop", "-t", "0", victim)
    try:
        excluded = wait_for(
            "the lost node kept out",
            lambda: excluded_nodes(kube, name) or None,
            timeout=NODE_STOP_BOUND_SECONDS,
            interval=1,
        )
        print(f"{name}: node stop -> excluded in {time.monotonic() - stopped:.0f}s: {excluded}")
        assert [(e["node"], e["cause"]) for e in excluded] == [(victim, "NodeLost")], excluded
        wait_for(
            "the new gang Running",
            lambda: new_gang_running(kube, name),
            timeout=TRAINING_TIMEOUT + NODE_STOP_BOUND_SECONDS,
            interval=1,
        )
        attempt = kube.status(NAMESPACE, name)["attempt"]
        elsewhere = node_of_pods(name, attempt=attempt)
        print(
            f"{name}: node stop -> attempt {attempt} Running elsewhere in {time.monotonic() - stopped:.0f}s, "
            f"on {elsewhere}"
        )
        assert elsewhere and victim not in elsewhere.values(), elsewhere
        assert all(kept_off(pod) == [victim] for pod in elsewhere), {pod: kept_off(pod) for pod in elsewhere}
    finally:
        docker("start", victim)
        wait_node_ready(victim)
    print(f"{name}: {victim} Ready again {time.monotonic() - stopped:.0f}s after it stopped")
    # Within the window, with the node back: another restart, and that attempt avoids it too.
    before = kube.status(NAMESPACE, name)["attempt"]
    back = time.monotonic()
    kubectl("delete", "pod", f"{name}-worker-1", "-n", NAMESPACE, "--wait=false")
    wait_for(
        "the attempt after the node came back Running",
        lambda: (
            (s := kube.status(NAMESPACE, name)).get("attempt", 0) > before and s.get("phase") == "Running"
        ),
        timeout=TRAINING_TIMEOUT,
        interval=1,
    )
    attempt = kube.status(NAMESPACE, name)["attempt"]
    after = node_of_pods(name, attempt=attempt)
    print(
        f"{name}: node back, a worker deleted -> attempt {attempt} Running in {time.monotonic() - back:.0f}s on {after}"
    )
    assert after and victim not in after.values(), after
    assert all(kept_off(pod) == [victim] for pod in after), {pod: kept_off(pod) for pod in after}
    status = kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    assert [e["node"] for e in status.get("excludedNodes") or []] == [victim], status
    condition = next(c for c in status["conditions"] if c["type"] == "NodesExcluded")
    assert condition["status"] == "True" and victim in condition["message"], condition
    assert victim not in node_of_pods(name).values()
    print(f"{name}: history {[(h['attempt'], h['cause'], h.get('node')) for h in status['history']]}")


def test_a_four_worker_job_whose_node_is_stopped_goes_on_with_two_and_succeeds(
    kube: ClusterClient, fresh_name: Callable[[str], str], several_nodes: list[str]
) -> None:
    """spec.minWorkers: four workers, two per node (each requests 40% of a node's CPU); one
    node stops, the restarted gang fits only half on the node left, and after the placement
    wait the next attempt goes on with two, with the same global batch, to the same steps."""
    name = fresh_name("fewer")
    epochs, steps = 6, 20
    manifest = spread_manifest(
        [f"--epochs={epochs}", f"--steps-per-epoch={steps}", "--epoch-pause=3", "--global-batch-size=16"]
    )
    manifest["spec"]["minWorkers"] = 2
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["cpu"] = f"{node_cpu_millis(several_nodes[0]) * 2 // 5}m"
    submit(kube, manifest, name)
    kube.wait_phase(NAMESPACE, name, "Running", timeout=TRAINING_TIMEOUT)
    wait_for("a checkpointed epoch", lambda: progress_epoch(kube, name) >= 1, timeout=TRAINING_TIMEOUT)
    placed = node_of_pods(name)
    # The node without the chief: the chief must be placed for the gang to go on smaller.
    victim = next(node for node in sorted(set(placed.values())) if node != placed[f"{name}-worker-0"])
    assert list(placed.values()).count(victim) == 2, placed
    print(f"\n{name}: stopping node {victim} (pods {placed})")
    stopped = time.monotonic()
    docker("stop", "-t", "0", victim)
    try:
        smaller = wait_for(
            "an attempt of two workers",
            lambda: (s := kube.status(NAMESPACE, name)).get("attemptWorkers") == 2 and s,
            timeout=TRAINING_TIMEOUT + NODE_STOP_BOUND_SECONDS,
            interval=1,
        )
        print(f"{name}: node stop -> attempt {smaller['attempt']} of 2 in {time.monotonic() - stopped:.0f}s")
        wait_for(
            "the attempt of two Running (or done)",
            lambda: kube.status(NAMESPACE, name).get("phase") in ("Running", "Succeeded"),
            timeout=TRAINING_TIMEOUT,
            interval=1,
        )
        print(
            f"{name}: node stop -> attempt {smaller['attempt']} of 2 Running in {time.monotonic() - stopped:.0f}s"
        )
        status = kube.wait_phase(
            NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT + NODE_STOP_BOUND_SECONDS
        )
        print(
            f"{name}: node stop -> Succeeded in {time.monotonic() - stopped:.0f}s: {status.get('progress')}"
        )
    finally:
        docker("start", victim)
        wait_node_ready(victim)
    assert status["attemptWorkers"] == 2, status
    progress = status["progress"]
    assert (progress["step"], progress["totalSteps"]) == (epochs * steps, epochs * steps), progress
    assert any(h.get("cause") == "Unplaceable" for h in status["history"]), status["history"]
    assert sorted(node_of_pods(name)) == [f"{name}-worker-0", f"{name}-worker-1"]
    chief = logs(name, 0)
    assert "start cluster_workers=2" in chief and "global_batch=16" in chief, chief[-3000:]
    assert "resumed_from_epoch=" in chief, chief[-3000:]
    assert status["restarts"] <= 1, status  # the node's loss; going on smaller is not counted
    sizes = [(h["attempt"], h.get("workers"), h["cause"]) for h in reversed(status["history"])]
    print(f"{name}: attempts (attempt, workers, end cause) {sizes}, then attempt {status['attempt']} of 2")
    assert sizes[0][1] == 4, sizes


def node_cpu_millis(node: str) -> int:
    cpu = kubectl("get", "node", node, "-o", "jsonpath={.status.allocatable.cpu}").stdout.strip()
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def test_the_leaders_node_stopped_the_other_replica_leads_and_runs_a_new_job(
    kube: ClusterClient, fresh_name: Callable[[str], str]
) -> None:
    kubectl("-n", "tfmw-system", "rollout", "status", "deployment/tfmw-operator", "--timeout=180s")
    pods = wait_for(
        "operator replicas on two nodes",
        spread_operator,
        timeout=180,
    )
    leader = wait_for(
        "a leader", lambda: next((p for p in pods if lease_holder().startswith(p)), None), timeout=60
    )
    node = pods[leader]
    print(f"\noperator replicas {pods}; leader {leader} on {node}: stopping {node}")
    stopped = time.monotonic()
    docker("stop", "-t", "0", node)
    successor = wait_for(
        "another replica holding the lease",
        lambda: new_holder(leader),
        timeout=120,
        interval=0.5,
    )
    takeover = time.monotonic() - stopped
    print(f"leader node stop -> {successor} leads in {takeover:.1f}s")
    # Until the node monitor marks it unreachable the scheduler may still place pods there.
    wait_for("the stopped node NotReady", lambda: node_ready(node) != "True", timeout=120, interval=1)
    print(f"{node} NotReady {time.monotonic() - stopped:.0f}s after it stopped")
    name = fresh_name("after-takeover")
    # A small job (the operator's image, writing its marker): what is measured is the operator.
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    manifest["spec"]["template"]["spec"]["containers"][0].update(
        image="tfmw-operator:dev",
        command=["python3", "-c", "import os; open(os.environ['TFMW_MARKER_PATH'], 'w').write('done')"],
        args=[],
    )
    submit(kube, manifest, name)
    kube.wait_phase(NAMESPACE, name, "Succeeded", timeout=TRAINING_TIMEOUT)
    print(f"{name}: Succeeded {time.monotonic() - stopped:.0f}s after the leader's node stopped")
    assert node not in node_of_pods(name).values()
