"""Creating a job's Service and pods: a first launch's Service beside its first pod, the
rest of the pods once the Service is the job's; pods in slow-start batches, built as they
are sent. What it ran into is returned, for the controller to remember and the core to
decide from."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tfmw_operator.api.objects import Json
from tfmw_operator.core.decision import CreatePods, EnsureService
from tfmw_operator.core.observed import CreatedObject, CreateErrorKind
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube.client import CONNECTION_POOL_SIZE, ApiError, Kube
from tfmw_operator.kube.informer import Informer
from tfmw_operator.shell.events import EventPoster


class CreateRefused(Exception):
    """The API server refused to create an object; `kind` says whether it ever will."""

    def __init__(self, kind: CreateErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @classmethod
    def of(cls, error: ApiError) -> CreateRefused | None:
        """What a failed create means for the job; None for what is not about the object."""
        if error.status in (400, 413, 422):  # as written, never: a bad field, or too large
            return cls(CreateErrorKind.INVALID, error.message)
        if error.status == 403:  # quota, Pod Security, RBAC: until someone acts
            return cls(CreateErrorKind.FORBIDDEN, error.message)
        if error.status == 429 or error.status >= 500:  # throttled, a failing webhook, the server
            return cls(CreateErrorKind.UNAVAILABLE, error.message)
        return None


async def _created(creating: Awaitable[Json | None]) -> Json | None:
    """The object created (None: it existed already); CreateRefused when the API server will not."""
    try:
        return await creating
    except ApiError as error:
        refused = CreateRefused.of(error)
        if refused is None:
            raise
        raise refused from error


async def _done(ensuring: asyncio.Future[Created]) -> bool:
    """Whether the Service ensured beside the first pod is there and the job's."""
    return (await asyncio.shield(ensuring)).done


# Pods built and sent at once by one launch, at most: each carries its TF_CONFIG, up to
# 128 KiB for the largest job the CRD accepts.
CREATE_BATCH_MAX = 32


@dataclass(frozen=True)
class Created:
    done: bool  # all there now; else decide again, knowing why not
    refused: tuple[CreatedObject, CreateRefused] | None = None
    namesake: Owned | None = None  # a Service of the job's name that is someone else's


View = Callable[[str], Informer[Owned]]  # a namespace's pods or Services as last seen


class Creator:
    def __init__(
        self, kube: Kube, events: EventPoster, services: View, pods: View, created: Callable[[object], None]
    ) -> None:
        self.kube = kube
        self.created = created  # told the UID of each pod created
        self.events = events
        self.services = services
        self.pods = pods
        self._sending = asyncio.Semaphore(CONNECTION_POOL_SIZE)

    async def launch(self, namespace: str, service: EnsureService | None, pods: CreatePods | None) -> Created:
        """The Service, and the pods: without it no worker resolves its peers, and pods whose
        Service is refused would hold their nodes for nothing. As the core decides, the
        Service and the first pod (slow start: one) go together, the rest only once the
        Service is the job's; when it is refused or someone else's, that one pod is deleted
        again (core/reconcile.py `_withdraw_unserved`)."""
        if service is None:
            return Created(True) if pods is None else await self._create_pods(namespace, pods)
        if pods is None or not service.beside_first_pod:
            created = await self._ensure_service(namespace, service.service)
            if not created.done or pods is None:
                return created
            return await self._create_pods(namespace, pods)
        ensuring = asyncio.ensure_future(self._service_beside_pods(namespace, service.service))
        try:
            try:
                pods_created = await self._create_pods(namespace, pods, functools.partial(_done, ensuring))
            except Exception:
                # The Service's outcome goes first: when it is not the job's, the core
                # withdraws the pod that went out beside it, whatever befell the pods' call.
                service_created = await ensuring
                if not service_created.done:
                    return service_created
                raise
            service_created = await ensuring
        finally:
            ensuring.cancel()  # done by now, unless the launch itself was cancelled
        return service_created if not service_created.done else pods_created

    async def _service_beside_pods(self, namespace: str, service: Json) -> Created:
        """The Service, where a pod went out beside it: a call that failed in any way (timed
        out, the connection dropped) is remembered as the Service's refusal, so the core
        withdraws that pod until a Service of the job's is there. Never raises."""
        # One turn of the loop first: the pod, which the API server takes longer to create,
        # goes out ahead of it (docs/benchmarks.md, run lone-detail-7).
        await asyncio.sleep(0)
        try:
            return await self._ensure_service(namespace, service)
        except Exception as error:
            failed = CreateRefused(CreateErrorKind.UNAVAILABLE, f"creating the Service failed: {error!r}")
            return Created(False, (CreatedObject.SERVICE, failed))

    async def recreate_service(self, namespace: str, service: Json, warnings: list[tuple[str, str]]) -> bool:
        """A running gang's Service went missing: create it again. False when refused (a
        full quota): reported, to be tried again later; the job's marker and failures are
        judged meanwhile."""
        name = service["metadata"]["name"]
        try:
            created = await _created(self.kube.create_service(namespace, service))
        except CreateRefused as refused:
            message = f"Service {name} is missing and creating it again was refused: {refused.message}"
            warnings.append(("ServiceRefused", f"{message}; restarted workers cannot resolve their peers"))
            return False
        if created is not None:
            self.services(namespace).put(created)
            warnings.append(("ServiceRecreated", f"Service {name} was missing; created it again"))
        return True

    async def _ensure_service(self, namespace: str, service: Json) -> Created:
        try:
            created = await _created(self.kube.create_service(namespace, service))
        except CreateRefused as refused:
            return Created(False, (CreatedObject.SERVICE, refused))
        if created is not None:
            self.services(namespace).put(created)
            return Created(True)
        # One of that name exists: ours (the view lags), or a namesake the view cannot see.
        found = await self.kube.get_service(namespace, service["metadata"]["name"])
        if found is None:
            return Created(True)
        uid = service["metadata"]["ownerReferences"][0]["uid"]
        if uid in Owned.service_of(found).owners:
            self.services(namespace).put(found)
            return Created(True)
        return Created(False, namesake=Owned.service_of(found))

    async def _create_pods(
        self, namespace: str, create: CreatePods, go_on: Callable[[], Awaitable[bool]] | None = None
    ) -> Created:
        """In slow-start batches (1, 2, 4, ... CREATE_BATCH_MAX): a doomed template costs one
        request, and no more than a batch of pods is ever built at once. A template the API
        server took before (a gang restart) goes in full batches: one round trip for a gang of
        up to CREATE_BATCH_MAX, not four. `go_on`, when given, is asked after the first batch
        whether to send the rest."""
        remaining, batch = list(create.members), CREATE_BATCH_MAX if create.proven else 1
        try:
            with self.events.creating_pods():
                while remaining:
                    if go_on is not None and len(remaining) < len(create.members):
                        if not await go_on():
                            return Created(False)
                        go_on = None
                    this_batch, remaining = remaining[:batch], remaining[batch:]
                    pods = [create.build(member) for member in this_batch]
                    created = await asyncio.gather(*(self._send_pod(namespace, pod) for pod in pods))
                    del pods
                    view = self.pods(namespace)
                    for pod in created:
                        if pod is not None:
                            self.created((pod.get("metadata") or {}).get("uid"))
                            view.put(pod)
                    batch = min(batch * 2, CREATE_BATCH_MAX)
        except CreateRefused as refused:
            return Created(False, (CreatedObject.PODS, refused))
        return Created(True)

    async def _send_pod(self, namespace: str, pod: Json) -> Json | None:
        # A request body is serialised before it waits for a connection: only as many as
        # there are connections are, whatever the number of launches (a large pod's body is
        # over a megabyte: docs/benchmarks.md, "The measurements behind the code").
        async with self._sending:
            return await _created(self.kube.create_pod(namespace, pod))
