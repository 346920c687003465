"""hack/components and the helpers of hack/lib.sh: the one component list the scripts
read (and kubeall/main.go's commands checked against it), the inputs hash that decides
rebuilds, waiting on a pid, and bump-kubernetes refusing what is not a release."""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from pathlib import Path

import pytest

HACK = Path(__file__).resolve().parents[3] / "hack"


def lib(script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs `script` in bash with hack/lib.sh sourced; args are $1..."""
    return subprocess.run(
        ["bash", "-c", f'source "{HACK}/lib.sh"; {script}', "test", *args],
        capture_output=True,
        text=True,
        check=check,
    )


def components(*args: str) -> list[str]:
    return lib('components "$@"', *args).stdout.splitlines()


def test_kubeall_dispatches_exactly_the_components_the_table_says_it_runs() -> None:
    source = (HACK / "kubeall" / "main.go").read_text()
    table = source[source.index("var commands = map[string]func(){") :]
    table = table[: table.index("\n}\n")]
    commands = re.findall(r'^\t"([a-z-]+)":', table, re.MULTILINE)
    assert sorted(commands) == sorted(components("binary=kubeall"))


def test_components_in_start_order_filtered_by_column() -> None:
    assert components("part=control-plane") == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    assert components("part=node") == ["containerd", "kubelet", "kube-proxy", "coredns"]
    assert components("part!=client") == components("part=control-plane") + components("part=node")
    assert components("binary=kubeall", "part=node") == ["kubelet", "kube-proxy"]
    assert components("kind=image", "binary=kubeall") == components("part=control-plane")


def test_columns_are_chosen_and_the_node_name_is_put_into_subjects() -> None:
    rows = [line.split(" ") for line in components("-o", "identity,subject", "identity!=-")]
    assert [identity for identity, _ in rows] == [
        "controller-manager",
        "scheduler",
        "kubelet",
        "kube-proxy",
        "coredns",
        "admin",
    ]
    assert dict(rows)["kubelet"] == "/O=system:nodes/CN=system:node:tfmw-node"
    assert all(subject.startswith("/") and "$" not in subject for _, subject in rows)


def test_an_unknown_column_is_an_error_not_an_empty_list() -> None:
    done = lib("components colour=red", check=False)
    assert done.returncode != 0 and "no column colour" in done.stderr
    done = lib("components -o name,colour", check=False)
    assert done.returncode != 0 and "no column colour" in done.stderr


def test_no_script_spells_out_the_component_list_again() -> None:
    names = set(components())
    for script in sorted(HACK.glob("*.sh")):
        for number, line in enumerate(script.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue  # prose may name them
            words = set(re.findall(r"[a-z][a-z-]+", line))
            assert len(words & names) < 3, f"{script.name}:{number} lists components: {line.strip()}"


def test_the_inputs_hash_is_the_sha256_prefix_of_the_files_in_order(tmp_path: Path) -> None:
    # The same hash the image tags were made with before the helper: built images stay valid.
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("one\n")
    b.write_text("two\n")
    first = lib('inputs_hash "$@"', str(a), str(b)).stdout.strip()
    assert first == hashlib.sha256(b"one\ntwo\n").hexdigest()[:16]
    assert lib('inputs_hash "$@"', str(a), str(b)).stdout.strip() == first
    b.write_text("three\n")
    assert lib('inputs_hash "$@"', str(a), str(b)).stdout.strip() != first
    text = lib('inputs_hash <(echo one) "$1"', str(b)).stdout.strip()
    assert text == hashlib.sha256(b"one\nthree\n").hexdigest()[:16]


def test_a_missing_input_fails_the_hash() -> None:
    assert lib("inputs_hash /nonexistent/file", check=False).returncode != 0


def test_wait_gone_returns_when_the_process_exits_and_fails_while_it_runs() -> None:
    started = time.monotonic()
    assert lib("sleep 0.3 & wait_gone $! 5").returncode == 0
    assert time.monotonic() - started < 3
    done = lib("sleep 30 & pid=$!; wait_gone $pid 1; status=$?; kill $pid; exit $status", check=False)
    assert done.returncode == 1


@pytest.mark.parametrize("version", ["", "1.34.4", "v1.34", "v2.0.0", "v1.34.4; rm -rf /"])
def test_bump_kubernetes_refuses_what_is_not_a_release_and_changes_nothing(version: str) -> None:
    before = (HACK / "versions.env").read_text()
    done = subprocess.run([str(HACK / "bump-kubernetes.sh"), version], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr
    assert (HACK / "versions.env").read_text() == before


def test_alive_is_the_process_start_started_not_another_with_its_pid(tmp_path: Path) -> None:
    # A component's pid, reused by another process (or a TensorFlow thread), is not that
    # component: `start` records the start time and `alive` holds the pid to it.
    script = """run=$1; mkdir -p "$run"; log() { :; }; logs=$run
    start sleeper sleep 30
    alive sleeper || exit 3
    echo 12345 >"$run/sleeper.started"   # as when the pid now names another process
    alive sleeper && exit 4
    rm "$run/sleeper.started"; alive sleeper || exit 5   # pid files of an older hack/ still count
    kill "$(cat "$run/sleeper.pid")"; wait_gone "$(cat "$run/sleeper.pid")" 5
    alive sleeper && exit 6
    exit 0"""
    done = lib(script, str(tmp_path / "run"), check=False)
    assert done.returncode == 0, (done.returncode, done.stderr)


def test_started_at_fails_for_a_process_that_is_not_there() -> None:
    done = lib("started_at 4194304", check=False)
    assert done.returncode != 0 and done.stderr == ""
