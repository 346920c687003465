"""The CLI's HTTP (tfmw_client.transport) against a real TLS server on loopback, beside the
official REST client (tfmw_client.kube.OfficialTransport) given the same connection: the
same answers, the same TLS checks (CA, server name, client certificate, verification off),
bodies as they come, kept-alive connections the server dropped, and timeouts.

The certificates are made by `openssl` for the session: a CA, the server's (127.0.0.1 and
api.lab) and a client's (CN alice).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tfmw_client.connection import Connection
from tfmw_client.errors import ApiError, TfmwError
from tfmw_client.kube import Kube, OfficialTransport
from tfmw_client.transport import Transport, TransportError

TransportKind = Callable[[Connection], Transport | OfficialTransport]
KINDS: dict[str, TransportKind] = {"stdlib": Transport, "official": OfficialTransport}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req",
        "-x509",
        *key,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=ca",
        cwd=folder,
    )
    _openssl(
        "req",
        "-x509",
        *key,
        "-keyout",
        "other.key",
        "-out",
        "other.crt",
        "-days",
        "2",
        "-subj",
        "/CN=o",
        cwd=folder,
    )
    for name, extension in (
        ("server", "subjectAltName=IP:127.0.0.1,DNS:api.lab"),
        ("alice", "extendedKeyUsage=clientAuth"),
    ):
        _openssl(
            "req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=folder
        )
        (folder / f"{name}.ext").write_text(extension + "\n")
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=folder,
        )  # fmt: skip
    return folder


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept-alive connections
    streamed = threading.Event()  # set by the test once it read the first line

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, document: Any, close: bool = False) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        # Dropped without saying so (no `Connection: close`), as an idle timeout does.
        self.close_connection = close

    def do_GET(self) -> None:
        if self.path.startswith("/stream"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in (b"first\n", b"second\nthird"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                Handler.streamed.wait(10)
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/slow"):
            time.sleep(2)
        if self.path.startswith("/moved"):
            self.send_response(302)
            self.send_header("Location", "https://elsewhere.lab/api")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/missing"):
            # As an API server says it: the absent object's kind in the details.
            self._answer(
                404,
                {
                    "kind": "Status",
                    "reason": "NotFound",
                    "message": 'jobs "x" not found',
                    "details": {"name": "x", "kind": "jobs"},
                },
            )
            return
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        names: Any = (peer or {}).get("subject", ())  # ((("commonName", "alice"),),)
        subject = {key: value for ((key, value),) in names}
        self._answer(
            200,
            {
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "client": subject.get("commonName"),
                "port": self.client_address[1],
            },
            close=self.path.startswith("/drop"),
        )

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Handler.patches.append(self.path)
        if self.path.startswith("/drop"):  # carried out, then the connection lost before the answer
            self.close_connection = True
            return
        self._answer(200, {"type": self.headers["Content-Type"], "body": json.loads(body)})

    patches: ClassVar[list[str]] = []


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and left (test_no_answer_within_the_timeout...)


@pytest.fixture(scope="session")
def server(pki: Path) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    context.load_verify_locations(pki / "ca.crt")
    context.verify_mode = ssl.CERT_OPTIONAL  # a client certificate is read when given
    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def connection(server: str, pki: Path, **settings: Any) -> Connection:
    made = Connection()
    made.host = server
    made.ca_cert_data = (pki / "ca.crt").read_text()
    for key, value in settings.items():
        setattr(made, key, value)
    return made


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> TransportKind:
    return KINDS[request.param]


def get(transport: Transport | OfficialTransport, target: str, **extra: Any) -> Any:
    response = transport.request(
        "GET", target, {"Authorization": "Bearer t"}, None, extra.get("timeout", 5.0)
    )
    return response.status, json.loads(response.data)


def test_a_request_verified_by_the_kubeconfig_s_ca_with_a_client_certificate(
    server: str, pki: Path, kind: TransportKind
) -> None:
    transport = kind(
        connection(server, pki, cert_file=str(pki / "alice.crt"), key_file=str(pki / "alice.key"))
    )
    status, answer = get(transport, "/apis/x?limit=500")
    assert status == 200
    assert answer["path"] == "/apis/x?limit=500"
    assert (answer["authorization"], answer["client"]) == ("Bearer t", "alice")
    transport.close()


def test_a_server_the_ca_did_not_sign_is_refused_unless_verification_is_off(
    server: str, pki: Path, kind: TransportKind
) -> None:
    wrong = connection(server, pki, ca_cert_data=(pki / "other.crt").read_text())
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        get(kind(wrong), "/x")
    status, answer = get(kind(connection(server, pki, ca_cert_data=None, verify_ssl=False)), "/x")
    assert (status, answer["client"]) == (200, None)


def test_the_certificate_is_checked_against_tls_server_name_when_given(
    server: str, pki: Path, kind: TransportKind
) -> None:
    assert get(kind(connection(server, pki, tls_server_name="api.lab")), "/x")[0] == 200
    with pytest.raises(TransportError, match=r"CERTIFICATE_VERIFY_FAILED|match"):
        get(kind(connection(server, pki, tls_server_name="elsewhere.lab")), "/x")


def test_a_body_is_sent_as_json_with_its_content_type(server: str, pki: Path, kind: TransportKind) -> None:
    headers = {"Content-Type": "application/merge-patch+json"}
    response = kind(connection(server, pki)).request("PATCH", "/p", headers, {"spec": {"suspend": True}}, 5.0)
    assert json.loads(response.data) == {
        "type": "application/merge-patch+json",
        "body": {"spec": {"suspend": True}},
    }


def test_a_followed_body_arrives_as_it_is_written(server: str, pki: Path, kind: TransportKind) -> None:
    Handler.streamed.clear()
    response = kind(connection(server, pki)).request("GET", "/stream", {}, None, (5.0, None))
    received = b""
    for chunk in response.chunks(4096):
        received += chunk
        if received == b"first\n":
            Handler.streamed.set()  # the server writes the rest only once this line arrived
    assert received == b"first\nsecond\nthird"


def test_a_kept_alive_connection_the_server_dropped_is_replaced_once(server: str, pki: Path) -> None:
    transport = Transport(connection(server, pki))
    first = get(transport, "/drop")[1]["port"]
    second = get(transport, "/again")[1]["port"]  # the dropped connection failed: a new one
    third = get(transport, "/again")[1]["port"]  # kept alive
    assert first != second == third


def test_no_answer_within_the_timeout_is_an_error(server: str, pki: Path, kind: TransportKind) -> None:
    started = time.monotonic()
    with pytest.raises(TransportError):
        get(kind(connection(server, pki)), "/slow", timeout=0.3)
    assert time.monotonic() - started < 1.9  # the server answers after 2 s


def test_requests_from_threads_at_once_each_get_their_answer(server: str, pki: Path) -> None:
    transport = Transport(connection(server, pki))
    answers: dict[int, Any] = {}

    def ask(index: int) -> None:
        answers[index] = get(transport, f"/n/{index}")[1]["path"]

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == {index: f"/n/{index}" for index in range(8)}


def _kubeconfig(tmp_path: Path, server: str, pki: Path, cluster: str = "") -> str:
    def data(name: str) -> str:
        return base64.standard_b64encode((pki / name).read_bytes()).decode()

    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}', certificate-authority-data: {data('ca.crt')}{cluster}}}}}]\n"
        f"users: [{{name: u, user: {{client-certificate-data: {data('alice.crt')}, client-key-data: {data('alice.key')}}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team}}]\n"
    )
    return str(path)


def test_the_cli_s_client_reads_the_kubeconfig_onto_the_standard_library_s_http(
    server: str, pki: Path, tmp_path: Path
) -> None:
    kube = Kube(kubeconfig=_kubeconfig(tmp_path, server, pki))
    assert isinstance(kube._transport, Transport)
    assert (kube.get("/apis/y")["client"], kube.namespace) == ("alice", "team")
    with pytest.raises(ApiError) as refused:
        kube.get("/missing")
    assert refused.value.not_found
    assert kube.get_or_none("/missing") is None
    kube.close()


def test_a_proxy_in_the_kubeconfig_keeps_the_official_client(server: str, pki: Path, tmp_path: Path) -> None:
    kube = Kube(kubeconfig=_kubeconfig(tmp_path, server, pki, ", proxy-url: 'http://127.0.0.1:1'"))
    assert isinstance(kube._transport, OfficialTransport)
    with pytest.raises(TfmwError, match="cannot reach the API server"):
        kube.get("/apis/y")  # nothing listens at the proxy's port


def test_an_unreadable_ca_in_the_kubeconfig_is_an_error_naming_it(
    server: str, pki: Path, tmp_path: Path
) -> None:
    path = Path(_kubeconfig(tmp_path, server, pki))
    text = path.read_text()
    garbage = base64.standard_b64encode(
        b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"
    )
    path.write_text(
        text.replace(text.split("certificate-authority-data: ")[1].split("}")[0], garbage.decode())
    )
    with pytest.raises(TfmwError, match="cannot set up the connection"):
        Kube(kubeconfig=str(path))


def test_a_write_on_a_connection_lost_before_the_answer_is_not_sent_again(server: str, pki: Path) -> None:
    """The server may have carried it out: sending it again could do it twice (urllib3 does
    not either). A read is sent again, once, on a new connection."""
    transport = Transport(connection(server, pki))
    get(transport, "/warm")  # a kept-alive connection, used by the PATCH
    Handler.patches.clear()
    with pytest.raises(TransportError, match="may have been carried out"):
        transport.request("PATCH", "/drop", {"Content-Type": "application/json"}, {}, 5.0)
    assert Handler.patches == ["/drop"]


def test_idle_connections_the_server_closed_are_not_used(server: str, pki: Path) -> None:
    transport = Transport(connection(server, pki))
    threads = [threading.Thread(target=get, args=(transport, "/slow-ish")) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for idle in transport._idle:  # as a load balancer's idle timeout closes them
        assert idle.sock is not None
        idle.sock.shutdown(socket.SHUT_RDWR)
    assert get(transport, "/after")[0] == 200
    Handler.patches.clear()
    get(transport, "/warm")
    for idle in transport._idle:
        assert idle.sock is not None
        idle.sock.shutdown(socket.SHUT_RDWR)
    answer = transport.request("PATCH", "/p", {"Content-Type": "application/json"}, {"a": 1}, 5.0)
    assert (answer.status, Handler.patches) == (200, ["/p"])  # a closed idle one is never tried


def test_a_tls_server_name_ending_in_a_dot_is_the_same_name(server: str, pki: Path) -> None:
    assert get(Transport(connection(server, pki, tls_server_name="api.lab.")), "/x")[0] == 200


def test_an_encrypted_client_key_is_refused_not_asked_for(pki: Path, tmp_path: Path) -> None:
    key = tmp_path / "encrypted.key"
    subprocess.run(
        ["openssl", "pkey", "-in", pki / "alice.key", "-aes256", "-passout", "pass:x", "-out", key],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    with pytest.raises(TransportError, match="client key is encrypted"):
        Transport(connection("https://127.0.0.1:1", pki, cert_file=str(pki / "alice.crt"), key_file=str(key)))


def test_a_server_below_a_path_gets_its_prefix(server: str, pki: Path) -> None:
    assert get(Transport(connection(server + "/gateway/", pki)), "/api?x=1")[1]["path"] == "/gateway/api?x=1"


def test_the_official_configuration_of_a_service_account_or_exec_plugin_is_served_here(
    server: str, pki: Path
) -> None:
    """What the official loaders fill: the CA as a file, and a token read again at every call
    through their refresh hook (a rotated service account token)."""
    from kubernetes.client import Configuration

    configuration = Configuration()
    configuration.host = server
    configuration.ssl_ca_cert = str(pki / "ca.crt")
    configuration.api_key["BearerToken"] = "Bearer zero"  # as the loader leaves it
    tokens = iter(["Bearer one", "Bearer two"])

    def refresh(settings: Configuration) -> None:
        settings.api_key["BearerToken"] = next(tokens)

    configuration.refresh_api_key_hook = refresh
    transport = Transport(configuration)
    seen = []
    for _ in range(2):
        bearer = configuration.auth_settings()["BearerToken"]
        response = transport.request("GET", "/sa", {bearer["key"]: bearer["value"]}, None, 5.0)
        seen.append(json.loads(response.data)["authorization"])
    assert seen == ["Bearer one", "Bearer two"]


def test_a_redirect_is_not_followed_and_is_named(server: str, pki: Path, tmp_path: Path) -> None:
    kube = Kube(kubeconfig=_kubeconfig(tmp_path, server, pki))
    with pytest.raises(TfmwError, match=r"redirect \(302\) to https://elsewhere\.lab/api"):
        kube.get("/moved")


def test_a_header_that_cannot_be_sent_is_an_error_not_a_traceback(server: str, pki: Path) -> None:
    with pytest.raises(TransportError, match="cannot be sent"):
        Transport(connection(server, pki)).request("GET", "/x", {"Authorization": "Bearer a\nb"}, None, 5.0)


@pytest.mark.parametrize("proxy", ["", ", proxy-url: 'http://127.0.0.1:1'"])
def test_the_client_key_is_on_disk_only_while_the_connection_is_set_up(
    server: str, pki: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proxy: str
) -> None:
    import stat
    import tempfile

    from tfmw_client import kube as kube_module

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    written: list[tuple[str, int, int]] = []
    write = kube_module.PrivateFiles.write

    def recording(files: kube_module.PrivateFiles, content: bytes) -> str:
        path = write(files, content)
        folder, file = os.stat(files.folder).st_mode, os.stat(path).st_mode
        written.append((path, stat.S_IMODE(folder), stat.S_IMODE(file)))
        return path

    monkeypatch.setattr(kube_module.PrivateFiles, "write", recording)
    kube = Kube(kubeconfig=_kubeconfig(tmp_path, server, pki, proxy))
    assert [(folder, file) for _, folder, file in written] == [(0o700, 0o600)] * 2  # certificate, key
    assert list(scratch.iterdir()) == []  # gone as soon as the connection was set up
    if not proxy:
        assert kube.get("/apis/y")["client"] == "alice"  # the certificate still signs us in
    kube.close()


def test_the_official_client_loads_the_client_certificate_once_at_the_start(
    server: str, pki: Path, tmp_path: Path
) -> None:
    # As Kube gives it: files that are removed once the transport is made.
    for name in ("alice.crt", "alice.key"):
        (tmp_path / name).write_bytes((pki / name).read_bytes())
    made = connection(
        server, pki, cert_file=str(tmp_path / "alice.crt"), key_file=str(tmp_path / "alice.key")
    )
    transport = OfficialTransport(made)
    for name in ("alice.crt", "alice.key"):
        (tmp_path / name).unlink()
    status, answer = get(transport, "/apis/x")
    assert (status, answer["client"]) == (200, "alice")
    transport.close()


@pytest.mark.parametrize("trust", ["verification off", "the system's CAs"])
def test_the_official_client_with_a_client_certificate_keeps_the_kubeconfig_s_trust(
    server: str, pki: Path, trust: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # insecure-skip-tls-verify, or no certificate-authority at all (the system trusts the
    # server): urllib3 refused CERT_NONE on a context that checked host names, and loaded no
    # system CAs into a context it did not make.
    made = connection(server, pki, cert_file=str(pki / "alice.crt"), key_file=str(pki / "alice.key"))
    made.ca_cert_data = None
    if trust == "verification off":
        made.verify_ssl = False
    else:
        monkeypatch.setenv("SSL_CERT_FILE", str(pki / "ca.crt"))
    transport = OfficialTransport(made)
    status, answer = get(transport, "/apis/x")
    assert (status, answer["client"]) == (200, "alice")
    transport.close()
