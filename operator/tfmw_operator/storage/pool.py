"""The storage threads, shared fairly between namespaces.

Every read and write of the shared storage runs in a thread of its own, off the event
loop, within a deadline. A call can hang in the kernel (a dead NFS server) and keep its
thread for good, and a tenant can make its own folders slow to walk; neither may take the
storage away from other namespaces. So:

- each namespace (a call's lane: the first segment of its path) has at most
  CALLS_PER_NAMESPACE calls queued or running at once; its next calls wait for one of
  them, not for the other namespaces' (at most CALLS_PER_NAMESPACE of THREADS threads);
- a call past its deadline is given up by its caller (StorageError), and its thread is
  written off until it returns: another thread takes its place, up to MAX_THREADS in all,
  so `THREADS` threads stay free for the calls that do answer;
- a namespace whose calls are all stuck is refused at once, and one whose calls keep
  timing out (BACKOFF_AFTER_TIMEOUTS in a row) is not tried for a while (BACKOFF_SECONDS,
  doubling up to MAX_BACKOFF_SECONDS): its jobs get a StorageError condition saying so,
  and the threads go on serving the others.

A call queued behind others that times out before it started is dropped, not run late, and
does not count against its namespace (it was the pool's wait, not its storage).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

THREADS = 16
# Threads at most, stuck ones included: THREADS free ones beside up to this many stuck.
MAX_THREADS = 64
CALLS_PER_NAMESPACE = 4
TIMEOUT_SECONDS = 10.0
BACKOFF_AFTER_TIMEOUTS = 3
BACKOFF_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 300.0


class Refused(Exception):
    """The pool would not run or finish a call: the message says why, for a StorageError."""


class _State(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DROPPED = "dropped"  # given up before a thread took it
    DONE = "done"


@dataclass(eq=False)
class _Call(Generic[T]):
    function: Callable[[], T]
    lane: _Lane
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    state: _State = _State.QUEUED
    overdue: bool = False  # its caller gave up while it ran: its thread is written off


@dataclass(eq=False)
class _Lane:
    """One namespace's calls."""

    name: str
    in_flight: int = 0  # queued or running, stuck ones included
    stuck: int = 0  # running past their deadline
    timeouts: int = 0  # in a row, while running
    backoff_until: float = 0.0
    waiters: collections.deque[asyncio.Future[None]] = field(default_factory=collections.deque)

    @property
    def idle(self) -> bool:
        return not (self.in_flight or self.stuck or self.timeouts or self.waiters)


class FairThreads:
    """Threads for blocking calls, by lane, within a deadline each."""

    def __init__(
        self,
        threads: int = THREADS,
        max_threads: int = MAX_THREADS,
        per_lane: int = CALLS_PER_NAMESPACE,
        timeout: float = TIMEOUT_SECONDS,
        name: str = "tfmw-storage",
    ) -> None:
        self.size = threads
        self.max_threads = max(max_threads, threads)
        self.per_lane = per_lane
        self.timeout = timeout
        self.name = name
        self._queue: queue.SimpleQueue[_Call[object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # alive
        self._idle = 0  # waiting for a call
        self._queued = 0  # calls not yet taken by a thread
        self._stuck = 0  # running a call past its deadline
        self._lanes: dict[str, _Lane] = {}

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def stuck(self) -> int:
        return self._stuck

    def lane_in_flight(self, lane: str) -> int:
        found = self._lanes.get(lane)
        return 0 if found is None else found.in_flight

    async def run(self, lane_name: str, function: Callable[[], T]) -> T:
        """`function()` in a thread, counted against `lane_name`; Refused when it cannot be
        run, or has not returned, within the deadline."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(lane_name) or self._lanes.setdefault(lane_name, _Lane(lane_name))
        now = loop.time()
        if lane.backoff_until > now:
            raise Refused(
                f"the storage of {_shown(lane_name)} timed out {lane.timeouts} times in a row; not "
                f"tried again for {lane.backoff_until - now:.0f}s (other namespaces are served)"
            )
        if lane.stuck >= self.per_lane:
            raise Refused(
                f"{lane.stuck} calls to the storage of {_shown(lane_name)} have not returned past their "
                f"deadline of {self.timeout:.0f}s; no more are sent until one does"
            )
        deadline = now + self.timeout
        try:
            await self._acquire(lane, deadline)
        except TimeoutError:
            self._forget_if_idle(lane)
            raise Refused(
                f"no answer within {self.timeout:.0f}s ({self.per_lane} calls of {_shown(lane_name)} "
                "were ahead of it)"
            ) from None
        future: asyncio.Future[T] = loop.create_future()
        call = _Call(function, lane, loop, future)
        self._submit(call)
        try:
            async with asyncio.timeout_at(deadline):
                return await future
        except TimeoutError:
            if self._give_up(call) is _State.RUNNING:
                raise Refused(f"no answer within {self.timeout:.0f}s") from None
            raise Refused(f"no answer within {self.timeout:.0f}s (it waited for a free thread)") from None
        except asyncio.CancelledError:
            self._give_up(call, counted=False)
            raise

    # ---- the event loop's side ----

    async def _acquire(self, lane: _Lane, deadline: float) -> None:
        if lane.in_flight < self.per_lane and not lane.waiters:
            lane.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter  # the slot is handed over: in_flight counts it already
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release(lane)  # handed over just as the wait ended
            else:
                waiter.cancel()
                if waiter in lane.waiters:
                    lane.waiters.remove(waiter)
            raise

    def _release(self, lane: _Lane) -> None:
        while lane.waiters:
            waiter = lane.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        lane.in_flight -= 1
        self._forget_if_idle(lane)

    def _forget_if_idle(self, lane: _Lane) -> None:
        if lane.idle and lane.backoff_until <= 0 and self._lanes.get(lane.name) is lane:
            del self._lanes[lane.name]

    def _give_up(self, call: _Call[T], counted: bool = True) -> _State:
        """The caller leaves: a queued call is dropped (its slot freed now), a running one is
        written off until its thread returns."""
        with self._lock:
            state = call.state
            if state is _State.QUEUED:
                call.state = _State.DROPPED
            elif state is _State.RUNNING:
                call.overdue = True
                self._stuck += 1
                self._spawn_if_needed()
        lane = call.lane
        if state is _State.QUEUED:
            self._release(lane)
        elif state is _State.RUNNING:
            lane.stuck += 1
            if counted:
                self._timed_out(lane)
        return state

    def _timed_out(self, lane: _Lane) -> None:
        lane.timeouts += 1
        if lane.timeouts >= BACKOFF_AFTER_TIMEOUTS:
            backoff = min(
                BACKOFF_SECONDS * 2.0 ** (lane.timeouts - BACKOFF_AFTER_TIMEOUTS), MAX_BACKOFF_SECONDS
            )
            lane.backoff_until = call_time() + backoff
            logger.warning(
                "shared storage: %s timed out %d times in a row; not tried for %.0fs",
                _shown(lane.name),
                lane.timeouts,
                backoff,
            )

    def _finished(self, call: _Call[T], result: T | None, error: BaseException | None) -> None:
        """On the event loop: a thread returned from `call`."""
        lane = call.lane
        if call.overdue:
            lane.stuck -= 1
            logger.info("shared storage: a call to %s returned after its deadline", _shown(lane.name))
        elif error is None:
            lane.timeouts = 0
            lane.backoff_until = 0.0
        if not call.future.done():
            if error is not None:
                call.future.set_exception(error)
            else:
                call.future.set_result(result)  # type: ignore[arg-type]
        self._release(lane)

    # ---- the threads' side ----

    def _submit(self, call: _Call[T]) -> None:
        with self._lock:
            self._queued += 1
            if self._idle < self._queued:
                self._spawn_if_needed()
        self._queue.put(call)  # type: ignore[arg-type]

    def _spawn_if_needed(self) -> None:
        """Under the lock: another thread, while fewer than `size` are free and the cap allows."""
        if self._threads - self._stuck < self.size and self._threads < self.max_threads:
            self._threads += 1
            threading.Thread(target=self._work, name=f"{self.name}-{self._threads}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            call = self._queue.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
                if call.state is not _State.QUEUED:
                    continue
                call.state = _State.RUNNING
            result: object = None
            error: BaseException | None = None
            try:
                result = call.function()
            except BaseException as raised:  # handed to the caller, whatever it is
                error = raised
            with self._lock:
                call.state = _State.DONE
                overdue = call.overdue
                if overdue:
                    self._stuck -= 1
                leave = overdue and self._threads - self._stuck > self.size
                if leave:
                    self._threads -= 1
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                call.loop.call_soon_threadsafe(self._finished, call, result, error)
            if leave:
                return


def call_time() -> float:
    return asyncio.get_running_loop().time()


def _shown(lane: str) -> str:
    return f"namespace {lane}" if lane else "the shared root"
