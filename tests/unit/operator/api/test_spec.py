"""The operator's defaults are the CRD's: a job reads the same whether or not the API server defaulted it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kube import REPO
from tfmw_operator import contract
from tfmw_operator.api import objects
from tfmw_operator.api import spec as api_spec
from tfmw_operator.api.spec import CleanPodPolicy, ProgressDeadlinePolicy, RestartPolicy, RunPolicy, parse_job
from tfmw_operator.contract import DEFAULT_MARKER_FILE
from wrappers import every_malformed, job

CRD = yaml.safe_load((REPO / "crds" / "tfmwjobs.tfmw.dev.yaml").read_text())


def spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]  # type: ignore[no-any-return]


def test_crd_defaults_equal_the_operators() -> None:
    spec = spec_schema()
    run = spec["runPolicy"]["properties"]
    defaults = RunPolicy()
    assert spec["port"]["default"] == api_spec.DEFAULT_PORT
    assert spec["sharedVolume"]["properties"]["mountPath"]["default"] == api_spec.DEFAULT_MOUNT_PATH
    completion = spec["completion"]["properties"]
    assert completion["markerFile"]["default"] == DEFAULT_MARKER_FILE
    assert completion["chiefExitGraceSeconds"]["default"] == api_spec.DEFAULT_CHIEF_EXIT_GRACE_SECONDS
    assert run["restartPolicy"]["default"] == defaults.restart_policy.value
    assert run["backoffLimit"]["default"] == defaults.backoff_limit == api_spec.DEFAULT_BACKOFF_LIMIT
    assert run["cleanPodPolicy"]["default"] == defaults.clean_pod_policy.value
    assert run["suspend"]["default"] is defaults.suspend
    for unset in ("activeDeadlineSeconds", "pendingTimeoutSeconds", "ttlSecondsAfterFinished"):
        assert "default" not in run[unset]
    # Not defaulted by the API server, so a CEL rule can refuse a policy without a deadline;
    # the operator's default applies.
    assert "default" not in run["progressDeadlinePolicy"] and "default" not in run["progressDeadlineSeconds"]
    assert defaults.progress_deadline_seconds is None
    assert defaults.progress_deadline_policy is ProgressDeadlinePolicy.RESTART


def test_crd_enums_are_the_operators() -> None:
    run = spec_schema()["runPolicy"]["properties"]
    assert set(run["restartPolicy"]["enum"]) == {p.value for p in RestartPolicy}
    assert set(run["cleanPodPolicy"]["enum"]) == {p.value for p in CleanPodPolicy}
    assert set(run["progressDeadlinePolicy"]["enum"]) == {p.value for p in ProgressDeadlinePolicy}


def test_the_progress_deadline_and_its_policy_are_read() -> None:
    parsed = parse_job(job().run_policy(progressDeadlineSeconds=90, progressDeadlinePolicy="Fail").obj())
    assert parsed.run_policy.progress_deadline_seconds == 90
    assert parsed.run_policy.progress_deadline_policy is ProgressDeadlinePolicy.FAIL


def test_an_undefaulted_job_parses_with_the_crd_defaults() -> None:
    parsed = parse_job(job().obj())
    assert (parsed.port, parsed.mount_path, parsed.marker_file) == (
        2222,
        "/shared",
        "multiworker-complete.txt",
    )
    assert parsed.chief_exit_grace_seconds == 30 and parsed.run_policy == RunPolicy()


def test_copy_json_shares_nothing_mutable_with_the_original() -> None:
    original: dict[str, Any] = {
        "spec": {"containers": [{"env": [{"name": "A"}], "args": ["x"]}]},
        "n": 1,
        "z": None,
    }
    copied = objects.copy_json(original)
    assert copied == original
    copied["spec"]["containers"][0]["env"].append({"name": "B"})
    copied["spec"]["containers"][0]["args"][0] = "y"
    assert original == {"spec": {"containers": [{"env": [{"name": "A"}], "args": ["x"]}]}, "n": 1, "z": None}


def test_node_exclusion_defaults_are_the_crds_and_present_means_on() -> None:
    schema = spec_schema()["runPolicy"]["properties"]["nodeExclusion"]["properties"]
    assert schema["maxNodes"]["default"] == api_spec.DEFAULT_EXCLUDED_NODES
    assert schema["durationSeconds"]["default"] == api_spec.DEFAULT_EXCLUSION_SECONDS
    assert schema["maxNodes"]["maximum"] == api_spec.MAX_EXCLUDED_NODES
    assert schema["durationSeconds"]["maximum"] == api_spec.MAX_EXCLUSION_SECONDS
    assert parse_job(job().obj()).run_policy.node_exclusion is None
    assert parse_job(job().run_policy(nodeExclusion={}).obj()).run_policy.node_exclusion == (
        api_spec.NodeExclusion(api_spec.DEFAULT_EXCLUDED_NODES, api_spec.DEFAULT_EXCLUSION_SECONDS)
    )
    chosen = parse_job(job().run_policy(nodeExclusion={"maxNodes": 1, "durationSeconds": 60}).obj())
    assert chosen.run_policy.node_exclusion == api_spec.NodeExclusion(1, 60)


def test_warm_start_present_means_on_with_the_crds_default_modules() -> None:
    schema = spec_schema()["runPolicy"]["properties"]["warmStart"]["properties"]["preload"]
    assert tuple(schema["default"]) == api_spec.DEFAULT_WARM_MODULES
    assert schema["maxItems"] == contract.MAX_WARM_MODULES
    assert schema["items"]["pattern"] == f"^{contract.MODULE_NAME_PATTERN}$"
    assert schema["items"]["maxLength"] == contract.MAX_MODULE_NAME_CHARS
    assert parse_job(job().obj()).run_policy.warm_start == ()
    assert parse_job(job().run_policy(warmStart={}).obj()).run_policy.warm_start == ("tensorflow",)
    chosen = parse_job(job().run_policy(warmStart={"preload": ["tensorflow", "numpy.linalg"]}).obj())
    assert chosen.run_policy.warm_start == ("tensorflow", "numpy.linalg")


@pytest.mark.parametrize(
    ("warm", "said"),
    [
        ([], "spec.runPolicy.warmStart must be an object"),
        ({"preload": []}, "spec.runPolicy.warmStart.preload must be a list of 1 to 16 module names"),
        ({"preload": "tensorflow"}, "spec.runPolicy.warmStart.preload must be a list"),
        (
            {"preload": ["tensorflow", "os;rm"]},
            "spec.runPolicy.warmStart.preload[1] must be a Python module name",
        ),
        ({"preload": [1]}, "spec.runPolicy.warmStart.preload[0] must be a Python module name"),
        ({"preload": ["m"] * 17}, "1 to 16 module names"),
    ],
)
def test_a_warm_start_that_is_not_a_list_of_module_names_is_refused_naming_the_field(
    warm: Any, said: str
) -> None:
    with pytest.raises(api_spec.SpecError) as refused:
        parse_job(job().run_policy(warmStart=warm).obj())
    assert said in str(refused.value)


def test_min_workers_is_read_and_a_sized_job_keeps_what_was_asked() -> None:
    parsed = parse_job(job().workers(4).spec(minWorkers=2).obj())
    assert parsed.min_workers == 2 and parsed.requested_workers == 4
    assert len(parsed.members) == 4  # cached on the spec: the sized one's are its own
    smaller = parsed.sized(2)
    assert (smaller.workers, smaller.requested_workers, len(smaller.members)) == (2, 4, 2)
    assert smaller.sized(4).workers == 4 and parsed.sized(4) is parsed
    assert spec_schema()["minWorkers"]["maximum"] == api_spec.MAX_REPLICAS


def test_a_rule_naming_an_unknown_role_is_refused_listing_the_roles() -> None:
    with pytest.raises(api_spec.SpecError) as refused:
        parse_job(job().rules({"action": "Fail", "onRoles": ["boss"]}).obj())
    assert (
        str(refused.value)
        == "spec.runPolicy.failureRules[0].onRoles must list some of chief, evaluator, ps, worker"
    )


@pytest.mark.parametrize(
    ("exclusion", "said"),
    [
        ({"maxNodes": 0}, "spec.runPolicy.nodeExclusion.maxNodes must be an integer in 1..32, got 0"),
        ({"maxNodes": 33}, "spec.runPolicy.nodeExclusion.maxNodes must be an integer in 1..32, got 33"),
        ({"maxNodes": True}, "spec.runPolicy.nodeExclusion.maxNodes must be an integer in 1..32, got True"),
        ({"maxNodes": "2"}, "spec.runPolicy.nodeExclusion.maxNodes must be an integer in 1..32, got '2'"),
        (
            {"durationSeconds": 0},
            "spec.runPolicy.nodeExclusion.durationSeconds must be an integer in 1..604800, got 0",
        ),
    ],
)
def test_node_exclusion_out_of_its_bounds_is_refused_naming_the_field(
    exclusion: dict[str, Any], said: str
) -> None:
    with pytest.raises(api_spec.SpecError) as refused:
        parse_job(job().run_policy(nodeExclusion=exclusion).obj())
    assert str(refused.value) == said


def test_node_exclusion_at_its_bounds_is_read() -> None:
    widest = {"maxNodes": api_spec.MAX_EXCLUDED_NODES, "durationSeconds": api_spec.MAX_EXCLUSION_SECONDS}
    parsed = parse_job(job().run_policy(nodeExclusion=widest).obj())
    assert parsed.run_policy.node_exclusion == api_spec.NodeExclusion(32, 7 * 24 * 3600)
    narrowest = parse_job(job().run_policy(nodeExclusion={"maxNodes": 1, "durationSeconds": 1}).obj())
    assert narrowest.run_policy.node_exclusion == api_spec.NodeExclusion(1, 1)


def test_a_jobs_replicas_of_each_kind_and_none_of_a_kind_it_lacks() -> None:
    from tfmw_operator.api.spec import ReplicaType, parse_job
    from wrappers import job

    spec = parse_job(job("ps").workers(3).chief().parameter_servers(2).obj())
    counts = {kind: spec.replicas(kind) for kind in ReplicaType}
    assert counts == {
        ReplicaType.CHIEF: 1,
        ReplicaType.WORKER: 3,
        ReplicaType.PS: 2,
        ReplicaType.EVALUATOR: 0,
    }


def test_a_malformed_value_anywhere_in_a_job_is_refused_as_a_spec_error_never_a_crash() -> None:
    """The CRD's schema refuses most of these at admission; the operator parses whatever it is
    handed all the same (a CRD older or newer than the operator, an object read some other way)."""
    rich = (
        job("rich")
        .chief()
        .parameter_servers(2)
        .evaluator()
        .commanded("--epochs", "3")
        .rules(
            {"onExitCodes": [42], "action": "RestartNotCounted"},
            {"onCauses": ["OOMKilled"], "onRoles": ["worker"], "action": "Fail"},
        )
        .run_policy(backoffLimit=3, activeDeadlineSeconds=600, ttlSecondsAfterFinished=60)
        .completion(policy="Marker", markerFile="done.json")
        .obj()
    )
    parse_job(rich)  # the document itself is valid
    crashed: list[str] = []
    for path, changed in every_malformed(rich):
        try:
            parse_job(changed)
        except api_spec.SpecError:
            pass
        except Exception as error:  # every crash is listed, not only the first
            crashed.append(f"{'.'.join(map(str, path))}: {type(error).__name__}: {error}")
    assert not crashed, "\n".join(sorted(set(crashed)))


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        (("runPolicy", "suspend"), "false", "spec.runPolicy.suspend must be true or false, got 'false'"),
        (("runPolicy", "backoffLimit"), -1, "spec.runPolicy.backoffLimit must be an integer in 0.."),
        (
            ("runPolicy", "activeDeadlineSeconds"),
            0,
            "spec.runPolicy.activeDeadlineSeconds must be an integer in 1..",
        ),
        (
            ("runPolicy", "ttlSecondsAfterFinished"),
            "60",
            "spec.runPolicy.ttlSecondsAfterFinished must be an integer",
        ),
        (("completion", "markerFile"), ["x"], "spec.completion.markerFile must be a string, got ['x']"),
        (("sharedVolume", "claimName"), 7, "spec.sharedVolume.claimName must be a string, got 7"),
        (("port",), True, "spec.port must be an integer in 1..65535, got True"),
        (("workers",), True, "spec.workers must be an integer in 1..1024, got True"),
        (("runPolicy",), [], "spec.runPolicy must be an object, got list"),
        (("chief",), "yes", "spec.chief must be an object, got str"),
    ],
)
def test_each_malformed_field_is_refused_by_its_name(
    where: tuple[str, ...], value: object, said: str
) -> None:
    changed = job("named").chief().obj()
    parent = changed["spec"]
    for key in where[:-1]:
        parent = parent.setdefault(key, {})
    parent[where[-1]] = value
    with pytest.raises(api_spec.SpecError) as refused:
        parse_job(changed)
    assert str(refused.value).startswith(said)
