"""TensorBoard over a sanitized copy of the shared folder, never over the folder itself.

Every job writes into its folder on the shared volume, and TensorBoard reads them all.
What a tenant puts there must not stop TensorBoard for the others:

- a FIFO (or a device, a socket) named like an event file: TensorBoard's Python loader
  opens it and waits for a writer for ever, and with it every run's reload;
- a symlink, to a folder or a file out of the tree: TensorBoard's Rust loader follows it
  (a link to / walks the whole container), and either loader reads what it points at.

So TensorBoard reads a view: a folder of its own (an emptyDir) holding copies of the
regular event files (names with "tfevents", as TensorBoard picks them) and nothing else.
The view is brought up to date every few seconds, appending what each file gained.
Each file is opened with O_NOFOLLOW | O_NONBLOCK relative to its folder's descriptor
(itself opened with O_NOFOLLOW), and copied only if fstat of that very descriptor says
it is a regular file: a FIFO opens at once and is skipped, a symlink is refused, and
nothing can be swapped in between the check and the read. Copies are capped per file and
in total, so a huge file fills no disk.

    python3 -m tfmw_trainer.tensorboard_view --source /shared --view /view -- \
        --port=6006 --bind_all          # the rest: TensorBoard's own flags
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("tfmw_trainer.tensorboard_view")

MAX_DEPTH = 16  # <namespace>/<job>/... : deeper folders are not looked into
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
BLOCK = 1024 * 1024
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


def is_event_file(name: str) -> bool:
    """TensorBoard's own test (io_wrapper.IsSummaryEventsFile): "tfevents" in the name."""
    return "tfevents" in name


@dataclass
class Copied:
    """What the view holds of one source file."""

    device: int
    inode: int
    size: int  # bytes copied so far


@dataclass
class View:
    source: Path
    view: Path
    max_file_bytes: int = MAX_FILE_BYTES
    max_total_bytes: int = MAX_TOTAL_BYTES
    copied: dict[str, Copied] = field(default_factory=dict)
    total: int = 0  # bytes in the view
    refused: set[tuple[str, str]] = field(default_factory=set)  # (path, why), each logged once

    def sync(self) -> None:
        """One pass: the view brought up to the source, files gone from it removed."""
        seen: set[str] = set()
        try:
            root = os.open(self.source, DIR_FLAGS)
        except OSError as error:
            logger.warning("cannot open %s: %s", self.source, error)
            return
        try:
            for relpath, parent, name in self._event_files(root, "", 0):
                if self._sync_file(relpath, parent, name):
                    seen.add(relpath)
        finally:
            os.close(root)
        for relpath in set(self.copied) - seen:
            self._drop(relpath)

    def _event_files(self, folder: int, prefix: str, depth: int) -> Iterator[tuple[str, int, str]]:
        """(relative path, folder descriptor, name) of every event-file name, never
        through a symlink: folders are opened by descriptor, each with O_NOFOLLOW."""
        try:
            entries = list(os.scandir(folder))
        except OSError as error:
            logger.warning("cannot list %s: %s", prefix or ".", error)
            return
        for entry in sorted(entries, key=lambda e: e.name):
            relpath = f"{prefix}{entry.name}"
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if depth + 1 >= MAX_DEPTH:
                    self._refuse(relpath, "too deep")
                    continue
                try:
                    child = os.open(entry.name, DIR_FLAGS, dir_fd=folder)
                except OSError as error:  # ELOOP: it became a symlink since it was listed
                    self._refuse(relpath, f"cannot open folder: {error.strerror}")
                    continue
                try:
                    yield from self._event_files(child, relpath + "/", depth + 1)
                finally:
                    os.close(child)
            elif is_event_file(entry.name):
                yield relpath, folder, entry.name

    def _sync_file(self, relpath: str, folder: int, name: str) -> bool:
        """Copy what the file gained; False when it is not a regular file (or unreadable)."""
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=folder)
        except OSError as error:
            reason = "a symlink" if error.errno == errno.ELOOP else error.strerror
            self._refuse(relpath, f"not read: {reason}")
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._refuse(relpath, f"not a regular file (mode {stat.filemode(st.st_mode)})")
                return False
            self._copy(relpath, fd, st)
            return True
        except OSError as error:
            logger.warning("copying %s: %s", relpath, error)
            return relpath in self.copied
        finally:
            os.close(fd)

    def _copy(self, relpath: str, fd: int, st: os.stat_result) -> None:
        target = self.view / relpath
        held = self.copied.get(relpath)
        if held is None or (held.device, held.inode) != (st.st_dev, st.st_ino) or st.st_size < held.size:
            # New, replaced, or shortened: copied again from its start, under a new name
            # first, so TensorBoard never reads a file that goes back in time.
            if held is not None:
                self._drop(relpath)
            held = Copied(st.st_dev, st.st_ino, 0)
            self.copied[relpath] = held  # counted from the first byte copied
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            with open(partial, "wb") as out:
                self._append(relpath, fd, st.st_size, held, out.fileno())
            partial.replace(target)
            return
        if st.st_size > held.size:
            with open(target, "ab") as out:
                self._append(relpath, fd, st.st_size, held, out.fileno())

    def _append(self, relpath: str, fd: int, size: int, held: Copied, out: int) -> None:
        room = min(self.max_file_bytes - held.size, self.max_total_bytes - self.total)
        end = min(size, held.size + max(room, 0))
        if end < size:
            limits = f"{self.max_file_bytes} bytes a file, {self.max_total_bytes} in all"
            self._refuse(relpath, f"copied in part: over the view's limits ({limits})")
        while held.size < end:
            block = os.pread(fd, min(BLOCK, end - held.size), held.size)
            if not block:
                break
            os.write(out, block)
            held.size += len(block)
            self.total += len(block)

    def _drop(self, relpath: str) -> None:
        held = self.copied.pop(relpath, None)
        if held is not None:
            self.total -= held.size
        with contextlib.suppress(FileNotFoundError):
            (self.view / relpath).unlink()

    def _refuse(self, relpath: str, why: str) -> None:
        if (relpath, why) not in self.refused:
            self.refused.add((relpath, why))
            logger.warning("%s: %s; left out of TensorBoard's view", relpath, why)


def serve(view: View, interval: float, tensorboard: Sequence[str]) -> int:
    """Sync once, start TensorBoard on the view, sync every `interval` s until it exits."""
    if view.view.exists():
        for child in view.view.iterdir():  # a restarted container's leftovers
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    view.view.mkdir(parents=True, exist_ok=True)
    view.sync()
    process = subprocess.Popen([*tensorboard, f"--logdir={view.view}"])
    stop = threading.Event()

    def forward(signum: int, _frame: object) -> None:
        stop.set()
        process.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while process.poll() is None and not stop.wait(interval):
        try:
            view.sync()
        except Exception:  # a failed pass is retried; TensorBoard goes on
            logger.exception("syncing the view failed")
    return process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, required=True, help="the shared folder (read only)")
    parser.add_argument("--view", type=Path, required=True, help="a folder of the view's own")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between syncs")
    parser.add_argument("--max-file-bytes", type=int, default=MAX_FILE_BYTES)
    parser.add_argument("--max-total-bytes", type=int, default=MAX_TOTAL_BYTES)
    parser.add_argument(
        "--tensorboard",
        help="the TensorBoard command (default: this Python's `-m tensorboard.main`, the "
        "TensorBoard installed beside the view, whether or not its bin/ is on the PATH)",
    )
    parser.add_argument("tensorboard_args", nargs="*", help="after --: TensorBoard's flags")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    view = View(args.source, args.view, args.max_file_bytes, args.max_total_bytes)
    tensorboard = [args.tensorboard] if args.tensorboard else [sys.executable, "-m", "tensorboard.main"]
    return serve(view, args.interval, [*tensorboard, *args.tensorboard_args])


if __name__ == "__main__":
    sys.exit(main())
