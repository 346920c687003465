"""Walking what tenants wrote, by file descriptor: bounded, and unable to block or escape.

A job's folder is its workers' to fill, and any pod of the namespace that mounts its claim
may change it while the operator walks it: swap a folder for a FIFO, a symlink or a device
between a look and an open (renameat2 RENAME_EXCHANGE does it atomically), nest folders
thousands deep, or make millions of entries. So every walk here:

- opens a folder only relative to its parent's descriptor, with O_DIRECTORY | O_NOFOLLOW |
  O_NONBLOCK: a FIFO, device, socket or link found under a folder's name fails the open at
  once (ENOTDIR, ELOOP), never blocks, and is never followed out of the tree;
- removes by descriptor (unlinkat, and rmdir relative to the parent's descriptor): a FIFO,
  device, socket or link is unlinked, never opened;
- keeps an explicit stack, no recursion, holding at most MAX_DEPTH descriptors: a folder
  deeper than that is moved up to the top of the tree being removed, and removed from there
  (so any depth goes, with bounded descriptors and no RecursionError);
- stops after `Budget.entries` entries, to be called again (retention goes on next time);
- never lets one entry's failure stop the others: what cannot be removed is skipped and
  named in the RemovalError raised once the rest is done.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# Descriptors one removal holds at once: one per level it has gone down.
MAX_DEPTH = 32
# Entries read from a folder before acting on them; the folder is read again after.
BATCH = 256
# Names a folder too deep is moved to, at the top of the tree being removed.
DEEP_PREFIX = ".tfmw-deep-"
MAX_FAILURES_NAMED = 3
# What an open under a folder's name meets when something else took its place.
NOT_A_FOLDER = (errno.ENOTDIR, errno.ELOOP)
# What a removal meets when an entry changed under it (swapped, filled again): read the
# folder again and go on, within the budget; not a failure of the entry.
CHANGED_MEANWHILE = (errno.ENOTDIR, errno.ELOOP, errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)


class RemovalError(Exception):
    """Some entries could not be removed (the others were): `failures` of them, the first named."""

    def __init__(self, failures: list[str], count: int) -> None:
        shown = "; ".join(failures[:MAX_FAILURES_NAMED])
        more = f" (and {count - MAX_FAILURES_NAMED} more)" if count > MAX_FAILURES_NAMED else ""
        super().__init__(f"{count} entries could not be removed: {shown}{more}")
        self.count = count


@dataclass
class Budget:
    """How many entries a walk may still look at (each read, removed, moved or failed one)."""

    entries: int

    @property
    def spent(self) -> bool:
        return self.entries <= 0

    def spend(self, count: int = 1) -> None:
        self.entries -= count


@dataclass
class _Folder:
    """One folder on the way down: its descriptor, its name in its parent, what failed in it."""

    fd: int
    name: str
    failed: set[str] = field(default_factory=set)


def open_folder(dir_fd: int, name: str) -> int:
    """A descriptor of the folder `name` in `dir_fd`: OSError (ENOTDIR, ELOOP) for anything
    else there, at once."""
    return os.open(name, DIRECTORY_FLAGS, dir_fd=dir_fd)


def entries(dir_fd: int, limit: int) -> list[tuple[str, bool]]:
    """Up to `limit` entries of a folder, by name, each with whether it is a folder (as the
    folder said; checked again on open, never trusted)."""
    found: list[tuple[str, bool]] = []
    with os.scandir(dir_fd) as scan:
        for entry in itertools.islice(scan, limit):
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_folder = False
            found.append((entry.name, is_folder))
    return found


def same_file(one: os.stat_result, other: os.stat_result) -> bool:
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


class _Removal:
    """One call of remove_tree: the folders on the way down, and what failed."""

    def __init__(self, top: int, name: str, budget: Budget, last: str | None) -> None:
        self.stack = [_Folder(top, name)]
        self.budget = budget
        self.last = last
        self.failures: list[str] = []
        self.failed = 0
        self._deep = itertools.count()

    def run(self) -> bool:
        """Empty the top folder but `last`: True when done, False when the budget ran out."""
        while not self.budget.spent:
            folder = self.stack[-1]
            batch = _unfailed(folder, BATCH, self.last if len(self.stack) == 1 else None)
            if not batch:
                if len(self.stack) == 1:
                    return True
                self._leave(folder)
                continue
            for entry, is_folder in batch:
                if self.budget.spent:
                    break
                self.budget.spend()
                if self._remove(folder, entry, is_folder):
                    break  # went down into it: the rest of this folder is read again later
        return len(self.stack) == 1 and not _unfailed(self.stack[0], 1, self.last)

    def _leave(self, folder: _Folder) -> None:
        """Done with an emptied folder: up to its parent, and the folder removed from it."""
        self.stack.pop()
        os.close(folder.fd)
        self.budget.spend()
        try:
            os.rmdir(folder.name, dir_fd=self.stack[-1].fd)
        except FileNotFoundError:
            pass
        except OSError as error:
            if error.errno not in CHANGED_MEANWHILE or folder.failed:
                self._fail(self.stack[-1], folder.name, error)

    def _remove(self, folder: _Folder, name: str, is_folder: bool) -> bool:
        """Remove one entry, or go down into it (True)."""
        try:
            if not is_folder:
                try:
                    os.unlink(name, dir_fd=folder.fd)  # a link, FIFO or device: never opened
                    return False
                except IsADirectoryError:
                    pass  # a folder took its place since the folder was read
            if len(self.stack) >= MAX_DEPTH:
                _move_up(folder.fd, name, self.stack[0].fd, self._deep)
                return False
            try:
                child = open_folder(folder.fd, name)
            except OSError as error:
                if error.errno not in NOT_A_FOLDER:
                    raise
                os.unlink(name, dir_fd=folder.fd)  # swapped for a FIFO, link or file meanwhile
                return False
        except FileNotFoundError:
            return False  # gone meanwhile
        except OSError as error:
            if error.errno not in CHANGED_MEANWHILE:
                self._fail(folder, name, error)
            return False
        self.stack.append(_Folder(child, name))
        return True

    def _fail(self, folder: _Folder, name: str, error: OSError) -> None:
        folder.failed.add(name)
        self.failed += 1
        if len(self.failures) < MAX_FAILURES_NAMED:
            self.failures.append(f"{_path(self.stack, folder, name)}: {_describe(error)}")

    def close(self) -> None:
        for folder in self.stack:
            os.close(folder.fd)
        self.stack = []


class FolderChanged(Exception):
    """The folder is not the one that was to be removed (`check` said so): left alone."""


def remove_tree(
    parent_fd: int,
    name: str,
    budget: Budget,
    last: str | None = None,
    check: Callable[[int], bool] | None = None,
) -> bool:
    """Remove `name` in `parent_fd` and everything in it, within `budget`: True once it is
    gone, False when the budget ran out first (call again to go on). `last`, an entry of the
    top folder, is removed only after everything else in it (the owner file: a folder half
    removed must still be known as the operator's). `check(fd)`, given the top folder's
    descriptor once it is open, says whether it is the folder meant (FolderChanged if not):
    what is checked is what is removed, whatever takes its name meanwhile. Raises
    RemovalError when entries could not be removed (the rest was), OSError when the top
    folder cannot be opened at all."""
    try:
        top = open_folder(parent_fd, name)
    except FileNotFoundError:
        return True
    except OSError as error:
        if error.errno not in NOT_A_FOLDER:
            raise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent_fd)  # a link, FIFO or file in its place: itself, never its target
        budget.spend()
        return True
    if check is not None and not check(top):
        os.close(top)
        raise FolderChanged(name)
    removal = _Removal(top, name, budget, last)
    try:
        if not removal.run():
            return False
        if removal.failed:
            raise RemovalError(removal.failures, removal.failed)
        if last is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(last, dir_fd=top)
        # The top folder goes only if the name still holds it (a tenant may have moved it).
        try:
            if same_file(os.fstat(top), os.stat(name, dir_fd=parent_fd, follow_symlinks=False)):
                os.rmdir(name, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        return True
    finally:
        removal.close()


def _unfailed(folder: _Folder, limit: int, last: str | None) -> list[tuple[str, bool]]:
    """The next entries to act on in `folder`: not those that failed, nor `last`."""
    skip = folder.failed | ({last} if last is not None else set())
    return [e for e in entries(folder.fd, limit + len(skip)) if e[0] not in skip][:limit]


def _move_up(dir_fd: int, name: str, top: int, names: Iterator[int]) -> None:
    """Move folder `name` of `dir_fd` to the top of the tree being removed, under a new name."""
    for _ in range(100):
        try:
            os.rename(name, f"{DEEP_PREFIX}{next(names)}", src_dir_fd=dir_fd, dst_dir_fd=top)
            return
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    raise OSError(errno.EEXIST, "no free name to move a deep folder to")


def _path(stack: list[_Folder], folder: _Folder, name: str) -> str:
    """The entry's path within the tree, its last folders only."""
    names = [f.name for f in stack[: stack.index(folder) + 1]] if folder in stack else [folder.name]
    return ("…/" if len(names) > 3 else "") + "/".join([*names[-3:], name])


def _describe(error: OSError) -> str:
    code = errno.errorcode.get(error.errno or 0, str(error.errno))
    return f"{code}: {error.strerror or error}"
