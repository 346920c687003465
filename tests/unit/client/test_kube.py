"""tfmw_client.kube against hostile or broken answers: JSON nested too deeply, listings whose
pages never end, error bodies that are not Status objects, and log lines without an end."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, cast

import pytest
from tfmw_client import kube as kube_module
from tfmw_client.errors import ApiError, TfmwError
from tfmw_client.kube import Kube, Query, _status_error, log_lines
from tfmw_client.transport import Response, Timeout

JOBS = "/apis/tfmw.dev/v1alpha1/namespaces/team/tfmwjobs"


class Answering(Kube):
    """A Kube whose API server answers each request with the next of `bodies`."""

    def __init__(self, *bodies: bytes) -> None:
        self.server = "https://api.lab"
        self.bodies = list(bodies)
        self.queries: list[list[tuple[str, str | int | bool]]] = []

    def _send(
        self,
        method: str,
        path: str,
        query: Query = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: Timeout = kube_module.REQUEST_TIMEOUT,
    ) -> Response:
        self.queries.append(list(query))
        return cast(Response, None)

    def _read(self, response: Response) -> bytes:
        return self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]


def page(token: str, *names: str) -> bytes:
    items = [{"metadata": {"name": n}} for n in names]
    return json.dumps({"items": items, "metadata": {"continue": token}}).encode()


def test_an_answer_nested_too_deeply_is_an_error_naming_it_not_a_traceback() -> None:
    deep = b'{"items": [{"spec": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}]}"
    with pytest.raises(TfmwError) as refused:
        Answering(deep).items(JOBS)
    assert "nested too deeply" in refused.value.message and JOBS in refused.value.message


def test_a_listing_whose_server_repeats_its_continue_token_ends_with_an_error() -> None:
    kube = Answering(page("a", "x"), page("b", "y"), page("a", "z"))
    with pytest.raises(TfmwError) as refused:
        kube.items(JOBS)
    assert "repeats a page" in refused.value.message
    assert len(kube.queries) == 3


def test_a_listing_whose_pages_never_end_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_module, "MAX_PAGES", 5)
    kube = Answering(*(page(f"t{i}", f"j{i}") for i in range(10)))
    with pytest.raises(TfmwError) as refused:
        kube.items(JOBS)
    assert "did not end after 5 pages" in refused.value.message
    assert len(kube.queries) == 5


def test_a_listing_reads_every_page_until_the_token_ends() -> None:
    kube = Answering(page("a", "x"), page("", "y"))
    assert [i["metadata"]["name"] for i in kube.items(JOBS)] == ["x", "y"]
    assert ("continue", "a") in kube.queries[1]


def test_a_404_without_a_status_object_says_the_api_is_not_served() -> None:
    error = _status_error(404, b"404 page not found", JOBS)
    assert error.type_missing and not error.not_found
    assert "the tfmw.dev API is not served on this cluster" in error.message
    assert "tfmw version" in error.fix


def test_a_404_status_with_no_kind_is_the_type_missing_and_one_naming_a_kind_the_object() -> None:
    no_kind = json.dumps({"kind": "Status", "reason": "NotFound", "details": {}}).encode()
    assert _status_error(404, no_kind, JOBS).type_missing
    absent = {"kind": "Status", "reason": "NotFound", "message": 'tfmwjobs "x" not found'}
    gone = _status_error(404, json.dumps({**absent, "details": {"kind": "tfmwjobs"}}).encode(), JOBS)
    assert gone.not_found and gone.message == 'tfmwjobs "x" not found'


def test_a_proxy_s_error_page_is_escaped_and_cut_short() -> None:
    error = _status_error(502, b"<html>\x1b]0;owned\x07" + b"x" * 5000, "/api/v1")
    assert isinstance(error, ApiError) and error.status == 502
    assert "\x1b" not in error.message and "\x07" not in error.message and "^[]0;owned" in error.message
    assert len(error.message) <= kube_module.ERROR_BODY_CAP


def chunked(data: bytes, size: int = 4096) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def test_log_lines_are_split_across_chunks_and_the_last_unended_one_kept() -> None:
    assert list(log_lines([b"fir", b"st\nsec", b"ond\n\nthi", b"rd"])) == ["first", "second", "", "third"]


def test_a_log_line_without_an_end_comes_in_parts_no_longer_than_the_cap() -> None:
    data = "é".encode() * (2 * 1024 * 1024)  # 4 MiB, no newline, two bytes a character
    parts = list(log_lines(chunked(data), cap=64 * 1024))
    assert all(len(p.encode()) <= 64 * 1024 for p in parts)
    assert "".join(parts) == data.decode()  # never cut inside a character


def test_private_files_are_this_user_s_alone_and_gone_on_leaving(tmp_path: Any) -> None:
    import stat
    import tempfile

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(tmp_path))
        with kube_module.PrivateFiles() as private:
            path = private.write(b"-----BEGIN PRIVATE KEY-----\n")
            folder = private.folder
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert os.path.dirname(path) == folder
            with open(path, "rb") as file:
                assert file.read().startswith(b"-----")
    assert not os.path.exists(folder) and list(tmp_path.iterdir()) == []


def test_private_files_are_removed_when_setting_up_fails(tmp_path: Any) -> None:
    import tempfile

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(tmp_path))
        with pytest.raises(RuntimeError), kube_module.PrivateFiles() as private:
            private.write(b"key")
            raise RuntimeError("the context could not be made")
    assert list(tmp_path.iterdir()) == []
