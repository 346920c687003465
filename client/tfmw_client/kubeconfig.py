"""Kubeconfig files, read and merged as kubectl reads them, and the connection they name.

Why not the official loader (`kubernetes.config.kube_config`) every time: importing that
module imports `ApiClient` (and with it pydantic and the models' package), oauthlib and
requests, for auth providers most kubeconfigs do not use; that is most of what `tfmw get`
spent starting (docs/benchmarks.md, "The CLI's start time"). So the common kubeconfigs (a
server with its CA, a bearer token or token file, a client certificate and key, no user) are
read here, onto the official client's own `Configuration`; any other way to authenticate
(`exec`, `auth-provider`, `username`/`password`) goes to the official `KubeConfigLoader`,
given the very same merged document (`Selected.official_reason`). A unit test checks that
both give the same connection for every kubeconfig read here.

kubectl's rules (client-go's `ClientConfigLoadingRules`), which tfmw follows whichever reads
the user's credentials: `--kubeconfig` is the one file; else every file of `$KUBECONFIG`
(missing ones skipped), else `~/.kube/config`; a cluster, user or context of a name is the
first file's that defines it, and `current-context` the first file's that sets one; relative
paths in a file are relative to that file's folder. Everything read may be malformed: an
error names the file or the entry.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfmw_client import plain_yaml
from tfmw_client.errors import TfmwError

Json = dict[str, Any]
SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
# Fields that name files, by section: resolved against the folder of the file that holds them.
PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}
# Ways to authenticate that only the official loader knows: with any of them, it reads them.
OFFICIAL_ONLY = ("exec", "auth-provider", "username", "password")
FIX = "check --kubeconfig and --context (`kubectl config get-contexts` lists the contexts)"


class KubeconfigError(TfmwError):
    def __init__(self, message: str) -> None:
        super().__init__(f"cannot use the kubeconfig: {message}", FIX)


def default_paths(environment: Mapping[str, str] | None = None) -> list[str]:
    """$KUBECONFIG's files (os.pathsep between them), else ~/.kube/config."""
    env = os.environ if environment is None else environment
    listed = [p for p in (env.get("KUBECONFIG") or "").split(os.pathsep) if p]
    return listed or [os.path.expanduser("~/.kube/config")]


@dataclass
class Entry:
    """One cluster, user or context: its fields, and the folder of the file it came from."""

    body: Json
    folder: str


@dataclass
class Merged:
    """The kubeconfig files merged by kubectl's rules."""

    files: list[str]
    current_context: str = ""
    clusters: dict[str, Entry] = field(default_factory=dict)
    users: dict[str, Entry] = field(default_factory=dict)
    contexts: dict[str, Entry] = field(default_factory=dict)

    def select(self, context: str | None = None) -> Selected:
        """The context to use (`context`, else the current one) with its cluster and user."""
        name = context or self.current_context
        if not name:
            raise KubeconfigError(f"no context named and no current-context in {', '.join(self.files)}")
        chosen = self.contexts.get(name)
        if chosen is None:
            raise KubeconfigError(f"context {name!r} not found in {', '.join(self.files)}")
        cluster_name = _text(chosen.body.get("cluster"), f"context {name!r}: cluster")
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise KubeconfigError(f"cluster {cluster_name!r} of context {name!r} not found")
        user_name = _text(chosen.body.get("user"), f"context {name!r}: user")
        # A context without a user, or naming one that is not there, is anonymous (as the
        # official loader has it).
        user = self.users.get(user_name) if user_name else None
        return Selected(
            context=name,
            namespace=_text(chosen.body.get("namespace"), f"context {name!r}: namespace"),
            cluster=cluster,
            user=user,
            cluster_name=cluster_name,
            user_name=user_name if user is not None else "",
        )


@dataclass
class Selected:
    """A context, its cluster and its user, ready to set on a `Configuration`."""

    context: str
    namespace: str
    cluster: Entry
    user: Entry | None
    cluster_name: str
    user_name: str

    @property
    def server(self) -> str:
        server = _text(self.cluster.body.get("server"), f"cluster {self.cluster_name!r}: server")
        if not server:
            raise KubeconfigError(f"cluster {self.cluster_name!r} has no server")
        return server.rstrip("/")

    @property
    def official_reason(self) -> str:
        """Why only the official loader can read this user's credentials ("": it need not)."""
        body = self.user.body if self.user is not None else {}
        found = [key for key in OFFICIAL_ONLY if key in body]
        return f"user {self.user_name!r} authenticates with {found[0]}" if found else ""

    def document(self) -> Json:
        """A kubeconfig of this context alone, with absolute paths: what the official loader reads."""
        user = [{"name": self.user_name, "user": self.user.body}] if self.user is not None else []
        context: Json = {"cluster": self.cluster_name, "namespace": self.namespace}
        if self.user is not None:
            context["user"] = self.user_name
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": self.context,
            "clusters": [{"name": self.cluster_name, "cluster": self.cluster.body}],
            "users": user,
            "contexts": [{"name": self.context, "context": context}],
        }

    @property
    def user_folder(self) -> str:
        """Where an `exec` plugin runs (the official loader's base path): its file's folder."""
        return self.user.folder if self.user is not None else self.cluster.folder

    def apply(self, configuration: Any, private_file: Callable[[bytes], str]) -> None:
        """Set the connection on the official client's Configuration, as its KubeConfigLoader
        would: the server, and for https the CA, the client certificate and key; the token;
        insecure-skip-tls-verify, tls-server-name and proxy-url. `private_file` keeps bytes
        in a file of the caller's (urllib3 reads client certificates from files only)."""
        if self.official_reason:
            raise ValueError(f"apply() cannot read this user: {self.official_reason}")
        cluster, user = self.cluster.body, self.user.body if self.user is not None else {}
        where = f"cluster {self.cluster_name!r}"
        configuration.host = self.server
        if configuration.host.startswith("https"):
            authority = _data_or_file(cluster, "certificate-authority", where)
            if authority is not None:
                configuration.ca_cert_data = authority.decode("utf-8", "replace")
            who = f"user {self.user_name!r}"
            certificate = _data_or_file(user, "client-certificate", who)
            key = _data_or_file(user, "client-key", who)
            if certificate is not None:
                configuration.cert_file = private_file(certificate)
            if key is not None:
                configuration.key_file = private_file(key)
        token = _text(user.get("token"), f"user {self.user_name!r}: token")
        if not token and user.get("tokenFile"):
            token = _read(str(user["tokenFile"]), f"user {self.user_name!r}: tokenFile").decode().strip()
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"
        if "insecure-skip-tls-verify" in cluster:
            skip = cluster["insecure-skip-tls-verify"]
            # A boolean, as client-go requires: the official loader's `not "false"` would turn
            # verification off for a quoted "false".
            if type(skip) is not bool:
                raise KubeconfigError(f"{where}: insecure-skip-tls-verify is not true or false, got {skip!r}")
            configuration.verify_ssl = not skip
        if cluster.get("tls-server-name"):
            configuration.tls_server_name = _text(cluster["tls-server-name"], f"{where}: tls-server-name")
        if cluster.get("proxy-url"):
            configuration.proxy = _text(cluster["proxy-url"], f"{where}: proxy-url")


def read(paths: Sequence[str], explicit: bool = False) -> Merged:
    """The files merged by kubectl's rules; `explicit` (--kubeconfig): the file must exist."""
    merged = Merged(files=[])
    for given in paths:
        path = os.path.expanduser(given)
        if not explicit and not os.path.exists(path):
            continue
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise KubeconfigError(f"cannot read {path}: {error.strerror}") from None
        document = _parse(path, text)
        if document is None:
            raise KubeconfigError(f"{path} is empty")
        if not isinstance(document, dict):
            raise KubeconfigError(f"{path} is not a kubeconfig (a mapping)")
        merged.files.append(path)
        folder = os.path.dirname(os.path.abspath(path))
        if not merged.current_context and document.get("current-context"):
            merged.current_context = _text(document["current-context"], f"{path}: current-context")
        for plural, singular in SECTIONS:
            items = document.get(plural) or []
            if not isinstance(items, list):
                raise KubeconfigError(f"{path}: {plural} is not a list")
            for item in items:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise KubeconfigError(f"{path}: an entry of {plural} has no name")
                body = item.get(singular) or {}
                if not isinstance(body, dict):
                    raise KubeconfigError(f"{path}: {singular} {item['name']!r} is not a mapping")
                entries: dict[str, Entry] = getattr(merged, plural)
                entries.setdefault(item["name"], Entry(_absolute(body, singular, folder), folder))
    if not merged.files:
        raise KubeconfigError(f"none of {', '.join(paths)} exists")
    return merged


def _parse(path: str, text: str) -> Any:
    """The YAML document: read by tfmw_client.plain_yaml where it can (PyYAML's import was a
    tenth of `tfmw get`'s start), else by PyYAML's safe loader, libyaml's where PyYAML has it
    (0.3 against 2.4 ms for a 400-byte kubeconfig on the busy VM); the same value either way."""
    document = plain_yaml.load(text)
    if document is not plain_yaml.DECLINED:
        return document
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader, C or Python
    except yaml.YAMLError as error:
        raise KubeconfigError(f"{path} is not YAML: {error}") from None


def _absolute(body: Json, section: str, folder: str) -> Json:
    resolved = dict(body)
    for key in PATH_FIELDS.get(section, ()):
        value = resolved.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            resolved[key] = os.path.normpath(os.path.join(folder, os.path.expanduser(value)))
    return resolved


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeconfigError(f"{what} is not a string")
    return value


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise KubeconfigError(f"{what}: cannot read {path}: {error.strerror}") from None


def _data_or_file(body: Json, key: str, where: str) -> bytes | None:
    """`<key>-data` (base64), else the file `<key>`, as the official FileOrData prefers."""
    data = body.get(f"{key}-data")
    if data:
        try:
            encoded = "".join(_text(data, f"{where}: {key}-data").split())  # lines folded in YAML
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise KubeconfigError(f"{where}: {key}-data is not base64") from None
    path = body.get(key)
    if path:
        return _read(_text(path, f"{where}: {key}"), f"{where}: {key}")
    return None
