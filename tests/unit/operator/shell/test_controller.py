"""The controller's reconcile of a running job, against a real HTTP server as the API server
and a real folder watched with inotify: what it costs while nothing changes."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from loopback import kube_serving
from tfmw_operator.api.kinds import kind_of
from tfmw_operator.api.objects import Json, Key
from tfmw_operator.api.spec import JobSpec, parse_spec
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.decision import ProgressWatch
from tfmw_operator.kube.client import Kube
from tfmw_operator.runtime.settings import Settings
from tfmw_operator.shell import controller as shell_controller
from tfmw_operator.shell.controller import JobController
from wrappers import SUPERVISOR_IMAGE, job, pod, write_marker

WORKERS = 4


def merged(into: Json, patch: Json) -> Json:
    """A JSON merge patch (RFC 7386) applied, as the API server applies the status writes."""
    for name, value in patch.items():
        if value is None:
            into.pop(name, None)
        elif isinstance(value, dict) and isinstance(into.get(name), dict):
            merged(into[name], value)
        else:
            into[name] = value
    return into


@asynccontextmanager
async def api(held: Json, statuses: list[Json]) -> AsyncIterator[Kube]:
    """The API server: the job's status writes merged into `held` (and kept in `statuses`)."""

    async def patched(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        statuses.append(body.get("status") or {})
        body["metadata"]["resourceVersion"] = str(len(statuses) + 1)
        return web.json_response(merged(held, body))

    app = web.Application()
    app.router.add_patch("/apis/tfmw.dev/v1alpha1/namespaces/{ns}/tfmwjobs/{name}/status", patched)
    async with kube_serving(app) as kube:
        yield kube


def versioned(obj: Json) -> Json:
    obj["metadata"]["resourceVersion"] = "1"
    return obj


def as_held(j: Json, supervisor_image: str = "") -> tuple[JobSpec, Key]:
    """Job `j` at resourceVersion 1, as a watch holds it: parsed, and its key."""
    versioned(j)
    spec = parse_spec(j, supervisor_image=supervisor_image)
    assert isinstance(spec, JobSpec)
    return spec, (spec.namespace, spec.name)


def running(
    kube: Kube, j: Json, spec: JobSpec, shared_root: Path, supervisor_image: str = ""
) -> JobController:
    """A controller whose views hold job `j` running: its pods and its Service, as the watches
    would hold them (a view orders objects by their resourceVersion)."""
    settings = Settings(
        shared_root=shared_root, namespaces=(spec.namespace,), supervisor_image=supervisor_image
    )
    controller = JobController(kube, settings)
    for watch in controller.watches():
        watch.synced.set()
    controller.jobs.put(j)
    for i in range(WORKERS):
        controller.pods[spec.namespace].put(versioned(pod(j, i).running().obj()))
    controller.services[spec.namespace].put(versioned(build_service(spec)))
    return controller


def step_times(index: int) -> str:
    """Worker `index`'s document: the last one computes five times slower than the others."""
    figures = [0.5 if index == WORKERS - 1 else 0.1] * 20
    return json.dumps(
        {"jobUid": "uid-mnist", "attempt": 0, "role": "worker", "index": index, "computeSeconds": figures}
    )


def test_a_running_job_that_writes_no_step_times_sets_no_timer_till_its_steps_folder_is_made(
    tmp_path: Path,
) -> None:
    # 1,000 running jobs whose programs write no step times each cost a reconcile a minute when
    # a timer read them (make bench-scale: 2.27 % of a core idle); inotify says when the steps
    # folder is made.
    reads = reads_of_a_running_job_without_steps(tmp_path)
    # The missing folder is read once: nothing was told of the watched folder since; then
    # again once the folder came.
    assert reads == (1, 2)


def test_a_missing_steps_folder_is_trusted_missing_for_a_while_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell_controller, "STEP_TIMES_ABSENT_TRUSTED_SECONDS", 0.0)
    assert reads_of_a_running_job_without_steps(tmp_path)[0] == 3


def reads_of_a_running_job_without_steps(tmp_path: Path) -> tuple[int, int]:
    """How often the steps folder is read in three reconciles of a running job that has none,
    and in all, once the folder is made."""
    j = job().workers(WORKERS).launched(phase="Running").obj()
    spec, key = as_held(j)
    folder = tmp_path / spec.directory
    folder.mkdir(parents=True)
    statuses: list[Json] = []
    read: list[str] = []  # the storage calls, by the function called
    before: list[int] = []

    async def scenario() -> tuple[list[float | None], list[Json]]:
        async with api(j, statuses) as kube:
            controller = running(kube, j, spec, tmp_path)
            # As its launch left it: its marker and progress document watched.
            controller.files.track(key, spec.marker_relpath, ProgressWatch(spec.progress_relpath))
            files = asyncio.create_task(controller.files.run())
            call = controller.storage.call

            def counted(relpath: str, function: Any, *args: Any) -> Any:
                read.append(function.__name__)
                return call(relpath, function, *args)

            controller.storage.call = counted  # type: ignore[method-assign]
            await asyncio.sleep(0.5)  # the job's folder is watched
            requeues = [await controller._reconcile(key) for _ in range(3)]
            before.append(read.count("read_step_times"))
            assert read.count("read_marker") == 3
            written = len(statuses)
            steps = folder / "steps"
            steps.mkdir()
            for i in range(WORKERS):
                (steps / f"worker-{i}.json").write_text(step_times(i))
            for _ in range(100):  # the folder's creation brings a reconcile, which reads them
                if len(statuses) > written:
                    break
                await asyncio.sleep(0.05)
            await controller.queue.drain()
            files.cancel()
            await asyncio.gather(files, return_exceptions=True)
            return requeues, statuses[written:]

    requeues, later = asyncio.run(scenario())
    assert requeues == [None, None, None]  # nothing is due: no timer while no document can be there
    assert later and "stragglers" in later[-1]  # read at once when the folder came
    recorded = later[-1]["stragglers"]
    assert [(w["pod"], w["slowReadings"]) for w in recorded["workers"]] == [("mnist-worker-3", 1)]
    return before[0], read.count("read_step_times")


def test_a_job_whose_marker_is_there_reads_no_step_times(tmp_path: Path) -> None:
    # A burst of completions (make bench-scale: 970 at once) costs a storage call less each:
    # a job ending now has no straggler to find.
    j = job().workers(WORKERS).launched(phase="Running").obj()
    spec, key = as_held(j)
    steps = tmp_path / spec.directory / "steps"
    steps.mkdir(parents=True)
    for i in range(WORKERS):
        (steps / f"worker-{i}.json").write_text(step_times(i))
    write_marker(tmp_path / spec.directory, "uid-mnist")
    statuses: list[Json] = []

    async def scenario() -> int | None:
        async with api(j, statuses) as kube:
            controller = running(kube, j, spec, tmp_path)
            await controller._reconcile(key)
            await controller.queue.drain()
            return controller._states[key].step_times_attempt

    read_for = asyncio.run(scenario())
    assert statuses and statuses[0]["phase"] == "Succeeded"
    assert read_for is None and "stragglers" not in statuses[0]  # never read


def posted(controller: JobController) -> list[tuple[str, str]]:
    """The Events handed to the poster since the last look: (type, reason)."""
    events = []
    while (taken := controller.events._next()) is not None:
        _, event = taken
        events.append((event["type"], event["reason"]))
    return events


def test_a_finished_jobs_exit_that_cannot_be_written_holds_up_nothing_after_its_status(
    tmp_path: Path,
) -> None:
    # The supervisors' `exit` follows the status (core/decision.py): a control file that cannot
    # be written costs the job's Succeeded Event nothing, is said once, and is tried again.
    j = job().workers(WORKERS).commanded("python", "train.py").launched(phase="Running").obj()
    spec, key = as_held(j, SUPERVISOR_IMAGE)
    folder = tmp_path / spec.directory
    folder.mkdir(parents=True)
    write_marker(folder, "uid-mnist")
    # Where the control file goes, a tenant's folder with a file in it: no rename replaces it.
    planted = folder / ".tfmw" / "control.json"
    (planted / "kept").mkdir(parents=True)
    statuses: list[Json] = []

    async def scenario() -> tuple[list[tuple[str, str]], list[tuple[str, str]], bool, bool]:
        async with api(j, statuses) as kube:
            controller = running(kube, j, spec, tmp_path, SUPERVISOR_IMAGE)
            await controller._reconcile(key)
            first = posted(controller)
            timer = controller.queue._timers.get(key)
            retried = timer is not None and not timer.cancelled()
            await controller._reconcile(key)  # still there: not said again
            second = posted(controller)
            (planted / "kept").rmdir()
            planted.rmdir()
            await controller._reconcile(key)
            control = json.loads((folder / ".tfmw" / "control.json").read_text())
            return first, second, retried, bool(control.get("exit"))

    first, second, retried, exited = asyncio.run(scenario())
    assert statuses and statuses[0]["phase"] == "Succeeded"
    assert ("Normal", "Succeeded") in first and ("Warning", "StorageError") in first
    assert retried  # tried again soon, without waiting for a change
    assert ("Warning", "StorageError") not in second
    assert exited  # written once the folder could be made


def test_a_job_is_parsed_once_per_version_and_again_for_each_new_one(tmp_path: Path) -> None:
    # A launch reconciles a job once per pod event, and its object changes only with a status
    # write: the spec and recorded status are parsed once per object LatestJobs holds.
    j = job().workers(WORKERS).launched(phase="Running").obj()
    spec, key = as_held(j)

    async def scenario() -> None:
        async with api(j, []) as kube:
            controller = running(kube, j, spec, tmp_path)
            state = controller._state(key)
            held = controller.jobs.get(key)
            assert held is not None
            kind = kind_of(held)
            first = controller._parsed(state, kind, held)
            assert controller._parsed(state, kind, held) is first
            newer = copy.deepcopy(held)
            newer["metadata"]["resourceVersion"] = "2"
            newer["spec"]["workers"] = WORKERS + 1
            newer["status"]["restarts"] = 3
            assert controller.jobs.put(newer)
            again = controller._parsed(state, kind_of(newer), newer)
            assert again is not first
            parsed, recorded = again
            assert isinstance(parsed, JobSpec) and parsed.workers == WORKERS + 1
            assert recorded.restarts == 3
            newer["metadata"]["resourceVersion"] = "3"  # changed in place, as no watch does
            newer["status"]["restarts"] = 4
            assert controller._parsed(state, kind, newer)[1].restarts == 4

    asyncio.run(scenario())


def test_a_gang_turning_running_reads_its_step_times_with_the_next_reconcile_not_one_of_its_own(
    tmp_path: Path,
) -> None:
    # Its programs have written none yet: a reconcile at once to read them was one more of the
    # five each launch costs (make bench-scale). Without inotify (no watcher runs here) the
    # documents are read on a timer: the first an interval on, or with whatever comes sooner.
    j = job().workers(WORKERS).launched(phase="Pending").obj()
    spec, key = as_held(j)
    (tmp_path / spec.directory).mkdir(parents=True)
    statuses: list[Json] = []

    async def scenario() -> tuple[float | None, float | None, float, int | None]:
        async with api(j, statuses) as kube:
            controller = running(kube, j, spec, tmp_path)
            # As its launch left it: followed, and looked at (no progress document yet).
            controller.files.track(key, spec.marker_relpath, ProgressWatch(spec.progress_relpath))
            controller.files.saw_progress(key, None)
            turned = await controller._reconcile(key)
            after = await controller._reconcile(key)  # brought by anything: reads them now
            state = controller._state(key)
            return turned, after, controller.settings.progress_interval, state.step_times_attempt

    turned, after, interval, read_for = asyncio.run(scenario())
    assert statuses and statuses[0]["phase"] == "Running"
    assert turned is not None and interval - 1 < turned <= interval
    assert read_for == 0  # the next reconcile read attempt 0's documents (none yet)
    assert after is not None and after > interval  # none there: read again less often
