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


def test_a_folders_stamp_changes_with_anything_told_of_it_and_with_a_new_watch(
    tmp_path: Path, events: FolderEvents
) -> None:
    # The controller reads a missing steps folder again only when the stamp of the job's
    # folder has changed (shell/controller.py, _read_step_times).
    key = ("ns", "job")
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / "ns" / "other").mkdir()
    assert events.stamp(key, "ns/job") is None  # not watched: nothing is promised
    assert events.watch(key, {"ns/job"}) and events.watch(("ns", "other"), {"ns/other"})
    first = events.stamp(key, "ns/job")
    assert first is not None
    (tmp_path / "ns" / "other" / "steps").mkdir()  # another job's folder
    events.changed()
    assert events.stamp(key, "ns/job") == first
    (tmp_path / "ns" / "job" / "steps").mkdir()
    assert events.stamp(key, "ns/job") == first  # not read yet: the read tells it
    events.changed()
    second = events.stamp(key, "ns/job")
    assert second not in (None, first)
    # Watched again (its watch dropped and put back): another descriptor, another stamp.
    events.forget(key)
    assert events.stamp(key, "ns/job") is None
    assert events.watch(key, {"ns/job"})
    assert events.stamp(key, "ns/job") not in (None, first, second)


def test_a_folder_already_watched_for_another_job_is_left_to_polling(
    tmp_path: Path, events: FolderEvents
) -> None:
    # The kernel answers a second watch of one folder with the first one's descriptor (a job's
    # folder renamed onto another's path before its move is read): one descriptor must never
    # stand for two jobs, or a stamp would stay the same while the other job's folder changes.
    (tmp_path / "ns" / "a").mkdir(parents=True)
    assert events.watch(("ns", "a"), {"ns/a"})
    before = events.stamp(("ns", "a"), "ns/a")
    assert not events.watch(("ns", "other"), {"ns/a"})
    assert events.stamp(("ns", "other"), "ns/a") is None
    (tmp_path / "ns" / "a" / "steps").mkdir()
    told = events.changed()
    assert told == {("ns", "a"): {"steps"}}
    assert events.stamp(("ns", "a"), "ns/a") not in (None, before)


def test_events_the_kernel_dropped_change_every_stamp(tmp_path: Path, events: FolderEvents) -> None:
    (tmp_path / "ns" / "job").mkdir(parents=True)
    assert events.watch(("ns", "job"), {"ns/job"})
    before = events.stamp(("ns", "job"), "ns/job")
    queued = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if queued > 65_536:  # 16,384 by default: a host tuned far above would need a million files
        pytest.skip(f"fs.inotify.max_queued_events is {queued}: too many files to overflow it")
    for index in range(queued + 10):  # more than the kernel keeps: it drops the rest
        (tmp_path / "ns" / "job" / f"f{index}").touch()
    told = [events.changed() for _ in range(queued // 1000 + 10)]
    assert None in told
    after = events.stamp(("ns", "job"), "ns/job")
    assert after is not None and before is not None and after[0] == before[0] + 1


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
