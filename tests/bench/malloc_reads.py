"""What glibc's malloc settings cost a TLS read: `python3 -m bench.malloc_reads`.

CPython's `SSLObject.read(n)` (asyncio's copied read path, which aiohttp's protocol takes)
allocates a bytes object of n = 256 KiB, has OpenSSL write what it has into it, shrinks it
to that and frees it when the data is consumed. This replays that pattern with libc's own
malloc, realloc and free in a child process per setting, and prints the minor page faults
and CPU time of 20,000 reads for each: the Dockerfile's settings against glibc's defaults.
"""

from __future__ import annotations

import os
import subprocess
import sys

READS = 20_000
BUFFER = 256 * 1024
READ = 16 * 1024
SETTINGS: tuple[tuple[str, dict[str, str]], ...] = (
    ("glibc's defaults", {}),
    ("arenas 2", {"MALLOC_ARENA_MAX": "2"}),
    ("arenas 2, mmap threshold 128 KiB", {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}),
    ("arenas 2, mmap threshold 512 KiB", {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "524288"}),
    (
        "the image's: and trim threshold 1 MiB",
        {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "524288", "MALLOC_TRIM_THRESHOLD_": "1048576"},
    ),
)

CHILD = f"""
import ctypes, resource, time
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.realloc.restype = ctypes.c_void_p
libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
live = [libc.malloc(200) for _ in range(200)]  # small objects made meanwhile, freed later
cpu, faults = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({READS}):
    buffer = libc.malloc({BUFFER})
    ctypes.memset(buffer, 1, {READ})
    buffer = libc.realloc(buffer, {READ})
    live.append(libc.malloc(200))
    libc.free(buffer)
    libc.free(live.pop(0))
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(faults, time.process_time() - cpu)
"""


def measure(env: dict[str, str]) -> tuple[int, float]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    return int(out[0]), float(out[1])


def main() -> None:
    print(f"{READS} reads of {READ // 1024} KiB into a {BUFFER // 1024} KiB buffer, shrunk, then freed")
    print(f"{'malloc settings':45} {'minor faults':>12} {'CPU (s)':>8}")
    for label, env in SETTINGS:
        faults, cpu = measure(env)
        print(f"{label:45} {faults:12d} {cpu:8.3f}")


if __name__ == "__main__":
    main()
