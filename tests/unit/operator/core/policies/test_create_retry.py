"""A refused creation: failed at once when it never will be taken, else retried with a
backoff (its exponent held) until pendingTimeoutSeconds."""

from __future__ import annotations

from tfmw_operator.api.spec import parse_job
from tfmw_operator.core.observed import CreatedObject, CreateError, CreateErrorKind
from tfmw_operator.core.policies.create_retry import MAX_CREATE_BACKOFF_SECONDS, Refused, judge_refusal
from tfmw_operator.core.policies.verdicts import Fail
from wrappers import at, job


def test_a_creation_refused_as_written_fails_the_job_and_stops_every_pod() -> None:
    spec = parse_job(job("mnist").obj())
    for refused, reason, fix in [
        (
            CreatedObject.PODS,
            "InvalidTemplate",
            "the API server refused the worker pods: bad; fix spec.template",
        ),
        (
            CreatedObject.SERVICE,
            "InvalidService",
            "the API server refused the Service mnist: bad; fix spec.port",
        ),
    ]:
        error = CreateError(CreateErrorKind.INVALID, "bad", 1, at(0), refused)
        assert judge_refusal(spec, error, at(1)) == Fail(reason, fix, stop_all=True)


def test_the_backoff_doubles_from_the_last_refusal_up_to_its_cap() -> None:
    spec = parse_job(job("mnist").obj())
    for failures, wait in [(1, 2.0), (3, 8.0), (8, 256.0), (9, MAX_CREATE_BACKOFF_SECONDS), (40, 300.0)]:
        error = CreateError(CreateErrorKind.FORBIDDEN, "quota", failures, at(10))
        verdict = judge_refusal(spec, error, at(10))
        assert isinstance(verdict, Refused) and verdict.retry_at == at(10 + wait), failures


def test_refusals_in_a_row_fail_the_job_after_pending_timeout_seconds_from_the_first() -> None:
    spec = parse_job(job("mnist").run_policy(pendingTimeoutSeconds=60).obj())
    error = CreateError(CreateErrorKind.UNAVAILABLE, "webhook down", 2, at(50), since=at(10))
    waiting = judge_refusal(spec, error, at(69))
    assert waiting == Refused(
        "PodCreationRefused", "creating worker pods was refused (2 times): webhook down", at(54), at(70)
    )
    assert judge_refusal(spec, error, at(70)) == Fail(
        "PendingTimeout",
        "creating worker pods was refused (2 times): webhook down; for longer than pendingTimeoutSeconds=60",
    )
