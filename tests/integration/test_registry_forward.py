"""The kind path's registry wall, with real components: the CNCF Distribution registry as
hack/registry.sh configures it, hack/kind/registry_forward.py in front of it as
hack/kind.sh starts it, and containerd pulling through it as a kind node's does (a
hosts.toml that sends the registry's name to the forwarder). No cluster: the registry,
the forwarder and a containerd of the test's own run on free ports and in a folder of
their own, and stop with the test.

- a pull works: containerd pulls an image pushed to the registry beforehand, by the
  forwarder alone (the registry's name does not resolve);
- a push or a delete through the forwarder is refused (403) and never reaches the
  registry; a delete sent to the registry itself is refused too (deletes are off);
- a connection from an address that is not a node's is closed unanswered, over a real
  socket bound to another address of lo.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kube import REPO, wait_for
from ports import free_ports

IMAGE = "walls/hello"
TAG = "1"
# The name containerd pulls by: nothing answers it but the forwarder, through hosts.toml.
REGISTRY_NAME = "tfmw-registry.invalid:5000"
NODE = "127.0.0.1"  # the source address of any connection to lo: the "node"
NOT_A_NODE = "127.0.0.3"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


@dataclass
class Image:
    manifest_digest: str
    layer_digest: str


def http(
    method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(
        url, data=body if method in ("POST", "PUT", "PATCH") else None, method=method
    )
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push(registry: str) -> Image:
    """A one-layer image, pushed straight to the registry (as `make push` does, on localhost)."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as tar:
        content = b"pulled through the forwarder\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    layer = gzip.compress(layer_tar.getvalue(), mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [digest(layer_tar.getvalue())]},
            "config": {},
        }
    ).encode()
    for blob in (layer, config):
        status, _, headers = http("POST", f"http://{registry}/v2/{IMAGE}/blobs/uploads/")
        assert status == 202, status
        location = headers["Location"]
        location = location if location.startswith("http") else f"http://{registry}{location}"
        separator = "&" if "?" in location else "?"
        status, _, _ = http(
            "PUT",
            f"{location}{separator}digest={digest(blob)}",
            blob,
            {"Content-Type": "application/octet-stream"},
        )
        assert status == 201, status
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    status, _, _ = http(
        "PUT", f"http://{registry}/v2/{IMAGE}/manifests/{TAG}", manifest, {"Content-Type": MANIFEST_TYPE}
    )
    assert status == 201, status
    return Image(digest(manifest), digest(layer))


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    # Short: containerd's unix sockets live here (at most 108 bytes of path).
    path = Path(tempfile.mkdtemp(prefix="tfmw-regfw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def registry(folder: Path) -> Iterator[str]:
    """The registry with hack/registry.sh's configuration, on a free port and storage of its own."""
    subprocess.run(
        ["bash", "-c", 'source hack/lib.sh && go_tool github.com/distribution/distribution/v3/cmd/registry "$DISTRIBUTION_VERSION" registry'],
        cwd=REPO, check=True, timeout=900,
    )  # fmt: skip
    config = folder / "registry.yml"
    config.write_text(
        subprocess.run(
            [str(REPO / "hack" / "registry.sh"), "config"], check=True, capture_output=True, text=True
        ).stdout
    )
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "none",
        "REGISTRY_HTTP_ADDR": address,
        "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY": str(folder / "storage"),
    }
    with (folder / "registry.log").open("ab") as log:
        process = subprocess.Popen(
            [str(REPO / "hack" / "bin" / "registry"), "serve", str(config)], env=env, stdout=log, stderr=log
        )
    try:

        def answers() -> bool:
            assert process.poll() is None, (folder / "registry.log").read_text()
            try:
                return http("GET", f"http://{address}/v2/")[0] == 200
            except urllib.error.URLError:
                return False

        wait_for("the registry", answers, timeout=30)
        yield address
    finally:
        stop(process)


@pytest.fixture(scope="module")
def pushed(registry: str) -> Image:
    return push(registry)


@pytest.fixture(scope="module")
def forwarder(registry: str, folder: Path) -> Iterator[str]:
    """The forwarder as hack/kind.sh starts it: on the "gateway", for the "node" only."""
    (port,) = free_ports(1)
    listen = f"127.0.0.1:{port}"
    with (folder / "forwarder.log").open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "hack" / "kind" / "registry_forward.py"),
                listen,
                registry,
                "--allow",
                NODE,
            ],
            stdout=log,
            stderr=log,
        )
    try:
        wait_for("the forwarder", lambda: b"listening" in (folder / "forwarder.log").read_bytes(), timeout=30)
        yield listen
    finally:
        stop(process)


@pytest.fixture(scope="module")
def containerd(folder: Path, forwarder: str) -> Iterator[tuple[str, Path]]:
    """A containerd of the test's own (its socket, and a hosts.toml folder as a kind node has)."""
    root = folder / "containerd"
    root.mkdir()
    socket_path = root / "c.sock"
    config = root / "config.toml"
    config.write_text(
        f'version = 2\nroot = "{root / "root"}"\nstate = "{root / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket_path}"\n[ttrpc]\n  address = "{root / "t.sock"}"\n'
        f'[debug]\n  address = "{root / "d.sock"}"\n'
    )
    hosts = root / "certs.d" / REGISTRY_NAME
    hosts.mkdir(parents=True)
    # hack/kind.sh's hosts.toml, with this forwarder for the kind network's gateway.
    (hosts / "hosts.toml").write_text(
        f'server = "http://{REGISTRY_NAME}"\n[host."http://{forwarder}"]\n  capabilities = ["pull", "resolve"]\n'
    )
    with (root / "containerd.log").open("ab") as log:
        process = subprocess.Popen(["containerd", "--config", str(config)], stdout=log, stderr=log)
    try:
        wait_for("containerd", lambda: socket_path.exists() if process.poll() is None else None, timeout=30)
        yield str(socket_path), root / "certs.d"
    finally:
        stop(process)


def ctr(socket_path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", socket_path, "-n", "tfmw-test", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_containerd_pulls_through_the_forwarder(containerd: tuple[str, Path], pushed: Image) -> None:
    socket_path, hosts_dir = containerd
    t0 = time.monotonic()
    pulled = ctr(
        socket_path, "images", "pull", "--hosts-dir", str(hosts_dir), f"{REGISTRY_NAME}/{IMAGE}:{TAG}"
    )
    print(f"pulled through the forwarder in {time.monotonic() - t0:.2f}s")
    assert pulled.returncode == 0, pulled.stderr
    listed = ctr(socket_path, "images", "ls")
    assert f"{REGISTRY_NAME}/{IMAGE}:{TAG}" in listed.stdout and pushed.manifest_digest in listed.stdout


def test_a_push_or_a_delete_through_the_forwarder_is_refused(
    registry: str, forwarder: str, pushed: Image, folder: Path
) -> None:
    through = f"http://{forwarder}/v2/{IMAGE}"
    for method, path in (
        ("POST", "/blobs/uploads/"),
        ("PUT", f"/manifests/{TAG}"),
        ("PATCH", "/blobs/uploads/00000000-0000-0000-0000-000000000000"),
        ("DELETE", f"/manifests/{pushed.manifest_digest}"),
        ("DELETE", f"/blobs/{pushed.layer_digest}"),
    ):
        status, body, _ = http(method, through + path, b"{}" if method != "DELETE" else b"")
        assert status == 403 and b"DENIED" in body, (method, path, status, body)
    # No upload was started: the registry keeps one in _uploads/ until it is finished.
    uploads = folder / "storage" / "docker" / "registry" / "v2" / "repositories" / IMAGE / "_uploads"
    assert not uploads.exists() or not list(uploads.iterdir())
    # The registry itself refuses deletes (hack/registry.sh: storage.delete off) ...
    status, body, _ = http("DELETE", f"http://{registry}/v2/{IMAGE}/manifests/{pushed.manifest_digest}")
    assert status == 405 and b"UNSUPPORTED" in body, (status, body)
    # ... and a pull through the forwarder still finds the image.
    status, body, _ = http("GET", f"{through}/manifests/{TAG}", headers={"Accept": MANIFEST_TYPE})
    assert status == 200 and digest(body) == pushed.manifest_digest
    status, _, _ = http("HEAD", f"{through}/blobs/{pushed.layer_digest}")
    assert status == 200


def test_an_address_that_is_not_a_nodes_is_closed_unanswered(forwarder: str) -> None:
    host, port = forwarder.rsplit(":", 1)

    def ask(source: str) -> bytes:
        with socket.socket() as client:
            client.settimeout(10)
            client.bind((source, 0))
            client.connect((host, int(port)))
            client.sendall(b"GET /v2/ HTTP/1.1\r\nHost: gateway\r\n\r\n")
            answer = b""
            try:
                while chunk := client.recv(65536):
                    answer += chunk
            except ConnectionResetError:
                pass
            return answer

    assert ask(NOT_A_NODE) == b""
    assert ask(NODE).startswith(b"HTTP/1.1 200 OK")
