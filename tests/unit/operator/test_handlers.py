"""The kopf handlers: what a job's watch event does to the controller."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import REGISTRY
from tfmw_operator.handlers import Operator
from tfmw_operator.runtime import metrics
from tfmw_operator.runtime.health import Health
from tfmw_operator.runtime.settings import Settings
from tfmw_operator.shell.controller import JobController
from wrappers import job


def test_a_job_deleted_with_no_pods_left_is_forgotten_whole(tmp_path: Path) -> None:
    # Waiting for its claim, say: no pod of it will ever bring a reconcile that forgets it.
    obj = job("forgotten").obj()
    obj["metadata"]["resourceVersion"] = "5"
    key = (obj["metadata"]["namespace"], "forgotten")

    async def scenario() -> tuple[bool, float | None]:
        operator = Operator(Settings(shared_root=tmp_path), Health())
        controller = JobController(None, operator.settings)  # type: ignore[arg-type]  # no call is made
        operator._controller = controller
        await operator.job_event({"type": "ADDED", "object": obj}, key)
        controller._state(key)
        metrics.publish_job(*key, metrics.JobSeries(stragglers=1))
        await operator.job_event({"type": "DELETED", "object": obj}, key)
        series = REGISTRY.get_sample_value("tfmw_job_stragglers", {"namespace": key[0], "job": key[1]})
        return key in controller._states, series

    assert asyncio.run(scenario()) == (False, None)
