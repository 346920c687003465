"""Submitting a job (tfmw_client.sdk.Client._create) when the answer to the job's creation
is lost: the job found under its name is taken as the one just made only when it names, by
UID, the ConfigMap made for it; otherwise nothing of someone else's is touched."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from tfmw_client import names
from tfmw_client.errors import ApiError, TfmwError
from tfmw_client.sdk import Client, Logs
from unit.client.jobs import failed, pod, running

JOBS = "/apis/tfmw.dev/v1alpha1/namespaces/team/tfmwjobs"
CONFIGMAPS = "/api/v1/namespaces/team/configmaps"


class Server(BaseHTTPRequestHandler):
    """An API server that keeps what it is given and loses the answer to a job's creation."""

    protocol_version = "HTTP/1.1"
    objects: ClassVar[dict[str, Any]] = {}
    unserved: ClassVar[bool] = False  # no CRD: every tfmw.dev path is the plain 404 page
    calls: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, document: Any) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

    def do_POST(self) -> None:
        Server.calls.append(f"POST {self.path}")
        made = self._body()
        path = f"{self.path}/{made['metadata']['name']}"
        if path in Server.objects:
            self._answer(409, {"kind": "Status", "reason": "AlreadyExists", "message": "exists"})
            return
        made["metadata"]["uid"] = f"uid-{len(Server.objects)}"
        Server.objects[path] = made
        if self.path == JOBS:
            self.close_connection = True  # made, and the answer lost
            return
        self._answer(201, made)

    def do_GET(self) -> None:
        Server.calls.append(f"GET {self.path}")
        if Server.unserved and self.path.startswith("/apis/tfmw.dev/"):
            page = b"404 page not found\n"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        found = Server.objects.get(self.path)
        missing = {"kind": "Status", "reason": "NotFound", "details": {"kind": "tfmwjobs"}}
        self._answer(200, found) if found else self._answer(404, missing)

    def do_PATCH(self) -> None:
        Server.calls.append(f"PATCH {self.path}")
        Server.objects[self.path]["metadata"].update(self._body()["metadata"])
        self._answer(200, Server.objects[self.path])

    def do_DELETE(self) -> None:
        Server.calls.append(f"DELETE {self.path}")
        self._body()  # read, so that the kept-alive connection's next request is read whole
        if Server.objects.pop(self.path, None) is None:
            self._answer(404, {"kind": "Status", "reason": "NotFound", "details": {"kind": "tfmwjobs"}})
            return
        self._answer(200, {"kind": "Status"})


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    Server.objects.clear()
    Server.calls.clear()
    Server.unserved = False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{httpd.server_address[1]}'}}}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u, namespace: team}}]\n"
    )
    yield Client(kubeconfig=str(config))
    httpd.shutdown()
    httpd.server_close()


def _objects() -> tuple[Any, Any]:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "mnist-code", "namespace": "team"},
    }
    job = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "mnist", "namespace": "team"},
    }
    return configmap, job


def test_a_job_made_though_its_answer_was_lost_is_taken_as_made(client: Client) -> None:
    submission = client._create(*_objects())
    job = Server.objects[f"{JOBS}/mnist"]
    configmap = Server.objects[f"{CONFIGMAPS}/mnist-code"]
    assert job["metadata"]["annotations"][names.PROGRAM_UID] == configmap["metadata"]["uid"]
    assert configmap["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert submission.name == "mnist"
    assert not any(call.startswith("DELETE") for call in Server.calls)


def test_a_namesake_job_that_is_not_this_one_is_left_alone(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    configmap, job = _objects()
    # Someone's job of that name appears between the look and the creation (no 409 here:
    # the creation's answer is lost), naming another program.
    someone = {
        **job,
        "metadata": {**job["metadata"], "uid": "theirs", "annotations": {names.PROGRAM_UID: "x"}},
    }
    original = Server.do_POST

    def post_then_replace(handler: Server) -> None:
        original(handler)
        if handler.path == JOBS:
            Server.objects[f"{JOBS}/mnist"] = someone

    monkeypatch.setattr(Server, "do_POST", post_then_replace)
    with pytest.raises(TfmwError, match="cannot reach the API server"):
        client._create(configmap, job)
    assert Server.objects[f"{JOBS}/mnist"] is someone  # not deleted
    assert f"{CONFIGMAPS}/mnist-code" not in Server.objects  # ours, removed again


def test_when_the_look_fails_too_the_creation_s_own_error_is_told(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def get_dropped(handler: Server) -> None:
        Server.calls.append(f"GET {handler.path}")
        handler.close_connection = True  # no answer to the look either

    monkeypatch.setattr(Server, "do_GET", get_dropped)
    with pytest.raises(TfmwError, match=r"the POST may have been carried out") as told:
        client._create(*_objects())
    assert f"GET {JOBS}/mnist" in Server.calls and "POST" in told.value.message


class Listing:
    """A Kube that has one job, and records the listings asked of it (it has none)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []

    def get_or_none(self, path: str) -> Any:
        return {"metadata": {"name": "mnist", "namespace": "team", "uid": "uid-1"}}

    def items(self, path: str, selector: str = "", field_selector: str = "") -> list[Any]:
        self.asked.append((path, selector, field_selector))
        return []


def test_events_are_only_this_job_s_not_an_earlier_namesake_s() -> None:
    client = Client.__new__(Client)
    listing = Listing()
    client.kube, client.namespace = listing, "team"  # type: ignore[assignment]
    client.describe("mnist")
    assert (
        listing.asked[1][2]
        == "involvedObject.name=mnist,involvedObject.kind=TFMultiWorkerJob,involvedObject.uid=uid-1"
    )


def test_saved_log_names_are_escaped_in_the_prefix() -> None:
    found = Logs("mnist", 0, False, [("worker-0", "a\n"), ("x\x1b[2Jy", "b\n")])
    assert found.text() == "[worker-0] a\n[x^[[2Jy] b"


def test_a_job_that_is_not_there_is_a_404_api_error(client: Client) -> None:
    with pytest.raises(ApiError) as deleted:
        client.delete("nothing")
    assert deleted.value.not_found
    with pytest.raises(ApiError) as read:
        client.get("nothing")
    assert read.value.not_found


def test_without_the_crd_get_and_describe_say_the_api_is_not_served(client: Client) -> None:
    Server.unserved = True
    for call in (lambda: client.list_jobs(), lambda: client.get("mnist")):
        with pytest.raises(ApiError) as raised:
            call()
        assert "the tfmw.dev API is not served on this cluster" in raised.value.message
        assert "not found" not in raised.value.message and "tfmw version" in raised.value.fix


def test_saved_log_names_are_escaped_in_the_hint_of_what_the_attempt_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tfmw_client import logs as logs_module

    job = {"metadata": {"name": "mnist", "namespace": "team"}, "status": {"phase": "Failed"}}
    saved = SimpleNamespace(folder_exists=True, listing={"x\x1b[2J.log": 1}, files={})
    monkeypatch.setattr(Client, "_log_plan", lambda self, name, selection, namespace: (job, 0, []))
    monkeypatch.setattr(logs_module, "read_saved", lambda *args: saved)
    monkeypatch.setattr(logs_module, "choose_saved", lambda *args: [])
    client = Client.__new__(Client)
    client.kube = None  # type: ignore[assignment]  # read_saved, which would use it, is replaced
    with pytest.raises(TfmwError) as raised:
        client.logs("mnist", worker=3)
    assert raised.value.fix == "logs/attempt-0/ holds: x^[[2J.log"


@pytest.mark.parametrize("name", ["..", ".", "a%2Fb", "a/b", "Mnist", "x" * 55])
def test_a_job_name_no_job_can_have_is_refused_before_any_request(client: Client, name: str) -> None:
    calls: list[Any] = [
        lambda: client.get(name),
        lambda: client.describe(name),
        lambda: client.delete(name),
        lambda: client.wait(name, display=False, timeout=0),
        lambda: client.logs(name),
        lambda: client.pods(name),
    ]
    for call in calls:
        with pytest.raises(TfmwError, match=r"the job name .* is not valid") as raised:
            call()
        assert "DNS-1035 label" in raised.value.fix
    assert Server.calls == []


@pytest.mark.parametrize("namespace", ["..", ".", "a/b", "Team", "x" * 64])
def test_a_namespace_that_cannot_be_one_is_refused_before_any_request(client: Client, namespace: str) -> None:
    with pytest.raises(TfmwError, match=r"the namespace .* is not valid") as raised:
        client.get("mnist", namespace)
    assert "DNS-1123 label" in raised.value.fix
    client.namespace = namespace  # as a kubeconfig's context may name it
    for call in (lambda: client.list_jobs(), lambda: client.delete("mnist")):
        with pytest.raises(TfmwError, match=r"the namespace .* is not valid"):
            call()
    assert Server.calls == []


def test_a_bad_operator_namespace_setting_breaks_only_what_reads_it(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFMW_OPERATOR_NAMESPACE", "Not/A_Namespace")
    made = Client(kubeconfig=str(tmp_path / "kubeconfig"))  # the fixture's: no refusal yet
    with pytest.raises(TfmwError, match=r"the namespace 'Not/A_Namespace' is not valid"):
        made.operator_version()
    assert Server.calls == []


class Namespace:
    """A Kube holding the job `mnist`, its pods by label (a stranger's among them), and logs."""

    def __init__(self, pods: list[Any]) -> None:
        self.pods = pods
        self.read: list[str] = []

    def get_or_none(self, path: str) -> Any:
        if path == f"{JOBS}/mnist":
            return running("mnist") | {"metadata": {**running("mnist")["metadata"], "namespace": "team"}}
        found = [p for p in self.pods if path.endswith(f"/pods/{p['metadata']['name']}")]
        return found[0] if found else None

    def items(self, path: str, selector: str = "", field_selector: str = "") -> list[Any]:
        return self.pods if path.endswith("/pods") else []

    def log(self, namespace: str, pod: str, container: str = "", tail: int | None = None) -> str:
        self.read.append(pod)
        return f"the log of {pod}\n"

    def follow_log(self, namespace: str, pod: str, container: str = "", tail: int | None = None) -> Any:
        self.read.append(pod)
        return iter([f"followed {pod}"])


def _stranger(stem: str, attempt: int = 1, **reference: Any) -> Any:
    """A pod someone made with the labels of job mnist's pod, copied."""
    made = pod("mnist", stem, attempt)
    made["metadata"]["ownerReferences"] = [reference] if reference else []
    return made


def _client_of(kube: Any) -> tuple[Client, list[str]]:
    client = Client.__new__(Client)
    client.kube, client.namespace = kube, "team"
    warnings: list[str] = []
    client.on_warning = warnings.append
    return client, warnings


@pytest.mark.parametrize(
    "reference",
    [
        {},  # no owner at all
        {"kind": "TFMultiWorkerJob", "name": "mnist", "uid": "someone-else", "controller": True},
        {"kind": "TFMultiWorkerJob", "name": "mnist", "uid": "uid-mnist", "controller": False},
        {"kind": "TFMultiWorkerJob", "name": "mnist", "uid": "uid-mnist"},
    ],
)
def test_logs_come_only_from_pods_the_job_controls_by_uid(reference: Any) -> None:
    # The stranger claims to be attempt 1's chief; the job's own chief is worker-0.
    kube = Namespace([_stranger("chief-0", **reference), pod("mnist", "worker-0", 1)])
    client, warnings = _client_of(kube)
    found = client.logs("mnist")
    assert found.live and found.entries == [("worker-0", "the log of mnist-worker-0\n")]
    assert kube.read == ["mnist-worker-0"]
    assert warnings == ["left out pod mnist-chief-0: it has job mnist's labels, but the job does not own it"]
    assert list(client.follow_logs("mnist", all=True)) == [("worker-0", "followed mnist-worker-0")]
    assert len(warnings) == 2  # said once for each look at the pods


def test_describe_shows_only_the_job_s_own_pods_and_says_which_it_left_out() -> None:
    client, warnings = _client_of(Namespace([_stranger("worker-7"), pod("mnist", "worker-0", 1)]))
    shown = client.describe("mnist")
    assert "mnist-worker-0" in shown and "mnist-worker-7" not in shown
    assert len(warnings) == 1 and "mnist-worker-7" in warnings[0]


def test_the_last_lines_of_a_failed_job_are_not_read_from_a_namesake_pod() -> None:
    job = failed("mnist") | {"metadata": {"name": "mnist", "namespace": "team", "uid": "uid-mnist"}}
    squatter = _stranger("worker-0", 0)
    kube = Namespace([squatter])
    client, _ = _client_of(kube)
    assert client.last_log_lines(job)[0] == "its status message" and kube.read == []
    kube.pods = [pod("mnist", "worker-0", 0)]
    assert client.last_log_lines(job) == ("pod mnist-worker-0", ["the log of mnist-worker-0"])
