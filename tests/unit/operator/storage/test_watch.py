import os
from pathlib import Path

import pytest
from tfmw_operator.api.objects import Key
from tfmw_operator.storage.watch import FolderEvents, WatchSync, filesystem_type

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw
40 27 0:45 / /var/lib/tfmw/shared rw,relatime - nfs4 server:/export rw
41 40 0:46 / /var/lib/tfmw/shared/local\\040disk rw - xfs /dev/vdb rw
"""


def test_the_filesystem_is_that_of_the_longest_mount_point_holding_the_path() -> None:
    assert filesystem_type(Path("/var/lib/tfmw/shared/ns/job"), MOUNTINFO) == "nfs4"
    assert filesystem_type(Path("/var/lib/tfmw/shared/local disk/x"), MOUNTINFO) == "xfs"
    assert filesystem_type(Path("/var/lib/tfmw/sharedother"), MOUNTINFO) == "ext4"
    assert filesystem_type(Path("/proc/1"), MOUNTINFO) == "proc"


@pytest.fixture
def events(tmp_path: Path) -> FolderEvents:
    opened = FolderEvents.open(tmp_path)
    if opened is None:  # the test machine's /tmp must be a local filesystem
        raise AssertionError(f"{tmp_path} is on {filesystem_type(tmp_path)!r}: no inotify")
    return opened


def test_a_file_finished_in_a_watched_folder_names_its_job_and_file(
    tmp_path: Path, events: FolderEvents
) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / "ns" / "other").mkdir()
    assert events.watch(("ns", "job"), {"ns/job"})
    assert events.changed() == {}
    (tmp_path / "ns" / "job" / "multiworker-complete.txt").write_text("done")
    (tmp_path / "ns" / "other" / "multiworker-complete.txt").write_text("not watched")
    assert events.changed() == {("ns", "job"): {"multiworker-complete.txt"}}
    partial = tmp_path / "ns" / "job" / ".progress.json.partial"
    partial.write_text("{}")
    events.changed()
    os.replace(partial, tmp_path / "ns" / "job" / "progress.json")
    assert "progress.json" in (events.changed() or {})[("ns", "job")]
    events.forget(("ns", "job"))
    (tmp_path / "ns" / "job" / "again").write_text("x")
    assert events.changed() == {}


def test_a_linked_or_missing_folder_is_not_watched_and_a_removed_one_is_dropped(
    tmp_path: Path, events: FolderEvents
) -> None:
    (tmp_path / "ns").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "ns" / "linked").symlink_to(tmp_path / "elsewhere")
    assert not events.watch(("ns", "linked"), {"ns/linked"})
    assert not events.watch(("ns", "missing"), {"ns/missing"})
    (tmp_path / "ns" / "job").mkdir()
    assert events.watch(("ns", "job"), {"ns/job"})
    (tmp_path / "ns" / "job").rmdir()
    changed = events.changed() or {}
    assert "" in changed[("ns", "job")]  # the folder itself went: its job is told
    assert events.watched(("ns", "job")) == set()


class Wants:
    """What each key wants watched, and which keys a sync asked about."""

    def __init__(self, **folders: str) -> None:
        self.folders = {("ns", name): {f"ns/{folder}"} for name, folder in folders.items()}
        self.asked: list[Key] = []

    def __call__(self, key: Key) -> set[str]:
        self.asked.append(key)
        return self.folders.get(key, set())


def test_a_sync_costs_only_the_keys_that_changed_and_those_not_yet_watchable(
    tmp_path: Path, events: FolderEvents
) -> None:
    for name in ("a", "b"):
        (tmp_path / "ns" / name).mkdir(parents=True)
    wants, sync = Wants(a="a", b="b", c="c"), WatchSync(events)
    for name in ("a", "b", "c"):
        sync.changed(("ns", name))
    # Watched only now: looked at by hand once, as a file may have come just before.
    assert sync.sync(wants) == {("ns", "a"), ("ns", "b"), ("ns", "c")}
    assert events.watched(("ns", "a")) == {"ns/a"}
    wants.asked.clear()
    assert sync.sync(wants) == {("ns", "c")}  # c's folder is not there yet: polled
    assert wants.asked == [("ns", "c")]  # a and b cost nothing
    (tmp_path / "ns" / "c").mkdir()
    assert sync.sync(wants) == {("ns", "c")}  # watched now, looked at once more
    wants.asked.clear()
    assert sync.sync(wants) == set()
    assert wants.asked == []


def test_a_key_that_wants_nothing_is_forgotten_and_a_sweep_drops_strays(
    tmp_path: Path, events: FolderEvents
) -> None:
    for name in ("a", "b"):
        (tmp_path / "ns" / name).mkdir(parents=True)
    wants, sync = Wants(a="a", b="b"), WatchSync(events)
    sync.changed(("ns", "a"))
    sync.changed(("ns", "b"))
    sync.sync(wants)
    del wants.folders[("ns", "a")]
    sync.changed(("ns", "a"))
    sync.sync(wants)
    assert events.keys() == {("ns", "b")}
    del wants.folders[("ns", "b")]  # never told: the next sweep finds it
    assert sync.sync(wants, every=set(wants.folders)) == set()
    assert events.keys() == set()
