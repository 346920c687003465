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
    whole,
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
  File "<frozen runpy>", line 198 in _run_module_as_main
"""


def test_the_training_thread_named_by_the_trainer_s_header() -> None:
    frames, named = thread_frames("an older dump\n" + DUMP)
    assert named and [f.function for f in frames] == [
        "sync_executors",
        "train_epoch",
        "run",
        "_run_module_as_main",
    ]
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


def threads(*idents: str) -> str:
    """A faulthandler dump of threads, each with one frame of its own: `at_<ident>`."""
    return "".join(
        f'Thread {i} (most recent call first):\n  File "{TRAINER}", line {n} in at_{i}\n'
        f'  File "{TRAINER}", line 1 in <module>\n\n'
        for n, i in enumerate(idents, 1)
    )


def header(main: str) -> str:
    return f"--- tfmw-trainer stacks: chief-0 pid=7 main_thread={main} ---\n"


def test_the_named_thread_among_several_gives_only_its_own_frames() -> None:
    frames, named = thread_frames(header("0xb") + threads("0xa", "0xb", "0xc"))
    assert named and frames[:1] == [Frame(TRAINER, 2, "at_0xb")]
    first, _ = thread_frames(header("0xa") + threads("0xa", "0xb", "0xc"))
    assert first[:1] == [Frame(TRAINER, 1, "at_0xa")]


def test_without_a_header_the_last_of_several_threads() -> None:
    frames, named = thread_frames(threads("0xa", "0xb", "0xc"))
    assert not named and frames[:1] == [Frame(TRAINER, 3, "at_0xc")]


def test_a_named_thread_not_listed_falls_back_to_the_last_as_a_guess() -> None:
    frames, named = thread_frames(header("0xf") + threads("0xa", "0xb"))
    assert frames[:1] == [Frame(TRAINER, 2, "at_0xb")] and not named


def test_a_dump_without_threads_has_no_frames() -> None:
    assert thread_frames(header("0xa")) == ([], False)
    assert thread_frames("") == ([], False)


def served(
    readings: tuple[StacksReading, ...], now: float, chief_exited: bool = False
) -> AskStacks | AwaitStacks | StacksTaken:
    """Both supervisors served request "req" (asked at 100 s) and delivered it; the chief
    (worker-0) may have exited since."""
    manifest = job().commanded().obj()
    spec = parse_job(manifest, supervisor_image=SUPERVISOR_IMAGE)
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    reports = tuple(report(r, "running", stacks="req", delivered=True) for r in raws)
    if chief_exited:
        raws[0] = pod(manifest, 0).exited(1).obj()
    pods = [p for p in (observe_pod(r) for r in raws) if p is not None]
    return judge_stacks(spec, asked(), list(with_reports(pods, reports, 0)), readings, at(now))


CHIEF_STACKS = StacksReading("worker-0", len(DUMP), at(101), DUMP)
FOLDER = "default/mnist/logs/attempt-0"


def test_an_empty_stacks_file_is_not_written_yet() -> None:
    assert served((CHIEF_STACKS, StacksReading("worker-1", 0, at(101))), 101) == AwaitStacks(at(101.5))
    assert isinstance(served((CHIEF_STACKS, StacksReading("worker-1", 1, at(101))), 101), StacksTaken)


def test_a_file_written_within_the_clock_slack_of_the_request_is_its_answer() -> None:
    assert isinstance(served((CHIEF_STACKS, StacksReading("worker-1", 10, at(98))), 101), StacksTaken)
    assert isinstance(served((CHIEF_STACKS, StacksReading("worker-1", 10, at(97.9))), 101), AwaitStacks)


def test_the_wait_ends_at_the_deadline_not_after() -> None:
    assert served((CHIEF_STACKS,), 109.8) == AwaitStacks(at(100 + STACKS_WAIT_SECONDS))


def test_a_chief_file_without_a_frame_is_pointed_to() -> None:
    written = StacksReading("worker-0", 1, at(101), "x")
    assert served((written, StacksReading("worker-1", 10, at(101))), 101) == StacksTaken(
        f"{FOLDER}/worker-0.stacks", f"; the chief's stacks are in {FOLDER}/worker-0.stacks"
    )


def test_an_empty_chief_file_at_the_deadline_is_no_stacks() -> None:
    empty = StacksReading("worker-0", 0, at(101))
    assert served((empty, StacksReading("worker-1", 10, at(101))), 110) == StacksTaken(
        None, f"; the chief's stacks did not come within {STACKS_WAIT_SECONDS:g} s"
    )


def test_a_dump_begun_without_its_training_thread_is_waited_for() -> None:
    begun = header("0xb")
    chief = StacksReading("worker-0", len(begun), at(101), begun)
    assert served((chief, StacksReading("worker-1", 10, at(101))), 101) == AwaitStacks(at(101.5))


def test_a_chief_that_exited_is_not_waited_for() -> None:
    begun = header("0xb")
    chief = StacksReading("worker-0", len(begun), at(101), begun)
    said = served((chief, StacksReading("worker-1", 10, at(101))), 101, chief_exited=True)
    assert said == StacksTaken(None, f"; the chief's stacks did not come within {STACKS_WAIT_SECONDS:g} s")


def test_a_dump_with_other_threads_written_before_the_training_thread_is_waited_for() -> None:
    """faulthandler lists the main thread last: a dump read while it is written has the
    others, and the chief's frame would be a background thread's."""
    begun = header("0xb") + threads("0xa")
    chief = StacksReading("worker-0", len(begun), at(101), begun)
    others = StacksReading("worker-1", 10, at(101))
    assert served((chief, others), 101) == AwaitStacks(at(101.5))
    whole = begun + threads("0xb")
    done = served((StacksReading("worker-0", len(whole), at(101), whole), others), 101)
    assert isinstance(done, StacksTaken) and "was in at_0xb" in done.said
    # At the deadline it goes on with what there is.
    late = served((chief, others), 100 + STACKS_WAIT_SECONDS)
    assert isinstance(late, StacksTaken) and "was in at_0xa" in late.said


def test_a_training_thread_read_while_it_is_written_is_waited_for() -> None:
    """faulthandler writes a thread's frames innermost first: read in the middle, the chief's
    frames end in threading.py's wait, and the frame named would be Python's, not the program's
    (seen in make test's e2e test_in_place: "was in wait (threading.py:320)")."""
    partial = (
        header("0xb")
        + threads("0xa")
        + 'Current thread 0xb (most recent call first):\n  File "/usr/lib/python3.11/threading.py", line 320 in wait\n'
    )
    chief = StacksReading("worker-0", len(partial), at(101), partial)
    others = StacksReading("worker-1", 10, at(101))
    assert served((chief, others), 101) == AwaitStacks(at(101.5))
    complete = (
        partial
        + f'  File "{TRAINER}", line 462 in _train_loop\n  File "<frozen runpy>", line 198 in _run_module_as_main\n'
    )
    done = served((StacksReading("worker-0", len(complete), at(101), complete), others), 101)
    assert isinstance(done, StacksTaken) and f"was in _train_loop ({TRAINER}:462)" in done.said


def test_a_main_thread_is_whole_at_module_level_or_cut_at_faulthandlers_limit() -> None:
    assert whole([Frame(TF, 1, "f"), Frame("/app/train.py", 9, "<module>")])
    assert whole([Frame(TF, 1, "f"), Frame("<frozen runpy>", 198, "_run_module_as_main")])
    assert whole([Frame(TF, n, "f") for n in range(100)])
    assert not whole([Frame("/usr/lib/python3.11/threading.py", 320, "wait")])
    assert not whole([])
