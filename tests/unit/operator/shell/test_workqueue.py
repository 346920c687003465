import asyncio

from tfmw_operator.api.objects import Key
from tfmw_operator.shell.workqueue import WorkQueue


def test_one_reconcile_per_key_at_a_time_and_bursts_coalesce() -> None:
    async def scenario() -> tuple[int, int]:
        running = 0
        peak = 0
        calls = 0
        gate = asyncio.Event()

        async def worker(key: Key) -> float | None:
            nonlocal running, peak, calls
            calls += 1
            running += 1
            peak = max(peak, running)
            await gate.wait()
            running -= 1
            return None

        queue = WorkQueue(worker)
        queue.trigger(("ns", "job"))
        await asyncio.sleep(0.01)  # the first reconcile is now running
        for _ in range(50):
            queue.trigger(("ns", "job"))
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.sleep(0.05)
        return peak, calls

    peak, calls = asyncio.run(scenario())
    assert peak == 1
    assert calls == 2  # the first run, and one more for everything that came meanwhile


def test_requeue_after_runs_again_and_errors_are_retried() -> None:
    async def scenario() -> list[str]:
        seen: list[str] = []

        async def worker(key: Key) -> float | None:
            seen.append(key[1])
            if len(seen) == 1:
                return 0.01
            if len(seen) == 2:
                raise RuntimeError("API hiccup")
            return None

        queue = WorkQueue(worker)
        queue.trigger(("ns", "job"))
        await asyncio.sleep(0.05)
        queue._timers[("ns", "job")].cancel()  # the error retry is 2s away; fire it now
        queue._fire(("ns", "job"))
        await asyncio.sleep(0.02)
        return seen

    assert asyncio.run(scenario()) == ["job", "job", "job"]


def test_a_drained_queue_finishes_what_runs_and_starts_nothing_more() -> None:
    async def scenario() -> list[str]:
        calls: list[str] = []
        gate = asyncio.Event()

        async def worker(key: Key) -> float | None:
            calls.append(key[1])
            await gate.wait()
            return 0.0  # wants to run again at once

        queue = WorkQueue(worker)
        queue.trigger(("ns", "a"))
        await asyncio.sleep(0.01)
        queue.trigger(("ns", "a"))  # dirty: would run once more
        draining = asyncio.ensure_future(queue.drain())
        await asyncio.sleep(0.01)
        queue.trigger(("ns", "b"))
        queue.trigger_later(("ns", "c"), 0)
        gate.set()
        await draining
        await asyncio.sleep(0.02)
        return calls

    assert asyncio.run(scenario()) == ["a"]
