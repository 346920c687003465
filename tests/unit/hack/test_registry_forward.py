"""hack/kind/registry_forward.py: kind's nodes pull from the machine-local registry through
it, and nothing else passes. What it lets through is checked request by request here; over
real sockets, that it answers only the nodes' addresses, refuses writes before they reach
the registry, and lets nothing ride behind a checked request. (With the real registry and a
real containerd pull: tests/integration/test_registry_forward.py.)"""

from __future__ import annotations

import importlib.util
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

FORWARDER = Path(__file__).resolve().parents[3] / "hack" / "kind" / "registry_forward.py"
NODE = "127.0.0.2"  # an address of lo that is not 127.0.0.1: the allowed "node"
NOT_A_NODE = "127.0.0.1"
DIGEST = "sha256:" + "ab" * 32


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("registry_forward", FORWARDER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["registry_forward"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


forward = load()


def head(request_line: str, *headers: str) -> bytes:
    return ("\r\n".join([request_line, *headers]) + "\r\n\r\n").encode()


@pytest.mark.parametrize(
    "request_line",
    [
        "GET /v2/ HTTP/1.1",
        "HEAD /v2/tfmw-operator/manifests/0.1.0 HTTP/1.1",
        "GET /v2/tfmw-operator/manifests/0.1.0?ns=localhost%3A5000 HTTP/1.1",  # containerd, through a mirror
        f"GET /v2/ml/team_a/tfmw-trainer/manifests/{DIGEST} HTTP/1.1",
        f"GET /v2/tfmw-trainer/blobs/{DIGEST}?ns=localhost%3A5000 HTTP/1.1",
        f"HEAD /v2/tfmw-trainer/blobs/{DIGEST} HTTP/1.0",
    ],
)
def test_pulls_pass(request_line: str) -> None:
    pull = forward.check_request(head(request_line, "Host: 172.18.0.1:5000"))
    assert f"{pull.method} {pull.target}" == request_line.rsplit(" ", 1)[0]


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        ("POST /v2/tfmw-operator/blobs/uploads/ HTTP/1.1", 403),  # a push starts here
        ("PATCH /v2/tfmw-operator/blobs/uploads/0b4e2c HTTP/1.1", 403),
        (f"PUT /v2/tfmw-operator/blobs/uploads/0b4e2c?digest={DIGEST} HTTP/1.1", 403),
        ("PUT /v2/tfmw-operator/manifests/0.1.0 HTTP/1.1", 403),
        ("DELETE /v2/tfmw-operator/manifests/0.1.0 HTTP/1.1", 403),
        (f"DELETE /v2/tfmw-operator/blobs/{DIGEST} HTTP/1.1", 403),
        ("OPTIONS * HTTP/1.1", 403),
        ("CONNECT 127.0.0.1:5000 HTTP/1.1", 403),
        ("get /v2/ HTTP/1.1", 403),  # methods are case-sensitive
        ("GET /v2/_catalog HTTP/1.1", 403),
        ("GET /v2/tfmw-operator/tags/list HTTP/1.1", 403),
        ("GET /v2/tfmw-operator/blobs/uploads/0b4e2c HTTP/1.1", 403),
        ("GET /v2/../v2/tfmw-operator/manifests/0.1.0 HTTP/1.1", 403),
        ("GET /v2/tfmw-operator/manifests/%2e%2e HTTP/1.1", 403),
        ("GET //v2/ HTTP/1.1", 403),
        ("GET http://127.0.0.1:5000/v2/ HTTP/1.1", 403),  # absolute form: a proxy request
        ("GET /v2/x/manifests/1?a=b c HTTP/1.1", 400),  # four parts
        ("GET /v2/x/manifests/1?<script> HTTP/1.1", 403),
        ("GET /v2/ HTTP/2.0", 400),
        ("GET /v2/", 400),
    ],
)
def test_anything_but_a_pull_is_refused(request_line: str, status: int) -> None:
    with pytest.raises(forward.Refused) as refused:
        forward.check_request(head(request_line, "Host: registry"))
    assert refused.value.status == status


@pytest.mark.parametrize(
    "headers",
    [
        ("Content-Length: 12",),  # a pull has no body
        ("Transfer-Encoding: chunked",),
        ("Content-Length: 0", "Transfer-Encoding: chunked"),
        ("Host: a", " folded: line"),  # obsolete line folding
        ("No colon here",),
        ("Bad name: x",),
        ("X-Evil: a\x00b",),
        ("X-Evil: a\rb",),
    ],
)
def test_requests_with_a_body_or_a_malformed_header_are_refused(headers: tuple[str, ...]) -> None:
    with pytest.raises(forward.Refused) as refused:
        forward.check_request(head("GET /v2/ HTTP/1.1", *headers))
    assert refused.value.status == 400


def test_the_registry_gets_the_request_as_parsed_without_hop_by_hop_headers_and_closing() -> None:
    pull = forward.check_request(
        head(
            "GET /v2/x/manifests/1 HTTP/1.1",
            "Host: 172.18.0.1:5000",
            "Accept:  application/vnd.oci.image.index.v1+json ",
            "Connection: keep-alive, X-Private",
            "Keep-Alive: timeout=5",
            "X-Private: 1",
            "Content-Length: 0",
            "Upgrade: h2c",
        )
    )
    assert pull.encode() == (
        b"GET /v2/x/manifests/1 HTTP/1.1\r\n"
        b"Host: 172.18.0.1:5000\r\n"
        b"Accept: application/vnd.oci.image.index.v1+json\r\n"
        b"Content-Length: 0\r\n"
        b"Connection: close\r\n\r\n"
    )


def test_a_refusal_is_the_registrys_error_shape_and_closes() -> None:
    answer = forward.refusal(403, "only pulls pass here", with_body=True)
    status, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status == b"HTTP/1.1 403 Forbidden"
    assert b"Connection: close" in headers and f"Content-Length: {len(body)}".encode() in headers
    assert body == b'{"errors": [{"code": "DENIED", "message": "only pulls pass here"}]}'
    assert forward.refusal(403, "x", with_body=False).endswith(b"\r\n\r\n")  # an answer to HEAD


# Over real sockets: the forwarder as kind.sh starts it, in front of a stand-in registry
# that records every byte it receives.


@dataclass
class Upstream:
    port: int
    received: list[bytes] = field(default_factory=list)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    recorded = Upstream(0)

    class Registry(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(2)
            data = b""
            try:
                while chunk := self.request.recv(65536):
                    data += chunk
                    if b"\r\n\r\n" in data:
                        break
            except TimeoutError:
                pass
            recorded.received.append(data)
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nmanifst")

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Registry) as server:
        recorded.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield recorded
        server.shutdown()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def forwarder(upstream: Upstream) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(FORWARDER), f"127.0.0.1:{port}", f"127.0.0.1:{upstream.port}", "--allow", NODE],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, "the forwarder never listened"
            time.sleep(0.05)
    try:
        yield port, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def exchange(port: int, data: bytes, source: str = NODE) -> bytes:
    """What the forwarder answers `data` sent from `source`, until it closes."""
    with socket.socket() as client:
        client.settimeout(10)
        client.bind((source, 0))
        client.connect(("127.0.0.1", port))
        client.sendall(data)
        answer = b""
        try:
            while chunk := client.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def test_a_nodes_pull_reaches_the_registry_and_its_answer_comes_back(
    upstream: Upstream, forwarder: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, _ = forwarder
    answer = exchange(port, head("GET /v2/x/manifests/1 HTTP/1.1", "Host: gw", "Connection: keep-alive"))
    assert answer.endswith(b"\r\n\r\nmanifst")
    assert upstream.received == [b"GET /v2/x/manifests/1 HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"]


@pytest.mark.parametrize(
    "request_line",
    [
        "POST /v2/tfmw-operator/blobs/uploads/ HTTP/1.1",
        "PUT /v2/tfmw-operator/manifests/0.1.0 HTTP/1.1",
        "PATCH /v2/tfmw-operator/blobs/uploads/0b4e2c HTTP/1.1",
        "DELETE /v2/tfmw-operator/manifests/0.1.0 HTTP/1.1",
    ],
)
def test_a_write_from_a_node_is_refused_and_never_reaches_the_registry(
    upstream: Upstream, forwarder: tuple[int, subprocess.Popen[bytes]], request_line: str
) -> None:
    port, _ = forwarder
    answer = exchange(port, head(request_line, "Host: gw", "Content-Length: 0"))
    assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n") and b'"DENIED"' in answer
    assert upstream.received == []


def test_nothing_behind_a_checked_pull_reaches_the_registry(
    upstream: Upstream, forwarder: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, _ = forwarder
    pull = head("GET /v2/x/manifests/1 HTTP/1.1", "Host: gw")
    smuggled = head("DELETE /v2/x/manifests/1 HTTP/1.1", "Host: gw")
    answer = exchange(port, pull + smuggled)
    assert answer.endswith(b"manifst") and answer.count(b"HTTP/1.1") == 1
    assert upstream.received == [b"GET /v2/x/manifests/1 HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"]


def test_an_address_that_is_not_a_node_is_closed_unanswered(
    upstream: Upstream, forwarder: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, _ = forwarder
    assert exchange(port, head("GET /v2/ HTTP/1.1", "Host: gw"), source=NOT_A_NODE) == b""
    assert upstream.received == []
    # ... while the node, a moment later, is served: the refusal is the address's.
    assert exchange(port, head("GET /v2/ HTTP/1.1", "Host: gw")).endswith(b"manifst")


def test_an_oversized_head_is_refused(
    upstream: Upstream, forwarder: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, _ = forwarder
    answer = exchange(port, head("GET /v2/ HTTP/1.1", "X-Pad: " + "a" * 20_000))
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert upstream.received == []


def test_it_exits_on_sigterm(forwarder: tuple[int, subprocess.Popen[bytes]]) -> None:
    _, process = forwarder
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
