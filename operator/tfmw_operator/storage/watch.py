"""Which job folders changed on the shared storage: inotify where the filesystem has it.

With inotify, noticing a marker costs nothing per running job and per tick: the kernel
says which folder changed, and the name of the file. A network filesystem (NFS, CIFS,
FUSE, ...) does not report another machine's writes to inotify, so there the operator
polls instead (job_files.py), more slowly the more jobs it watches.

A folder is watched through a descriptor opened without following links (storage.py),
so a worker that swaps its folder for a symlink cannot point the watch elsewhere; the
watch only ever triggers a reconcile, which reads as carefully as always.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from tfmw_operator.api.objects import Key
from tfmw_operator.storage.files import StorageError, open_directory

logger = logging.getLogger(__name__)

IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
# A file finished (written and closed, renamed in, created as a link or FIFO), or the
# folder itself went. Not IN_MODIFY: checkpoints and TensorBoard logs would flood it.
WATCH_MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF
# Not IN_DONT_FOLLOW: the watch is added through /proc/self/fd/N, itself a link, to the
# folder the descriptor holds (reached without following links).
WATCH_FLAGS = IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len
# Overflows so far, the folder's watch descriptor, the events read for it (FolderEvents.stamp).
FolderStamp = tuple[int, int, int]
MAX_READS_PER_CALL = 8

# Filesystems whose every write goes through this kernel, so inotify sees all of them.
LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "ramfs", "reiserfs", "jfs"}
)


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """The type of the filesystem `path` is on, from /proc/self/mountinfo ("" if unknown)."""
    try:
        text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
        target = os.path.realpath(path)
    except OSError:
        return ""
    best, kind = "", ""
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        mount_point = fields[4].replace("\\040", " ")
        fs_type = fields[fields.index("-") + 1]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, fs_type
    return kind


class FolderEvents:
    """inotify over job folders: `changed()` says which keys saw which file names.

    `FolderEvents.open()` is None where inotify cannot be trusted or used.
    """

    def __init__(self, shared_root: Path, fd: int, libc: ctypes.CDLL) -> None:
        self.shared_root = shared_root
        self.fd = fd
        self._libc = libc
        self._keys: dict[int, Key] = {}
        self._folders: dict[Key, dict[str, int]] = {}  # key -> relpath -> watch descriptor
        self._told: dict[int, int] = {}  # watch descriptor -> events read for it
        self._overflows = 0  # times the kernel dropped events

    @classmethod
    def open(cls, shared_root: Path) -> FolderEvents | None:
        kind = filesystem_type(shared_root)
        if kind not in LOCAL_FILESYSTEMS:
            logger.info("shared root %s is on %r: markers are polled, not watched", shared_root, kind or "?")
            return None
        name = ctypes.util.find_library("c")
        if name is None:
            return None
        libc = ctypes.CDLL(name, use_errno=True)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            logger.warning("inotify unavailable (%s): markers are polled", os.strerror(ctypes.get_errno()))
            return None
        return cls(shared_root, fd, libc)

    def close(self) -> None:
        os.close(self.fd)

    def keys(self) -> set[Key]:
        return set(self._folders)

    def watched(self, key: Key) -> set[str]:
        return set(self._folders.get(key, {}))

    def stamp(self, key: Key, relpath: str) -> FolderStamp | None:
        """What changes whenever `changed()` reads anything told of the folder, or the kernel
        dropped events: equal stamps, no event of the folder was read between them (read
        before the reconcile it triggers). None while it is not watched. A folder watched
        again has another descriptor, so another stamp (watch() records no descriptor twice)."""
        wd = self._folders.get(key, {}).get(relpath)
        return None if wd is None else (self._overflows, wd, self._told.get(wd, 0))

    def watch(self, key: Key, relpaths: set[str]) -> bool:
        """Watch these folders for the key (and no others); False if one cannot be watched
        now (not there yet, a link, no watches left): the caller polls that key."""
        held = self._folders.setdefault(key, {})
        for relpath in set(held) - relpaths:
            self._remove(key, relpath)
        complete = True
        for relpath in relpaths - set(held):
            try:
                with open_directory(self.shared_root, relpath) as dir_fd:
                    path = f"/proc/self/fd/{dir_fd}".encode()
                    wd = self._libc.inotify_add_watch(self.fd, path, WATCH_MASK | WATCH_FLAGS)
            except (StorageError, OSError):
                complete = False
                continue
            if wd < 0:
                code = ctypes.get_errno()
                if code == errno.ENOSPC:
                    logger.warning(
                        "no inotify watches left (fs.inotify.max_user_watches): polling %s", relpath
                    )
                complete = False
                continue
            if wd in self._keys:
                # The kernel's descriptor for a folder already watched (one moved onto this
                # path while its own move is still unread): left to polling, so that one
                # descriptor never stands for two folders (and stamps stay true).
                complete = False
                continue
            held[relpath] = wd
            self._keys[wd] = key
        if not held:
            self._folders.pop(key, None)
        return complete

    def forget(self, key: Key) -> None:
        for relpath in list(self._folders.get(key, {})):
            self._remove(key, relpath)
        self._folders.pop(key, None)

    def _remove(self, key: Key, relpath: str) -> None:
        wd = self._folders.get(key, {}).pop(relpath, None)
        if wd is not None and self._keys.pop(wd, None) is not None:
            self._told.pop(wd, None)
            self._libc.inotify_rm_watch(self.fd, wd)

    def changed(self) -> dict[Key, set[str]] | None:
        """The keys whose folders changed since the last call, with the names of what
        changed in them ("" for the folder itself); None when the kernel dropped events."""
        found: dict[Key, set[str]] = {}
        overflow = False
        # A bounded read per call: a worker flooding its folder with files cannot hold the
        # event loop; the rest is read on the next call.
        for _ in range(MAX_READS_PER_CALL):
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                    self._overflows += 1
                    continue
                key = self._keys.get(wd)
                if key is None:
                    continue
                self._told[wd] = self._told.get(wd, 0) + 1
                if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                    self._drop_descriptor(wd)  # watched again on the next sweep
                found.setdefault(key, set()).add(raw.rstrip(b"\0").decode("utf-8", "replace"))
        return None if overflow else found

    def _drop_descriptor(self, wd: int) -> None:
        key = self._keys.pop(wd, None)
        self._told.pop(wd, None)
        if key is None:
            return
        folders = self._folders.get(key, {})
        for relpath, held in list(folders.items()):
            if held == wd:
                del folders[relpath]
        self._libc.inotify_rm_watch(self.fd, wd)


class WatchSync:
    """Keeps the watches of `events` in line with the folders each key wants, at a cost per
    change: `changed(key)` when what a key wants may have changed, `sync()` each tick."""

    def __init__(self, events: FolderEvents, on_change: Callable[[], None] = lambda: None) -> None:
        self.events = events
        self._on_change = on_change  # told of every change, so a sync can wait for one
        self._pending: set[Key] = set()
        self._unwatched: set[Key] = set()

    def changed(self, key: Key) -> None:
        self._pending.add(key)
        self._on_change()

    @property
    def idle(self) -> bool:
        """Nothing to sync until a key changes: none pending, none waiting to be watchable."""
        return not self._pending and not self._unwatched

    def sync(self, wanted: Callable[[Key], set[str]], every: Iterable[Key] | None = None) -> set[Key]:
        """Watch what the pending keys want (and every key in `every`, forgetting the rest),
        trying again those that could not be watched before.

        Returns the keys to look at by hand now: those whose folders cannot be watched (not
        there yet, a link, no watches left), and those watched only now, as a file may have
        come just before the watch did.
        """
        pending, self._pending = self._pending | self._unwatched, set()
        if every is not None:
            pending |= set(every) | self.events.keys()
        look = set()
        for key in pending:
            folders = wanted(key)
            if not folders:
                self.events.forget(key)
                self._unwatched.discard(key)
                continue
            before = self.events.watched(key)
            if self.events.watch(key, folders) and self.events.watched(key) == folders:
                self._unwatched.discard(key)
                if before != folders:
                    look.add(key)
            else:
                self._unwatched.add(key)
        return look | self._unwatched
