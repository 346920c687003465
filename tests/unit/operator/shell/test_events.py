"""Events posted in the background: each held back while pods are created, and queued per
namespace, in turn, so one tenant's flood waits behind and drops its own Events only."""

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


def test_while_pods_are_created_each_event_waits_and_a_quiet_tenants_goes_on_its_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pods first: while creation goes on, each Event waits up to MAX_EVENT_DELAY_SECONDS, so a
    restart wave's creates do not compete with its Events on a saturated API server; and the
    namespaces take turns, so a quiet tenant's Warning is not behind another's flood."""
    monkeypatch.setattr(events, "MAX_EVENT_DELAY_SECONDS", 0.2)

    async def scenario() -> tuple[int, int, list[str]]:
        poster, kube = poster_of()
        posters = [asyncio.create_task(poster.run()) for _ in range(EVENT_POSTERS)]
        stop = asyncio.Event()

        async def launches(after: float) -> None:
            await asyncio.sleep(after)
            while not stop.is_set():
                with poster.creating_pods():
                    await asyncio.sleep(0.05)

        # Two reconciles creating by turns, overlapping: creation never pauses.
        launchers = [asyncio.create_task(launches(after)) for after in (0, 0.025)]
        await asyncio.sleep(0.03)
        for i in range(60):
            poster.post("tenant-a", {"reason": f"Flood{i}"})
        poster.post("tenant-b", {"reason": "Failed"})
        await asyncio.sleep(0.1)
        early = len(kube.posted)
        await asyncio.sleep(0.9)
        within_a_second = len(kube.posted)
        stop.set()
        await stopped([*launchers, *posters])
        return early, within_a_second, [reason for _, _, reason in kube.posted]

    early, within_a_second, reasons = asyncio.run(scenario())
    assert early == 0  # the pods came first
    assert within_a_second <= EVENT_POSTERS * 6, f"{within_a_second} Events posted while pods were created"
    assert "Failed" in reasons[: EVENT_POSTERS * 2], "a quiet tenant's Warning waited behind a flood"


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
