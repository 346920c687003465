"""The actions the core decides (core/decision.py): pods are built as they are sent."""

from __future__ import annotations

from tfmw_operator.api.spec import Member, parse_job
from tfmw_operator.core.builders import pod_group_name
from tfmw_operator.core.decision import CreatePods
from wrappers import job


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
    from tfmw_operator.core.decision import WriteControl

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
