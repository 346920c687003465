"""Kubernetes Events, posted in the background after the work they tell of."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from tfmw_operator.api.objects import Json
from tfmw_operator.kube.client import Kube

logger = logging.getLogger(__name__)

EVENT_POSTERS = 4
MAX_WAITING_EVENTS = 10_000
MAX_EVENT_DELAY_SECONDS = 2.0


class EventPoster:
    """A bounded queue of Events and the posters that drain it. While pods are being
    created, the posters wait (never long): in a burst of launches, the pods come first."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._waiting: asyncio.Queue[tuple[str, Json]] = asyncio.Queue(MAX_WAITING_EVENTS)
        self._creating = 0  # reconciles creating pods now
        self._not_creating = asyncio.Event()
        self._not_creating.set()

    def post(self, namespace: str, event: Json) -> None:
        try:
            self._waiting.put_nowait((namespace, event))
        except asyncio.QueueFull:
            logger.warning("too many Events waiting; dropped %s: %s", event["reason"], event.get("message"))

    @contextlib.contextmanager
    def creating_pods(self) -> Iterator[None]:
        """Hold the posters back while the block creates pods."""
        self._creating += 1
        self._not_creating.clear()
        try:
            yield
        finally:
            self._creating -= 1
            if not self._creating:
                self._not_creating.set()

    async def run(self) -> None:
        """One poster; runs until cancelled, then posts what is left."""
        try:
            while True:
                namespace, event = await self._waiting.get()
                with contextlib.suppress(TimeoutError):  # but never for long
                    await asyncio.wait_for(self._not_creating.wait(), MAX_EVENT_DELAY_SECONDS)
                await self.kube.post_event(namespace, event)
        except asyncio.CancelledError:
            while not self._waiting.empty():
                namespace, event = self._waiting.get_nowait()
                await self.kube.post_event(namespace, event)
            raise
