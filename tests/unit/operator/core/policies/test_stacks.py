"""Where a hung job hung: the stacks asked, waited for a bounded time, the chief's frame named."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tfmw_operator.api.spec import JobSpec, parse_job
from tfmw_operator.api.status import JobStatus, StacksRequest
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.policies.stacks import (
    STACKS_WAIT_SECONDS,
    AskStacks,
    AwaitStacks,
    Frame,
    StacksTaken,
    judge_stacks,
    own_frame,
    thread_frames,
)
from tfmw_operator.core.reports import StacksReading
from tfmw_operator.core.supervision import with_reports
from wrappers import SUPERVISOR_IMAGE, at, job, pod, report

Json = dict[str, Any]
TRAINER = "/opt/tfmw/trainer/tfmw_trainer/train.py"
TF = "/usr/local/lib/python3.12/dist-packages/tensorflow/python/eager/context.py"
DUMP = f"""--- tfmw-trainer stacks: worker-0 pid=7 main_thread=0x00007f01 ---
Thread 0x00007f02 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 331 in wait
  File "{TRAINER}", line 40 in report_progress

Thread 0x00007f01 (most recent call first):
  File "{TF}", line 1500 in sync_executors
  File "{TRAINER}", line 210 in train_epoch
  File "{TRAINER}", line 300 in run
"""


def test_the_training_thread_named_by_the_trainer_s_header() -> None:
    frames, named = thread_frames("an older dump\n" + DUMP)
    assert named and [f.function for f in frames] == ["sync_executors", "train_epoch", "run"]
    assert own_frame(frames) == Frame(TRAINER, 210, "train_epoch")


def test_without_a_header_the_last_thread_listed() -> None:
    frames, named = thread_frames(DUMP.split("\n", 1)[1])
    assert not named and frames[0].function == "sync_executors"


def test_only_library_frames_give_the_innermost() -> None:
    frames = [Frame(TF, 1, "inner"), Frame("<frozen runpy>", 2, "outer")]
    assert own_frame(frames) == frames[0]
    assert own_frame([]) is None


def test_a_frame_s_description_is_bounded() -> None:
    assert len(Frame("/x" * 500, 1, "f").describe()) == 300


def gang() -> tuple[JobSpec, list[ObservedPod], list[Json]]:
    manifest = job().commanded().obj()
    spec = parse_job(manifest, supervisor_image=SUPERVISOR_IMAGE)
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    pods = [p for p in (observe_pod(r) for r in raws) if p is not None]
    return spec, pods, raws


def test_a_stalled_gang_is_first_asked_for_its_stacks() -> None:
    spec, pods, _ = gang()
    said = judge_stacks(spec, JobStatus(attempt=0), pods, (), at(100))
    assert isinstance(said, AskStacks) and said.id.startswith("stalled-attempt-0-")
    assert said.wake_at == at(100.5)


def asked(seconds: float = 100) -> JobStatus:
    return JobStatus(attempt=0, stacks_request=StacksRequest("req", 0, at(seconds)))


def test_it_waits_for_the_supervisors_to_serve_the_request_then_goes_on() -> None:
    spec, pods, _ = gang()
    said = judge_stacks(spec, asked(), pods, (), at(101))
    assert isinstance(said, AwaitStacks)
    late = at(100) + timedelta(seconds=STACKS_WAIT_SECONDS)
    gone_on = judge_stacks(spec, asked(), pods, (), late)
    assert isinstance(gone_on, StacksTaken) and gone_on.path is None and "did not come" in gone_on.said


def test_the_chief_s_stacks_name_its_frame_and_the_folder() -> None:
    spec, pods, raws = gang()
    reports = tuple(report(r, "running", stacks="req", delivered=True) for r in raws)
    pods = list(with_reports(pods, reports, 0))
    readings = (
        StacksReading("worker-0", len(DUMP), at(101), DUMP),
        StacksReading("worker-1", 10, at(101)),
    )
    said = judge_stacks(spec, asked(), pods, readings, at(101))
    assert isinstance(said, StacksTaken)
    assert said.path == "default/mnist/logs/attempt-0/worker-0.stacks"
    assert f"was in train_epoch ({TRAINER}:210)" in said.said and "default/mnist/logs/attempt-0/" in said.said


def test_a_stale_stacks_file_is_waited_past() -> None:
    """A file older than the request (an earlier dump) is not the answer."""
    spec, pods, raws = gang()
    reports = tuple(report(r, "running", stacks="req", delivered=True) for r in raws)
    pods = list(with_reports(pods, reports, 0))
    readings = (
        StacksReading("worker-0", len(DUMP), at(101), DUMP),
        StacksReading("worker-1", 10, at(50)),
    )
    said = judge_stacks(spec, asked(), pods, readings, at(101))
    assert isinstance(said, AwaitStacks)


def test_a_job_without_supervised_pods_takes_none() -> None:
    manifest = job().obj()
    spec = parse_job(manifest, supervisor_image=SUPERVISOR_IMAGE)
    pods = [p for p in (observe_pod(pod(manifest, i).running().obj()) for i in range(2)) if p is not None]
    assert judge_stacks(spec, JobStatus(attempt=0), pods, (), at(100)) == StacksTaken()
