"""The storage threads: one namespace's slow or hung calls never take them from the others."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tfmw_operator.storage import pool
from tfmw_operator.storage.files import SharedStorage, StorageError, read_marker
from tfmw_operator.storage.pool import FairThreads, Refused


class Held:
    """Calls that block until released, counting how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.ran = 0

    def call(self, seconds: float | None = None) -> Callable[[], str]:
        def blocking() -> str:
            with self.lock:
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                if seconds is None:
                    self.release.wait()
                else:
                    time.sleep(seconds)
            finally:
                with self.lock:
                    self.running -= 1
                    self.ran += 1
            return "done"

        return blocking


@pytest.fixture
def held() -> Iterator[Held]:
    calls = Held()
    yield calls
    calls.release.set()


def test_a_flooding_namespace_runs_a_bounded_share_and_another_is_served_promptly(held: Held) -> None:
    threads = FairThreads(threads=8, per_lane=2, timeout=30)

    async def scenario() -> tuple[float, float]:
        started = time.perf_counter()
        flood = [asyncio.ensure_future(threads.run("flood", held.call(0.05))) for _ in range(60)]
        await asyncio.sleep(0.02)
        asked = time.perf_counter()
        assert await threads.run("quiet", lambda: "served") == "served"
        quiet = time.perf_counter() - asked
        assert all(result == "done" for result in await asyncio.gather(*flood))
        return quiet, time.perf_counter() - started

    quiet, flood = asyncio.run(scenario())
    assert held.peak == 2, f"the flooding namespace ran {held.peak} calls at once"
    assert quiet < 0.2, f"the quiet namespace waited {quiet:.3f}s behind the flood"
    print(
        f"flood of 60 calls of 50 ms: {flood:.2f}s; another namespace's call answered in {quiet * 1000:.1f} ms"
    )


def test_hung_calls_are_written_off_and_the_others_still_have_every_thread(held: Held) -> None:
    threads = FairThreads(threads=4, max_threads=12, per_lane=2, timeout=0.2)

    async def scenario() -> None:
        hung = [asyncio.ensure_future(threads.run("dead", held.call())) for _ in range(2)]
        for call in hung:
            with pytest.raises(Refused, match="no answer within"):
                await call
        assert threads.stuck == 2
        # Its next call is refused at once: both its slots are held by calls that never came back.
        asked = time.perf_counter()
        with pytest.raises(Refused, match="have not returned"):
            await threads.run("dead", held.call())
        assert time.perf_counter() - asked < 0.05
        # Every other namespace still has its threads: four at once answer together.
        asked = time.perf_counter()
        answers = await asyncio.gather(*(threads.run(f"ns-{i}", held.call(0.1)) for i in range(4)))
        assert answers == ["done"] * 4 and time.perf_counter() - asked < 0.19
        assert held.peak >= 4 and threads.threads == 2 + 4
        held.release.set()  # the dead server answers at last
        for _ in range(100):
            if threads.stuck == 0:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert threads.stuck == 0 and threads.threads <= 4 + 1
        assert await threads.run("dead", lambda: "back") == "back"

    asyncio.run(scenario())


def test_a_namespace_that_keeps_timing_out_is_backed_off_and_says_so(
    held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "BACKOFF_SECONDS", 0.5)
    threads = FairThreads(threads=4, max_threads=16, per_lane=4, timeout=0.1)

    async def scenario() -> None:
        for _ in range(pool.BACKOFF_AFTER_TIMEOUTS):
            with pytest.raises(Refused, match="no answer"):
                await threads.run("slow", held.call(0.3))
        with pytest.raises(Refused, match=r"namespace slow timed out 3 times in a row; not tried again"):
            await threads.run("slow", held.call(0.3))
        assert await threads.run("other", lambda: "fine") == "fine"
        await asyncio.sleep(0.6)
        assert await threads.run("slow", lambda: "tried again") == "tried again"
        assert await threads.run("slow", lambda: "and reset") == "and reset"

    asyncio.run(scenario())


def test_a_call_that_waited_past_its_deadline_in_the_queue_never_runs_late(held: Held) -> None:
    threads = FairThreads(threads=1, max_threads=1, per_lane=4, timeout=0.2)
    ran: list[str] = []

    async def scenario() -> None:
        blocker = asyncio.ensure_future(threads.run("a", held.call(0.5)))
        await asyncio.sleep(0.02)
        with pytest.raises(Refused, match="waited for a free thread"):
            await threads.run("b", lambda: ran.append("late"))
        with pytest.raises(Refused):
            await blocker
        await asyncio.sleep(0.5)
        # b's timeout was the pool's wait, not b's storage: b is not backed off.
        assert await threads.run("b", lambda: "now") == "now"

    asyncio.run(scenario())
    assert ran == []


def test_shared_storage_names_the_path_and_the_namespace(tmp_path: Path, held: Held) -> None:
    storage = SharedStorage(tmp_path, FairThreads(threads=2, per_lane=1, timeout=0.1))

    def hang(root: Path, relpath: str) -> None:
        held.release.wait()

    async def scenario() -> None:
        with pytest.raises(StorageError, match=r"team-a/job/marker: no answer within 0s"):
            await storage.call("team-a/job/marker", hang, "team-a/job/marker")
        with pytest.raises(StorageError, match=r"team-a/other: .*namespace team-a have not returned"):
            await storage.call("team-a/other", hang, "team-a/other")
        assert not (await storage.call("team-b/job/marker", read_marker, "team-b/job/marker")).exists

    asyncio.run(scenario())
