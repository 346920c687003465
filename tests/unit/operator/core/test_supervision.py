"""Which gangs run under the in-pod supervisor, and why not; reports folded into their pods."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tfmw_operator.api.spec import Member, parse_job
from tfmw_operator.contract import supervised_command
from tfmw_operator.core.builders import build_pod
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.supervision import (
    NO_COMMAND,
    NO_SHARED_VOLUME,
    NO_SUPERVISOR_IMAGE,
    PARAMETER_SERVERS,
    SUPERVISED,
    supervision_of,
    template_command,
    with_reports,
)
from wrappers import SUPERVISOR_IMAGE, TRAINER_COMMAND, at, job, pod, report

Json = dict[str, Any]


def observed(raw: Json) -> ObservedPod:
    found = observe_pod(raw)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        ({"command": ["python3", "-m", "x"], "args": ["--a"]}, ["python3", "-m", "x", "--a"]),
        ({"command": ["run"]}, ["run"]),
        ({"args": ["--a"]}, None),  # the image's entrypoint: unknown
        ({"command": []}, None),
        ({"command": "python3 -m x"}, None),
        ({"command": ["python3", 3]}, None),
        ({"command": ["python3"], "args": "--a"}, None),
    ],
)
def test_the_template_s_command(container: Json, expected: list[str] | None) -> None:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "i", **container}]}}
    assert template_command(template) == expected


def test_a_gang_with_its_command_and_the_operator_s_image_restarts_in_place() -> None:
    said = supervision_of(parse_job(job().commanded("--epochs=1").obj(), supervisor_image=SUPERVISOR_IMAGE))
    assert said.in_place and said.reason == SUPERVISED


@pytest.mark.parametrize(
    ("manifest", "image", "reason", "named"),
    [
        (job().obj(), SUPERVISOR_IMAGE, NO_COMMAND, "spec.template has no command"),
        (job().commanded().obj(), "", NO_SUPERVISOR_IMAGE, "--supervisor-image"),
        (job().commanded().without_shared_volume().obj(), SUPERVISOR_IMAGE, NO_SHARED_VOLUME, "sharedVolume"),
        (job().commanded().parameter_servers().obj(), SUPERVISOR_IMAGE, PARAMETER_SERVERS, "ParameterServer"),
    ],
)
def test_why_a_gang_re_creates_its_pods(manifest: Json, image: str, reason: str, named: str) -> None:
    said = supervision_of(parse_job(manifest, supervisor_image=image))
    assert not said.in_place and said.reason == reason and named in said.message
    assert "re-create every pod" in said.message


def test_a_chief_template_without_command_is_named() -> None:
    manifest = job().commanded().chief().obj()
    manifest["spec"]["chief"]["template"]["spec"]["containers"][0].pop("command", None)
    said = supervision_of(parse_job(manifest, supervisor_image=SUPERVISOR_IMAGE))
    assert said.reason == NO_COMMAND and "spec.chief.template" in said.message


def supervised_pods() -> tuple[Json, list[ObservedPod]]:
    manifest = job().commanded().obj()
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    pods = [observed(r) for r in raws]
    assert all(p.supervised for p in pods) and TRAINER_COMMAND
    return manifest, pods


def test_an_exited_command_makes_its_living_pod_read_as_ended() -> None:
    manifest, pods = supervised_pods()
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    reports = (
        report(raws[0], "running"),
        report(raws[1], "exited", exit_code=137, log_tail="killed"),
    )
    kept, ended = with_reports(pods, reports, attempt=0)
    assert kept.phase == "Running" and kept.report is not None and not kept.child_ended
    assert (ended.phase, ended.exit_code, ended.reason, ended.child_ended) == ("Failed", 137, "Error", True)
    assert ended.message == "killed"


def test_an_oom_killed_command_says_so() -> None:
    manifest, pods = supervised_pods()
    raw = pod(manifest, 1).running().obj()
    (_, ended) = with_reports(pods, (report(raw, "exited", exit_code=137, oom_killed=True),), attempt=0)
    assert ended.reason == "OOMKilled"


def test_a_report_naming_another_pod_is_as_absent() -> None:
    """A report left by an earlier pod of the same name (or forged) says nothing of this one."""
    manifest, pods = supervised_pods()
    raw = pod(manifest, 1, attempt=5).running().obj()  # another UID
    (_, second) = with_reports(pods, (report(raw, "exited", exit_code=1),), attempt=0)
    assert second.report is None and second.phase == "Running" and not second.child_ended
    assert second.awaiting_start


def test_a_report_of_another_attempt_leaves_the_pod_awaiting_its_start() -> None:
    manifest, pods = supervised_pods()
    raws = [pod(manifest, i).running().obj() for i in range(2)]
    first, _ = with_reports(pods, (report(raws[0], "exited", attempt=0, exit_code=1),), attempt=1)
    assert first.awaiting_start and not first.child_ended and first.phase == "Running"


def test_reports_that_cannot_be_read_change_nothing() -> None:
    _, pods = supervised_pods()
    assert with_reports(pods, None, attempt=0) == tuple(pods)


def test_a_pod_is_supervised_when_its_command_is_the_supervisors() -> None:
    manifest = job().commanded().spec(sharedVolume={"claimName": "data", "mountPath": "/ckpt"}).obj()
    spec = parse_job(manifest, folder_check_image=SUPERVISOR_IMAGE, supervisor_image=SUPERVISOR_IMAGE)
    raw = build_pod(spec, Member.worker(0), 0)
    assert observed(raw).supervised
    # A pod of an older operator (the supervisor in an emptyDir at /tfmw) is supervised too.
    raw["spec"]["containers"][0]["command"] = supervised_command(TRAINER_COMMAND, "/tfmw/supervisor.py")
    assert observed(raw).supervised
    # The main container's command decides (it cannot change once the pod is made): not a
    # side container's, and not a command that only looks alike.
    raw["spec"]["containers"][0]["command"] = ["python3", "-I", "-S", "-c", "import os"]
    assert not observed(raw).supervised
    raw["spec"]["containers"].append({"name": "side", "command": supervised_command(["x"], "/p")})
    assert not observed(raw).supervised


def test_an_unsupervised_pod_ignores_reports() -> None:
    manifest = job().obj()
    raw = pod(manifest, 0).running().obj()
    plain = observed(raw)
    assert not plain.supervised
    (same,) = with_reports([plain], (report(raw, "exited", exit_code=1),), attempt=0)
    assert same == plain


def test_a_command_that_ended_well_reads_as_completed_without_a_log() -> None:
    manifest, pods = supervised_pods()
    raw = pod(manifest, 0).running().obj()
    done = report(raw, "exited", exit_code=0, finished=12, log_tail="all done")
    ended, _ = with_reports(pods, (done,), attempt=0)
    assert (ended.phase, ended.exit_code, ended.reason, ended.message) == ("Succeeded", 0, "Completed", "")
    assert ended.child_ended and ended.report == done and ended.finished_at == at(12)


def test_a_command_that_exited_1_is_an_error_with_the_end_of_its_log() -> None:
    manifest, pods = supervised_pods()
    raw = pod(manifest, 1).running().obj()
    failed = report(raw, "exited", exit_code=1, log_tail="Traceback: boom")
    _, ended = with_reports(pods, (failed,), attempt=0)
    assert (ended.phase, ended.exit_code, ended.reason, ended.message) == (
        "Failed",
        1,
        "Error",
        "Traceback: boom",
    )
    assert ended.report == failed


def test_an_end_without_its_own_time_ends_when_the_report_was_written() -> None:
    manifest, pods = supervised_pods()
    raw = pod(manifest, 0).running().obj()
    written = report(raw, "exited", exit_code=1, finished=15)
    assert written.end is not None
    undated = dataclasses.replace(written, end=dataclasses.replace(written.end, finished_at=None))
    ended, _ = with_reports(pods, (undated,), attempt=0)
    assert ended.finished_at == at(15)
    dated = dataclasses.replace(written.end, finished_at=at(11))
    ended, _ = with_reports(pods, (dataclasses.replace(written, end=dated),), attempt=0)
    assert ended.finished_at == at(11)


@pytest.mark.parametrize("state", ["pending", "terminated", "deleting"])
def test_a_pod_not_living_keeps_its_own_state_and_its_report(state: str) -> None:
    """A pod still pending, ended or going is read from the pod itself; its report is kept."""
    manifest, _ = supervised_pods()
    wrapper = pod(manifest, 0)
    if state == "terminated":
        wrapper.exited(1)
    elif state == "deleting":
        wrapper.running().deleting(5)
    raw = wrapper.obj()
    itself = observed(raw)
    said = report(raw, "exited", exit_code=137, log_tail="killed")
    (folded,) = with_reports([itself], (said,), attempt=0)
    assert folded == dataclasses.replace(itself, report=said)
    assert not folded.child_ended and not folded.awaiting_start and folded.exit_code != 137


def test_every_pod_is_folded_whatever_comes_before_it() -> None:
    """An unsupervised pod (the evaluator) and a going pod do not stop the pods after them."""
    manifest = job().commanded().evaluator().obj()
    evaluator = observed(pod(manifest, 0, replica_type="evaluator").running().obj())
    assert not evaluator.supervised
    going_raw = pod(manifest, 0).running().deleting(5).obj()
    living_raw = pod(manifest, 1).running().obj()
    pods = [evaluator, observed(going_raw), observed(living_raw)]
    folded = with_reports(pods, (report(living_raw, "exited", exit_code=1),), attempt=0)
    assert [p.name for p in folded] == [p.name for p in pods]
    assert folded[0] == evaluator and folded[2].child_ended and folded[2].exit_code == 1


def test_a_warm_start_on_a_job_that_is_not_supervised_is_said_to_have_no_effect() -> None:
    unwrapped = parse_job(job().run_policy(warmStart={}).obj(), supervisor_image=SUPERVISOR_IMAGE)
    said = supervision_of(unwrapped)
    assert not said.in_place and said.message.endswith(
        "runPolicy.warmStart has no effect: it warms a supervised pod's next attempt"
    )
    supervised = parse_job(
        job().commanded().run_policy(warmStart={}).obj(), supervisor_image=SUPERVISOR_IMAGE
    )
    assert "warmStart" not in supervision_of(supervised).message
