"""Kubernetes Events, posted in the background after the work they tell of.

Each namespace has a queue of its own, and the posters take from them in turn: a tenant whose
jobs flood Events waits behind its own, and when its queue is full drops its own, never another
tenant's. While pods are being created, each Event waits (never long): in a burst of launches
or restarts the pods come first, as in every scale run measured (docs/benchmarks.md), and a
quiet tenant's Warning still goes out on its turn, not behind a launching tenant's Events.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Iterator

from tfmw_operator.api.objects import Json
from tfmw_operator.kube.client import Kube

logger = logging.getLogger(__name__)

EVENT_POSTERS = 4
# Events waiting, in all: beyond this, the namespace with the most waiting loses its newest.
MAX_WAITING_EVENTS = 10_000
# Events waiting of one namespace: beyond this, its newest are dropped.
MAX_WAITING_EVENTS_PER_NAMESPACE = 1_000
# How long each Event waits at most while pods are being created.
MAX_EVENT_DELAY_SECONDS = 2.0
# A namespace dropping Events says how many at most this often (and once its queue empties).
DROPPED_LOG_SECONDS = 60.0


class EventPoster:
    """Queues of Events, one per namespace, and the posters that drain them in turn."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.capacity = MAX_WAITING_EVENTS
        self.per_namespace = MAX_WAITING_EVENTS_PER_NAMESPACE
        self.delay = MAX_EVENT_DELAY_SECONDS
        # The namespaces with Events waiting, in turn: the one served goes to the end.
        self._waiting: collections.OrderedDict[str, collections.deque[Json]] = collections.OrderedDict()
        self._count = 0  # Events waiting, in all
        self._ready = asyncio.Event()  # set while any Event waits
        # Dropped, by namespace, since its last line about them; when that line was.
        self._dropped: dict[str, int] = {}
        self._dropped_said: dict[str, float] = {}
        self._creating = 0  # reconciles creating pods now
        self._not_creating = asyncio.Event()
        self._not_creating.set()

    def post(self, namespace: str, event: Json) -> None:
        queue = self._waiting.get(namespace)
        if queue is not None and len(queue) >= self.per_namespace:
            self._drop(namespace, 1)
            return
        if self._count >= self.capacity:
            # The namespace with the most waiting pays for it, with its newest Event: a flood
            # never pushes out a quieter namespace's.
            fullest = max(self._waiting, key=lambda ns: len(self._waiting[ns]))
            if len(self._waiting[fullest]) <= len(queue or ()):
                self._drop(namespace, 1)
                return
            self._waiting[fullest].pop()
            self._count -= 1
            self._drop(fullest, 1)
            if not self._waiting[fullest]:  # a capacity below the namespaces waiting
                del self._waiting[fullest]
                self._say_dropped(fullest, time.monotonic())
                self._dropped_said.pop(fullest, None)
        if queue is None:
            queue = self._waiting[namespace] = collections.deque()
        queue.append(event)
        self._count += 1
        self._ready.set()

    def _drop(self, namespace: str, count: int) -> None:
        """Count Events dropped; a line says how many, at most every DROPPED_LOG_SECONDS (the
        first at once), and the rest once the namespace's queue has emptied."""
        self._dropped[namespace] = self._dropped.get(namespace, 0) + count
        now = time.monotonic()
        if now - self._dropped_said.get(namespace, float("-inf")) >= DROPPED_LOG_SECONDS:
            self._say_dropped(namespace, now)

    def _say_dropped(self, namespace: str, now: float) -> None:
        dropped = self._dropped.pop(namespace, 0)
        if dropped:
            self._dropped_said[namespace] = now
            logger.warning(
                "too many Events waiting in namespace %s: %d dropped (at most %d wait per namespace)",
                namespace or "(cluster)",
                dropped,
                self.per_namespace,
            )

    def _next(self) -> tuple[str, Json] | None:
        """The next Event to post: the oldest of the namespace whose turn it is."""
        if not self._waiting:
            return None
        namespace, queue = next(iter(self._waiting.items()))
        event = queue.popleft()
        self._count -= 1
        if queue:
            self._waiting.move_to_end(namespace)
        else:
            del self._waiting[namespace]
            if not self._waiting:
                self._ready.clear()
            self._say_dropped(namespace, time.monotonic())
            self._dropped_said.pop(namespace, None)
        return namespace, event

    @contextlib.contextmanager
    def creating_pods(self) -> Iterator[None]:
        """Hold the posters back while the block creates pods (each Event at most `delay`)."""
        self._creating += 1
        self._not_creating.clear()
        try:
            yield
        finally:
            self._creating -= 1
            if not self._creating:
                self._not_creating.set()

    async def _let_creation_go_first(self) -> None:
        if self._creating:
            with contextlib.suppress(TimeoutError):  # but never for long
                await asyncio.wait_for(self._not_creating.wait(), self.delay)

    async def run(self) -> None:
        """One poster; runs until cancelled, then posts what is left."""
        try:
            while True:
                await self._ready.wait()
                await self._let_creation_go_first()
                taken = self._next()
                if taken is not None:
                    await self.kube.post_event(*taken)
        except asyncio.CancelledError:
            while (taken := self._next()) is not None:
                await self.kube.post_event(*taken)
            raise
