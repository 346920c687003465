"""The controller's marker detection, on a real folder with real inotify; no API server is
asked anything (the reconcile a marker triggers is only recorded)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import kopf
import pytest
from tfmw_operator import controller as controller_module
from tfmw_operator.controller import JobController
from tfmw_operator.kube import Kube
from tfmw_operator.workqueue import Key

KEY: Key = ("ns", "job")
MARKER = "ns/job/multiworker-complete.txt"


def test_marker_detection_outlives_a_look_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Already there when detection starts, so no inotify event announces it: only a look does.
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / MARKER).write_text("done\n")
    monkeypatch.setattr(controller_module, "SWEEP_SECONDS", 0.5)

    async def scenario() -> list[Key]:
        kube = Kube(kopf.ConnectionInfo(server="https://127.0.0.1:9"))
        controller = JobController(kube, tmp_path, namespaces=["ns"])
        triggered: list[Key] = []
        monkeypatch.setattr(controller.queue, "trigger", triggered.append)
        looks = 0
        markers_present = controller._markers_present

        def first_look_breaks(root: Path, watched: list[tuple[Key, str]]) -> list[Key]:
            nonlocal looks
            looks += 1
            if looks == 1:
                raise RuntimeError("the first look went wrong")
            return markers_present(root, watched)

        monkeypatch.setattr(controller, "_markers_present", first_look_breaks)
        controller.awaiting_marker[KEY] = MARKER
        detection = asyncio.create_task(controller.watch_markers())
        for _ in range(100):
            if triggered:
                break
            await asyncio.sleep(0.05)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        await kube.close()
        return triggered

    with caplog.at_level(logging.ERROR, logger="tfmw_operator.controller"):
        triggered = asyncio.run(scenario())
    assert "the first look went wrong" in caplog.text  # the failure is told, not swallowed
    assert KEY in triggered
