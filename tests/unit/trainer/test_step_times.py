"""The per-worker compute-time document (steps/<stem>.json): its format, its throttle, its
identity, and the helper a program of its own uses."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tfmw_trainer import step_times
from tfmw_trainer.step_times import StepTimes, compute_timer

ENV = {
    "TFMW_JOB_UID": "uid-1",
    "TFMW_ATTEMPT": "3",
    "TFMW_ROLE": "worker",
    "TFMW_REPLICA_INDEX": "2",
}


def read(path: Path) -> dict[str, object]:
    document = json.loads(path.read_text())
    assert isinstance(document, dict)
    return document


def test_the_document_has_the_contract_keys_and_the_recent_figures_newest_last(tmp_path: Path) -> None:
    path = tmp_path / "steps" / "worker-2.json"  # the folder is made on the first write
    times = StepTimes(path, env=ENV, write_seconds=0)
    for step in range(1, 61):
        times.record(step, step / 1000)
    document = read(path)
    assert set(document) == {"jobUid", "attempt", "role", "index", "step", "computeSeconds", "updatedAt"}
    assert (document["jobUid"], document["attempt"], document["role"], document["index"]) == (
        "uid-1",
        3,
        "worker",
        2,
    )
    assert document["step"] == 60
    assert document["computeSeconds"] == [step / 1000 for step in range(11, 61)]  # at most 50
    assert isinstance(document["updatedAt"], str) and document["updatedAt"].endswith("Z")
    assert [p.name for p in path.parent.iterdir()] == ["worker-2.json"], "no temporary file left"


def test_writes_at_most_once_per_interval_and_flush_writes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    times = StepTimes(path, env=ENV, write_seconds=1.0)
    assert times.record(1, 0.01, now=100.0)  # the first figure is written at once
    assert not times.record(2, 0.01, now=100.5)
    assert read(path)["step"] == 1
    assert times.record(3, 0.01, now=101.0)
    assert read(path)["step"] == 3
    times.record(4, 0.02, now=101.2)
    assert times.flush()
    assert read(path)["computeSeconds"] == [0.01, 0.01, 0.01, 0.02]


def test_without_the_operator_s_names_the_index_and_role_come_from_tf_config(tmp_path: Path) -> None:
    tf_config = json.dumps({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}})
    times = StepTimes(tmp_path / "w.json", env={"TF_CONFIG": tf_config}, write_seconds=0)
    times.record(7, 0.5)
    document = read(tmp_path / "w.json")
    assert (document["role"], document["index"], document["step"]) == ("chief", 0, 7)
    assert "jobUid" not in document and "attempt" not in document  # absent, never null


def test_nowhere_to_write_is_silent_and_a_failed_write_warns_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not StepTimes(env={}, write_seconds=0).record(1, 0.1)
    blocker = tmp_path / "file"
    blocker.write_text("")
    times = StepTimes(blocker / "steps" / "w.json", env=ENV, write_seconds=0)
    assert not times.record(1, 0.1) and not times.record(2, 0.1)
    assert capsys.readouterr().err.count("compute times are not reported") == 1


def test_compute_timer_records_the_block_s_wall_time_and_nothing_for_a_block_that_raised(
    tmp_path: Path,
) -> None:
    times = StepTimes(tmp_path / "w.json", env=ENV, write_seconds=0)
    with compute_timer(5, times):
        time.sleep(0.05)
    with pytest.raises(RuntimeError), compute_timer(6, times):
        raise RuntimeError("a failed step")
    document = read(tmp_path / "w.json")
    assert document["step"] == 5
    seconds = document["computeSeconds"]
    assert isinstance(seconds, list) and len(seconds) == 1 and 0.05 <= seconds[0] < 1.0


def test_record_compute_time_writes_to_tfmw_step_times_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFMW_STEP_TIMES_PATH", str(tmp_path / "steps" / "chief-0.json"))
    monkeypatch.setattr(step_times, "_default", None)
    assert step_times.record_compute_time(1, 0.25)
    assert read(tmp_path / "steps" / "chief-0.json")["computeSeconds"] == [0.25]
