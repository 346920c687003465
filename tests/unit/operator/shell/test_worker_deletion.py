"""How much of a deleted worker's log is kept: the whole tail alone, a share when many go."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest
from aiohttp import web
from loopback import kube_serving
from tfmw_operator.core.decision import DeletePods
from tfmw_operator.core.owned import Owned
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.kube.client import Kube
from tfmw_operator.kube.informer import Informer, ignore_changes
from tfmw_operator.shell import worker_deletion
from tfmw_operator.shell.worker_deletion import (
    LOG_ARCHIVE_BYTES,
    LOG_MEMORY_BYTES,
    LOG_MIN_BYTES,
    WorkerDeleter,
    log_tail_bytes,
)
from tfmw_operator.storage.files import SharedStorage
from wrappers import job, pod


def test_a_few_workers_keep_the_whole_tail() -> None:
    assert log_tail_bytes(1) == log_tail_bytes(16) == LOG_ARCHIVE_BYTES


def test_a_large_gang_shares_the_budget_but_keeps_a_useful_tail() -> None:
    assert log_tail_bytes(64) * 64 <= LOG_MEMORY_BYTES
    assert log_tail_bytes(10 * 1024) == LOG_MIN_BYTES  # 1,024 workers of ten containers


def test_never_more_than_the_budget_until_the_floor() -> None:
    for reading in range(1, 5000, 7):
        kept = log_tail_bytes(reading)
        assert kept == LOG_MIN_BYTES or kept * reading <= LOG_MEMORY_BYTES


# ---- a log read while the node's kubelet restarts ----

NS, JOB = "team-a", "mnist"


def stopped_worker() -> ObservedPod:
    """Worker 1 of attempt 0, exited 137 just now: deleted at once, so read before its deletion."""
    observed = observe_pod(pod(job().obj(), 1).exited(137).obj())
    assert observed is not None and observed.terminated
    return dataclasses.replace(observed, finished_at=datetime.now(UTC))


@asynccontextmanager
async def api(log: Callable[[web.Request], Awaitable[web.Response]]) -> AsyncIterator[Kube]:
    """A real HTTP server as the API server: the worker's log as `log` answers, its deletion at once."""

    async def deleted(request: web.Request) -> web.Response:
        return web.json_response(
            {"metadata": {"name": request.match_info["pod"], "deletionGracePeriodSeconds": 0}}
        )

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/log", log)
    app.router.add_delete("/api/v1/namespaces/{ns}/pods/{pod}", deleted)
    async with kube_serving(app) as kube:
        yield kube


def delete_and_save(
    tmp_path: Path, log: Callable[[web.Request], Awaitable[web.Response]]
) -> list[tuple[str, str]]:
    (tmp_path / NS / JOB).mkdir(parents=True)
    warned: list[tuple[str, str]] = []

    async def scenario() -> None:
        async with api(log) as kube:
            deleter = WorkerDeleter(
                kube, SharedStorage(tmp_path), lambda ns: Informer(kube, "/p", Owned.pod_of, ignore_changes)
            )
            action = DeletePods(("mnist-worker-1",), 0)
            await deleter.delete(NS, JOB, stopped_worker(), action, lambda *w: warned.append(w))
            await deleter.drain(30)

    asyncio.run(scenario())
    return warned


def test_a_log_unreadable_while_the_kubelet_restarts_is_read_once_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_deletion, "LOG_READ_PAUSES", (0.05, 0.05, 0.05, 0.05))
    asked: list[float] = []

    async def log(request: web.Request) -> web.Response:
        asked.append(time.monotonic())
        if len(asked) <= 2:  # as the API server answers while the kubelet is down
            return web.Response(status=500, text="dial tcp 172.18.0.2:10250: connect: connection refused")
        return web.Response(body=b"last words\n")

    warned = delete_and_save(tmp_path, log)
    assert len(asked) == 3 and not warned
    assert (tmp_path / NS / JOB / "logs" / "attempt-0" / "worker-1.log").read_bytes() == b"last words\n"


def test_a_log_that_cannot_be_had_says_why_where_the_history_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_deletion, "LOG_READ_PAUSES", (0.05, 0.05))

    async def log(request: web.Request) -> web.Response:
        return web.Response(status=502, text="the kubelet is not there")

    warned = delete_and_save(tmp_path, log)
    text = (tmp_path / NS / JOB / "logs" / "attempt-0" / "worker-1.log").read_text()
    assert text.startswith("[tfmw] the log of container") and "mnist-worker-1" in text
    assert "kubelet was not reached" in text and "3 tries" in text and "not there" in text
    assert [reason for reason, _ in warned] == ["LogNotSaved"]


def test_a_pod_already_gone_is_not_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_deletion, "LOG_READ_PAUSES", (5.0,))
    asked: list[int] = []

    async def log(request: web.Request) -> web.Response:
        asked.append(1)
        return web.Response(status=404, text='pods "mnist-worker-1" not found')

    started = time.monotonic()
    delete_and_save(tmp_path, log)
    assert len(asked) == 1 and time.monotonic() - started < 5
    assert "the pod was gone" in (tmp_path / NS / JOB / "logs" / "attempt-0" / "worker-1.log").read_text()


def test_one_namespace_stopping_many_slow_workers_leaves_log_following_slots_to_others() -> None:
    """20 workers of one namespace that take their time to stop (their logs followed all the
    while) hold LOG_FOLLOWED_PER_NAMESPACE slots at most; another namespace's worker is
    followed at once, not read as it is."""

    async def slow_log(request: web.Request) -> web.Response:
        await asyncio.sleep(2)  # a worker that ignores SIGTERM: its log stream stays open (long enough here)
        return web.Response(body=b"")

    async def scenario() -> tuple[int, int]:
        async with api(slow_log) as kube:
            deleter = WorkerDeleter(
                kube,
                SharedStorage(Path("/nonexistent")),
                lambda ns: Informer(kube, "/p", Owned.pod_of, ignore_changes),
            )
            action = DeletePods((), 30)
            running = [observe_pod(pod(job().workers(20).obj(), i).running().obj()) for i in range(21)]
            assert all(p is not None and p.active for p in running)
            for worker in running[:20]:
                assert worker is not None
                await deleter.delete("team-a", JOB, worker, action, lambda *w: None)
            flooder = deleter._followed.held_by("team-a")
            assert running[20] is not None
            await deleter.delete("team-b", JOB, running[20], action, lambda *w: None)
            other = deleter._followed.held_by("team-b")
            await deleter.drain(0.1)
            return flooder, other

    flooder, other = asyncio.run(scenario())
    assert (flooder, other) == (worker_deletion.LOG_FOLLOWED_PER_NAMESPACE, 1)


def test_the_log_reads_pauses_run_from_the_workers_end_not_from_the_operators_start() -> None:
    """An operator killed and started again and again must still delete a stopped worker
    whose log cannot be read: the retries' window is the worker's, by level."""
    from datetime import timedelta

    from tfmw_operator.shell.worker_deletion import LOG_READ_PAUSES, log_read_pauses

    end = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert log_read_pauses(None, end) == LOG_READ_PAUSES  # no end known: every pause
    assert log_read_pauses(end, end) == LOG_READ_PAUSES
    assert log_read_pauses(end, end + timedelta(seconds=3.5)) == (4.0, 4.0)  # 1 + 2 spent
    assert log_read_pauses(end, end + timedelta(seconds=11)) == ()  # read once, no more
    assert log_read_pauses(end, end + timedelta(days=3)) == ()
    assert log_read_pauses(end + timedelta(days=365), end) == LOG_READ_PAUSES  # an absurd end: bounded anyway


def test_the_window_of_a_worker_reported_late_by_a_restarted_kubelet_opens_at_the_report() -> None:
    """A worker that ended while its kubelet was down is reported when the kubelet is back,
    with its real end, 20 s before: the retries count from the report (the pod's conditions'
    change), or the kubelet just back would get a single try."""
    from datetime import timedelta

    from tfmw_operator.shell.worker_deletion import (
        LOG_READ_PAUSES,
        LOG_REPORT_DELAY_MAX,
        log_read_pauses,
        log_window_start,
    )

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    ended = dataclasses.replace(stopped_worker(), finished_at=now - timedelta(seconds=20))
    assert log_window_start(dataclasses.replace(ended, changed_at=now - timedelta(seconds=19))) == (
        now - timedelta(seconds=19)
    )
    late = dataclasses.replace(ended, changed_at=now - timedelta(seconds=0.5))
    assert log_read_pauses(log_window_start(late), now) == LOG_READ_PAUSES
    # Conditions that changed before the end (a pod Ready long ago): the end counts.
    early = dataclasses.replace(ended, changed_at=now - timedelta(hours=1))
    assert (
        log_window_start(early) == now - timedelta(seconds=20)
        and log_read_pauses(log_window_start(early), now) == ()
    )
    # Still running, its log followed: every pause, however old its conditions.
    running = dataclasses.replace(ended, finished_at=None, changed_at=now - timedelta(hours=1))
    assert log_window_start(running) is None
    # A condition dated far after the end (a controller's, a skewed clock, 2999): the window
    # opens at most LOG_REPORT_DELAY_MAX after the end, so the pod is deleted in the end.
    far = dataclasses.replace(ended, changed_at=datetime(2999, 1, 1, tzinfo=UTC))
    assert log_window_start(far) == now - timedelta(seconds=20) + LOG_REPORT_DELAY_MAX
    assert log_read_pauses(log_window_start(far), now + LOG_REPORT_DELAY_MAX) == ()


def test_a_log_asked_once_says_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file says how many times the log was asked for, not how many it could have been."""
    monkeypatch.setattr(worker_deletion, "LOG_READ_PAUSES", ())

    async def log(request: web.Request) -> web.Response:
        return web.Response(status=502, text="the kubelet is not there")

    delete_and_save(tmp_path, log)
    text = (tmp_path / NS / JOB / "logs" / "attempt-0" / "worker-1.log").read_text()
    assert "kubelet was not reached (restarting, or the node gone) in 1 try (" in text, text


def test_one_namespaces_cleanup_does_not_queue_anothers_log_reads_behind_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers deleted gracefully beyond the follow slots have their logs read beside their
    deletion, LOG_READS_AT_ONCE at a time: a namespace deleting 100 workers and another
    deleting one get turns, so the one is read among the first, while its worker still stops
    (not after the other's 100, when it may be gone and its log with it)."""
    monkeypatch.setattr(worker_deletion, "LOG_FOLLOWED_AT_ONCE", 0)  # every log read in turn

    class Api:
        def __init__(self) -> None:
            self.read: list[str] = []

        async def container_log(
            self, namespace: str, pod: str, container: str, limit: int, follow: bool, grace: int
        ) -> bytes:
            self.read.append(namespace)
            await asyncio.sleep(0.01)
            return b"last words\n"

        async def delete_pod(self, namespace: str, name: str, uid: str, grace: int | None) -> None:
            await asyncio.sleep(0)

    async def no_save(*args: object) -> None:
        pass

    async def scenario() -> list[str]:
        api = Api()
        kube = cast(Kube, api)
        deleter = WorkerDeleter(
            kube,
            SharedStorage(Path("/nonexistent")),
            lambda ns: Informer(kube, "/p", Owned.pod_of, ignore_changes),
        )
        monkeypatch.setattr(deleter, "_save", no_save)
        action = DeletePods((), 30)
        big = job("big").workers(100).obj()
        workers = [observe_pod(pod(big, index).running().obj()) for index in range(100)]
        small = observe_pod(pod(job("small").obj(), 0).running().obj())
        for worker in workers:  # the cleanup's deletions come quicker than its logs are read
            assert worker is not None
            await deleter.delete("tenant-a", "big", worker, action, lambda *w: None)
        assert small is not None
        await deleter.delete("tenant-b", "small", small, action, lambda *w: None)
        await deleter.drain(30)
        return api.read

    read = asyncio.run(scenario())
    assert len(read) == 101
    # The readers busy with the first 32 of the cleanup, then its turn, then the other's.
    assert read.index("tenant-b") <= worker_deletion.LOG_READS_AT_ONCE + 1, read.index("tenant-b")
