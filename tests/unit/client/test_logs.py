"""Which logs `tfmw logs` reads: which pods live, which saved files, as the role labels say."""

from __future__ import annotations

from tfmw_client.logs import LogSelection, choose_saved, job_image, saved_patterns, select_live
from tfmw_client.manifests import SavedLogs
from unit.client.jobs import pod, running


def stems(pods: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [p["metadata"]["name"].removeprefix("mnist-") for p in pods]


PODS = [
    pod("mnist", "worker-0", 1),
    pod("mnist", "worker-1", 1),
    pod("mnist", "worker-2", 1),
    pod("mnist", "worker-1", 0, phase="Failed"),
]


def test_the_default_is_the_chief_of_the_attempt() -> None:
    assert stems(select_live(PODS, LogSelection(), 1, "mnist")) == ["worker-0"]
    assert stems(select_live(PODS, LogSelection(), 0, "mnist")) == []


def test_a_worker_a_role_or_every_pod_of_the_attempt() -> None:
    assert stems(select_live(PODS, LogSelection(worker=1), 0, "mnist")) == ["worker-1"]
    assert stems(select_live(PODS, LogSelection(role="worker"), 1, "mnist")) == ["worker-1", "worker-2"]
    assert stems(select_live(PODS, LogSelection(everyone=True), 1, "mnist")) == [
        "worker-0",
        "worker-1",
        "worker-2",
    ]
    assert stems(select_live(PODS, LogSelection(role="ps"), 1, "mnist")) == []


def test_a_pod_from_before_the_role_label_counts_worker_0_as_the_chief() -> None:
    unlabelled = pod("mnist", "worker-0", 0)
    del unlabelled["metadata"]["labels"]["tfmw.dev/role"]
    assert stems(select_live([unlabelled], LogSelection(), 0, "mnist")) == ["worker-0"]


def test_the_saved_files_asked_for() -> None:
    assert saved_patterns(LogSelection(worker=3)) == ["worker-3.log"]
    assert saved_patterns(LogSelection()) == ["chief-0.log", "worker-0.log"]
    assert saved_patterns(LogSelection(role="ps")) == ["ps-*.log"]
    assert saved_patterns(LogSelection(everyone=True)) == ["*.log"]


def test_without_a_chief_pod_worker_0_was_the_chief_in_saved_logs_too() -> None:
    saved = SavedLogs(listing=["worker-0.log", "worker-1.log", "worker-10.log", "worker-2.log"])
    saved.files = {name: name for name in saved.listing}
    assert [stem for stem, _ in choose_saved(saved, LogSelection(role="worker"))] == [
        "worker-1",
        "worker-2",
        "worker-10",
    ]
    assert [stem for stem, _ in choose_saved(saved, LogSelection())] == ["worker-0"]


def test_with_a_chief_pod_the_chief_is_chief_0() -> None:
    saved = SavedLogs(listing=["chief-0.log", "worker-0.log", "ps-0.log", "evaluator-0.log"])
    saved.files = {name: name for name in ("chief-0.log", "worker-0.log")}
    assert [stem for stem, _ in choose_saved(saved, LogSelection())] == ["chief-0"]
    saved.files = {name: name for name in saved.listing}
    assert [stem for stem, _ in choose_saved(saved, LogSelection(everyone=True))] == [
        "chief-0",
        "worker-0",
        "ps-0",
        "evaluator-0",
    ]


def test_the_reader_runs_the_jobs_own_main_image() -> None:
    job = running()
    job["spec"]["template"]["spec"]["containers"] = [
        {"name": "sidecar", "image": "proxy"},
        {"name": "tensorflow", "image": "mine:1"},
    ]
    assert job_image(job) == "mine:1"


def test_the_reader_pods_waiting_reason_is_said_on_one_line_without_control_characters() -> None:
    from tfmw_client.logs import _pending_reason

    pod = {"status": {"containerStatuses": [{"state": {"waiting": {"reason": "Err\x1b]52;c;x\x07\nor"}}}]}}
    said = _pending_reason(pod)
    assert "\x1b" not in said and "\x07" not in said and "\n" not in said and said.startswith("Err")
