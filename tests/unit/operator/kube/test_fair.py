"""Slots shared in turn between namespaces: one that floods gets no more than its turn."""

from __future__ import annotations

import asyncio
import time

import pytest
from tfmw_operator.kube.fair import FairSlots, namespace_of_path


@pytest.mark.parametrize(
    ("path", "namespace"),
    [
        ("/api/v1/namespaces/team-a/pods", "team-a"),
        ("/api/v1/namespaces/team-a/pods/x/log", "team-a"),
        ("/apis/tfmw.dev/v1alpha1/namespaces/b/tfmwjobs/j/status", "b"),
        ("/apis/tfmw.dev/v1alpha1/tfmwjobs", ""),
        ("/api/v1/namespaces", ""),
        ("/api/v1/namespaces/c", ""),  # the namespace object itself: cluster-scoped
        ("/version", ""),
    ],
)
def test_the_namespace_of_an_api_path(path: str, namespace: str) -> None:
    assert namespace_of_path(path) == namespace


def test_a_freed_slot_goes_to_the_namespace_holding_fewest_not_the_first_in_line() -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(2)
        served: list[str] = []
        await slots.acquire("a")
        await slots.acquire("a")

        async def take(namespace: str) -> None:
            await slots.acquire(namespace)
            served.append(namespace)

        waiting = [asyncio.ensure_future(take("a")) for _ in range(5)]
        await asyncio.sleep(0)
        waiting += [asyncio.ensure_future(take("b")), asyncio.ensure_future(take("c"))]
        await asyncio.sleep(0)
        slots.release("a")  # a holds 1 now: b (0 held) first
        await asyncio.sleep(0)
        slots.release("a")  # a holds 0, b 1, c 0: a waited longer, but c is next after a's turn
        await asyncio.sleep(0)
        for _ in range(5):
            slots.release(served[-1] if served else "a")
            await asyncio.sleep(0)
        await asyncio.gather(*waiting)
        return served

    served = asyncio.run(scenario())
    assert served[0] == "b" and "c" in served[:3], served


def test_a_cap_per_namespace_holds_whether_or_not_others_wait() -> None:
    async def scenario() -> None:
        slots = FairSlots(4, per_namespace=2)
        assert slots.try_acquire("a") and slots.try_acquire("a")
        assert not slots.try_acquire("a")
        blocked = asyncio.ensure_future(slots.acquire("a"))
        await asyncio.sleep(0)
        assert not blocked.done()
        # a waits at its cap: b takes the free slots at once, not behind a.
        await asyncio.wait_for(slots.acquire("b"), 0.1)
        await asyncio.wait_for(slots.acquire("b"), 0.1)
        slots.release("a")
        await asyncio.wait_for(blocked, 0.1)
        assert slots.held_by("a") == 2 and slots.in_use == 4

    asyncio.run(scenario())


def test_a_waiter_that_gives_up_leaks_no_slot() -> None:
    async def scenario() -> None:
        slots = FairSlots(1)
        await slots.acquire("a")
        gives_up = asyncio.ensure_future(slots.acquire("b"))
        later = asyncio.ensure_future(slots.acquire("c"))
        await asyncio.sleep(0)
        gives_up.cancel()
        await asyncio.sleep(0)
        slots.release("a")
        await asyncio.wait_for(later, 0.1)
        assert slots.in_use == 1 and slots.held_by("c") == 1 and slots.waiting() == 0
        slots.release("c")
        assert slots.in_use == 0

    asyncio.run(scenario())


def test_a_flood_of_one_namespace_delays_another_by_about_one_turn() -> None:
    """1,000 requests of 2 ms from one namespace through 16 slots: another namespace's one
    request waits for about one request to end, not for the 1,000."""

    async def scenario() -> tuple[float, float]:
        slots = FairSlots(16)

        async def request(namespace: str) -> float:
            asked = time.perf_counter()
            async with slots.held(namespace):
                waited = time.perf_counter() - asked
                await asyncio.sleep(0.002)
            return waited

        started = time.perf_counter()
        flood = [asyncio.ensure_future(request("flood")) for _ in range(1000)]
        await asyncio.sleep(0.01)
        quiet = await request("quiet")
        await asyncio.gather(*flood)
        return quiet, time.perf_counter() - started

    quiet, flood = asyncio.run(scenario())
    assert quiet < 0.05 < flood / 2, (quiet, flood)
    print(f"flood of 1,000 requests: {flood:.2f}s; the other namespace waited {quiet * 1000:.1f} ms")
