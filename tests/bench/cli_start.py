"""The `tfmw` command's start time against kubectl's: `tfmw get`, `kubectl tfmw get` (kubectl's
plugin mechanism running `kubectl-tfmw`) and `kubectl get tfmwjobs`, each a whole process from
exec to exit, against the cluster of $KUBECONFIG (hack/cluster.sh up --no-node is enough).

`PYTHONPATH=tests python3 -m bench.cli_start [--runs N] [--namespace NS] [--bin DIR]` runs
the commands in turn (one of each, then again: a round), N rounds (30 unless told) after 3
not counted, and prints for each the median and 90th percentile of its wall time and the
median of its CPU time (user + system, the kernel's own accounting of the finished process),
then the ratios to `kubectl get tfmwjobs` round by round, medians: paired so that a machine
whose speed drifts (a shared VM) moves both sides of a ratio alike. The floor is a bare
client doing the same work: the interpreter that runs `tfmw`, the standard library's HTTPS,
one GET of the same list with the kubeconfig's server and certificates (read once, before
the rounds, and given as files), the answer parsed and its item count printed. `--bin DIR`: where `tfmw`
and `kubectl-tfmw` are (default: the PATH's), so that an installed copy can be measured
beside another; `--also LABEL=DIR` adds that folder's `tfmw get` to the same rounds (another
build, measured on the same machine at the same moments). Nothing is written to the
cluster; every command must exit 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.stats import percentile, say

BASELINE = "kubectl get tfmwjobs"


def commands(namespace: str, bin_dir: str | None) -> dict[str, list[str]]:
    tfmw = os.path.join(bin_dir, "tfmw") if bin_dir else shutil.which("tfmw")
    kubectl = shutil.which("kubectl")
    if not tfmw or not kubectl:
        raise SystemExit("tfmw and kubectl must be on the PATH (or tfmw in --bin)")
    return {
        "tfmw get": [tfmw, "get", "-n", namespace],
        "kubectl tfmw get": [kubectl, "tfmw", "get", "-n", namespace],
        BASELINE: [kubectl, "get", "tfmwjobs", "-n", namespace],
    }


FLOOR = """
import http.client, json, ssl, sys
host, port, ca, cert, key, token, path = sys.argv[1:]
context = ssl.create_default_context(cafile=ca or None)
if cert:
    context.load_cert_chain(cert, key or None)
connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)
headers = {"Accept": "application/json", **({"Authorization": "Bearer " + token} if token else {})}
connection.request("GET", path, headers=headers)
answer = connection.getresponse()
assert answer.status == 200, answer.status
print(len(json.loads(answer.read())["items"]))
"""


def floor(namespace: str, folder: str) -> list[str]:
    """The bare client's command: the kubeconfig's connection as tfmw reads it, its CA,
    certificate and key as files in `folder` (the process only reads them)."""
    from tfmw_client import kube, kubeconfig
    from tfmw_client.connection import Connection

    connection = Connection()
    counter = iter(range(10))

    def keep(data: bytes) -> str:
        path = os.path.join(folder, f"file-{next(counter)}")
        with open(path, "wb") as file:
            file.write(data)
        return path

    kubeconfig.read(kubeconfig.default_paths()).select(None).apply(connection, keep)
    ca = keep(connection.ca_cert_data.encode()) if connection.ca_cert_data else connection.ssl_ca_cert or ""
    server = connection.host.removeprefix("https://").rstrip("/")
    host, _, port = server.rpartition(":")
    token = (connection.api_key.get("BearerToken") or "").removeprefix("Bearer ")
    return [
        sys.executable, "-c", FLOOR, host.strip("[]"), port or "443", ca, connection.cert_file or "",
        connection.key_file or "", token, kube.job_path(namespace),
    ]  # fmt: skip


def run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}: {error.decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.cli_start", description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--bin", help="the folder of tfmw and kubectl-tfmw to measure")
    parser.add_argument("--also", action="append", default=[], help="LABEL=DIR: that folder's tfmw get too")
    args = parser.parse_args(argv)
    # The bench's own PYTHONPATH (tests, a source tree) would put that tree's tfmw_client
    # before the measured installation's: each `tfmw` runs with its own packages only.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if args.bin:  # kubectl finds its plugin on the PATH
        env["PATH"] = f"{args.bin}{os.pathsep}{env['PATH']}"
    measured = commands(args.namespace, args.bin)
    floor_files = tempfile.TemporaryDirectory(prefix="cli-start-")
    measured["floor (stdlib HTTPS GET)"] = floor(args.namespace, floor_files.name)
    for also in args.also:
        label, _, folder = also.partition("=")
        measured[f"tfmw get ({label})"] = [os.path.join(folder, "tfmw"), "get", "-n", args.namespace]
    wall: dict[str, list[float]] = {name: [] for name in measured}
    cpu: dict[str, list[float]] = {name: [] for name in measured}
    say(f"{args.warmup} + {args.runs} rounds of {', '.join(measured)}; load average {os.getloadavg()}")
    for round_ in range(args.warmup + args.runs):
        for name, command in measured.items():
            seconds, cpu_seconds = run(command, env)
            if round_ >= args.warmup:
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds)
    say(f"done; load average {os.getloadavg()}")
    floor_files.cleanup()
    print(
        f"{'command':<28} {'wall median':>12} {'wall p90':>9} {'CPU median':>11} {'wall/kubectl':>13} {'CPU/kubectl':>12}"
    )
    for name in measured:
        wall_ratio = statistics.median(a / b for a, b in zip(wall[name], wall[BASELINE], strict=True))
        cpu_ratio = statistics.median(a / b for a, b in zip(cpu[name], cpu[BASELINE], strict=True))
        print(
            f"{name:<28} {statistics.median(wall[name]) * 1000:>9.1f} ms {percentile(wall[name], 90) * 1000:>6.1f} ms"
            f" {statistics.median(cpu[name]) * 1000:>8.1f} ms {wall_ratio:>13.2f} {cpu_ratio:>12.2f}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
