"""The watch-backed view: what it holds after events, our own writes, and a re-list."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from unittest.mock import patch

import kopf
import pytest
from aiohttp import web
from loopback import kube_serving
from tfmw_operator.api.objects import Key, cut_spec_reason
from tfmw_operator.core.claim_checks import Claim
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube import client as client_module
from tfmw_operator.kube import informer as informer_module
from tfmw_operator.kube.client import Kube
from tfmw_operator.kube.informer import Informer, LatestJobs, Tombstones, ignore_changes, own_name

Json = dict[str, Any]
JOB = ("ns", "job")


def pod(name: str, version: int, deleting: bool = False) -> Json:
    meta: Json = {
        "name": name,
        "namespace": "ns",
        "resourceVersion": str(version),
        "uid": f"uid-{name}-{version}",
        "labels": {"tfmw.dev/job-name": "job", "tfmw.dev/replica-index": "0", "tfmw.dev/attempt": "0"},
        "ownerReferences": [{"uid": "job-uid"}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": "Pending"}}


def view() -> tuple[Informer[Owned], list[tuple[str, str]]]:
    told: list[tuple[str, str]] = []
    return Informer(None, "/api/v1/pods", Owned.pod_of, told.append), told  # type: ignore[arg-type]


def names(informer: Informer[Owned]) -> dict[str, bool]:
    return {o.name: bool(o.pod and o.pod.deleting) for o in informer.of_job(JOB)}


def test_events_are_kept_by_job_and_each_change_tells_the_job() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("MODIFIED", pod("job-worker-0", 6, deleting=True))
    assert names(informer) == {"job-worker-0": True}
    informer._apply("DELETED", pod("job-worker-0", 7, deleting=True))
    assert names(informer) == {}
    assert told == [JOB, JOB, JOB]


def test_a_change_the_reduced_view_does_not_show_tells_nobody_but_its_version_is_kept() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    heartbeat = pod("job-worker-0", 6)
    heartbeat["metadata"]["uid"] = "uid-job-worker-0-5"  # the same pod
    heartbeat["metadata"]["annotations"] = {"kubelet": "status written again"}
    informer._apply("MODIFIED", heartbeat)
    assert told == [JOB]
    informer._apply("MODIFIED", pod("job-worker-0", 6, deleting=True))  # not newer than what is held
    assert names(informer) == {"job-worker-0": False}
    informer._apply("MODIFIED", pod("job-worker-0", 7, deleting=True))
    assert told == [JOB, JOB] and names(informer) == {"job-worker-0": True}


def test_a_pod_relabelled_to_another_job_tells_both_even_when_it_reads_the_same() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    moved = pod("job-worker-0", 6)
    moved["metadata"]["labels"]["tfmw.dev/job-name"] = "other"
    informer._apply("MODIFIED", moved)
    assert told == [JOB, JOB, ("ns", "other")]
    assert names(informer) == {}


def test_an_own_write_goes_in_silently_and_its_echo_or_an_older_answer_changes_nothing() -> None:
    informer, told = view()
    informer.put(pod("job-worker-0", 10, deleting=True))
    informer._apply("MODIFIED", pod("job-worker-0", 10, deleting=True))  # the echo
    informer.put(pod("job-worker-0", 8))  # a late answer, older than what is held
    assert names(informer) == {"job-worker-0": True}
    assert told == []


def test_a_deletion_with_the_version_held_removes_and_nothing_older_brings_it_back() -> None:
    informer, _ = view()
    informer.put(pod("job-worker-0", 10))  # a deletion answered at once carries its final version
    informer._apply("DELETED", pod("job-worker-0", 10))
    informer.put(pod("job-worker-0", 10))  # that answer arriving after the event
    informer._apply("MODIFIED", pod("job-worker-0", 9))
    assert names(informer) == {}
    informer._apply("ADDED", pod("job-worker-0", 12))  # a new pod of the same name
    assert names(informer) == {"job-worker-0": False}


def test_removing_after_a_refused_delete_spares_a_newer_namesake() -> None:
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 12))
    informer.remove("ns", "job-worker-0", lambda held: held.pod is not None and held.pod.uid == "uid-old")
    assert names(informer) == {"job-worker-0": False}


def test_a_relist_replaces_the_view_but_keeps_own_writes_newer_than_the_list() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("ADDED", pod("job-worker-9", 6))  # deleted while the watch was down
    written = informer._written = set()  # a LIST under way (as _list sets it)
    informer.put(pod("job-worker-1", 30))  # created by us after the list was taken
    informer._replace(informer.sightings([pod("job-worker-0", 5)]), listed_at=20, written=written)
    assert names(informer) == {"job-worker-0": False, "job-worker-1": False}
    assert JOB in told


def test_a_listed_object_is_reduced_as_its_page_comes_and_one_of_no_job_is_left_out() -> None:
    informer, _ = view()
    stray = pod("other-worker-0", 5)
    del stray["metadata"]["labels"]["tfmw.dev/job-name"]
    found = informer.sightings([pod("job-worker-0", 5), stray, {"metadata": {}}])
    assert [(s.okey, s.at, s.job) for s in found] == [(("ns", "job-worker-0"), 5, JOB)]
    assert isinstance(found[0].reduced, Owned)


def test_a_relist_taken_before_a_deletion_seen_since_does_not_bring_the_object_back() -> None:
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    written = informer._written = set()  # a LIST under way (as _list sets it)
    listed = informer.sightings([pod("job-worker-0", 5)])  # the list, taken at 6
    informer.remove("ns", "job-worker-0", lambda held: True)  # a deletion our write saw meanwhile
    informer._replace(listed, listed_at=6, written=written)
    assert names(informer) == {}


def test_the_newest_job_is_kept_and_a_deleted_one_never_returns() -> None:
    jobs = LatestJobs()
    job: Json = {"metadata": {"namespace": "ns", "name": "job", "uid": "u1", "resourceVersion": "5"}}
    newer: Json = {"metadata": {**job["metadata"], "resourceVersion": "7"}}
    assert jobs.put(newer)
    assert not jobs.put(job)  # older
    assert not jobs.put(newer)  # the echo of our own write
    assert jobs.get(JOB) is newer
    jobs.remove(newer)
    assert not jobs.put({"metadata": {**job["metadata"], "resourceVersion": "9"}})  # late answer
    assert jobs.get(JOB) is None


def test_a_job_is_held_without_its_managed_fields_and_the_object_given_is_untouched() -> None:
    jobs = LatestJobs()
    fields = [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:workers": {}}}}]
    job: Json = {
        "metadata": {
            "namespace": "ns",
            "name": "job",
            "uid": "u1",
            "resourceVersion": "5",
            "managedFields": fields,
        },
        "spec": {"workers": 2},
    }
    assert jobs.put(job)
    held = jobs.get(JOB)
    assert held is not None and "managedFields" not in held["metadata"]
    assert held["metadata"]["resourceVersion"] == "5" and held["spec"] == {"workers": 2}
    assert job["metadata"]["managedFields"] is fields  # kopf's object, as it was


def test_a_write_answered_without_a_version_never_brings_a_deleted_pod_back() -> None:
    # A pod deleted with no grace can come back from the DELETE with no resourceVersion;
    # held, it could never be ordered against its DELETED event and stayed for ever.
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("DELETED", pod("job-worker-0", 7, deleting=True))
    answer = pod("job-worker-0", 0, deleting=True)
    del answer["metadata"]["resourceVersion"]
    informer.put(answer)
    assert names(informer) == {}


def test_objects_not_ours_are_kept_by_their_own_name_without_any_label() -> None:
    path = "/api/v1/persistentvolumeclaims"
    claims: Informer[Claim] = Informer(None, path, Claim.of, ignore_changes, "", own_name)  # type: ignore[arg-type]
    raw = {
        "metadata": {"name": "tfmw-shared", "namespace": "ns", "uid": "c1", "resourceVersion": "3"},
        "spec": {"volumeName": "pv"},
        "status": {"phase": "Bound"},
    }
    claims._apply("ADDED", raw)
    assert claims.of_job(("ns", "tfmw-shared")) == [Claim("c1", "pv", True, phase="Bound")]
    claims._apply("DELETED", {**raw, "metadata": {**raw["metadata"], "resourceVersion": "4"}})
    assert claims.of_job(("ns", "tfmw-shared")) == []


def test_tombstones_are_forgotten_oldest_first_only_beyond_the_kept_number_and_once_old() -> None:
    stones: Tombstones[str, int] = Tombstones(kept=3, seconds=10)
    for i in range(3):
        stones.put(f"p{i}", i, now=0)
    assert [stones.get(f"p{i}") for i in range(3)] == [0, 1, 2]  # old, but only 3
    stones.put("p0", 7, now=5)  # deleted again: now the youngest
    stones.put("p3", 3, now=11)  # 4 held: p1 (put at 0) is old enough to go, and only it
    assert "p1" not in stones and len(stones) == 3
    assert (stones.get("p0"), stones.get("p2"), stones.get("p3")) == (7, 2, 3)
    stones.put("p4", 4, now=12)  # p2 goes (put at 0); p0 (put at 5) is 7 s old: stays
    assert "p2" not in stones and stones.get("p0") == 7
    for i in range(5, 10):
        stones.put(f"p{i}", i, now=12)  # young ones all stay, however many
    assert len(stones) == 8 and stones.get("p0") == 7
    stones.put("p10", 10, now=30)  # everything old enough leaves, down to the kept 3
    assert len(stones) == 3 and {"p8", "p9", "p10"} == {
        k for k in (f"p{i}" for i in range(11)) if k in stones
    }


def test_a_pod_deleted_among_thousands_in_one_cleanup_never_comes_back() -> None:
    """A cleanup deletes thousands of pods within the window: every tombstone is kept, so a
    late event of any of them brings none back."""
    informer, _ = view()
    for i in range(2500):
        informer._apply("ADDED", pod(f"job-worker-{i}", 10))
    for i in range(2500):
        informer._apply("DELETED", pod(f"job-worker-{i}", 20, deleting=True))
    for i in range(2500):
        informer._apply("MODIFIED", pod(f"job-worker-{i}", 15, deleting=True))  # late
    assert names(informer) == {}


def _job_with_env(values: int, generation: int, version: str, managed_by: str | None = None) -> Json:
    env = [{"name": f"V{i}", "value": "x" * 500} for i in range(values)]
    spec: Json = {"workers": 2, "template": {"spec": {"containers": [{"name": "c", "env": env}]}}}
    if managed_by is not None:
        spec["runPolicy"] = {"managedBy": managed_by}
    meta = {
        "namespace": "ns",
        "name": "job",
        "uid": "u1",
        "resourceVersion": version,
        "generation": generation,
    }
    return {"kind": "TFJob", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def test_a_spec_too_large_to_hold_is_held_cut_to_why_with_its_controller_and_status() -> None:
    jobs = LatestJobs()
    assert jobs.put(_job_with_env(300, 1, "5", managed_by="tfmw.dev/tfjob-controller"))
    held = jobs.get(JOB)
    assert held is not None
    why = cut_spec_reason(held)
    assert why is not None and "characters of JSON, more than the 131,072" in why and "envFrom" in why
    assert held["spec"]["runPolicy"] == {"managedBy": "tfmw.dev/tfjob-controller"}  # who serves it
    assert held["status"] == {"phase": "Running"} and held["metadata"]["uid"] == "u1"
    assert len(json.dumps(held)) < 2_000


def test_a_cut_spec_is_measured_once_per_generation_and_held_whole_when_it_fits_again() -> None:
    jobs = LatestJobs()
    jobs.put(_job_with_env(300, 1, "5"))
    echo = _job_with_env(300, 1, "6")  # a status write's answer: the same spec
    with patch("tfmw_operator.kube.informer.held_job", side_effect=AssertionError("measured again")):
        assert jobs.put(echo)
    assert cut_spec_reason(jobs.get(JOB) or {}) is not None
    fits = _job_with_env(3, 2, "7")  # the owner shortened it
    assert jobs.put(fits)
    assert jobs.get(JOB) is fits


def test_a_long_managed_by_is_not_kept_so_no_cut_can_name_tfmw() -> None:
    jobs = LatestJobs()
    jobs.put(_job_with_env(300, 1, "5", managed_by="tfmw.dev/tfjob-controller" + "x" * 300))
    held = jobs.get(JOB)
    assert held is not None and "runPolicy" not in held["spec"]


# ---- against an API server on loopback: the watch's failures, and what a LIST tells ----

PODS = "/api/v1/pods"


@asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    relogin: Callable[[], kopf.ConnectionInfo] | None = None,
    extra: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] | None = None,
) -> AsyncIterator[Kube]:
    app = web.Application()
    app.router.add_get(PODS, handler)
    for path, other in (extra or {}).items():
        app.router.add_get(path, other)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    info = kopf.ConnectionInfo(server=f"http://127.0.0.1:{runner.addresses[0][1]}")
    kube = Kube(info, relogin=relogin or (lambda: info))
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()


async def quiet_watch(request: web.Request) -> web.StreamResponse:
    """A watch with nothing to tell, until the client hangs up."""
    response = web.StreamResponse()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):
        for _ in range(100):
            await asyncio.sleep(0.05)
            await response.write(b"\n")  # an empty line: no event
    return response


def pods_of(jobs: int) -> list[Json]:
    found = []
    for i in range(jobs):
        found.append(pod(f"job{i}-worker-0", 10 + i))
        found[-1]["metadata"]["labels"]["tfmw.dev/job-name"] = f"job{i}"
    return found


def a_list(items: list[Json], version: str = "100") -> web.Response:
    return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": version}, "items": items})


async def running(informers: list[Informer[Owned]], seconds: float) -> list[asyncio.Task[None]]:
    """Each informer run for `seconds`; the tasks, still running or not, cancelled after."""
    tasks = [asyncio.create_task(informer.run()) for informer in informers]
    await asyncio.sleep(seconds)
    ended = [task.done() for task in tasks]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return [task for task, done in zip(tasks, ended, strict=True) if done]


def test_a_401_on_any_request_ends_no_watch_and_no_informer() -> None:
    """A rotated token: one request refused once. Every watch goes on (none is cut, none
    lists again) and no informer's task ends."""
    refused = 0

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return a_list([pod("job-worker-0", 5)], "5")
        response = web.StreamResponse()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            for _ in range(40):
                await response.write(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}\n')
                await asyncio.sleep(0.05)
        return response

    async def once_refused(request: web.Request) -> web.Response:
        nonlocal refused
        refused += 1
        return web.json_response({"code": 401}, status=401) if refused == 1 else web.json_response({})

    async def scenario() -> tuple[list[asyncio.Task[None]], list[int]]:
        async with serving(pods, extra={"/x": once_refused}) as kube:
            informers = [Informer(kube, PODS, Owned.pod_of, ignore_changes) for _ in range(3)]
            tasks = [asyncio.create_task(informer.run()) for informer in informers]
            await asyncio.sleep(0.3)
            await kube.request("GET", "/x")  # a reconcile's request, refused once
            await asyncio.sleep(0.5)
            ended = [task for task in tasks if task.done()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return ended, [informer.relists for informer in informers]

    ended, relists = asyncio.run(scenario())
    assert ended == [] and relists == [1, 1, 1]


def test_an_informer_retries_whatever_its_watch_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Not only the errors foreseen: a RuntimeError (aiohttp's 'Connection closed.' of a
    session closed under a watch) is logged and retried, and the task goes on."""
    monkeypatch.setattr(informer_module, "RETRY_SECONDS", (0.05,))

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return a_list([pod("job-worker-0", 5)], "5")
        return await quiet_watch(request)

    async def scenario() -> tuple[list[asyncio.Task[None]], int]:
        async with serving(pods) as kube:
            informer = Informer(kube, PODS, Owned.pod_of, ignore_changes)
            streams, opened = kube.stream_lines, 0

            async def failing_once(path: str, params: dict[str, str]) -> AsyncIterator[bytes]:
                nonlocal opened
                opened += 1
                if opened == 1:
                    raise RuntimeError("Connection closed.")
                async for line in streams(path, params):
                    yield line

            monkeypatch.setattr(kube, "stream_lines", failing_once)
            ended = await running([informer], 0.5)
            return ended, informer.relists

    ended, relists = asyncio.run(scenario())
    assert ended == [] and relists == 2
    assert "RuntimeError('Connection closed.')" in caplog.text


def watch_failing(mode: str) -> Json:
    """What a watch answers, failing each time in its own way."""
    answers: dict[str, Json] = {
        "403": {"status": 403, "body": {"kind": "Status", "code": 403, "message": "watch forbidden"}},
        "500 event": {"event": {"type": "ERROR", "object": {"kind": "Status", "code": 500}}},
        "410 Gone": {"event": {"type": "ERROR", "object": {"kind": "Status", "code": 410}}},
        "empty 200": {},
        "null line": {"line": b"null\n"},
        "metadata a string": {"line": b'{"type":"MODIFIED","object":{"metadata":"x"}}\n'},
    }
    return answers[mode]


@pytest.mark.parametrize(
    "mode", ["403", "500 event", "410 Gone", "empty 200", "null line", "metadata a string"]
)
def test_a_watch_failing_at_once_is_tried_again_after_growing_pauses_and_relists_tell_no_job(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a failing watch listed again every 0.2 s for ever (the count of failures was
    reset by each LIST), a 410 or an empty 200 at once, and each LIST told every job."""
    monkeypatch.setattr(informer_module, "RETRY_SECONDS", (0.05, 0.1, 0.2, 0.4))
    answer = watch_failing(mode)
    counts = {"list": 0, "watch": 0}

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            counts["list"] += 1
            return a_list(pods_of(5))
        counts["watch"] += 1
        if "status" in answer:
            return web.json_response(answer["body"], status=answer["status"])
        if "event" in answer:
            return web.Response(body=json.dumps(answer["event"]).encode() + b"\n")
        return web.Response(body=answer.get("line", b""))

    told: list[Key] = []

    async def scenario() -> list[asyncio.Task[None]]:
        async with serving(pods) as kube:
            return await running([Informer(kube, PODS, Owned.pod_of, told.append)], 1.0)

    assert asyncio.run(scenario()) == []  # the task never ends
    # 0.05 + 0.1 + 0.2 + 0.4 (each ±20 %): about five tries in the second, not hundreds
    assert counts["watch"] <= 7, counts
    assert counts["list"] <= 7, counts
    assert sorted(told) == [("ns", f"job{i}") for i in range(5)]  # by the first LIST only


def test_a_watch_that_ran_its_course_is_resumed_at_once_from_where_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informer_module, "WATCH_WORKED_SECONDS", 0.1, raising=False)
    monkeypatch.setattr(informer_module, "RETRY_SECONDS", (5.0,))  # never waited for
    versions: list[str] = []

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return a_list([], "100")
        versions.append(request.query["resourceVersion"])
        await asyncio.sleep(0.12)  # quiet, then the server's timeout
        event = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(101 + len(versions))}}}
        return web.Response(body=json.dumps(event).encode() + b"\n")

    async def scenario() -> int:
        async with serving(pods) as kube:
            informer = Informer(kube, PODS, Owned.pod_of, ignore_changes)
            await running([informer], 0.9)
            return informer.relists

    assert asyncio.run(scenario()) == 1
    assert len(versions) >= 5 and versions[:3] == ["100", "102", "103"]


def test_a_list_that_never_ends_is_given_up_and_tried_again_after_pauses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(informer_module, "RETRY_SECONDS", (0.05, 0.1, 0.2, 0.4))
    pages = 0

    async def pods(request: web.Request) -> web.StreamResponse:
        nonlocal pages
        pages += 1
        page = web.json_response(
            {"metadata": {"resourceVersion": "5", "continue": "same"}, "items": pods_of(50)}
        )
        return page

    async def scenario() -> tuple[list[asyncio.Task[None]], bool]:
        async with serving(pods) as kube:
            informer = Informer(kube, PODS, Owned.pod_of, ignore_changes)
            ended = await running([informer], 1.0)
            return ended, informer.synced.is_set()

    ended, synced = asyncio.run(scenario())
    assert ended == [] and not synced
    assert pages <= 14, pages  # two pages a try, about five tries
    assert "repeats a page" in caplog.text


def test_the_view_lists_large_objects_in_pages_under_the_byte_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims of tenants, 20 KB each, with a cap of 100 KB a page: listed in pages of 2, each
    held whole, then as text, never 500 of them."""
    monkeypatch.setattr(client_module, "MAX_LIST_PAGE_BYTES", 100_000, raising=False)
    claims = [
        {"metadata": {"name": f"c{i}", "namespace": "t", "uid": f"u{i}", "resourceVersion": str(10 + i)}}
        | {"pad": "x" * 20_000}
        for i in range(30)
    ]
    limits: list[int] = []

    async def listing(request: web.Request) -> web.StreamResponse:
        limit, start = int(request.query["limit"]), int(request.query.get("continue") or 0)
        limits.append(limit)
        meta: Json = {"resourceVersion": "99"}
        if start + limit < len(claims):
            meta["continue"] = str(start + limit)
        return web.json_response({"metadata": meta, "items": claims[start : start + limit]})

    async def scenario() -> list[str]:
        app = web.Application()
        app.router.add_get("/api/v1/persistentvolumeclaims", listing)
        async with kube_serving(app) as kube:
            view: Informer[Claim] = Informer(
                kube, "/api/v1/persistentvolumeclaims", Claim.of, ignore_changes, "", own_name
            )
            await view._list()
            return sorted(key[1] for key in view.jobs())

    assert asyncio.run(scenario()) == sorted(f"c{i}" for i in range(30))
    assert limits[0] == 500 and limits[-1] == 2 and len(limits) < 20, limits


# ---- a LIST tells only the jobs it changes ----


def test_a_relist_tells_only_the_jobs_whose_objects_it_added_removed_or_changed() -> None:
    informer, told = view()
    for name, job, version in [("a-0", "a", 5), ("b-0", "b", 6), ("c-0", "c", 7), ("d-0", "d", 8)]:
        obj = pod(name, version)
        obj["metadata"]["labels"]["tfmw.dev/job-name"] = job
        informer._apply("ADDED", obj)
    told.clear()
    listed = []
    for name, job, version in [
        ("a-0", "a", 5),
        ("b-0", "b", 9),
        ("e-0", "e", 10),
    ]:  # c's gone, b's newer, e's new
        obj = pod(name, version)
        obj["metadata"]["labels"]["tfmw.dev/job-name"] = job
        listed.append(obj)
    moved = pod("d-0", 11)
    moved["metadata"]["labels"]["tfmw.dev/job-name"] = "f"  # relabelled: both jobs are told
    informer._replace(informer.sightings([*listed, moved]), listed_at=12)
    assert sorted(told) == [("ns", "b"), ("ns", "c"), ("ns", "d"), ("ns", "e"), ("ns", "f")]
    assert sorted(informer.jobs()) == [("ns", "a"), ("ns", "b"), ("ns", "e"), ("ns", "f")]


# ---- resourceVersions going back (etcd restored) ----


def test_a_list_below_the_versions_held_forgets_what_was_seen_before_and_believes_the_list(
    caplog: pytest.LogCaptureFixture,
) -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 900_000))  # seen before the restore
    informer._apply("ADDED", pod("job-worker-1", 900_001))
    informer._apply("DELETED", pod("job-worker-1", 900_002))  # a deletion at 900,002
    # etcd restored: its revision is now 500,000. worker-0 is gone, worker-1 is there.
    informer._replace(informer.sightings([pod("job-worker-1", 499_000)]), listed_at=500_000)
    assert names(informer) == {"job-worker-1": False}  # no ghost, nothing hidden
    assert "went back" in caplog.text and "500000" in caplog.text
    informer.put(pod("job-worker-0", 500_100, deleting=True))  # created again by us, since
    informer._apply("MODIFIED", pod("job-worker-1", 500_200, deleting=True))
    assert names(informer) == {"job-worker-0": True, "job-worker-1": True}
    assert JOB in told


def test_a_list_at_or_above_what_was_held_keeps_the_deletions_remembered() -> None:
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("DELETED", pod("job-worker-0", 7))
    written = informer._written = set()
    informer.put(pod("job-worker-1", 30))  # our own write during the LIST, newer than it
    informer._replace(informer.sightings([pod("job-worker-0", 5)]), listed_at=20, written=written)
    assert names(informer) == {"job-worker-1": False}  # worker-0's list entry is older than its deletion


def test_malformed_objects_and_metadata_are_left_out_not_raised() -> None:
    informer, _ = view()
    malformed: list[Any] = [None, [], {"metadata": "x"}, {"metadata": {"name": 5}}]
    found = informer.sightings([*malformed, pod("job-worker-0", 5)])
    assert [s.okey for s in found] == [("ns", "job-worker-0")]


def test_a_job_re_created_under_its_name_is_measured_afresh_whatever_its_generation() -> None:
    """A DELETED missed in a relist: the new job starts at generation 1 as the old one did,
    and neither the old cut nor the old whole spec may stand for it."""
    jobs = LatestJobs()
    jobs.put(_job_with_env(300, 1, "5"))
    fixed = _job_with_env(3, 1, "9")
    fixed["metadata"]["uid"] = "u2"
    assert jobs.put(fixed)
    assert jobs.get(JOB) is fixed
    big = _job_with_env(300, 1, "12")
    big["metadata"]["uid"] = "u3"
    assert jobs.put(big)
    assert cut_spec_reason(jobs.get(JOB) or {}) is not None
