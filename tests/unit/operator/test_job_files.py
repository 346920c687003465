"""Marker detection, on a real folder with real inotify; no API server is asked anything
(the reconcile a marker triggers is only recorded)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from tfmw_operator import job_files, storage
from tfmw_operator.decision import ProgressWatch
from tfmw_operator.job_files import JobFileWatcher
from tfmw_operator.storage import SharedStorage
from tfmw_operator.workqueue import Key

KEY: Key = ("ns", "job")
MARKER = "ns/job/multiworker-complete.txt"
PROGRESS = "ns/job/progress.json"


def watch(
    root: Path, track: dict[Key, tuple[str | None, ProgressWatch | None]], until: int = 1
) -> tuple[list[Key], list[Key]]:
    """Run the watcher until `until` triggers (or 5 s); the triggered keys, now and later."""

    async def scenario() -> tuple[list[Key], list[Key]]:
        triggered: list[Key] = []
        later: list[Key] = []
        watcher = JobFileWatcher(SharedStorage(root), triggered.append, lambda key, _: later.append(key))
        for key, (marker, progress) in track.items():
            watcher.track(key, marker, progress)
        detection = asyncio.create_task(watcher.run())
        for _ in range(100):
            if len(triggered) + len(later) >= until:
                break
            await asyncio.sleep(0.05)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return triggered, later

    return asyncio.run(scenario())


def test_marker_detection_outlives_a_look_that_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Already there when detection starts, so no inotify event announces it: only a look does.
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / MARKER).write_text("done\n")
    monkeypatch.setattr(job_files, "SWEEP_SECONDS", 0.5)
    looks = 0
    marker_exists = storage.marker_exists

    def first_look_breaks(root: Path, relpath: str) -> bool:
        nonlocal looks
        looks += 1
        if looks == 1:
            raise RuntimeError("the first look went wrong")
        return marker_exists(root, relpath)

    monkeypatch.setattr(job_files, "marker_exists", first_look_breaks)
    with caplog.at_level(logging.ERROR, logger="tfmw_operator.job_files"):
        triggered, _ = watch(tmp_path, {KEY: (MARKER, None)})
    assert "the first look went wrong" in caplog.text  # the failure is told, not swallowed
    assert KEY in triggered


def test_a_marker_written_while_watched_triggers_its_job_only(tmp_path: Path) -> None:
    for job in ("job", "other"):
        (tmp_path / "ns" / job).mkdir(parents=True)
    other: Key = ("ns", "other")

    async def scenario() -> list[Key]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(SharedStorage(tmp_path), triggered.append, lambda key, _: None)
        watcher.track(KEY, MARKER, None)
        watcher.track(other, "ns/other/multiworker-complete.txt", None)
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.5)  # the watches are set up; nothing is there yet
        triggered.clear()
        (tmp_path / MARKER).write_text("done\n")
        for _ in range(60):
            if triggered:
                break
            await asyncio.sleep(0.05)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return triggered

    assert asyncio.run(scenario()) == [KEY]


def test_a_forgotten_job_is_not_triggered(tmp_path: Path) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / MARKER).write_text("done\n")

    async def scenario() -> list[Key]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(SharedStorage(tmp_path), triggered.append, lambda key, _: None)
        watcher.track(KEY, MARKER, None)
        watcher.forget(KEY)
        assert watcher.awaiting_marker(KEY) is None
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.6)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return triggered

    assert asyncio.run(scenario()) == []


def test_a_progress_document_unchanged_since_read_triggers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / PROGRESS).write_text('{"epoch": 1}')
    monkeypatch.setattr(job_files, "SWEEP_SECONDS", 0.2)
    monkeypatch.setattr(job_files, "PROGRESS_POLL_SECONDS", 0.2)
    seen = storage.file_signature(tmp_path, PROGRESS)

    async def scenario() -> tuple[list[Key], list[Key]]:
        triggered: list[Key] = []
        watcher = JobFileWatcher(SharedStorage(tmp_path), triggered.append, lambda key, _: None)
        watcher.track(KEY, None, ProgressWatch(PROGRESS))
        watcher.saw_progress(KEY, seen)
        detection = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.8)
        quiet = list(triggered)
        (tmp_path / PROGRESS).write_text('{"epoch": 2, "totalEpochs": 4}')  # a new size
        for _ in range(40):
            if triggered:
                break
            await asyncio.sleep(0.05)
        detection.cancel()
        await asyncio.gather(detection, return_exceptions=True)
        return quiet, triggered

    quiet, triggered = asyncio.run(scenario())
    assert quiet == [] and KEY in triggered
