"""The progress helper: atomic writes of the documented fields; failures never reach training."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tfmw_trainer.progress import ProgressReporter, progress_document, report_progress


def test_the_document_has_the_documented_fields_and_names_its_job() -> None:
    env = {"TFMW_JOB_UID": "uid-1", "TFMW_ATTEMPT": "2"}
    doc = progress_document(3, 10, 30, 100, {"loss": 0.5}, 512.0, env=env)
    assert doc["epoch"] == 3 and doc["totalEpochs"] == 10 and doc["step"] == 30 and doc["totalSteps"] == 100
    assert doc["metrics"] == {"loss": 0.5} and doc["examplesPerSecond"] == 512.0
    assert doc["jobUid"] == "uid-1" and doc["attempt"] == 2
    written = datetime.fromisoformat(str(doc["updatedAt"]).replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - written).total_seconds()) < 5


def test_unknown_totals_and_non_finite_metrics_are_left_out() -> None:
    doc = progress_document(epoch=1, metrics={"loss": float("nan"), "ok": 1.0}, env={})
    assert doc["metrics"] == {"ok": 1.0} and "totalEpochs" not in doc and "jobUid" not in doc


def test_a_report_replaces_the_file_atomically(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    reporter = ProgressReporter(path)
    assert reporter.report(1, 2) and reporter.report(2, 2)
    assert json.loads(path.read_text())["epoch"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no partial file left


def test_a_failed_write_is_said_once_and_never_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reporter = ProgressReporter(tmp_path / "no-such-folder" / "progress.json")
    assert not reporter.report(1, 2) and not reporter.report(2, 2)
    assert capsys.readouterr().err.count("cannot write") == 1


def test_without_a_path_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TFMW_PROGRESS_PATH", raising=False)
    assert not ProgressReporter().report(1, 2)
    assert not ProgressReporter(tmp_path / "p.json", enabled=False).report(1, 2)
    assert not (tmp_path / "p.json").exists()


def test_report_progress_writes_where_the_operator_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFMW_PROGRESS_PATH", str(tmp_path / "progress.json"))
    monkeypatch.setenv("TFMW_ATTEMPT", "0")
    assert report_progress(epoch=1, total_epochs=4, metrics={"loss": 1.25})
    assert json.loads((tmp_path / "progress.json").read_text())["metrics"] == {"loss": 1.25}
    assert os.stat(tmp_path / "progress.json").st_size < 1024


def test_a_completed_checkpoint_is_named_in_every_later_report(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    reporter = ProgressReporter(path)
    assert reporter.report(1, 4)
    assert "checkpointEpoch" not in json.loads(path.read_text())
    reporter.checkpointed(1, "checkpoints/ckpt-1")
    assert reporter.report(1, 4, step=30)
    written = json.loads(path.read_text())
    assert (written["checkpointEpoch"], written["checkpointPath"]) == (1, "checkpoints/ckpt-1")
