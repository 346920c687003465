"""The side-car evaluator's document: read with suspicion, throttled into status.evaluation."""

from __future__ import annotations

import json

import pytest
from tfmw_operator.api.status import EvaluationStatus
from tfmw_operator.api.times import format_precise_time
from tfmw_operator.core.evaluation import EvaluationReport, next_evaluation, parse_evaluation
from tfmw_operator.core.progress import ProgressError, ProgressProblem
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
