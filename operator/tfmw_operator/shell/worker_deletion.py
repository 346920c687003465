"""Deleting a worker, and keeping its log on the shared storage, read to its last line."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

from tfmw_operator.core.decision import DeletePods
from tfmw_operator.core.owned import Owned
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.kube.client import Kube, LogUnavailable
from tfmw_operator.kube.fair import FairSlots
from tfmw_operator.kube.informer import Informer
from tfmw_operator.storage.files import SharedStorage, archive_log, reported

logger = logging.getLogger(__name__)

LOG_ARCHIVE_BYTES = 4 * 1024 * 1024  # the tail of each container's log that is kept
# All logs being read at once share this much of the operator's memory: when a 1,024-worker
# gang is deleted, each container keeps a shorter tail (at least LOG_MIN_BYTES).
LOG_MEMORY_BYTES = 64 * 1024 * 1024
LOG_MIN_BYTES = 64 * 1024
# Each log being read holds an HTTPS connection of its own, a followed one until its worker
# has stopped: deleting thousands of workers at once would open as many (docs/benchmarks.md,
# "The measurements behind the code"). Beyond LOG_FOLLOWED_AT_ONCE, a worker's log is read
# as it is, LOG_READS_AT_ONCE at a time (the lines it prints while stopping are not kept):
# before its deletion when that is immediate, beside it when graceful.
LOG_FOLLOWED_AT_ONCE = 64
LOG_READS_AT_ONCE = 32
# The most one namespace follows at once: workers that ignore SIGTERM with a grace period of
# days hold their slots that long, and take no more than a quarter from everyone else.
LOG_FOLLOWED_PER_NAMESPACE = 16
# A log that cannot be read (a kubelet restarting answers nothing, or errors, for a few
# seconds) is asked again, after these pauses: the pod is deleted only after, when it is
# deleted at once, so its log is still there to be read. 404: the pod is gone, and its log.
LOG_READ_PAUSES = (1.0, 2.0, 4.0, 4.0)
# How late after a worker's end its kubelet's report still opens the window: a condition's
# time is anyone's to write (a controller's DisruptionTarget, a skewed clock, 2999), and an
# operator restarted again and again must still delete the pod in the end.
LOG_REPORT_DELAY_MAX = timedelta(minutes=10)


def log_window_start(pod: ObservedPod) -> datetime | None:
    """When the retries' window opens for a worker's log: when its kubelet reported the end
    (the pod's latest condition change), if later than the end itself. A worker that ended
    while its kubelet was down is reported only once the kubelet is back, its finishedAt
    the real end, long before: its window must start then, when the log can first be
    asked, or a kubelet just back gets a single try. At most LOG_REPORT_DELAY_MAX after the end."""
    if pod.finished_at is None:  # running (followed): every pause
        return None
    reported = min(pod.changed_at or pod.finished_at, pod.finished_at + LOG_REPORT_DELAY_MAX)
    return max(pod.finished_at, reported)


def log_read_pauses(finished_at: datetime | None, now: datetime) -> tuple[float, ...]:
    """The pauses of LOG_READ_PAUSES still due for a worker that stopped at `finished_at`
    (log_window_start). The window runs from the worker's end, not from this operator's
    start: an operator restarted again and again (each start retrying from the first pause)
    would otherwise never delete the pod, and the gang would never restart. By level, not
    by edge."""
    if finished_at is None:
        return LOG_READ_PAUSES
    elapsed = (now - finished_at).total_seconds()
    due, spent = [], 0.0
    for pause in LOG_READ_PAUSES:
        spent += pause
        if spent > elapsed:
            due.append(pause)
    return tuple(due)


Warn = Callable[[str, str], None]  # a Warning Event (reason, message) on the worker's job
Reading = Awaitable[Sequence[bytes | BaseException]]  # each container's log, in order


class WorkerDeleter:
    def __init__(self, kube: Kube, storage: SharedStorage, pods: Callable[[str], Informer[Owned]]) -> None:
        self.kube = kube
        self.storage = storage
        self.pods = pods  # the view of a namespace's pods
        self._reading = 0  # containers whose logs are being read now
        # Of those, followed while their workers stop; both shared in turn between namespaces.
        self._followed = FairSlots(LOG_FOLLOWED_AT_ONCE, per_namespace=LOG_FOLLOWED_PER_NAMESPACE)
        self._reads_now = FairSlots(LOG_READS_AT_ONCE)  # read before a deletion
        # Logs of workers deleted gracefully, waiting for a reader: a queue per namespace, the
        # namespaces served in turn. One tenant's cleanup of thousands of workers must not put
        # another's few behind it: a log still waiting when its worker is gone is lost.
        self._in_turn: collections.OrderedDict[str, collections.deque[tuple[str, ObservedPod, Warn]]] = (
            collections.OrderedDict()
        )
        self._readers = 0  # reading the queued logs, at most LOG_READS_AT_ONCE
        self._archiving: set[asyncio.Task[None]] = set()

    async def delete(
        self, namespace: str, job_name: str, pod: ObservedPod, action: DeletePods, warn: Warn
    ) -> bool:
        """Delete the worker and keep its log, saved in the background: saving it is best
        effort and holds up neither the deletion nor the job's next decision (a gang restart's
        new pods wait for the old ones to be gone, not for their log streams to end; a stream
        from a lost node ends only at its timeout).

        A running worker given a grace period has its log followed while it stops, to its last
        line. Beyond LOG_FOLLOWED_AT_ONCE, for a worker that has stopped, and for one deleted
        with no grace, the log is read as it is: before the deletion when that is immediate
        (a stopped pod, no grace), which would take the log along; beside it when graceful."""
        # No log to read where no kubelet answers (a lost node): a read would hang to its
        # timeout; and none to keep for a job with no shared volume.
        if action.force or not action.keep_logs or pod.phase in ("Pending", "Unknown") or pod.node_lost:
            return await self.delete_pod(namespace, pod, action.grace_seconds)
        count = len(pod.containers)
        grace = pod.grace_seconds if action.grace_seconds is None else action.grace_seconds
        job_relpath = f"{namespace}/{job_name}"
        # With no grace the API server forgets the pod at once, and a log stream not yet
        # open by then finds nothing: such a worker's log is read before, never followed.
        immediate = pod.terminated or grace == 0
        follow = pod.active and not immediate and self._followed.try_acquire(namespace, count)
        if not follow and not immediate:
            # A graceful deletion leaves the log readable while the worker stops: read beside it.
            gone = await self.delete_pod(namespace, pod, action.grace_seconds)
            self._read_in_turn(namespace, job_relpath, pod, warn)
            return gone
        if follow:
            self._reading += count
            reading = asyncio.gather(*self._reads(namespace, pod, follow, grace), return_exceptions=True)
            self._archive_later(job_relpath, pod, reading, follow, warn)
            await asyncio.sleep(0)  # let the log requests go out before the stop
            return await self.delete_pod(namespace, pod, action.grace_seconds)
        # Deleted at once: read first, or the log goes with the pod.
        async with self._reads_now.held(namespace):
            self._reading += count  # counted once reading (a wait for the slot may be cancelled)
            reading = asyncio.gather(*self._reads(namespace, pod, follow, grace), return_exceptions=True)
            self._archive_later(job_relpath, pod, reading, follow, warn)
            await reading
        return await self.delete_pod(namespace, pod, action.grace_seconds)

    def _reads(
        self, namespace: str, pod: ObservedPod, follow: bool, grace: int
    ) -> Iterator[Awaitable[bytes]]:
        """Each container's log, kept to a tail that shares LOG_MEMORY_BYTES with the others
        being read now."""
        limit = log_tail_bytes(self._reading)
        pauses = log_read_pauses(log_window_start(pod), datetime.now(UTC))
        return (self._read_log(namespace, pod.name, c, limit, follow, grace, pauses) for c in pod.containers)

    async def _read_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        limit: int,
        follow: bool,
        grace: int,
        pauses: tuple[float, ...] = LOG_READ_PAUSES,
    ) -> bytes:
        """One container's log; asked again after `pauses` while it cannot be read and the
        pod is not gone (then followed no more: the worker has stopped by then, or soon)."""
        for tries, pause in enumerate((*pauses, None), start=1):
            try:
                return await self.kube.container_log(namespace, pod, container, limit, follow, grace)
            except LogUnavailable as unavailable:
                if unavailable.status == 404 or pause is None:
                    unavailable.tries = tries
                    raise
                logger.info("the log of %s/%s [%s] not read yet: %s", namespace, pod, container, unavailable)
                follow = False
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    def _read_in_turn(self, namespace: str, job_relpath: str, pod: ObservedPod, warn: Warn) -> None:
        """Queue the log of a worker deleted gracefully, read by LOG_READS_AT_ONCE readers, a
        namespace at a time in turn. A queued worker costs a tuple, not a task (FairSlots'
        waiters are futures, awaited each by a task): a large cleanup queues thousands of logs."""
        self._in_turn.setdefault(namespace, collections.deque()).append((job_relpath, pod, warn))
        if self._readers < LOG_READS_AT_ONCE:
            self._readers += 1
            reader = asyncio.ensure_future(self._read_queued())
            self._archiving.add(reader)
            reader.add_done_callback(self._archiving.discard)

    async def _read_queued(self) -> None:
        try:
            while self._in_turn:
                namespace, job_relpath, pod, warn = self._next_in_turn()
                self._reading += len(pod.containers)
                reads = self._reads(namespace, pod, False, pod.grace_seconds)
                await self._archive(
                    job_relpath, pod, asyncio.gather(*reads, return_exceptions=True), False, warn
                )
        finally:
            self._readers -= 1

    def _next_in_turn(self) -> tuple[str, str, ObservedPod, Warn]:
        """The oldest queued log of the namespace whose turn it is; that namespace then goes
        last."""
        namespace, queued = next(iter(self._in_turn.items()))
        job_relpath, pod, warn = queued.popleft()
        if queued:
            self._in_turn.move_to_end(namespace)
        else:
            del self._in_turn[namespace]
        return namespace, job_relpath, pod, warn

    def _archive_later(
        self, job_relpath: str, pod: ObservedPod, reading: Reading, followed: bool, warn: Warn
    ) -> None:
        archive = asyncio.ensure_future(self._archive(job_relpath, pod, reading, followed, warn))
        self._archiving.add(archive)
        archive.add_done_callback(self._archiving.discard)

    async def _archive(
        self, job_relpath: str, pod: ObservedPod, reading: Reading, followed: bool, warn: Warn
    ) -> None:
        try:
            logs = await reading
        finally:
            self._reading -= len(pod.containers)
            if followed:
                self._followed.release(job_relpath.split("/", 1)[0], len(pod.containers))
        try:
            await self._save(job_relpath, pod, logs, warn)
        except Exception:  # best effort: one worker's log never ends the readers of the others'
            logger.exception("saving the log of %s failed", pod.name)

    async def _save(
        self, job_relpath: str, pod: ObservedPod, logs: Sequence[bytes | BaseException], warn: Warn
    ) -> None:
        warnings: list[tuple[str, str]] = []
        for position, (container, text) in enumerate(zip(pod.containers, logs, strict=True)):
            if isinstance(text, BaseException):
                # Never a silent absence: the file the job's history points to says why.
                why = log_not_read(pod, container, text)
                logger.warning("%s", why)
                warn("LogNotSaved", why)
                text = f"[tfmw] {why}\n".encode()
            if not text:
                continue
            suffix = "" if position == 0 else f".{container}"
            call = self.storage.call(
                job_relpath,
                archive_log,
                job_relpath,
                pod.attempt,
                f"{pod.member.stem}{suffix}",
                text,
                pod.uid[:8],
            )
            await reported(warnings, call)
        for reason, message in warnings:
            warn(reason, message)

    async def drain(self, timeout: float) -> None:
        """At shutdown: the logs being saved get `timeout` seconds to finish, then are given up."""
        if not self._archiving:
            return
        _, late = await asyncio.wait(set(self._archiving), timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            logger.warning("stopping: %d worker logs not saved in time", len(late))
            await asyncio.gather(*late, return_exceptions=True)

    async def delete_pod(self, namespace: str, pod: ObservedPod, grace_seconds: int | None) -> bool:
        """True when the pod is gone at once (a stopped pod, no grace): the view drops it, so
        its DELETED event, coming after, tells the job nothing (Informer.remove)."""
        deleted = await self.kube.delete_pod(namespace, pod.name, pod.uid, grace_seconds)
        view = self.pods(namespace)
        # With no grace the API server removes a pod at once, and answers with the pod as it
        # was (at times without a resourceVersion), not as a pod still terminating.
        metadata = (deleted or {}).get("metadata") or {}
        # Gone at once unless a finalizer holds it (Kueue's does): then it is still there,
        # terminating, and its watch events tell when it goes.
        gone_at_once = metadata.get("deletionGracePeriodSeconds") == 0 and not metadata.get("finalizers")
        if deleted is None or gone_at_once:
            view.remove(namespace, pod.name, lambda held: held.pod is not None and held.pod.uid == pod.uid)
            return True
        view.put(deleted)
        return False


def log_tail_bytes(reading: int) -> int:
    """How much of each container's log to keep while `reading` containers are being read."""
    return max(LOG_MIN_BYTES, min(LOG_ARCHIVE_BYTES, LOG_MEMORY_BYTES // max(1, reading)))


def log_not_read(pod: ObservedPod, container: str, error: BaseException) -> str:
    """Why a worker's log is not kept, as its log file and a Warning say."""
    if isinstance(error, LogUnavailable):
        if error.status == 404:
            cause = "the pod was gone"
        elif error.status == 0 or error.status >= 500:
            cause = "its node's kubelet was not reached (restarting, or the node gone)"
        else:
            cause = "the API server refused"
        tries = "" if error.status == 404 else f" in {error.tries} tr{'y' if error.tries == 1 else 'ies'}"
        detail = f"{cause}{tries} ({error.reason[:300]})"
    else:
        detail = f"{type(error).__name__}: {str(error)[:300]}"
    where = f"container {container} of pod {pod.name} (attempt {pod.attempt})"
    return f"the log of {where} could not be read: {detail}"
