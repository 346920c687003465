"""Runs a submitted program in a worker's container (`tfmw submit`, `Client().train`).

Shipped inside the job's ConfigMap and run as `python3 launch.py MARKER SCRIPT ARGS...`: the
standard library only, and Python 3.8 or newer, since the image is the user's. It runs the
script as `python3 SCRIPT ARGS...` would (as `__main__`, its folder first on sys.path, from
the job's shared folder: the container's working directory), then, when MARKER is `auto` and
the program returned (or exited 0) on the chief without writing the completion marker
itself, writes it: the job is then Succeeded (docs/cli.md, "tfmw submit").
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import sys


def is_chief(env: dict[str, str]) -> bool:
    """The contract's chief: TFMW_ROLE chief; before roles existed, worker 0."""
    role = env.get("TFMW_ROLE", "")
    return role == "chief" if role else env.get("TFMW_WORKER_INDEX") == "0"


def write_marker(env: dict[str, str]) -> str | None:
    """The marker, atomically (a new file renamed over the name), unless the program wrote it."""
    path = env.get("TFMW_MARKER_PATH", "")
    if not path or os.path.lexists(path):
        return None
    document: dict[str, object] = {"jobUid": env.get("TFMW_JOB_UID", ""), "writtenBy": "tfmw launcher"}
    with contextlib.suppress(ValueError):
        document["attempt"] = int(env.get("TFMW_ATTEMPT", ""))
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.tfmw-tmp"
    with open(temporary, "w") as file:
        json.dump(document, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    return path


def _stop(signum: int, frame: object) -> None:
    # As PID 1 the kernel drops SIGTERM without a handler: the worker would wait for its
    # grace period's SIGKILL. A program's own handler replaces this one.
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("auto", "program"):
        print("usage: launch.py auto|program SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    marker, script = argv[1], argv[2]
    signal.signal(signal.SIGTERM, _stop)
    sys.argv = argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as ended:
        if ended.code not in (None, 0):
            raise
    sys.stdout.flush()
    if marker == "auto" and is_chief(dict(os.environ)):
        written = write_marker(dict(os.environ))
        if written:
            print(f"tfmw launcher: the program returned on the chief; wrote the marker {written}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
