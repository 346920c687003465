import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tfmw_operator.storage.files import SharedStorage, ensure_job_directory
from tfmw_operator.storage.retention import (
    FolderRetention,
    JobFolder,
    list_job_folders,
    remove_job_folder,
    stale_folders,
)

NOW = datetime(2026, 1, 8, tzinfo=UTC)
WEEK = timedelta(days=7)


def test_only_folders_of_gone_jobs_unchanged_for_the_retention_are_stale() -> None:
    folders = [
        JobFolder("a/live", "uid-live", NOW - 2 * WEEK),
        JobFolder("a/gone-old", "uid-gone", NOW - WEEK),
        JobFolder("a/gone-recent", "uid-gone2", NOW - WEEK + timedelta(seconds=1)),
    ]
    assert stale_folders(folders, {"uid-live"}, NOW, WEEK) == ["a/gone-old"]
    assert stale_folders(folders, set(), NOW, timedelta(0)) == ["a/live", "a/gone-old", "a/gone-recent"]


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


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
    for folder in (gone, tmp_path / "team-a" / "live", tmp_path / "team-a" / "not-ours"):
        age(folder, 3600)

    async def live_uids() -> set[str]:
        return {"uid-live"}

    sweeper = FolderRetention(SharedStorage(tmp_path), 600, live_uids)
    removed = asyncio.run(sweeper.sweep(datetime.now(UTC)))
    assert removed == ["team-a/gone"]
    assert not gone.exists() and (outside / "keep").read_text() == "x"
    assert (tmp_path / "team-a" / "live").is_dir() and (tmp_path / "team-a" / "not-ours").is_dir()
    assert (tmp_path / "team-b" / "recent").is_dir()  # gone job, but changed within the retention


def test_listing_skips_links_and_files_and_folders_without_an_owner(tmp_path: Path) -> None:
    ensure_job_directory(tmp_path, "ns/job", "uid-1")
    (tmp_path / "ns" / "file").write_text("x")
    (tmp_path / "ns" / "link").symlink_to(tmp_path / "ns" / "job")
    (tmp_path / "ns" / "bare").mkdir()
    found = list_job_folders(tmp_path, ["ns", "missing"])
    assert [(f.relpath, f.owner_uid) for f in found] == [("ns/job", "uid-1")]
    remove_job_folder(tmp_path, "ns/job")
    remove_job_folder(tmp_path, "ns/job")  # already gone: nothing to do
    assert not (tmp_path / "ns" / "job").exists()


def test_a_folder_dated_in_the_far_future_neither_overflows_nor_goes() -> None:
    far = JobFolder("a/future", "uid-gone", datetime.max.replace(tzinfo=UTC))
    old = JobFolder("a/old", "uid-gone", NOW - 2 * WEEK)
    assert stale_folders([far, old], set(), NOW, WEEK) == ["a/old"]
