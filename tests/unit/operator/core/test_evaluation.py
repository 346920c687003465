"""The side-car evaluator's document: read with suspicion, throttled into status.evaluation."""

from __future__ import annotations

import json

import pytest
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import EvaluationStatus, Phase
from tfmw_operator.api.times import format_precise_time, format_time
from tfmw_operator.core.decision import Decision, DeletePods
from tfmw_operator.core.evaluation import (
    EvaluationReport,
    next_evaluation,
    parse_evaluation,
    reads_evaluation,
)
from tfmw_operator.core.pods import ObservedPod, observe_pod
from tfmw_operator.core.progress import (
    MAX_CHECKPOINT_PATH,
    MAX_CLOCK_AHEAD_SECONDS,
    ProgressError,
    ProgressProblem,
)
from wrappers import Json, at, decide, job, pod


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


def test_a_checkpoint_too_long_or_not_a_string_is_refused_saying_so() -> None:
    said = f"checkpoint must be a checkpoint's name or path of at most {MAX_CHECKPOINT_PATH} characters"
    for checkpoint in (7, "x" * (MAX_CHECKPOINT_PATH + 1)):
        with pytest.raises(ProgressError) as refused:
            parse_evaluation(document(checkpoint=checkpoint), at(0))
        assert str(refused.value) == said


def test_another_jobs_document_is_ignored_and_a_refusal_is_said_once() -> None:
    other = EvaluationReport(parse_evaluation(document(), at(0)).figures.__class__(at(10), job_uid="someone"))
    assert next_evaluation(None, other, "uid-ev", at(0), at(11), 10.0).status is None
    problem = ProgressProblem("evaluation.json: not JSON")
    first = next_evaluation(None, problem, "uid-ev", at(0), at(11), 10.0)
    assert first.warning and first.status is not None and first.status.error
    again = next_evaluation(first.status, problem, "uid-ev", at(0), at(12), 10.0)
    assert again.warning is None and again.status is first.status  # kept as it was
    kept = EvaluationStatus(checkpoint="ckpt-1", step=1, updated_at=at(5))
    assert next_evaluation(kept, other, "uid-ev", at(0), at(11), 10.0).status is kept


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


# ---- after a success: the final checkpoint ----


def succeeded_with_its_evaluator_running(grace: int | None = None) -> tuple[Json, list[Json]]:
    """A job with an evaluator that succeeded at 20 s: training done, the evaluator running."""
    obj = job("ev").evaluator().launched(phase="Succeeded", completionTime=format_time(at(20))).obj()
    if grace is not None:
        obj["spec"]["evaluator"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    pods = [
        pod(obj, 0).exited(0, at_seconds=19).obj(),
        pod(obj, 1).exited(0, at_seconds=19).obj(),
        pod(obj, 0, 0, "evaluator").running().obj(),
    ]
    return obj, pods


def deleted(decision: Decision) -> set[str]:
    return {name for a in decision.actions if isinstance(a, DeletePods) for name in a.names}


def test_after_a_success_the_evaluator_has_its_grace_to_evaluate_the_final_checkpoint() -> None:
    obj, pods = succeeded_with_its_evaluator_running()
    during = decide(obj, pods, now=at(40))
    assert "ev-evaluator-0" not in deleted(during)
    assert during.requeue_after == pytest.approx(10.0)  # woken at the end of its grace: 20 s + 30 s
    after = decide(obj, pods, now=at(51))
    assert "ev-evaluator-0" in deleted(after)


def test_the_evaluators_grace_is_its_templates_termination_grace_period() -> None:
    obj, pods = succeeded_with_its_evaluator_running(grace=120)
    assert "ev-evaluator-0" not in deleted(decide(obj, pods, now=at(130)))
    assert "ev-evaluator-0" in deleted(decide(obj, pods, now=at(141)))


def test_a_failed_job_stops_its_evaluator_at_once() -> None:
    obj = job("ev").evaluator().launched(phase="Failed", completionTime=format_time(at(20))).obj()
    pods = [pod(obj, 0).exited(1).obj(), pod(obj, 0, 0, "evaluator").running().obj()]
    assert "ev-evaluator-0" in deleted(decide(obj, pods, now=at(21)))


def test_the_final_figures_reach_the_status_after_the_success_however_soon_they_come() -> None:
    """Written at once, not once per interval: nothing would wake a finished job for them."""
    obj, pods = succeeded_with_its_evaluator_running()
    earlier = {"checkpoint": "ckpt-2", "epoch": 2, "updatedAt": format_precise_time(at(19))}
    obj["status"]["evaluation"] = earlier
    pods[2] = pod(obj, 0, 0, "evaluator").exited(0, at_seconds=22).obj()
    report = parse_evaluation(
        document(checkpoint="ckpt-3", epoch=3, updatedAt=format_precise_time(at(21))), at(0)
    )
    decision = decide(obj, pods, evaluation=report, now=at(22), progress_interval=10.0)
    assert decision.status.evaluation is not None
    assert (decision.status.evaluation.checkpoint, decision.status.evaluation.epoch) == ("ckpt-3", 3)


def test_a_failed_jobs_evaluation_is_left_as_it_was() -> None:
    obj = job("ev").evaluator().launched(phase="Failed", completionTime=format_time(at(20))).obj()
    report = parse_evaluation(document(checkpoint="ckpt-3", epoch=3), at(0))
    decision = decide(obj, [pod(obj, 0, 0, "evaluator").running().obj()], evaluation=report, now=at(22))
    assert decision.status.evaluation is None


def observed(*pods: Json) -> list[ObservedPod | None]:
    return [observe_pod(p) for p in pods]


def test_the_document_is_read_while_training_and_after_a_success_while_the_evaluator_is_there() -> None:
    obj = job("ev").evaluator().obj()
    spec = parse_job(obj)
    evaluator = pod(obj, 0, 0, "evaluator")
    assert reads_evaluation(spec, Phase.RUNNING, [])
    assert reads_evaluation(spec, Phase.SUCCEEDED, observed(evaluator.running().obj()))
    exited = pod(obj, 0, 0, "evaluator").exited(0).obj()
    assert reads_evaluation(spec, Phase.SUCCEEDED, observed(exited))  # its exit: the last figures
    going = pod(obj, 0, 0, "evaluator").running().deleting().obj()
    assert not reads_evaluation(spec, Phase.SUCCEEDED, observed(going, pod(obj, 0).exited(0).obj()))
    assert not reads_evaluation(spec, Phase.FAILED, observed(pod(obj, 0, 0, "evaluator").running().obj()))
    for phase in (Phase.PENDING, Phase.RESTARTING):
        assert not reads_evaluation(spec, phase, [])
    assert not reads_evaluation(parse_job(job("plain").obj()), Phase.RUNNING, [])
    without_volume = parse_job(job("nv").evaluator().without_shared_volume().obj())
    assert not reads_evaluation(without_volume, Phase.RUNNING, [])


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
