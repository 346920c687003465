"""Training you can watch, on the real node: status.progress advancing under a watch, the
final figures equal to the marker's, and TensorBoard showing the job's loss in a browser."""

from __future__ import annotations

import copy
import itertools
import json
import re
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from e2e.test_training import NAMESPACE, TRAINING_TIMEOUT, epoch_lines, sample, submit
from kube import REPO, ClusterClient, kubectl, wait_for
from tfmw_operator.api.names import GROUP, PLURAL, VERSION
from watching import follow_in_thread

Json = dict[str, Any]
ARTIFACTS = REPO / "build" / "test-artifacts"
EPOCHS = 6


@pytest.fixture(scope="module")
def watched_job(kube: ClusterClient, shared_dir: Path, module_name: Callable[[str], str]) -> Json:
    """A job trained to Succeeded on real digits while a watch records every status it had.

    Each epoch is followed by a pause (a testing option of the trainer), so the job runs
    for several of the operator's 10 s progress intervals.
    """
    manifest = copy.deepcopy(sample("mnist-2-workers.yaml"))
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [f"--epochs={EPOCHS}", "--steps-per-epoch=40", "--epoch-pause=6"]
    name = module_name("progress")
    submit(kube, manifest, name)
    seen: list[Json] = []
    finished = threading.Event()

    def record(kind: str, job: Json) -> None:
        status = job.get("status") or {}
        seen.append(copy.deepcopy(status))
        if status.get("phase") in ("Succeeded", "Failed"):
            finished.set()

    follow_in_thread(
        kube.custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        NAMESPACE,
        PLURAL,
        field_selector=f"metadata.name={name}",
        on_event=record,
        stop=finished,
    )
    assert finished.wait(TRAINING_TIMEOUT), f"{name} did not finish; statuses seen: {seen[-3:]}"
    job_dir = shared_dir / NAMESPACE / name
    marker = json.loads((job_dir / "multiworker-complete.txt").read_text())
    # The chief's log: from the pod, or from the shared folder if cleanPodPolicy took the pod.
    archived = job_dir / "logs" / "attempt-0" / "worker-0.log"
    chief = kubectl("logs", "-n", NAMESPACE, f"{name}-worker-0", check=False).stdout
    if not epoch_lines(chief):
        chief = wait_for(
            "the chief's archived log", lambda: archived.read_text() if archived.exists() else None
        )
    return {"name": name, "statuses": seen, "marker": marker, "epoch_lines": epoch_lines(chief)}


def test_progress_advances_under_a_watch_and_ends_with_the_markers_figures(watched_job: Json) -> None:
    statuses = watched_job["statuses"]
    assert statuses[-1]["phase"] == "Succeeded", statuses[-1]
    before_end = [
        s["progress"]["epoch"] for s in statuses[:-1] if s.get("progress", {}).get("epoch") is not None
    ]
    assert len(set(before_end)) >= 2, f"epochs seen before Succeeded: {before_end}"
    assert before_end == sorted(before_end), "progress went backwards"
    final = statuses[-1]["progress"]
    marker = watched_job["marker"]
    assert final["metrics"] == marker["metrics"]
    assert final["epochs"] == f"{EPOCHS}/{EPOCHS}" and final["percent"] == 100 and final["eta"] == "0s"
    assert any("eta" in s.get("progress", {}) and s["progress"]["eta"] != "0s" for s in statuses[:-1])
    # Real digits, held out: far better than the 10 % of guessing.
    assert marker["data"] == "digits" and marker["metrics"]["eval_accuracy"] > 0.8, marker


def test_progress_is_written_at_most_once_per_interval_but_for_the_final_figures(watched_job: Json) -> None:
    stamps = sorted({s["progress"]["lastUpdate"] for s in watched_job["statuses"] if "progress" in s})
    times = [datetime.fromisoformat(stamp.replace("Z", "+00:00")) for stamp in stamps]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert all(gap >= 10 for gap in gaps[:-1]), stamps
    print(f"\nprogress writes: {len(stamps)} over {(times[-1] - times[0]).total_seconds():.0f}s")


@pytest.fixture(scope="module")
def tensorboard(kube: ClusterClient) -> Iterator[str]:
    """TensorBoard (deploy/tensorboard) port-forwarded; the URL. Removed afterwards unless it
    was there before (`make demo` deploys it)."""
    existed = kubectl("-n", "tfmw-system", "get", "deployment/tfmw-tensorboard", check=False).returncode == 0
    if not existed:
        kubectl("apply", "-k", str(REPO / "deploy" / "tensorboard"))
    kubectl("-n", "tfmw-system", "rollout", "status", "deployment/tfmw-tensorboard", "--timeout=180s")
    forward = subprocess.Popen(
        ["kubectl", "-n", "tfmw-system", "port-forward", "svc/tfmw-tensorboard", ":6006"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found, f"port-forward said: {line}"
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        forward.terminate()
        forward.wait(timeout=10)
        if not existed:
            kubectl("delete", "-k", str(REPO / "deploy" / "tensorboard"), "--wait=true")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_tensorboard_serves_the_jobs_loss_and_shows_its_run_in_a_browser(
    watched_job: Json, tensorboard: str
) -> None:
    run = f"{NAMESPACE}/{watched_job['name']}"  # one run per job
    wait_for(f"run {run} in TensorBoard", lambda: run in get_json(f"{tensorboard}/data/runs"), timeout=60)
    query = urllib.parse.urlencode({"run": run, "tag": "loss"})

    # TensorBoard reloads its runs on its own clock: the last epoch's point may come a reload
    # after the run itself (a make test here once read 5 of 6).
    def every_epoch() -> list[Any] | None:
        found: list[Any] = get_json(f"{tensorboard}/data/plugin/scalars/scalars?{query}")
        return found if len(found) >= EPOCHS else None

    scalars = wait_for(f"every epoch's loss of {run} in TensorBoard", every_epoch, timeout=60)
    losses = [round(value, 4) for _, step, value in sorted(scalars, key=lambda point: point[1])]
    printed = [float(line.split("loss=")[1].split()[0]) for line in watched_job["epoch_lines"]]
    assert losses == pytest.approx(printed, abs=1e-4), (losses, printed)
    assert [step for _, step, _ in sorted(scalars, key=lambda point: point[1])] == list(range(1, EPOCHS + 1))

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "tensorboard.png"
    screenshot.unlink(missing_ok=True)
    page = f"{tensorboard}/?runFilter={urllib.parse.quote(watched_job['name'])}#timeseries"
    dom = chromium("--dump-dom", page)
    chromium(f"--screenshot={screenshot}", "--window-size=1400,1000", page)
    assert run in dom, "the job's run is not in the rendered page"
    assert screenshot.stat().st_size > 10_000
    print(f"\nscreenshot: {screenshot}")


def chromium(*args: str) -> str:
    """Debian's Chromium, headless, as root, with no network beyond localhost."""
    with_profile = subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip()
    command = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={with_profile}",
        "--virtual-time-budget=20000",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    subprocess.run(["rm", "-rf", with_profile], check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
