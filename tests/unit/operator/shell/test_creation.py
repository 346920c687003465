"""A first launch's Service and first pod, sent together, against a real HTTP server as the
API server: the rest of the pods wait for the Service, and whatever the Service's call runs
into comes back as the Service's, for the core to withdraw the pod that went beside it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from loopback import kube_serving
from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import JobSpec, parse_spec
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.decision import CreatePods, EnsureService
from tfmw_operator.core.observed import CreatedObject, CreateErrorKind
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube.informer import Informer
from tfmw_operator.shell.creation import Created, Creator
from tfmw_operator.shell.events import EventPoster
from wrappers import job

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def created(request_body: Json) -> web.Response:
    body = {**request_body, "metadata": {**request_body["metadata"], "uid": "u", "resourceVersion": "7"}}
    return web.json_response(body, status=201)


async def accept(request: web.Request) -> web.StreamResponse:
    return created(await request.json())


async def forbid(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(0.05)  # answered after the first pod was sent beside it
    message = {"kind": "Status", "message": "exceeded quota: services=0", "code": 403}
    return web.json_response(message, status=403)


async def drop(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(0.05)
    assert request.transport is not None
    request.transport.abort()  # the connection drops: no status at all
    return web.Response()


@asynccontextmanager
async def launching(service: Handler, pod: Handler, sent: list[str]) -> AsyncIterator[Creator]:
    async def services(request: web.Request) -> web.StreamResponse:
        sent.append("service")
        return await service(request)

    async def pods(request: web.Request) -> web.StreamResponse:
        sent.append("pod")
        return await pod(request)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/default/services", services)
    app.router.add_post("/api/v1/namespaces/default/pods", pods)
    async with kube_serving(app) as kube:

        def view(namespace: str) -> Informer[Owned]:
            return Informer(kube, f"/api/v1/namespaces/{namespace}/pods", Owned.pod_of, lambda key: None)

        yield Creator(kube, EventPoster(kube), view, view, lambda uid: None)


def first_launch(workers: int) -> tuple[EnsureService, CreatePods]:
    spec = parse_spec(job(workers=workers).obj())
    assert isinstance(spec, JobSpec)
    return EnsureService(build_service(spec), beside_first_pod=True), CreatePods(spec, 0, spec.members)


def launch(service: Handler, pod: Handler, workers: int) -> tuple[Created, list[str]]:
    """A first launch of a job of `workers`: what it came to, and what was sent in order."""
    sent: list[str] = []

    async def launched() -> Created:
        async with launching(service, pod, sent) as creator:
            return await creator.launch("default", *first_launch(workers))

    return asyncio.run(launched()), sent


def test_the_first_pod_goes_beside_the_service_and_the_rest_once_it_is_there() -> None:
    outcome, sent = launch(accept, accept, workers=4)
    assert outcome.done and sorted(sent) == ["pod"] * 4 + ["service"]
    assert set(sent[:2]) == {"service", "pod"}  # both out before either answered


def test_a_refused_service_lets_no_more_than_the_first_pod_out() -> None:
    outcome, sent = launch(forbid, accept, workers=4)
    assert not outcome.done and outcome.refused is not None
    what, refused = outcome.refused
    assert what is CreatedObject.SERVICE and refused.kind is CreateErrorKind.FORBIDDEN
    assert sorted(sent) == ["pod", "service"]


def test_a_service_call_that_fails_unanswered_is_the_services_refusal() -> None:
    # Raised, it would be a failed reconcile with no error recorded: the pod beside it would
    # run on without its Service, and each retry would send one more.
    outcome, sent = launch(drop, accept, workers=1)
    assert not outcome.done and outcome.refused is not None
    what, refused = outcome.refused
    assert what is CreatedObject.SERVICE and refused.kind is CreateErrorKind.UNAVAILABLE
    assert "creating the Service failed" in refused.message and sorted(sent) == ["pod", "service"]


def test_the_services_refusal_goes_ahead_of_the_pods_failure() -> None:
    outcome, sent = launch(forbid, drop, workers=4)
    assert outcome.refused is not None and outcome.refused[0] is CreatedObject.SERVICE
    assert sorted(sent) == ["pod", "service"]


def test_the_pods_failure_goes_up_when_the_service_is_the_jobs() -> None:
    with pytest.raises(aiohttp.ClientError):
        launch(accept, drop, workers=2)


def test_a_restarts_pods_wait_for_the_service() -> None:
    sent: list[str] = []
    service, pods = first_launch(2)

    async def launched() -> Created:
        async with launching(accept, accept, sent) as creator:
            return await creator.launch("default", EnsureService(service.service), pods)

    assert asyncio.run(launched()).done and sent == ["service", "pod", "pod"]
