"""Which failures restart and which fail: `runPolicy.failureRules`, then the rule list that
`runPolicy.restartPolicy` names. Pure.

The rules are tried in order and the first that matches decides; a job's own rules come
first, so they can say what the preset would have said otherwise (say, `{onExitCodes: [42],
action: RestartNotCounted}` for TensorFlow's PreemptionCheckpointHandler, which exits 42
after saving). When none of the job's rules matches, the preset's do; every preset ends
with a rule that matches everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfmw_operator.api.spec import FailureRule, JobSpec, RestartPolicy, RuleAction

# Exit codes 1..127 are the program's own: an error that will happen again the same way.
# From 128 up are deaths by signal (137 = SIGKILL, the OOM killer's too).
PROGRAM_EXIT_CODES = frozenset(range(1, 128))

# The presets, as rule lists: restartPolicy names one.
PRESETS: dict[RestartPolicy, tuple[FailureRule, ...]] = {
    RestartPolicy.NEVER: (FailureRule(RuleAction.FAIL, name="Never"),),
    RestartPolicy.ON_FAILURE: (FailureRule(RuleAction.RESTART, name="OnFailure"),),
    RestartPolicy.EXIT_CODE: (
        # Taken away (evicted, preempted, deleted, its node lost): not the program's fault,
        # whatever it exited with on the SIGTERM it got.
        FailureRule(RuleAction.RESTART, name="ExitCode: a disruption", disruption=True),
        FailureRule(RuleAction.FAIL, name="ExitCode: the program's own error", exit_codes=PROGRAM_EXIT_CODES),
        FailureRule(RuleAction.RESTART, name="ExitCode: a signal or the system"),
    ),
}


@dataclass(frozen=True)
class Failure:
    """What the rules see of a failure."""

    role: str  # chief, worker, ps, evaluator
    cause: str  # in status.history's words
    exit_code: int | None
    disrupted: bool


@dataclass(frozen=True)
class Ruling:
    action: RuleAction
    rule: str  # which rule decided: "failureRules[1] (name)", or the preset's
    node_fault: bool = False
    own: bool = True  # one of the job's failureRules, not its restartPolicy's

    @property
    def told(self) -> str:
        """What a message says of the rule: only a rule of the job's own is named, so a job
        that writes none reads as it always did."""
        return self.rule if self.own else ""


def matches(rule: FailureRule, failure: Failure) -> bool:
    code = failure.exit_code
    if rule.exit_codes is not None and (code is None or code not in rule.exit_codes):
        return False
    if rule.exit_codes_not_in is not None and (code is None or code in rule.exit_codes_not_in):
        return False
    if rule.causes is not None and failure.cause not in rule.causes:
        return False
    if rule.roles is not None and failure.role not in rule.roles:
        return False
    return rule.disruption is None or rule.disruption == failure.disrupted


def own_ruling(job: JobSpec, failure: Failure, naming_its_cause: bool = False) -> Ruling | None:
    """The job's own first matching rule, if one matches; with `naming_its_cause`, only a rule
    whose onCauses names the failure's cause may (a stall: progressDeadlinePolicy decides it
    unless a rule names ProgressStalled, so a rule on roles alone or a catch-all leaves it)."""
    for position, rule in enumerate(job.run_policy.failure_rules):
        if naming_its_cause and (rule.causes is None or failure.cause not in rule.causes):
            continue
        if matches(rule, failure):
            return Ruling(rule.action, rule.describe(position), rule.node_fault)
    return None


def rule_on(job: JobSpec, failure: Failure) -> Ruling:
    """The job's own rules first, then its restartPolicy's."""
    own = own_ruling(job, failure)
    if own is not None:
        return own
    preset = job.run_policy.restart_policy
    for rule in PRESETS[preset]:
        if matches(rule, failure):
            return Ruling(rule.action, f"restartPolicy {rule.name}", rule.node_fault, own=False)
    raise AssertionError(f"the preset {preset} ends with a rule that matches everything")
