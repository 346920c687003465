"""Events posted in the background: held back once per burst of pod creation, not once per
Event, and queued per namespace, in turn, so one tenant's flood drops its own Events only."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import cast

import pytest
from tfmw_operator.api.objects import Json
from tfmw_operator.kube.client import Kube
from tfmw_operator.shell import events
from tfmw_operator.shell.events import EVENT_POSTERS, EventPoster


class FakeKube:
    def __init__(self) -> None:
        self.posted: list[tuple[float, str, str]] = []

    async def post_event(self, namespace: str, event: Json) -> None:
        await asyncio.sleep(0.002)
        self.posted.append((time.monotonic(), namespace, event["reason"]))


def poster_of() -> tuple[EventPoster, FakeKube]:
    kube = FakeKube()
    return EventPoster(cast(Kube, kube)), kube


async def stopped(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def test_a_tenant_launching_job_after_job_holds_the_events_back_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Launches one after another (two reconciles creating pods by turns, and one with short
    gaps): the posters hold back at the start of the burst, then post, not one Event per
    MAX_EVENT_DELAY_SECONDS each."""
    monkeypatch.setattr(events, "MAX_EVENT_DELAY_SECONDS", 0.2)
    monkeypatch.setattr(events, "BURST_GAP_SECONDS", 0.2, raising=False)

    async def scenario() -> tuple[int, int, float]:
        poster, kube = poster_of()
        posters = [asyncio.create_task(poster.run()) for _ in range(EVENT_POSTERS)]
        stop = asyncio.Event()

        async def launches(after: float, gap: float) -> None:
            await asyncio.sleep(after)
            while not stop.is_set():
                with poster.creating_pods():
                    await asyncio.sleep(0.1)
                await asyncio.sleep(gap)

        launchers = [asyncio.create_task(launches(*when)) for when in ((0, 0), (0.05, 0), (0.02, 0.01))]
        await asyncio.sleep(0.01)
        started = time.monotonic()
        for i in range(60):
            poster.post("tenant-b", {"reason": f"Failed{i}"})
        await asyncio.sleep(0.1)
        early = len(kube.posted)  # the pods came first
        await asyncio.sleep(0.9)
        stop.set()
        await stopped(launchers + posters)
        return early, len([p for p in kube.posted if p[0] - started <= 1.0]), kube.posted[-1][0] - started

    early, within_a_second, last = asyncio.run(scenario())
    assert early == 0
    assert within_a_second == 60, f"{within_a_second} of 60 Events posted in 1 s (the last at {last:.2f} s)"


def test_a_flood_of_one_namespace_drops_its_own_events_never_anothers(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(events, "MAX_WAITING_EVENTS", 25)
    monkeypatch.setattr(events, "MAX_WAITING_EVENTS_PER_NAMESPACE", 10, raising=False)
    caplog.set_level(logging.WARNING, logger=events.__name__)

    async def scenario() -> list[str]:
        poster, kube = poster_of()
        for i in range(50):
            poster.post("flood", {"reason": f"Flood{i}"})
        for i in range(5):
            poster.post("quiet", {"reason": f"Failed{i}"})
        posters = [asyncio.create_task(poster.run())]  # one poster: the order is the turn's
        while len(kube.posted) < 15:
            await asyncio.sleep(0.01)
        await stopped(posters)
        return [namespace for _, namespace, _ in kube.posted]

    order = asyncio.run(scenario())
    assert order.count("quiet") == 5 and order.count("flood") == 10
    assert set(order[:10]) == {"flood", "quiet"} and order[:10].count("quiet") == 5  # in turn
    said = [re.search(r"namespace (\S+): (\d+) dropped", r.getMessage()) for r in caplog.records]
    counts = [(m.group(1), int(m.group(2))) for m in said if m]
    assert {ns for ns, _ in counts} == {"flood"} and sum(n for _, n in counts) == 40
    assert len(counts) == 2  # the first drop at once, the rest once the queue emptied: not 40 lines


def test_when_all_are_full_the_namespace_with_the_most_waiting_loses_its_newest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events, "MAX_WAITING_EVENTS", 25)
    monkeypatch.setattr(events, "MAX_WAITING_EVENTS_PER_NAMESPACE", 10, raising=False)

    async def scenario() -> dict[str, int]:
        poster, kube = poster_of()
        for namespace in ("a", "b", "c"):
            for i in range(10):
                poster.post(namespace, {"reason": f"{namespace}{i}"})
        poster.post("d", {"reason": "Failed"})
        posters = [asyncio.create_task(poster.run())]
        while len(kube.posted) < 25:
            await asyncio.sleep(0.01)
        await stopped(posters)
        return {ns: [n for _, n, _ in kube.posted].count(ns) for ns in "abcd"}

    posted = asyncio.run(scenario())
    assert sum(posted.values()) == 25
    assert posted["d"] == 1 and posted["c"] >= 7 and max(posted.values()) - min(posted["a"], posted["c"]) <= 1
