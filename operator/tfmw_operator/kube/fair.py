"""A bounded resource shared fairly between namespaces: API requests, launches, reconciles,
log reads.

A plain semaphore serves its waiters first come, first served: a namespace that submits a
thousand jobs at once would queue a thousand launches ahead of another namespace's one.
`FairSlots` hands a freed slot to the waiting namespace that holds the fewest slots (the
longest-waiting one among equals), so while others wait a namespace gets no more than its
turn, and when nobody else waits it may use them all (nothing is left idle).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator


def namespace_of_path(path: str) -> str:
    """The namespace an API path is in (`.../namespaces/<ns>/...`); "" for a cluster-wide one."""
    parts = path.split("/")
    for index, part in enumerate(parts[:-1]):
        if part == "namespaces" and index + 2 < len(parts):
            return parts[index + 1]
    return ""


class FairSlots:
    """`capacity` slots, handed out in turn between namespaces; `per_namespace` (optional) is
    the most one namespace may hold at once, whether others wait or not."""

    def __init__(self, capacity: int, per_namespace: int | None = None) -> None:
        self.capacity = capacity
        self.per_namespace = per_namespace or capacity
        self._in_use = 0
        self._held: dict[str, int] = {}
        # Namespaces with waiters, in the order they began waiting (or were last served).
        self._waiting: collections.OrderedDict[str, collections.deque[asyncio.Future[None]]] = (
            collections.OrderedDict()
        )

    @property
    def in_use(self) -> int:
        return self._in_use

    def held_by(self, namespace: str) -> int:
        return self._held.get(namespace, 0)

    def waiting(self, namespace: str | None = None) -> int:
        if namespace is not None:
            return len(self._waiting.get(namespace, ()))
        return sum(len(waiters) for waiters in self._waiting.values())

    def try_acquire(self, namespace: str, count: int = 1) -> bool:
        """Take `count` slots now if they are free (and nobody waits); False otherwise. For
        slots nobody waits for: what does not get one does without."""
        if self._waiting or not self._free_for(namespace, count):
            return False
        self._take(namespace, count)
        return True

    async def acquire(self, namespace: str) -> None:
        if not self._waiting and self._free_for(namespace, 1):
            self._take(namespace, 1)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(namespace, collections.deque()).append(waiter)
        self._hand_over()  # a free slot the waiters before could not take (their cap) is its
        try:
            await waiter  # handed over: counted as held already
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(namespace)  # handed over just as the wait was given up
            else:
                waiter.cancel()
                self._drop_waiter(namespace, waiter)
            raise

    def release(self, namespace: str, count: int = 1) -> None:
        held = self._held.get(namespace, 0) - count
        if held > 0:
            self._held[namespace] = held
        else:
            self._held.pop(namespace, None)
        self._in_use -= count
        self._hand_over()

    @contextlib.asynccontextmanager
    async def held(self, namespace: str) -> AsyncIterator[None]:
        await self.acquire(namespace)
        try:
            yield
        finally:
            self.release(namespace)

    def _free_for(self, namespace: str, count: int) -> bool:
        return self._in_use + count <= self.capacity and self.held_by(namespace) + count <= self.per_namespace

    def _take(self, namespace: str, count: int) -> None:
        self._in_use += count
        self._held[namespace] = self._held.get(namespace, 0) + count

    def _hand_over(self) -> None:
        """Free slots to waiters: each to the namespace holding fewest, longest waiting first."""
        while self._in_use < self.capacity and self._waiting:
            chosen = None
            for namespace, waiters in self._waiting.items():
                if not waiters or self.held_by(namespace) >= self.per_namespace:
                    continue
                if chosen is None or self.held_by(namespace) < self.held_by(chosen):
                    chosen = namespace
            if chosen is None:
                return
            waiters = self._waiting[chosen]
            waiter = waiters.popleft()
            if waiters:
                self._waiting.move_to_end(chosen)
            else:
                del self._waiting[chosen]
            if waiter.done():
                continue  # given up meanwhile
            self._take(chosen, 1)
            waiter.set_result(None)

    def _drop_waiter(self, namespace: str, waiter: asyncio.Future[None]) -> None:
        waiters = self._waiting.get(namespace)
        if waiters is None:
            return
        with contextlib.suppress(ValueError):
            waiters.remove(waiter)
        if not waiters:
            del self._waiting[namespace]
        # A slot it was next for may be free now for someone else.
        self._hand_over()
