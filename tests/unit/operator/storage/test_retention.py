import asyncio
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tfmw_operator.contract import OWNER_FILE
from tfmw_operator.storage import retention
from tfmw_operator.storage.files import SharedStorage, ensure_job_directory
from tfmw_operator.storage.retention import (
    FolderRetention,
    JobFolder,
    list_job_folders,
    remove_job_folder,
    stale_folders,
)
from unit.operator.storage.test_walk import nest

NOW = datetime(2026, 1, 8, tzinfo=UTC)
WEEK = timedelta(days=7)


def test_only_folders_of_gone_jobs_unchanged_for_the_retention_are_stale() -> None:
    folders = [
        JobFolder("a/live", "uid-live", NOW - 2 * WEEK),
        JobFolder("a/gone-old", "uid-gone", NOW - WEEK),
        JobFolder("a/gone-recent", "uid-gone2", NOW - WEEK + timedelta(seconds=1)),
    ]
    assert stale_folders(folders, {"a": {"uid-live"}}, NOW, WEEK) == ["a/gone-old"]
    assert stale_folders(folders, {}, NOW, timedelta(0)) == ["a/live", "a/gone-old", "a/gone-recent"]


def test_a_folder_naming_a_live_job_of_another_namespace_is_not_kept() -> None:
    """The owner file is the workers' to write: a tenant naming another namespace's running
    job's UID must not pin its folder for ever."""
    pinned = JobFolder("tenant/pinned", "uid-of-b-job", NOW - 2 * WEEK)
    own = JobFolder("b/job", "uid-of-b-job", NOW - 2 * WEEK)
    assert stale_folders([pinned, own], {"b": {"uid-of-b-job"}}, NOW, WEEK) == ["tenant/pinned"]


def test_a_folder_whose_removal_has_begun_goes_on_whatever_its_time() -> None:
    begun = JobFolder("a/half", "uid-gone", NOW)  # its own time changed as entries went
    assert stale_folders([begun], {}, NOW, WEEK) == []
    assert stale_folders([begun], {}, NOW, WEEK, removing={"a/half"}) == ["a/half"]
    assert stale_folders([begun], {"a": {"uid-gone"}}, NOW, WEEK, removing={"a/half"}) == []


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def live(uids: Mapping[str, set[str]]) -> retention.LiveUids:
    async def listed() -> Mapping[str, set[str]]:
        return uids

    return listed


def test_the_sweep_removes_a_deleted_jobs_folder_and_nothing_else(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "team-a/gone", "uid-gone")
    ensure_job_directory(tmp_path, "team-a/live", "uid-live")
    ensure_job_directory(tmp_path, "team-b/recent", "uid-recent")
    (tmp_path / "team-a" / "not-ours").mkdir()  # no .tfmw-job-uid: never touched
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    gone = tmp_path / "team-a" / "gone"
    (gone / "checkpoints").mkdir()
    (gone / "escape").symlink_to(outside)  # removed as a link; its target untouched
    os.mkfifo(gone / "checkpoints" / "fifo")  # unlinked, never opened
    for folder in (gone, tmp_path / "team-a" / "live", tmp_path / "team-a" / "not-ours"):
        age(folder, 3600)

    sweeper = FolderRetention(SharedStorage(tmp_path), 600, live({"team-a": {"uid-live"}}))
    removed = asyncio.run(sweeper.sweep(datetime.now(UTC)))
    assert removed == ["team-a/gone"]
    assert not gone.exists() and (outside / "keep").read_text() == "x"
    assert (tmp_path / "team-a" / "live").is_dir() and (tmp_path / "team-a" / "not-ours").is_dir()
    assert (tmp_path / "team-b" / "recent").is_dir()  # gone job, but changed within the retention


def test_listing_skips_links_fifos_files_and_folders_without_an_owner(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/job", "uid-1")
    (tmp_path / "ns" / "file").write_text("x")
    (tmp_path / "ns" / "link").symlink_to(tmp_path / "ns" / "job")
    os.mkfifo(tmp_path / "ns" / "fifo")
    (tmp_path / "ns" / "bare").mkdir()
    os.mkfifo(tmp_path / "ns" / "bare" / OWNER_FILE)  # an owner file that is a FIFO: not ours
    found, following = list_job_folders(tmp_path, "ns")
    assert [(f.relpath, f.owner_uid) for f in found] == [("ns/job", "uid-1")] and following == 0
    assert remove_job_folder(tmp_path, "ns/job", "uid-1", 1000).done
    assert remove_job_folder(tmp_path, "ns/job", "uid-1", 1000).done  # already gone: nothing to do
    assert not (tmp_path / "ns" / "job").exists()


def test_a_namespace_folder_is_listed_a_bounded_number_of_entries_at_a_time(tmp_path: Path) -> None:
    for index in range(25):
        ensure_job_directory(tmp_path, f"ns/job-{index}", f"uid-{index}")
    seen: list[str] = []
    start = 0
    for _ in range(3):
        found, start = list_job_folders(tmp_path, "ns", start, limit=10)
        seen += [f.relpath for f in found]
    assert start == 0 and sorted(seen) == sorted(f"ns/job-{i}" for i in range(25))


def test_a_folder_taken_over_by_another_job_since_the_listing_is_left_alone(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/job", "uid-old")
    (tmp_path / "ns" / "job" / "data").write_text("x")
    # A new job of the same name: its folder moved the old one aside, under the old name now.
    ensure_job_directory(tmp_path, "ns/job", "uid-new")
    assert remove_job_folder(tmp_path, "ns/job", "uid-old", 1000).done
    assert (tmp_path / "ns" / "job" / OWNER_FILE).read_text() == "uid-new"


def test_a_folder_2000_deep_is_removed_by_the_sweep_with_its_neighbours(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/after", "uid-after")
    ensure_job_directory(tmp_path, "other/also", "uid-also")
    nest(tmp_path / "ns" / "deep", 2000)
    (tmp_path / "ns" / "deep" / OWNER_FILE).write_text("uid-deep")
    for folder in ("ns/deep", "ns/after", "other/also"):
        age(tmp_path / folder, 3600)
    sweeper = FolderRetention(SharedStorage(tmp_path), 600, live({}))
    started = time.perf_counter()
    removed = asyncio.run(sweeper.sweep(datetime.now(UTC)))
    took = time.perf_counter() - started
    assert sorted(removed) == ["ns/after", "ns/deep", "other/also"]
    assert os.listdir(tmp_path / "ns") == [] and os.listdir(tmp_path / "other") == []
    print(f"a sweep removing a 2,000-deep folder and two others took {took * 1000:.0f} ms")


def test_a_big_folder_goes_over_several_sweeps_and_the_others_are_not_held_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "MAX_ENTRIES_PER_SWEEP", 300)
    monkeypatch.setattr(retention, "ENTRIES_PER_CALL", 50)
    ensure_job_directory(tmp_path, "big/huge", "uid-huge")
    for index in range(1000):
        (tmp_path / "big" / "huge" / f"f{index}").write_text("")
    for namespace in ("a", "b"):
        ensure_job_directory(tmp_path, f"{namespace}/small", f"uid-{namespace}")
    for folder in ("big/huge", "a/small", "b/small"):
        age(tmp_path / folder, 3600)
    sweeper = FolderRetention(SharedStorage(tmp_path), 600, live({}))
    first = asyncio.run(sweeper.sweep(datetime.now(UTC)))
    assert sorted(first) == ["a/small", "b/small"]
    # Half removed: its own time is now, and its owner file is still there.
    assert (tmp_path / "big" / "huge" / OWNER_FILE).exists()
    sweeps = 1
    while (tmp_path / "big" / "huge").exists():
        asyncio.run(sweeper.sweep(datetime.now(UTC)))
        sweeps += 1
        assert sweeps < 10
    assert sweeps >= 4


def test_any_failure_of_one_folder_never_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("first", "broken", "last"):
        ensure_job_directory(tmp_path, f"ns/{name}", f"uid-{name}")
        age(tmp_path / "ns" / name, 3600)
    real = retention.remove_job_folder

    def failing(root: Path, relpath: str, owner: str, budget: int) -> retention.Removed:
        if relpath == "ns/broken":
            raise RecursionError("maximum recursion depth exceeded")  # what rmtree raised
        return real(root, relpath, owner, budget)

    monkeypatch.setattr(retention, "remove_job_folder", failing)
    sweeper = FolderRetention(SharedStorage(tmp_path), 600, live({}))
    assert sorted(asyncio.run(sweeper.sweep(datetime.now(UTC)))) == ["ns/first", "ns/last"]
    monkeypatch.setattr(retention, "remove_job_folder", real)
    assert asyncio.run(sweeper.sweep(datetime.now(UTC))) == ["ns/broken"]


def test_a_folder_dated_in_the_far_future_neither_overflows_nor_goes() -> None:
    far = JobFolder("a/future", "uid-gone", datetime.max.replace(tzinfo=UTC))
    old = JobFolder("a/old", "uid-gone", NOW - 2 * WEEK)
    assert stale_folders([far, old], {}, NOW, WEEK) == ["a/old"]
