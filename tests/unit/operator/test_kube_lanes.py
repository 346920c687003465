"""Pods and Services are created on connections of their own, against a real HTTP server
on loopback: status writes that fill the other pool never hold a launch back."""

from __future__ import annotations

import asyncio
import json

import kopf
from aiohttp import web
from tfmw_operator.kube import CONNECTION_POOL_SIZE, Kube


def test_a_pod_is_created_while_every_other_connection_waits_on_a_status_write() -> None:
    asyncio.run(scenario())


async def scenario() -> None:
    release = asyncio.Event()
    patches_arrived = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal patches_arrived
        if request.method == "PATCH":
            patches_arrived += 1
            await release.wait()
            return web.json_response({"metadata": {"name": "job"}})
        body = json.loads(await request.read())
        return web.json_response(body, status=201)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kube = Kube(kopf.ConnectionInfo(server=f"http://127.0.0.1:{port}"))
    try:
        # One more than the pool holds: every connection of it is taken, one write queues.
        patches = [
            asyncio.ensure_future(kube.patch_job_status("ns", f"job-{i}", {"phase": "Running"}, "1"))
            for i in range(CONNECTION_POOL_SIZE + 1)
        ]
        while patches_arrived < CONNECTION_POOL_SIZE:
            await asyncio.sleep(0.01)
        pod = {"metadata": {"name": "job-worker-0"}}
        created = await asyncio.wait_for(kube.create_pod("ns", pod), timeout=5)
        service = await asyncio.wait_for(kube.create_service("ns", {"metadata": {"name": "job"}}), timeout=5)
        assert created == pod
        assert service == {"metadata": {"name": "job"}}
        assert patches_arrived == CONNECTION_POOL_SIZE  # the ninth still waits for a connection
        release.set()
        await asyncio.gather(*patches)
    finally:
        release.set()
        await kube.close()
        await runner.cleanup()
