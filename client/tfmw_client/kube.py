"""The connection to the API server, with plain JSON in and out.

Requests go over the standard library's HTTPS (tfmw_client.transport), or over the official
`kubernetes` client's REST client where a proxy is in the way (its no_proxy, SOCKS and proxy
TLS rules are the official client's). Why not the official REST client for every call: its
import alone (urllib3) took longer than all of `kubectl get` (docs/benchmarks.md, "The CLI's
start time"). The kubeconfig is read by tfmw_client.kubeconfig onto tfmw_client.connection;
the official `Configuration` and loaders, imported only then, serve the kubeconfigs tfmw does
not read itself (`exec`, auth providers, basic auth) and a pod's service account, and the
transport is given what they set. Objects are read and written as JSON dicts, as the API
serves them (the job is a custom resource, and reading a pod into a model costs more than
the call)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, urlencode

from tfmw_client import kubeconfig as kubeconfigs
from tfmw_client import names, render
from tfmw_client.connection import Connection
from tfmw_client.errors import ApiError, TfmwError
from tfmw_client.transport import Response, Timeout, Transport, TransportError, tls_context

Json = dict[str, Any]
Query = Sequence[tuple[str, str | int | bool]]
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
REQUEST_TIMEOUT = 30.0  # seconds, for every call that is not a stream
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "tfmw-cli"
MAX_PAGES = 10_000  # of a listing, 500 items each: a server whose pages never end is cut off
LOG_LINE_CAP = 64 * 1024  # bytes of a followed log line kept before it is printed in parts
ERROR_BODY_CAP = 500  # characters of an error body that is not a Status object


class PrivateFiles:
    """The kubeconfig's client certificate and key, in files only this user may read (a 0700
    folder, 0600 files made with O_EXCL and O_NOFOLLOW), for only as long as the TLS context
    takes to load them: both transports read them once, as they are made (ssl's
    load_cert_chain reads the files at call time), so a crash or SIGKILL later leaves no key
    on disk. `with`: the folder is removed on leaving, whatever happened."""

    def __init__(self) -> None:
        self.folder = ""

    def write(self, content: bytes) -> str:
        import tempfile

        if not self.folder:
            self.folder = tempfile.mkdtemp(prefix="tfmw-")  # mode 0700
        descriptor, path = tempfile.mkstemp(dir=self.folder)  # mode 0600, O_EXCL | O_NOFOLLOW
        with os.fdopen(descriptor, "wb") as file:
            file.write(content)
        return path

    def remove(self) -> None:
        import shutil

        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""

    def __enter__(self) -> PrivateFiles:
        return self

    def __exit__(self, *exception: object) -> None:
        self.remove()


def _official(name: str) -> ModuleType:
    """A module of the official client, imported only where it is used (tfmw_client.official)."""
    from tfmw_client import official

    return official.module(name)


def job_path(namespace: str | None, name: str = "") -> str:
    """/apis/tfmw.dev/v1alpha1[/namespaces/<ns>]/tfmwjobs[/<name>]; no namespace: all of them."""
    base = f"/apis/{names.GROUP}/{names.VERSION}"
    scoped = f"{base}/namespaces/{quote(namespace, safe='')}" if namespace else base
    path = f"{scoped}/{names.PLURAL}"
    return f"{path}/{quote(name, safe='')}" if name else path


def core_path(namespace: str, resource: str, name: str = "", subresource: str = "") -> str:
    """/api/v1/namespaces/<ns>/<resource>[/<name>[/<subresource>]]."""
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/{resource}"
    if name:
        path += f"/{quote(name, safe='')}"
    if subresource:
        path += f"/{subresource}"
    return path


def _decode(body: bytes) -> object:
    """The body's JSON value, or None when it is not JSON or nested too deeply to read."""
    try:
        return json.loads(body or b"{}")
    except (ValueError, RecursionError):
        return None


def _type_missing(status: int, document: object) -> bool:
    """A 404 for the resource type itself: the API server's plain "404 page not found" (no
    Status object), or a Status naming no kind; an absent object's Status names its kind."""
    if status != 404:
        return False
    if not isinstance(document, dict) or document.get("kind") != "Status":
        return True
    return not render.as_str(render.as_dict(document.get("details")).get("kind"))


def _status_error(status: int, body: bytes, path: str = "") -> ApiError:
    """The API server's Status object, or the body (escaped, cut short) when it is not one."""
    reason, message, fix = "", "", ""
    document = _decode(body)
    if isinstance(document, dict):
        reason = str(document.get("reason") or "")
        message = str(document.get("message") or "")
    else:  # a proxy's or load balancer's page: shown, never obeyed
        message = render.cut(render.escape_controls(body.decode("utf-8", "replace")), ERROR_BODY_CAP)
    type_missing = _type_missing(status, document)
    if status == 401:
        message = f"the API server refused your credentials (401 Unauthorized): {message}"
        fix = "log in again or refresh the kubeconfig's credentials; `kubectl auth whoami` shows who you are"
    elif type_missing and path.startswith(f"/apis/{names.GROUP}/"):
        message = f"the {names.GROUP} API is not served on this cluster (404 for {path})"
        fix = "is tfmw installed? `tfmw version` says what the cluster serves"
    return ApiError(status, reason, message, fix, type_missing)


def _unreachable(server: str, error: TransportError) -> TfmwError:
    return TfmwError(
        f"cannot reach the API server at {server}: {error}",
        "check that the cluster is up and that --kubeconfig and --context point at it "
        "(`kubectl cluster-info`)",
    )


def _utf8_boundary(data: bytearray, at: int) -> int:
    """`at`, moved back to the start of the UTF-8 character it falls in (at most 3 bytes)."""
    start = at
    while start > at - 3 and start > 0 and data[start] & 0xC0 == 0x80:
        start -= 1
    return start if start > 0 else at


def log_lines(chunks: Iterable[bytes], cap: int = LOG_LINE_CAP) -> Iterator[str]:
    """The lines of a log arriving in chunks. Each chunk is scanned once (a long line costs
    no more than its length), and a line longer than `cap` bytes comes in parts of at most
    `cap`, so that a program writing without newlines cannot fill the memory."""
    pending = bytearray()
    for chunk in chunks:
        scanned = len(pending)
        pending += chunk
        end = pending.rfind(b"\n", scanned)
        if end >= 0:
            yield from (line.decode("utf-8", "replace") for line in bytes(pending[:end]).split(b"\n"))
            del pending[: end + 1]
        while len(pending) > cap:
            cut = _utf8_boundary(pending, cap)
            yield pending[:cut].decode("utf-8", "replace")
            del pending[:cut]
    if pending:
        yield pending.decode("utf-8", "replace")


class OfficialTransport:
    """The official REST client (urllib3) as a Transport: for a connection through a proxy,
    whose rules (no_proxy, SOCKS, a proxy's own TLS) are the official client's to keep."""

    def __init__(self, configuration: Any) -> None:
        self._rest = _official("kubernetes.client.rest").RESTClientObject(configuration)
        self._server = configuration.host
        if configuration.cert_file:
            # Loaded now, not by urllib3 at each new connection: the files are removed once
            # the connection is set up (PrivateFiles). The whole TLS setting is the direct
            # path's (tls_context: the CA given or the system's, verification off when the
            # kubeconfig says so): urllib3 loads the system's CAs only into a context of its
            # own making, and refuses CERT_NONE on one that still checks host names.
            pools = self._rest.pool_manager.connection_pool_kw
            pools.pop("cert_file", None)
            pools.pop("key_file", None)
            pools["ssl_context"] = tls_context(configuration)

    def request(
        self, method: str, target: str, headers: Mapping[str, str], body: Any, timeout: Timeout
    ) -> Response:
        import urllib3

        try:
            response = self._rest.request(
                method, self._server + target, headers=dict(headers), body=body, _request_timeout=timeout
            ).response
        except urllib3.exceptions.HTTPError as error:
            raise TransportError(str(error)) from None
        except _official("kubernetes.client.exceptions").ApiException as error:
            raise TransportError(str(error.reason)) from None  # the REST client's own: TLS failed
        return Response(response.status, response, response.release_conn, (urllib3.exceptions.HTTPError,))

    def close(self) -> None:
        self._rest.close()


class Kube:
    """One API server, as a kubeconfig context (or the pod's own service account) reaches it:
    through tfmw_client.transport, or the official REST client where a proxy is in the way."""

    def __init__(
        self, kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None
    ) -> None:
        with PrivateFiles() as private:  # removed once the transport has read them
            configuration, context_namespace = self._load(kubeconfig, context, private.write)
            self.server: str = configuration.host
            self.namespace: str = namespace or context_namespace or "default"
            self._configuration = configuration
            try:
                self._transport: Transport | OfficialTransport = (
                    OfficialTransport(configuration) if configuration.proxy else Transport(configuration)
                )
            except (TransportError, OSError, ValueError, TypeError) as error:  # ssl.SSLError: OSError
                raise TfmwError(
                    f"cannot set up the connection to {self.server}: {error}",
                    "check the kubeconfig's server, certificate-authority and client certificate",
                ) from None

    @staticmethod
    def _load(
        kubeconfig: str | None, context: str | None, private_file: Callable[[bytes], str]
    ) -> tuple[Any, str]:
        """The connection as kubectl would make it: --kubeconfig, else $KUBECONFIG, else
        ~/.kube/config, else (in a pod) its service account; and the context's namespace.
        The connection is tfmw's (tfmw_client.connection) for what tfmw_client.kubeconfig
        reads, else the official Configuration its loaders fill."""
        paths = [kubeconfig] if kubeconfig else kubeconfigs.default_paths()
        have_file = bool(kubeconfig) or any(Path(p).expanduser().is_file() for p in paths)
        if not have_file and os.environ.get("KUBERNETES_SERVICE_HOST") and not context:
            configuration = _official("kubernetes.client.configuration").Configuration()
            incluster = _official("kubernetes.config.incluster_config")
            try:
                incluster.load_incluster_config(client_configuration=configuration)
            except _official("kubernetes.config.config_exception").ConfigException as error:
                raise TfmwError(f"cannot use the pod's service account: {error}") from None
            try:
                return configuration, IN_CLUSTER_NAMESPACE.read_text().strip()
            except OSError:
                return configuration, ""
        if not have_file:
            raise TfmwError(
                f"no kubeconfig found (looked at {os.pathsep.join(paths)})",
                "pass --kubeconfig FILE or set KUBECONFIG, as for kubectl",
            )
        selected = kubeconfigs.read(paths, explicit=bool(kubeconfig)).select(context)
        if not selected.official_reason:
            connection = Connection()
            selected.apply(connection, private_file)
            return connection, selected.namespace
        # exec plugins, auth providers, basic auth: the official loader, on the same context.
        configuration = _official("kubernetes.client.configuration").Configuration()
        loader_module = _official("kubernetes.config.kube_config")
        try:
            loader = loader_module.KubeConfigLoader(
                config_dict=selected.document(),
                active_context=selected.context,
                config_base_path=selected.user_folder,
            )
            loader.load_and_set(configuration)
        except _official("kubernetes.config.config_exception").ConfigException as error:
            raise kubeconfigs.KubeconfigError(str(error)) from None
        return configuration, selected.namespace

    # ---- requests ----

    def _read(self, response: Response) -> bytes:
        try:
            return response.data
        except TransportError as error:
            raise _unreachable(self.server, error) from None

    def close(self) -> None:
        self._transport.close()

    def _send(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: Timeout = REQUEST_TIMEOUT,
    ) -> Response:
        """The response, its body not read yet; an error status raised as ApiError."""
        headers = {"Accept": "application/json, */*", "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = content_type
        # The token, refreshed first where its loader set a hook (the pod's rotated token,
        # an exec plugin's expired one): what ApiClient does before each call.
        bearer = self._configuration.auth_settings().get("BearerToken")
        if bearer and bearer.get("value"):
            headers[bearer["key"]] = bearer["value"]
        encoded = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in query]
        target = path + (f"?{urlencode(encoded, quote_via=quote)}" if encoded else "")
        try:
            response = self._transport.request(method, target, headers, body, timeout)
            if 300 <= response.status <= 399:
                response.close()
                raise TfmwError(
                    f"the API server at {self.server} answered {method} {path} with a redirect "
                    f"({response.status}) to {response.header('Location') or 'nowhere'}, "
                    "which tfmw does not follow",
                    "point the kubeconfig's server at the API server itself",
                )
            if not 200 <= response.status <= 299:
                raise _status_error(response.status, response.data, path)
        except TransportError as error:
            raise _unreachable(self.server, error) from None
        return response

    def request(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Json:
        response = self._send(method, path, query, body, content_type)
        try:
            document = json.loads(self._read(response) or b"{}")
        except ValueError as error:
            raise TfmwError(f"the API server's answer to {method} {path} is not JSON: {error}") from None
        except RecursionError:
            # One object nested thousands of levels deep (a tenant's preserved-unknown field)
            # is beyond Python's JSON reader: an error naming the answer, not a traceback.
            raise TfmwError(
                f"the API server's answer to {method} {path} is nested too deeply to read "
                "(an object in it holds JSON nested more than about 1,000 levels deep)",
                "read the objects one by one (or with kubectl) to find it, and have its owner fix it",
            ) from None
        if not isinstance(document, dict):
            raise TfmwError(f"the API server's answer to {method} {path} is not an object")
        return document

    def get(self, path: str, query: Query = ()) -> Json:
        return self.request("GET", path, query)

    def get_or_none(self, path: str, query: Query = ()) -> Json | None:
        try:
            return self.get(path, query)
        except ApiError as error:
            if error.not_found:
                return None
            raise

    def create(self, path: str, body: Json, dry_run: bool = False) -> Json:
        return self.request("POST", path, [("dryRun", "All")] if dry_run else [], body)

    def patch(self, path: str, body: Json) -> Json:
        return self.request("PATCH", path, body=body, content_type=MERGE_PATCH)

    def delete(self, path: str, body: Json | None = None) -> Json:
        return self.request("DELETE", path, body=body)

    def items(self, path: str, selector: str = "", field_selector: str = "") -> list[Json]:
        """Every item of a list, page by page (500 at a time); a server that repeats a page's
        `continue` token, or whose pages never end (MAX_PAGES), is an error, not a loop."""
        query: list[tuple[str, str | int | bool]] = [("limit", 500)]
        if selector:
            query.append(("labelSelector", selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        found: list[Json] = []
        token = ""
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = self.get(path, [*query, ("continue", token)] if token else query)
            found.extend(item for item in render.as_list(page.get("items")) if isinstance(item, dict))
            token = render.as_str(render.as_dict(page.get("metadata")).get("continue"))
            if not token:
                return found
            if token in seen:
                raise TfmwError(
                    f"the API server's listing of {path} repeats a page (its continue token), "
                    "so it would never end",
                    "try again; if it persists, the API server (or a proxy before it) is at fault",
                )
            seen.add(token)
        raise TfmwError(
            f"the API server's listing of {path} did not end after {MAX_PAGES} pages",
            "list a narrower set (one namespace, not -A)",
        )

    # ---- logs ----

    def log(self, namespace: str, pod: str, container: str = "", tail: int | None = None) -> str:
        query: list[tuple[str, str | int | bool]] = []
        if container:
            query.append(("container", container))
        if tail is not None:
            query.append(("tailLines", tail))
        response = self._send("GET", core_path(namespace, "pods", pod, "log"), query)
        return self._read(response).decode("utf-8", "replace")

    def follow_log(
        self, namespace: str, pod: str, container: str = "", tail: int | None = None
    ) -> Iterator[str]:
        """The container's log lines as they are written, until the container ends."""
        query: list[tuple[str, str | int | bool]] = [("follow", True)]
        if container:
            query.append(("container", container))
        if tail is not None:
            query.append(("tailLines", tail))
        response = self._send("GET", core_path(namespace, "pods", pod, "log"), query, timeout=(10.0, None))
        chunks = response.chunks(4096)
        try:
            yield from log_lines(chunks)
        except TransportError as error:
            raise _unreachable(self.server, error) from None
        finally:
            chunks.close()

    def can_i(self, namespace: str, verb: str, resource: str, subresource: str = "") -> bool | None:
        """A SelfSubjectAccessReview (what `kubectl auth can-i` asks); None when it cannot be asked."""
        review: Mapping[str, Any] = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "resource": resource,
                    "subresource": subresource,
                }
            },
        }
        try:
            answer = self.request(
                "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=dict(review)
            )
        except ApiError:
            return None
        return bool((answer.get("status") or {}).get("allowed"))
