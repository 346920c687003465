"""runPolicy.failureRules: the first rule that matches decides; restartPolicy's presets are
rule lists that keep today's jobs as they were."""

from __future__ import annotations

import pytest
from tfmw_operator.api.spec import RestartPolicy, RuleAction, SpecError, parse_job
from tfmw_operator.contract import SUPERVISOR_UNUSABLE_EXIT_CODE
from tfmw_operator.core.policies.failure_rules import PRESETS, Failure, Ruling, matches, rule_on
from wrappers import at, decide, job, pod

FAIL, RESTART, NOT_COUNTED = RuleAction.FAIL, RuleAction.RESTART, RuleAction.RESTART_NOT_COUNTED


def failure(
    code: int | None = 1, cause: str = "Error", role: str = "worker", disrupted: bool = False
) -> Failure:
    return Failure(role, cause, code, disrupted)


@pytest.mark.parametrize(
    ("policy", "seen", "action"),
    [
        (RestartPolicy.EXIT_CODE, failure(1), FAIL),
        (RestartPolicy.EXIT_CODE, failure(127), FAIL),
        (RestartPolicy.EXIT_CODE, failure(128), RESTART),
        (RestartPolicy.EXIT_CODE, failure(137, "OOMKilled"), RESTART),
        (RestartPolicy.EXIT_CODE, failure(1, "Evicted", disrupted=True), RESTART),
        (RestartPolicy.EXIT_CODE, failure(None, "PodDeleted", disrupted=True), RESTART),
        (RestartPolicy.EXIT_CODE, failure(None, "Unknown"), RESTART),
        (RestartPolicy.ON_FAILURE, failure(1), RESTART),
        (RestartPolicy.NEVER, failure(137), FAIL),
        (RestartPolicy.NEVER, failure(None, "Evicted", disrupted=True), FAIL),
        # A supervisor that cannot be run (contract.SUPERVISOR_UNUSABLE_EXIT_CODE) is the system's
        # fault, not the program's: restarted, and the operator puts the file back.
        (RestartPolicy.EXIT_CODE, failure(SUPERVISOR_UNUSABLE_EXIT_CODE), RESTART),
        (RestartPolicy.ON_FAILURE, failure(SUPERVISOR_UNUSABLE_EXIT_CODE), RESTART),
        (RestartPolicy.NEVER, failure(SUPERVISOR_UNUSABLE_EXIT_CODE), FAIL),
    ],
)
def test_the_presets_decide_as_restart_policy_always_did(
    policy: RestartPolicy, seen: Failure, action: RuleAction
) -> None:
    spec = parse_job(job().run_policy(restartPolicy=policy.value).obj())
    assert rule_on(spec, seen).action is action


@pytest.mark.parametrize(
    ("policy", "seen", "ruling"),
    [
        (RestartPolicy.NEVER, failure(137), Ruling(FAIL, "restartPolicy Never", False, own=False)),
        (RestartPolicy.ON_FAILURE, failure(1), Ruling(RESTART, "restartPolicy OnFailure", False, own=False)),
        (
            RestartPolicy.EXIT_CODE,
            failure(1),
            Ruling(FAIL, "restartPolicy ExitCode: the program's own error", False, own=False),
        ),
        (
            RestartPolicy.EXIT_CODE,
            failure(None, "Evicted", disrupted=True),
            Ruling(RESTART, "restartPolicy ExitCode: a disruption", False, own=False),
        ),
    ],
)
def test_a_presets_ruling_names_its_rule_but_tells_none_and_blames_no_node(
    policy: RestartPolicy, seen: Failure, ruling: Ruling
) -> None:
    spec = parse_job(job().run_policy(restartPolicy=policy.value).obj())
    found = rule_on(spec, seen)
    assert found == ruling and found.told == "" and found.node_fault is False


def test_every_preset_ends_with_a_rule_that_matches_everything() -> None:
    for rules in PRESETS.values():
        assert matches(rules[-1], failure(None, "Anything", "ps"))


def test_the_jobs_own_rules_come_first_and_the_first_match_decides() -> None:
    spec = parse_job(
        job()
        .rules(
            {"name": "preempted", "action": "RestartNotCounted", "onExitCodes": [42]},
            {"action": "Fail", "onExitCodes": [42, 43]},
        )
        .obj()
    )
    ruling = rule_on(spec, failure(42))
    assert (ruling.action, ruling.rule, ruling.own) == (NOT_COUNTED, "failureRules[0] (preempted)", True)
    assert rule_on(spec, failure(43)).action is FAIL
    # No rule of its own matches: the preset's.
    assert rule_on(spec, failure(137)).action is RESTART and not rule_on(spec, failure(137)).own


@pytest.mark.parametrize(
    ("rule", "seen", "matched"),
    [
        ({"onExitCodesNotIn": [0, 42]}, failure(1), True),
        ({"onExitCodesNotIn": [0, 42]}, failure(42), False),
        ({"onExitCodesNotIn": [42]}, failure(None, "PodDeleted"), False),  # NotIn needs a code
        ({"onExitCodes": [137]}, failure(None, "PodDeleted"), False),
        ({"onCauses": ["OOMKilled", "Evicted"]}, failure(137, "OOMKilled"), True),
        ({"onCauses": ["OOMKilled"]}, failure(137, "Error"), False),
        ({"onRoles": ["ps"]}, failure(1, role="ps"), True),
        ({"onRoles": ["ps"]}, failure(1, role="worker"), False),
        ({"onDisruption": True}, failure(143, "Evicted", disrupted=True), True),
        ({"onDisruption": False}, failure(143, "Evicted", disrupted=True), False),
        ({"onRoles": ["worker"], "onExitCodes": [1]}, failure(1, role="chief"), False),
    ],
)
def test_a_rule_matches_when_every_field_it_has_matches(
    rule: dict[str, object], seen: Failure, matched: bool
) -> None:
    (parsed,) = parse_job(
        job().parameter_servers().rules({"action": "Fail", **rule}).obj()
    ).run_policy.failure_rules
    assert matches(parsed, seen) is matched


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ("not a list", "failureRules must be a list"),
        ([{"onExitCodes": [1]}], "failureRules[0].action"),
        ([{"action": "Fail", "onExitCodes": [300]}], "failureRules[0].onExitCodes"),
        ([{"action": "Fail"}, {"action": "Fail", "onCauses": ["Sunspots"]}], "failureRules[1].onCauses"),
        ([{"action": "Fail", "onRoles": ["boss"]}], "failureRules[0].onRoles"),
    ],
)
def test_rules_the_crd_would_refuse_are_refused_by_the_parser_too(rules: object, field: str) -> None:
    with pytest.raises(SpecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_job(job().run_policy(failureRules=rules).obj())


def test_restart_not_counted_leaves_backoff_limit_alone() -> None:
    j = job().run_policy(backoffLimit=0).rules({"action": "RestartNotCounted", "onExitCodes": [42]})
    obj = j.launched(phase="Running", restarts=0).obj()
    decision = decide(obj, [pod(obj, 0).running().obj(), pod(obj, 1).exited(42, reason="Error").obj()])
    assert decision.status.phase == "Restarting"
    assert (decision.status.restarts, decision.status.restarts_not_counted) == (0, 1)
    assert "failureRules[0]: RestartNotCounted" in (decision.status.message or "")


def test_a_rule_can_fail_what_the_preset_would_restart() -> None:
    obj = job().rules({"action": "Fail", "onCauses": ["OOMKilled"]}).launched(phase="Running").obj()
    decision = decide(obj, [pod(obj, 0).running().obj(), pod(obj, 1).exited(137, reason="OOMKilled").obj()])
    assert decision.status.phase == "Failed" and decision.status.reason == "WorkerFailed"
    assert "(failureRules[0]: Fail)" in (decision.status.message or "")


def test_a_rule_on_progress_stalled_overrides_the_progress_deadline_policy() -> None:
    from tfmw_operator.api.times import format_precise_time

    obj = (
        job()
        .run_policy(progressDeadlineSeconds=30, progressDeadlinePolicy="Restart")
        .rules({"action": "Fail", "onCauses": ["ProgressStalled"]})
        .launched(phase="Running")
        .condition("Running", True, "AllWorkersRunning")
        .status(progress={"attempt": 0, "epoch": 1, "advancedAt": format_precise_time(at(0))})
        .obj()
    )
    decision = decide(obj, [pod(obj, 0).running().obj(), pod(obj, 1).running().obj()], now=at(100))
    assert decision.status.phase == "Failed" and decision.status.reason == "ProgressStalled"
    assert decision.status.history[0].cause == "ProgressStalled"
