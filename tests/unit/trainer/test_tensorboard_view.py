"""TensorBoard's sanitized view: only regular event files, copied; FIFOs and symlinks left out."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from ports import free_ports
from tfmw_trainer import tensorboard_view
from tfmw_trainer.tensorboard_view import View

EVENTS = "events.out.tfevents.1700000000.host.1.0.v2"


def sync_within(view: View, seconds: float = 5.0) -> None:
    """One pass, which must not hang (a FIFO opened without O_NONBLOCK would)."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            view.sync()
        except BaseException as error:  # reported in the test's thread
            failure.append(error)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(seconds), "a sync pass hung"
    if failure:
        raise failure[0]


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    source, view = tmp_path / "shared", tmp_path / "view"
    (source / "ns" / "job").mkdir(parents=True)
    view.mkdir()
    return source, view


def test_regular_event_files_are_copied_and_followed_as_they_grow(tree: tuple[Path, Path]) -> None:
    source, target = tree
    events = source / "ns" / "job" / EVENTS
    events.write_bytes(b"first")
    (source / "ns" / "job" / "checkpoint").write_bytes(b"not an event file")
    view = View(source, target)
    sync_within(view)
    assert files(target) == {f"ns/job/{EVENTS}": b"first"}
    with events.open("ab") as out:
        out.write(b" second")
    sync_within(view)
    assert files(target) == {f"ns/job/{EVENTS}": b"first second"}
    assert view.total == len(b"first second")


def test_a_fifo_named_like_an_event_file_is_left_out_without_waiting(
    tree: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    source, target = tree
    os.mkfifo(source / "ns" / "job" / "events.out.tfevents.1.evil")
    (source / "ns" / "job" / EVENTS).write_bytes(b"ok")
    view = View(source, target)
    with caplog.at_level(logging.WARNING):
        sync_within(view)
        sync_within(view)
    assert files(target) == {f"ns/job/{EVENTS}": b"ok"}
    refused = [r.getMessage() for r in caplog.records if "evil" in r.getMessage()]
    assert len(refused) == 1 and "not a regular file" in refused[0], refused  # logged once


def test_symlinks_are_never_followed_to_a_file_or_a_folder(tree: tuple[Path, Path], tmp_path: Path) -> None:
    source, target = tree
    outside = tmp_path / "outside"
    (outside / "run").mkdir(parents=True)
    (outside / "run" / EVENTS).write_bytes(b"secret")
    os.mkfifo(outside / "fifo")
    job = source / "ns" / "job"
    (job / "events.out.tfevents.2.file").symlink_to(outside / "run" / EVENTS)
    (job / "events.out.tfevents.3.fifo").symlink_to(outside / "fifo")
    (job / "elsewhere").symlink_to(outside)
    (job / "loop").symlink_to(source)
    sync_within(View(source, target))
    assert files(target) == {}


def test_a_file_replaced_or_removed_is_replaced_or_removed_in_the_view(tree: tuple[Path, Path]) -> None:
    source, target = tree
    events = source / "ns" / "job" / EVENTS
    events.write_bytes(b"old old old")
    view = View(source, target)
    sync_within(view)
    events.unlink()
    events.write_bytes(b"new")  # another inode, and shorter
    sync_within(view)
    assert files(target) == {f"ns/job/{EVENTS}": b"new"}
    events.unlink()
    os.mkfifo(events)  # a regular file becomes a FIFO: out of the view
    sync_within(view)
    assert files(target) == {} and view.total == 0


def test_copies_stop_at_the_limits_per_file_and_in_all(tree: tuple[Path, Path]) -> None:
    source, target = tree
    job = source / "ns" / "job"
    (job / "a.tfevents").write_bytes(b"a" * 100)
    (job / "b.tfevents").write_bytes(b"b" * 100)
    (job / "c.tfevents").write_bytes(b"c" * 100)
    view = View(source, target, max_file_bytes=60, max_total_bytes=150)
    sync_within(view)
    assert files(target) == {
        "ns/job/a.tfevents": b"a" * 60,
        "ns/job/b.tfevents": b"b" * 60,
        "ns/job/c.tfevents": b"c" * 30,
    }
    assert view.total == 150


# ---- TensorBoard itself, over the view: a FIFO no longer stops it ----


def write_scalars(logdir: Path, steps: int) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2  # type: ignore[import-untyped]
    from tensorboard.summary.writer.event_file_writer import EventFileWriter  # type: ignore[import-untyped]

    writer = EventFileWriter(str(logdir))
    for step in range(steps):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        writer.add_event(
            event_pb2.Event(step=step, wall_time=time.time(), summary=summary_pb2.Summary(value=[value]))
        )
    writer.close()


def runs(port: int) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=3) as response:
            found: list[str] = json.load(response)
            return found
    except OSError:
        return []


def wait_runs(port: int, expected: set[str], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    seen = runs(port)
    while not expected <= set(seen) and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = runs(port)
    return seen


@pytest.mark.parametrize("load_fast", ["false", "auto"])
def test_tensorboard_over_the_view_serves_every_run_despite_a_fifo(tmp_path: Path, load_fast: str) -> None:
    """TensorBoard's Python loader (--load_fast=false, also its fallback where the Rust
    data server is missing) opens a FIFO in the logdir and waits for ever: no run is
    served. Over the view it serves the good runs, and new ones as they come."""
    pytest.importorskip("tensorboard")
    source, target = tmp_path / "shared", tmp_path / "view"
    (source / "a" / "evil").mkdir(parents=True)
    os.mkfifo(source / "a" / "evil" / "events.out.tfevents.1.evil")
    write_scalars(source / "b" / "good", 3)
    (port,) = free_ports(1)
    command = [
        sys.executable,
        "-m",
        "tfmw_trainer.tensorboard_view",
        f"--source={source}",
        f"--view={target}",
        "--interval=1",
        "--",
        f"--port={port}",
        "--host=127.0.0.1",
        "--reload_interval=1",
        f"--load_fast={load_fast}",
    ]
    # A PATH without the environment's bin/: the view starts the TensorBoard installed beside
    # it, as when its Python is called by path (a venv not activated). PYTHONPATH: the
    # tfmw_trainer under test, not the one an editable install points at.
    environment = {
        **os.environ,
        "PATH": os.defpath,
        "PYTHONPATH": str(Path(tensorboard_view.__file__).parents[1]),
    }
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment
    )
    try:
        assert "b/good" in wait_runs(port, {"b/good"}, timeout=90)
        write_scalars(source / "c" / "later", 2)
        assert {"b/good", "c/later"} <= set(wait_runs(port, {"c/later"}, timeout=30))
        assert "a/evil" not in runs(port)
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert "a/evil/events.out.tfevents.1.evil: not a regular file" in errors, errors[-2000:]
