"""The operator's API client against a real HTTP server on loopback: for unit tests that play
the API server's answers (errors, streams, writes) without a control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import kopf
from aiohttp import web
from tfmw_operator.kube.client import Kube


@asynccontextmanager
async def kube_serving(app: web.Application) -> AsyncIterator[Kube]:
    """`app` served on a free loopback port, and a Kube that talks to it; both closed after."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    kube = Kube(kopf.ConnectionInfo(server=f"http://127.0.0.1:{runner.addresses[0][1]}"))
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()
