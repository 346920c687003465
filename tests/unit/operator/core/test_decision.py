"""The actions the core decides (core/decision.py): pods are built as they are sent."""

from __future__ import annotations

from tfmw_operator.api.spec import Member, parse_job
from tfmw_operator.core.builders import pod_group_name
from tfmw_operator.core.decision import CreatePods, PatchStatus, WriteControl
from tfmw_operator.core.observed import MarkerState
from wrappers import at, decide, job, pod


def test_created_pods_join_the_pod_group_they_are_given_else_their_attempts() -> None:
    spec = parse_job(job().queue("team-a").obj())
    members = (Member.worker(0), Member.worker(1))
    kept = CreatePods(spec, 3, members, pod_group="tfmw-mnist-uid-mnis-1")
    assert [p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in kept.pods] == [
        "tfmw-mnist-uid-mnis-1",
        "tfmw-mnist-uid-mnis-1",
    ]
    fresh = CreatePods(spec, 3, members)
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in fresh.pods} == {
        pod_group_name(spec, 3)
    }
    assert [p["metadata"]["name"] for p in fresh.pods] == ["mnist-worker-0", "mnist-worker-1"]


def test_the_control_file_says_only_what_is_set() -> None:
    plain = WriteControl("ns/j", "uid-j", 2, start=True)
    assert plain.document() == {"jobUid": "uid-j", "attempt": 2, "start": True}
    told = WriteControl("ns/j", "uid-j", 3, start=False, stop_seconds=0, stacks="req-1", exit=True)
    assert told.document() == {
        "jobUid": "uid-j",
        "attempt": 3,
        "start": False,
        "stopSeconds": 0,
        "stacks": "req-1",
        "exit": True,
    }


def test_a_launchs_control_file_goes_before_its_pods_and_a_finished_jobs_after_its_status() -> None:
    """A new pod finds the control file as the status has it; the `exit` that ends a job's
    supervisors never runs ahead of its `Succeeded`, nor holds it up."""
    j = job().commanded("python", "train.py")
    launch = decide(j.obj(), reports=())
    kinds = [type(a) for a in launch.actions]
    assert kinds.index(WriteControl) < kinds.index(CreatePods) < kinds.index(PatchStatus)

    running = j.launched(phase="Running").obj()
    pods = [pod(running, i).running().obj() for i in range(2)]
    done = decide(running, pods, marker=MarkerState(True, "uid-mnist", at(50)), now=at(51), reports=())
    assert done.status.phase == "Succeeded"
    assert [type(a) for a in done.actions][:2] == [PatchStatus, WriteControl]
    control = next(a for a in done.actions if isinstance(a, WriteControl))
    assert control.exit and not control.raises
