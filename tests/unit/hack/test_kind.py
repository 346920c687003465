"""hack/kind/: the runc wrapper that asks only for grantable capabilities, and the kind
config derived from deploy/kind/cluster.yaml for a node image built here. (The registry
forwarder: test_registry_forward.py.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

KIND = Path(__file__).resolve().parents[3] / "hack" / "kind"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, KIND / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runc_capped = load("runc_capped")
ALL = {"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--root", "/run/r", "--log", "/l.json", "create", "--bundle", "/b", "id"],
            ("/b/config.json", False),
        ),
        (["--log-format=json", "run", "-b", "/b", "id"], ("/b/config.json", False)),
        (["create", "id"], ("./config.json", False)),
        (["--root", "/r", "exec", "--process", "/tmp/p.json", "-d", "id"], ("/tmp/p.json", True)),
        (["exec", "-p=/tmp/p.json", "id"], ("/tmp/p.json", True)),
        (["exec", "id", "sh"], None),  # no process file: nothing to change
        (["--root", "create", "start", "id"], None),  # "create" is the value of --root
        (["delete", "--force", "id"], None),
        (["--version"], None),
    ],
)
def test_the_spec_runc_reads_capabilities_from_is_found_for_create_run_and_exec(
    args: list[str], expected: tuple[str, bool] | None
) -> None:
    assert runc_capped.spec_to_fix(args) == expected


def spec_with(caps: list[str]) -> dict[str, object]:
    sets = {k: list(caps) for k in ("bounding", "effective", "permitted", "inheritable", "ambient")}
    return {
        "ociVersion": "1.0.2",
        "process": {"args": ["sh"], "capabilities": sets},
        "root": {"path": "rootfs"},
    }


def test_capabilities_the_machine_cannot_grant_are_dropped_from_every_set(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(spec_with(sorted(ALL))))
    runc_capped.keep_grantable(str(path), False, held=ALL - {"CAP_SYS_RESOURCE"})
    spec = json.loads(path.read_text())
    for values in spec["process"]["capabilities"].values():
        assert values == sorted(ALL - {"CAP_SYS_RESOURCE"})
    assert spec["root"] == {"path": "rootfs"}  # the rest of the spec as it was


def test_an_exec_process_file_is_rewritten_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "process.json"
    path.write_text(json.dumps(spec_with(sorted(ALL))["process"]))
    runc_capped.keep_grantable(str(path), True, held={"CAP_CHOWN"})
    assert all(v == ["CAP_CHOWN"] for v in json.loads(path.read_text())["capabilities"].values())


def test_a_spec_asking_only_for_what_is_held_is_left_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(original := json.dumps(spec_with(["CAP_CHOWN"]), indent=3))
    runc_capped.keep_grantable(str(path), False, held=ALL)
    assert path.read_text() == original


def test_the_bounding_set_is_read_from_the_status_file(tmp_path: Path) -> None:
    status = tmp_path / "status"
    # bits 0 (CHOWN), 21 (SYS_ADMIN) and 24 (SYS_RESOURCE)
    status.write_text(f"Name:\tx\nCapBnd:\t{(1 << 0) | (1 << 21) | (1 << 24):016x}\n")
    assert runc_capped.bounding_set(str(status)) == {"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"}
    status.write_text(f"CapBnd:\t{(1 << 41) - 1 - (1 << 24):016x}\n")
    held = runc_capped.bounding_set(str(status))
    assert "CAP_SYS_RESOURCE" not in held and len(held) == 40


def test_the_derived_kind_config_keeps_the_nodes_and_mounts_and_points_kubeadm_at_our_images() -> None:
    source = KIND.parents[1] / "deploy" / "kind" / "cluster.yaml"
    out = subprocess.run(
        [
            sys.executable,
            str(KIND / "cluster_config.py"),
            str(source),
            "0",
            "tfmw.local",
            "v3.6.4",
            "v1.12.1",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    config, original = yaml.safe_load(out), yaml.safe_load(source.read_text())
    assert config["nodes"] == original["nodes"]  # the shared folder mounted as the user's config says
    assert config["networking"]["disableDefaultCNI"] is True
    (patch,) = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]]
    assert patch == {
        "kind": "ClusterConfiguration",
        "imageRepository": "tfmw.local",
        "etcd": {"local": {"imageTag": "v3.6.4"}},
        "dns": {"imageTag": "v1.12.1"},
    }


def test_workers_each_mount_the_shared_folder_where_the_control_plane_does() -> None:
    source = KIND.parents[1] / "deploy" / "kind" / "cluster.yaml"
    out = subprocess.run(
        [sys.executable, str(KIND / "cluster_config.py"), str(source), "2"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    config, original = yaml.safe_load(out), yaml.safe_load(source.read_text())
    control_plane, *workers = config["nodes"]
    assert control_plane == original["nodes"][0]
    assert [w["role"] for w in workers] == ["worker", "worker"]
    assert all(w["extraMounts"] == control_plane["extraMounts"] for w in workers)
    # kind's own image: its own CNI (kindnet) and images, nothing patched.
    assert "networking" not in config and "kubeadmConfigPatches" not in config


def test_every_node_reads_registry_hosts_from_certs_d() -> None:
    source = KIND.parents[1] / "deploy" / "kind" / "cluster.yaml"
    out = subprocess.run(
        [sys.executable, str(KIND / "cluster_config.py"), str(source), "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (patch,) = yaml.safe_load(out)["containerdConfigPatches"]
    assert patch.splitlines() == [
        '[plugins."io.containerd.grpc.v1.cri".registry]',
        '  config_path = "/etc/containerd/certs.d"',
    ]
