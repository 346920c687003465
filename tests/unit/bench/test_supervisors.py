import json
from pathlib import Path

from bench.supervisors import EmulatedSupervisors
from tfmw_operator.core.reports import parse_report

JOB_UID = "uid-s0"
PODS = {f"worker-{i}": (f"s0-worker-{i}", f"pod-uid-{i}") for i in range(3)}


def control(folder: Path, attempt: int, start: bool) -> None:
    (folder / ".tfmw").mkdir(parents=True, exist_ok=True)
    document = {"jobUid": JOB_UID, "attempt": attempt, "start": start, "stopSeconds": 0}
    (folder / ".tfmw" / "control.json").write_text(json.dumps(document))


def reports(folder: Path) -> dict[str, tuple[str, int, int | None]]:
    """What the operator reads from each pod's report: state, attempt, exit code."""
    read = {}
    for stem in PODS:
        report = parse_report((folder / ".tfmw" / "pods" / f"{stem}.json").read_bytes(), JOB_UID, stem)
        assert report is not None and report.pod_uid == PODS[stem][1]
        read[stem] = (report.state, report.attempt, report.end.exit_code if report.end else None)
    return read


def test_a_gang_goes_from_a_death_through_the_barrier_to_running_as_its_supervisors_report_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ns" / "s0"
    folder.mkdir(parents=True)
    running: list[str] = []
    supervisors = EmulatedSupervisors(tmp_path, "ns", lambda job, seconds: running.append(job))
    supervisors.close()  # the test makes each poll itself
    supervisors.kill("s0", JOB_UID, PODS, "worker-1")
    gang = supervisors.gangs["s0"]
    report = parse_report((folder / ".tfmw" / "pods" / "worker-1.json").read_bytes(), JOB_UID, "worker-1")
    assert report is not None and report.state == "exited" and report.end is not None
    assert (report.end.exit_code, report.end.signal, report.attempt) == (137, 9, 0)

    supervisors._poll(gang)  # no control file yet: nothing asked
    assert gang.marks == {} and not running

    control(folder, 1, start=False)
    supervisors._poll(gang)
    assert reports(folder) == {stem: ("waiting", 1, None) for stem in PODS}
    assert set(gang.marks) == {"attempt raised", "all waiting"} and not running

    control(folder, 1, start=True)
    supervisors._poll(gang)
    assert reports(folder) == {stem: ("running", 1, None) for stem in PODS}
    assert set(gang.marks) == {"attempt raised", "all waiting", "barrier open", "all running"}
    assert running == ["s0"]


def test_a_control_file_of_another_job_or_an_older_attempt_is_not_obeyed(tmp_path: Path) -> None:
    folder = tmp_path / "ns" / "s0"
    folder.mkdir(parents=True)
    supervisors = EmulatedSupervisors(tmp_path, "ns", lambda job, seconds: None)
    supervisors.close()
    supervisors.kill("s0", JOB_UID, PODS, "worker-2")
    gang = supervisors.gangs["s0"]
    (folder / ".tfmw").mkdir(exist_ok=True)
    (folder / ".tfmw" / "control.json").write_text(
        json.dumps({"jobUid": "other", "attempt": 1, "start": True})
    )
    supervisors._poll(gang)
    control(folder, 0, start=True)
    supervisors._poll(gang)
    assert gang.marks == {}
    assert sorted(p.name for p in (folder / ".tfmw" / "pods").iterdir()) == ["worker-2.json"]


def test_a_pod_running_in_the_first_attempt_reports_its_child_running(tmp_path: Path) -> None:
    supervisors = EmulatedSupervisors(tmp_path, "ns", lambda job, seconds: None)
    supervisors.close()
    supervisors._start("s0", JOB_UID, "s0-worker-0", "pod-uid-0")  # no folder yet: kept for later
    assert supervisors.starting == [("s0", JOB_UID, "s0-worker-0", "pod-uid-0")]
    (tmp_path / "ns" / "s0").mkdir(parents=True)
    supervisors._start(*supervisors.starting.pop())
    raw = (tmp_path / "ns" / "s0" / ".tfmw" / "pods" / "worker-0.json").read_bytes()
    report = parse_report(raw, JOB_UID, "worker-0")
    assert report is not None and (report.state, report.attempt, report.pod_uid) == (
        "running",
        0,
        "pod-uid-0",
    )
    assert report.started_at is not None
