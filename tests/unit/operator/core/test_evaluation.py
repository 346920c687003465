"""The side-car evaluator's document: read with suspicion, throttled into status.evaluation."""

from __future__ import annotations

import json

import pytest
from tfmw_operator.api.status import EvaluationStatus
from tfmw_operator.api.times import format_precise_time
from tfmw_operator.core.evaluation import EvaluationReport, next_evaluation, parse_evaluation
from tfmw_operator.core.progress import (
    MAX_CHECKPOINT_PATH,
    MAX_CLOCK_AHEAD_SECONDS,
    ProgressError,
    ProgressProblem,
)
from wrappers import at, decide, job, pod


def document(**fields: object) -> bytes:
    return json.dumps({"jobUid": "uid-ev", "updatedAt": format_precise_time(at(10)), **fields}).encode()


def test_the_evaluators_figures_reach_the_status() -> None:
    report = parse_evaluation(
        document(checkpoint="ckpt-4", epoch=4, metrics={"accuracy": 0.97, "loss": 0.1}), at(0)
    )
    update = next_evaluation(None, report, "uid-ev", at(0), at(11), 10.0)
    assert update.status == EvaluationStatus(
        checkpoint="ckpt-4",
        epoch=4,
        metrics=(("accuracy", 0.97), ("loss", 0.1)),
        summary="accuracy=0.97 loss=0.1",
        updated_at=at(10),
    )


@pytest.mark.parametrize(
    "content",
    [document(checkpoint=7), document(checkpoint="x" * 2000), b"[]", b"{", document(epoch=-1)],
)
def test_a_bad_document_is_refused_naming_why(content: bytes) -> None:
    with pytest.raises(ProgressError):
        parse_evaluation(content, at(0))


def test_another_jobs_document_is_ignored_and_a_refusal_is_said_once() -> None:
    other = EvaluationReport(parse_evaluation(document(), at(0)).figures.__class__(at(10), job_uid="someone"))
    assert next_evaluation(None, other, "uid-ev", at(0), at(11), 10.0).status is None
    problem = ProgressProblem("evaluation.json: not JSON")
    first = next_evaluation(None, problem, "uid-ev", at(0), at(11), 10.0)
    assert first.warning and first.status is not None and first.status.error
    assert next_evaluation(first.status, problem, "uid-ev", at(0), at(12), 10.0).warning is None


def test_a_running_job_with_an_evaluator_records_its_figures() -> None:
    obj = job("ev").evaluator().launched(phase="Running").obj()
    pods = [
        pod(obj, 0).running().obj(),
        pod(obj, 1).running().obj(),
        pod(obj, 0, 0, "evaluator").running().obj(),
    ]
    report = parse_evaluation(document(checkpoint="ckpt-1", metrics={"accuracy": 0.5}), at(0))
    decision = decide(obj, pods, evaluation=report, now=at(11))
    assert decision.status.evaluation is not None and decision.status.evaluation.summary == "accuracy=0.5"


def test_a_checkpoint_name_at_the_limit_is_read_and_without_updated_at_the_files_time_counts() -> None:
    longest = "c" * MAX_CHECKPOINT_PATH
    assert parse_evaluation(document(checkpoint=longest), at(0)).checkpoint == longest
    undated = json.dumps({"jobUid": "uid-ev", "step": 3}).encode()
    assert parse_evaluation(undated, at(7)).figures.updated_at == at(7)


def report(updated: float, uid: str | None = "uid-ev", **fields: object) -> EvaluationReport:
    content = json.dumps(
        {"updatedAt": format_precise_time(at(updated)), **({"jobUid": uid} if uid else {}), **fields}
    ).encode()
    return parse_evaluation(content, at(0))


def test_what_is_kept_and_what_is_written_rule_by_rule() -> None:
    old = EvaluationStatus(checkpoint="ckpt-1", step=1, updated_at=at(10))
    assert next_evaluation(old, None, "uid-ev", at(0), at(30), 10.0).status is old  # nothing read
    # Dated ahead of the operator's clock: refused, saying so.
    ahead = next_evaluation(old, report(30 + MAX_CLOCK_AHEAD_SECONDS + 1), "uid-ev", at(0), at(30), 10.0)
    assert ahead.status is not None and ahead.status.error == (
        f"updatedAt {format_precise_time(at(31 + MAX_CLOCK_AHEAD_SECONDS))} is ahead of the operator's clock"
    )
    assert (
        ahead.status.checkpoint == "ckpt-1"
        and ahead.warning == f"evaluation document refused: {ahead.status.error}"
    )
    # No jobUid: read only when written since the job started (at its start counts).
    assert next_evaluation(old, report(20, uid=None), "uid-ev", at(21), at(30), 10.0).status is old
    assert next_evaluation(old, report(20, uid=None), "uid-ev", None, at(30), 10.0).status is old
    since = next_evaluation(old, report(20, uid=None, step=5), "uid-ev", at(20), at(30), 10.0).status
    assert since is not None and since.step == 5 and since.updated_at == at(20)
    # The same document again: kept, unless the status holds an error to clear.
    assert next_evaluation(old, report(10), "uid-ev", at(0), at(30), 10.0).status is old
    failed = EvaluationStatus(updated_at=at(10), error="not JSON")
    cleared = next_evaluation(failed, report(10, step=2), "uid-ev", at(0), at(30), 10.0).status
    assert cleared == EvaluationStatus(step=2, updated_at=at(10))
    # At most one write per interval from the last one.
    assert next_evaluation(old, report(15), "uid-ev", at(0), at(19.9), 10.0).status is old
    written = next_evaluation(old, report(15, step=9, checkpoint="ckpt-2"), "uid-ev", at(0), at(20), 10.0)
    assert written.status == EvaluationStatus(checkpoint="ckpt-2", step=9, updated_at=at(15))
    assert written.warning is None
    unwritten = EvaluationStatus(error="not JSON")  # never written: no interval to wait
    assert next_evaluation(unwritten, report(15, step=1), "uid-ev", at(0), at(16), 10.0).status == (
        EvaluationStatus(step=1, updated_at=at(15))
    )
