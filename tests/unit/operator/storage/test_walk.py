"""Removing a tree a tenant wrote, and may be changing: by descriptor, bounded, never blocking."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from tfmw_operator.contract import OWNER_FILE
from tfmw_operator.storage.walk import (
    DEEP_PREFIX,
    MAX_DEPTH,
    Budget,
    FolderChanged,
    RemovalError,
    remove_tree,
)

LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchange(one: Path, other: Path) -> bool:
    """renameat2(RENAME_EXCHANGE): the two names swap what they hold, atomically."""
    result: int = LIBC.renameat2(AT_FDCWD, os.fsencode(one), AT_FDCWD, os.fsencode(other), RENAME_EXCHANGE)
    return result == 0


def remove(parent: Path, name: str, budget: int = 1_000_000, last: str | None = None) -> bool:
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return remove_tree(fd, name, Budget(budget), last)
    finally:
        os.close(fd)


def nest(top: Path, depth: int) -> Path:
    """A chain of `depth` folders under `top`, each holding a file; made by descriptor (a path
    that long is beyond PATH_MAX)."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=child))
        os.close(fd)
        fd = child
    os.close(fd)
    return top


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_tree_2000_deep_goes_with_bounded_descriptors_and_no_recursion(tmp_path: Path) -> None:
    nest(tmp_path / "job", 2000)
    before = open_descriptors()
    peak = before
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, open_descriptors())
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.perf_counter()
    try:
        assert remove(tmp_path, "job")
    finally:
        stop.set()
        watcher.join()
    took = time.perf_counter() - started
    assert not (tmp_path / "job").exists() and os.listdir(tmp_path) == []
    assert open_descriptors() == before, "a descriptor was left open"
    assert peak - before <= MAX_DEPTH + 4, f"held {peak - before} descriptors at once"
    print(f"2,000-deep tree (4,000 entries) removed in {took * 1000:.0f} ms, at most {peak - before} fds")


def test_a_deep_tree_goes_over_several_calls_when_the_budget_is_small(tmp_path: Path) -> None:
    nest(tmp_path / "job", 300)
    calls = 0
    while not remove(tmp_path, "job", budget=100):
        calls += 1
        assert calls < 100, "no progress"
    assert not (tmp_path / "job").exists() and calls >= 5
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(DEEP_PREFIX)]
    assert not leftovers


def test_links_fifos_and_devices_are_unlinked_never_opened_or_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    job = tmp_path / "ns" / "job"
    (job / "sub").mkdir(parents=True)
    (job / "sub" / "escape").symlink_to(outside)
    (job / "to-file").symlink_to(outside / "keep")
    os.mkfifo(job / "sub" / "fifo")  # opened blocking, it would hang the thread for good
    os.mknod(job / "null", 0o600 | 0o020000, os.makedev(1, 3))  # a character device
    assert remove(tmp_path / "ns", "job")
    assert not job.exists() and (outside / "keep").read_text() == "x"


@pytest.mark.parametrize("planted", ["fifo", "symlink", "file"])
def test_the_top_folder_itself_swapped_for_something_else_is_unlinked(tmp_path: Path, planted: str) -> None:
    (tmp_path / "target").mkdir()
    top = tmp_path / "ns" / "job"
    top.parent.mkdir()
    if planted == "fifo":
        os.mkfifo(top)
    elif planted == "symlink":
        top.symlink_to(tmp_path / "target")
    else:
        top.write_text("x")
    assert remove(tmp_path / "ns", "job")
    assert not os.path.lexists(top) and (tmp_path / "target").is_dir()


def test_the_owner_file_goes_last_and_a_half_removed_folder_keeps_it(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / OWNER_FILE).write_text("uid-1")
    for index in range(50):
        (job / f"file-{index}").write_text("x")
    assert not remove(tmp_path, "job", budget=10, last=OWNER_FILE)
    assert (job / OWNER_FILE).read_text() == "uid-1"
    while not remove(tmp_path, "job", budget=10, last=OWNER_FILE):
        assert (job / OWNER_FILE).exists()
    assert not job.exists()


def test_a_check_that_fails_leaves_the_folder_alone(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "data").write_text("x")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FolderChanged):
            remove_tree(fd, "job", Budget(100), check=lambda _: False)
    finally:
        os.close(fd)
    assert (tmp_path / "job" / "data").exists()


def immutable(path: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)


def test_what_cannot_be_removed_is_named_and_the_rest_goes(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "stuck").mkdir(parents=True)
    (job / "stuck" / "held").write_text("x")
    for index in range(20):
        (job / f"file-{index}").write_text("x")
    (job / "after" / "deeper").mkdir(parents=True)
    immutable(job / "stuck" / "held", True)  # even root cannot remove it
    try:
        with pytest.raises(RemovalError, match=r"stuck/held: EPERM"):
            remove(tmp_path, "job")
        assert sorted(p.name for p in job.iterdir()) == ["stuck"]
        assert (job / "stuck" / "held").exists()
    finally:
        immutable(job / "stuck" / "held", False)
    assert remove(tmp_path, "job") and not job.exists()


RACES = 150
RACERS = 4


def test_a_folder_swapped_for_a_fifo_or_a_link_while_it_goes_never_blocks_or_escapes(tmp_path: Path) -> None:
    """The rename-exchange race of issue 34: a tenant swaps a subfolder for a FIFO, or for a
    link out of the tree, between the remover's look and its open. Run many times, in
    threads at once, against the real remove function: no thread stays blocked, nothing
    outside the folder is touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary").write_text("alive")
    blocked: list[str] = []
    failures: list[BaseException] = []

    def one_race(index: int) -> None:
        ns = tmp_path / f"ns-{index}"
        job = ns / "job"
        (job / "sub" / "deeper").mkdir(parents=True)
        for name in ("a", "b", "c"):
            (job / "sub" / name).write_text("x")
            (job / "sub" / "deeper" / name).write_text("x")
        os.mkfifo(job / "fifo")
        (job / "link").symlink_to(outside)
        done = threading.Event()

        def race() -> None:
            pairs = [
                (job / "sub", job / "fifo"),
                (job / "sub", job / "link"),
                (job / "sub" / "deeper", job / "fifo"),
            ]
            while not done.is_set():
                for one, other in pairs:
                    exchange(one, other)

        racer = threading.Thread(target=race, daemon=True)
        racer.start()
        remover_done = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            try:
                while not remove(ns, "job", budget=50):
                    pass
            except BaseException as raised:
                error.append(raised)
            finally:
                remover_done.set()

        remover = threading.Thread(target=run, daemon=True)
        remover.start()
        if not remover_done.wait(10):
            blocked.append(str(job))
            # Free it: whatever FIFO it is blocked on gets a writer.
            for fifo in job.rglob("*"):
                if fifo.is_fifo():
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        done.set()
        racer.join()
        failures.extend(error)

    def racer_thread(first: int) -> None:
        for index in range(first, RACES, RACERS):
            one_race(index)

    threads = [threading.Thread(target=racer_thread, args=(first,)) for first in range(RACERS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not blocked, f"removal threads blocked: {blocked[:3]}"
    assert not failures, f"removals raised: {failures[:3]!r}"
    assert (outside / "canary").read_text() == "alive" and sorted(os.listdir(outside)) == ["canary"]
    left = [p for p in tmp_path.glob("ns-*/*")]
    assert not left, f"not removed: {left[:3]}"
    print(
        f"{RACES} rename-exchange races, {RACERS} at once: none blocked, {time.perf_counter() - started:.1f}s"
    )
