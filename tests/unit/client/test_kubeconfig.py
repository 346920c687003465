"""Kubeconfigs read as kubectl reads them, onto the same connection the official loader makes.

Every kubeconfig tfmw reads itself (onto its own Connection) is also given to the official
`load_kube_config` (onto the official Configuration); both must say the same server, CA,
client certificate, key, token and TLS flags, and give the official REST client the same
pool manager, proxies of the environment included.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as official_client
from kubernetes import config as official_config
from kubernetes.client import rest as official_rest
from tfmw_client import kubeconfig
from tfmw_client.connection import Connection
from tfmw_client.kubeconfig import KubeconfigError

CA, CERT, KEY = b"-----CA-----\n", b"-----CERT-----\n", b"-----KEY-----\n"


def b64(data: bytes) -> str:
    return base64.standard_b64encode(data).decode()


def write(folder: Path, name: str, cluster: str, user: str, namespace: str = "") -> Path:
    path = folder / name
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {cluster}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        f"contexts: [{{name: c, context: {{cluster: c, user: u, namespace: '{namespace}'}}}}]\n"
    )
    return path


def connection(configuration: Any) -> dict[str, Any]:
    """What a Configuration connects with, files read (both write theirs to temporary files)."""

    def content(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    ca = content(configuration.ssl_ca_cert)
    if configuration.ca_cert_data:
        ca = configuration.ca_cert_data.encode()
    manager = official_rest.RESTClientObject(configuration).pool_manager
    pool = dict(manager.connection_pool_kw)
    for key in ("ca_certs", "cert_file", "key_file"):  # files of either's own: their content
        pool[key] = content(pool.get(key))
    # The CA as data or as a file (the official loader writes a file, tfmw gives the data).
    data = pool.pop("ca_cert_data", None)
    pool["ca_certs"] = data.encode() if data else pool["ca_certs"]
    return {
        "pool manager": type(manager).__name__,
        "pool": pool,
        "proxy url": str(getattr(manager, "proxy", None)),
        "authorization": (configuration.auth_settings().get("BearerToken") or {}).get("value"),
        "host": configuration.host,
        "ca": ca,
        "cert": content(configuration.cert_file),
        "key": content(configuration.key_file),
        "token": configuration.api_key.get("BearerToken"),
        "verify": configuration.verify_ssl,
        "server_name": configuration.tls_server_name,
        "proxy": configuration.proxy,
    }


def ours(path: Path, tmp_path: Path) -> dict[str, Any]:
    counter = iter(range(100))

    def private_file(data: bytes) -> str:
        kept = tmp_path / f"private-{next(counter)}"
        kept.write_bytes(data)
        return str(kept)

    configuration = Connection()
    kubeconfig.read([str(path)], explicit=True).select().apply(configuration, private_file)
    return connection(configuration)


def theirs(path: Path) -> dict[str, Any]:
    configuration = official_client.Configuration()
    official_config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return connection(configuration)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "kube"
    folder.mkdir()
    for name, data in (("ca.crt", CA), ("admin.crt", CERT), ("admin.key", KEY), ("token", b"secret")):
        (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        # kind's and kubeadm's: everything as data
        (
            f"{{server: 'https://10.0.0.1:6443/', certificate-authority-data: {b64(CA)}}}",
            f"{{client-certificate-data: {b64(CERT)}, client-key-data: {b64(KEY)}}}",
        ),
        # this repository's local cluster: absolute files
        (
            "{server: 'https://127.0.0.1:6443', certificate-authority: '{F}/ca.crt'}",
            "{client-certificate: '{F}/admin.crt', client-key: '{F}/admin.key'}",
        ),
        # relative files: relative to the kubeconfig's folder
        (
            "{server: 'https://127.0.0.1:6443', certificate-authority: ca.crt}",
            "{client-certificate: admin.crt, client-key: admin.key}",
        ),
        ("{server: 'https://h:443', insecure-skip-tls-verify: true}", "{token: abc}"),
        (
            "{server: 'https://h:443', tls-server-name: api.lab, proxy-url: 'http://p:3128'}",
            "{tokenFile: token}",
        ),
        ("{server: 'http://localhost:8080'}", "{}"),
    ],
)
def test_the_same_connection_as_the_official_loader(
    files: Path, tmp_path: Path, cluster: str, user: str
) -> None:
    path = write(files, "config", cluster.replace("{F}", str(files)), user.replace("{F}", str(files)))
    assert ours(path, tmp_path) == theirs(path)


@pytest.mark.parametrize(
    "environment",
    [
        {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.1,.lab"},
        {"https_proxy": "http://proxy:3128"},
        {"http_proxy": "http://plain:80"},
        {"ALL_PROXY": "http://everything:1080"},
    ],
)
@pytest.mark.parametrize("server", ["https://10.0.0.1:6443", "https://api.lab:443", "https://elsewhere:6443"])
def test_the_environments_proxies_as_the_official_configuration_reads_them(
    files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], server: str
) -> None:
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = write(files, "config", f"{{server: '{server}'}}", "{token: abc}")
    assert ours(path, tmp_path) == theirs(path)
    # A proxy-url in the kubeconfig wins over the environment's, in both.
    path = write(files, "config", f"{{server: '{server}', proxy-url: 'http://named:8080'}}", "{token: abc}")
    assert ours(path, tmp_path) == theirs(path)


def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    first = tmp_path / "a"
    first.write_text(
        "current-context: lab\n"
        "contexts: [{name: lab, context: {cluster: one, user: me, namespace: team-a}}]\n"
        "clusters: [{name: one, cluster: {server: 'https://first'}}]\n"
    )
    second = tmp_path / "b"
    second.write_text(
        "current-context: other\n"
        "contexts: [{name: lab, context: {cluster: two}}, {name: other, context: {cluster: two}}]\n"
        "clusters: [{name: one, cluster: {server: 'https://second'}}, {name: two, cluster: {server: 'https://two'}}]\n"
        "users: [{name: me, user: {token: t}}]\n"
    )
    paths = kubeconfig.default_paths({"KUBECONFIG": f"{first}:{tmp_path / 'missing'}:{second}"})
    merged = kubeconfig.read(paths)
    chosen = merged.select()
    assert (chosen.context, chosen.namespace, chosen.server, chosen.user_name) == (
        "lab",
        "team-a",
        "https://first",
        "me",
    )
    assert merged.select("other").server == "https://two"
    assert merged.files == [str(first), str(second)]


def test_only_the_official_loader_reads_exec_plugins_and_auth_providers(tmp_path: Path) -> None:
    path = write(tmp_path, "config", "{server: 'https://h'}", "{exec: {command: get-token}}")
    selected = kubeconfig.read([str(path)]).select()
    assert selected.official_reason == "user 'u' authenticates with exec"
    document = selected.document()
    assert document["users"] == [{"name": "u", "user": {"exec": {"command": "get-token"}}}]
    with pytest.raises(ValueError, match="exec"):
        selected.apply(official_client.Configuration(), str)


@pytest.mark.parametrize(
    ("text", "context", "said"),
    [
        ("a: [", None, "is not YAML"),
        ("", None, "is empty"),
        ("- a\n", None, "is not a kubeconfig"),
        ("clusters: {c: 1}\n", None, "clusters is not a list"),
        ("contexts: [{context: {}}]\n", None, "an entry of contexts has no name"),
        ("contexts: []\n", None, "no current-context"),
        ("contexts: [{name: c, context: {cluster: x}}]\n", "c", "cluster 'x' of context 'c' not found"),
        ("contexts: []\n", "lab", "context 'lab' not found"),
        ("contexts: [{name: c, context: {cluster: 5}}]\n", "c", "context 'c': cluster is not a string"),
    ],
)
def test_a_malformed_kubeconfig_is_an_error_naming_the_field(
    tmp_path: Path, text: str, context: str | None, said: str
) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeconfigError, match="cannot use the kubeconfig") as raised:
        kubeconfig.read([str(path)]).select(context)
    assert said in raised.value.message


def test_a_missing_file_is_an_error_and_unreadable_data_names_the_user(files: Path, tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="none of"):
        kubeconfig.read([str(tmp_path / "nope")])
    with pytest.raises(KubeconfigError, match="cannot read"):
        kubeconfig.read([str(tmp_path / "nope")], explicit=True)
    path = write(files, "config", "{server: 'https://h'}", "{client-certificate-data: '%%'}")
    with pytest.raises(KubeconfigError, match="user 'u': client-certificate-data is not base64"):
        ours(path, tmp_path)
    path = write(files, "config", "{server: 'https://h'}", "{client-key: gone.key}")
    with pytest.raises(KubeconfigError, match=r"user 'u': client-key: cannot read .*gone\.key"):
        ours(path, tmp_path)


@pytest.mark.parametrize("skip", ["'false'", "'no'", "null", "0"])
def test_insecure_skip_tls_verify_must_be_a_boolean(files: Path, tmp_path: Path, skip: str) -> None:
    """A quoted "false" is a true value in Python: the official loader would skip TLS
    verification for it; kubectl refuses the file, and so does tfmw, naming the field."""
    path = write(
        files, "config", f"{{server: 'https://h:443', insecure-skip-tls-verify: {skip}}}", "{token: t}"
    )
    with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify is not true or false"):
        ours(path, tmp_path)
