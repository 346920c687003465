"""A per-job work queue: one reconcile of a job at a time, bursts of triggers coalesced."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from tfmw_operator.api.objects import Key

Worker = Callable[[Key], Awaitable[float | None]]

logger = logging.getLogger(__name__)
RETRY_AFTER_ERROR_SECONDS = 2.0


class WorkQueue:
    """Runs `worker(key)` whenever a key is triggered, never twice at once for one key.

    A trigger that arrives while the key is being reconciled makes it run once more
    afterwards, so no observation is missed. The worker returns when it wants to be
    run again at the latest (a deadline coming up), or None.
    """

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._running: dict[Key, asyncio.Task[None]] = {}
        self._dirty: set[Key] = set()
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._closed = False

    def trigger(self, key: Key) -> None:
        if self._closed:
            return
        if key in self._running:
            self._dirty.add(key)
            return
        self._running[key] = asyncio.get_running_loop().create_task(self._run(key))

    def trigger_later(self, key: Key, delay: float) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        existing = self._timers.get(key)
        if existing is not None and not existing.cancelled() and existing.when() <= when:
            return
        if existing is not None:
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def forget(self, key: Key) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.trigger(key)

    async def _run(self, key: Key) -> None:
        try:
            while True:
                self._dirty.discard(key)
                try:
                    requeue = await self._worker(key)
                except Exception:
                    logger.exception("reconcile of %s/%s failed; retrying", *key)
                    requeue = RETRY_AFTER_ERROR_SECONDS
                if requeue is not None:
                    self.trigger_later(key, requeue)
                if self._closed or key not in self._dirty:
                    return
        finally:
            del self._running[key]

    async def drain(self) -> None:
        """Finish the reconciles running; start no more."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
