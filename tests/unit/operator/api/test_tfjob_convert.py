"""What `convert` (api/tfjob.py) says, word for word: the field and the reason of each
refusal, and each note of a conversion (they are what `tfmw convert` prints);
test_tfjob.py holds what the converted jobs run."""

from __future__ import annotations

from typing import Any

import pytest
from tfmw_operator.api.names import API_VERSION, KIND
from tfmw_operator.api.spec import JobSpec, SpecError, parse_job
from tfmw_operator.api.tfjob import ConversionError, Note, convert, parse_tfjob, parse_tfjob_spec
from wrappers import every_malformed

Json = dict[str, Any]


def replica(replicas: Any = 1, policy: str | None = None, **container: Any) -> Json:
    spec: Json = {
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "img:1", **container}]}},
    }
    if policy is not None:
        spec["restartPolicy"] = policy
    return spec


def tfjob(spec: Any = None, **meta: Any) -> Json:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "dist", **meta},
        "spec": spec,
    }


def port(number: int) -> Json:
    return {"ports": [{"name": "tfjob-port", "containerPort": number}]}


GANG = "belongs to a gang scheduler (volcano, scheduler-plugins) that tfmw does not drive: leave it out, and give the job a Kueue queue instead (docs/kueue.md)"


def test_a_spec_that_is_no_object_is_refused_naming_it() -> None:
    with pytest.raises(SpecError) as refused:
        convert(tfjob([1]))
    assert str(refused.value) == "spec must be an object, got list"


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({}, "spec.tfReplicaSpecs: is required: at least a Worker or a Chief"),
        ({"tfReplicaSpecs": []}, "spec.tfReplicaSpecs: is required: at least a Worker or a Chief"),
        (
            {"tfReplicaSpecs": {"Launcher": replica()}},
            "spec.tfReplicaSpecs.Launcher: tfmw runs the replica types Chief (or Master), Worker, PS and Evaluator",
        ),
        ({"tfReplicaSpecs": {"Worker": "x"}}, "spec.tfReplicaSpecs.Worker: must be a replica spec"),
        (
            {"tfReplicaSpecs": {"Chief": replica(), "Master": replica(), "Worker": replica()}},
            "spec.tfReplicaSpecs.Master: a TFJob has at most one Chief or Master",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica(-1)}},
            "spec.tfReplicaSpecs.Worker.replicas: must be a non-negative integer, got -1",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica("2")}},
            "spec.tfReplicaSpecs.Worker.replicas: must be a non-negative integer, got '2'",
        ),
        (
            {"tfReplicaSpecs": {"Chief": replica(2), "Worker": replica()}},
            "spec.tfReplicaSpecs.Chief.replicas: tfmw runs one chief",
        ),
        (
            {"tfReplicaSpecs": {"Evaluator": replica(2), "Worker": replica()}},
            "spec.tfReplicaSpecs.Evaluator.replicas: tfmw runs one evaluator",
        ),
        (
            {"tfReplicaSpecs": {"Chief": replica(), "Worker": replica(0)}},
            "spec.tfReplicaSpecs.Worker: tfmw needs at least one worker; a lone chief runs as one Worker (worker 0 is the chief)",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica()}, "enableDynamicWorker": True},
            "spec.enableDynamicWorker: tfmw gives every task the whole cluster in TF_CONFIG: leave it out (or false)",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica()}, "runPolicy": {"minResources": None}},
            "spec.runPolicy.minResources: has no meaning in tfmw: leave it out, and give the job a Kueue queue for its quota (docs/kueue.md)",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica()}, "runPolicy": {"schedulingPolicy": "gang"}},
            "spec.runPolicy.schedulingPolicy: must be an object",
        ),
        (
            {
                "tfReplicaSpecs": {"Worker": replica(3)},
                "runPolicy": {"schedulingPolicy": {"minAvailable": 2}},
            },
            "spec.runPolicy.schedulingPolicy.minAvailable: tfmw admits the whole gang together or none of it "
            "(under Kueue): minAvailable 2 of 3 pods has no meaning here; leave it out or set it to 3",
        ),
        (
            {
                "tfReplicaSpecs": {"Worker": replica()},
                "runPolicy": {"schedulingPolicy": {"minResources": {}}},
            },
            f"spec.runPolicy.schedulingPolicy.minResources: {GANG}",
        ),
        (
            {
                "tfReplicaSpecs": {"Worker": replica()},
                "runPolicy": {"schedulingPolicy": {"scheduleTimeoutSeconds": 5}},
            },
            f"spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds: {GANG}",
        ),
        (
            {"tfReplicaSpecs": {"Chief": replica(**port(1)), "Worker": replica(**port(2))}},
            "spec.tfReplicaSpecs.*.template.spec.containers[tensorflow].ports[tfjob-port]: "
            "tfmw runs every task on one port; these replicas name several: [1, 2]",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica()}, "successPolicy": "AnyWorker"},
            "spec.successPolicy: must be empty or AllWorkers, got 'AnyWorker'",
        ),
        (
            {"tfReplicaSpecs": {"Worker": replica(policy="Sometimes")}},
            "spec.tfReplicaSpecs.Worker.restartPolicy: must be Always, OnFailure, Never or ExitCode, got 'Sometimes'",
        ),
    ],
)
def test_each_refusal_names_its_field_and_why(spec: Any, said: str) -> None:
    with pytest.raises(ConversionError) as refused:
        convert(tfjob(spec))
    assert str(refused.value) == said
    assert refused.value.field == said.split(": ")[0]


def test_a_replica_type_written_twice_is_named_with_its_twin() -> None:
    with pytest.raises(ConversionError) as refused:
        convert(tfjob({"tfReplicaSpecs": {"Worker": replica(2), "worker": replica(2)}}))
    assert str(refused.value) == (
        "spec.tfReplicaSpecs.worker: names the same replica type as spec.tfReplicaSpecs.Worker: keep one of them"
    )


@pytest.mark.parametrize(
    ("replicas", "field", "said"),
    [
        (
            {"Worker": replica(1025)},
            "spec.tfReplicaSpecs.Worker.replicas",
            "tfmw runs at most 1024, got 1025",
        ),
        (
            {"Chief": replica(1), "worker": replica(1025)},
            "spec.tfReplicaSpecs.worker.replicas",
            "tfmw runs at most 1024, got 1025",
        ),
        (
            {"Worker": replica(2), "PS": replica(65)},
            "spec.tfReplicaSpecs.PS.replicas",
            "tfmw runs at most 64, got 65",
        ),
    ],
)
def test_replica_bounds_name_the_tfjobs_own_field(replicas: Json, field: str, said: str) -> None:
    """Not the converted job's spec.workers or spec.parameterServers, which the TFJob has not."""
    with pytest.raises(ConversionError) as refused:
        convert(tfjob({"tfReplicaSpecs": replicas}))
    assert str(refused.value) == f"{field}: {said}"
    convert(tfjob({"tfReplicaSpecs": {"Worker": replica(1024), "PS": replica(64)}}))  # the bounds themselves


@pytest.mark.parametrize(
    ("annotations", "field", "why"),
    [
        (
            {"tfmw.dev/shared-claim": "Bad_Name!"},
            "tfmw.dev/shared-claim",
            "must be a PersistentVolumeClaim's name",
        ),
        (
            {"tfmw.dev/shared-claim": "a" * 254},
            "tfmw.dev/shared-claim",
            "must be a PersistentVolumeClaim's name",
        ),
        (
            {"tfmw.dev/shared-claim": "-data"},
            "tfmw.dev/shared-claim",
            "must be a PersistentVolumeClaim's name",
        ),
        (
            {"tfmw.dev/shared-claim": "data", "tfmw.dev/shared-mount-path": "rel/path"},
            "tfmw.dev/shared-mount-path",
            "must be an absolute path such as /shared",
        ),
    ],
)
def test_the_shared_volume_annotations_get_the_crds_checks(annotations: Json, field: str, why: str) -> None:
    """No CRD checks a TFJob's annotations: convert makes spec.sharedVolume's checks on them."""
    with pytest.raises(ConversionError) as refused:
        convert(tfjob({"tfReplicaSpecs": {"Worker": replica()}}, annotations=annotations))
    assert refused.value.field == f"metadata.annotations[{field}]"
    assert why in str(refused.value)


def test_a_job_tfmw_launched_before_is_not_refused_for_checks_added_since() -> None:
    """An operator upgraded under a running TFJob never fails it for a refusal the older one
    did not make: a container named otherwise, the annotations' form."""
    replicas = {
        "Worker": replica(),
        "PS": {"replicas": 1, "template": {"spec": {"containers": [{"name": "ps"}]}}},
    }
    annotations = {"tfmw.dev/shared-claim": "data", "tfmw.dev/shared-mount-path": "shared/"}
    with pytest.raises(ConversionError):
        parse_tfjob(tfjob({"tfReplicaSpecs": replicas}, namespace="ns", uid="u", annotations=annotations))
    launched = {**annotations, "tfmw.dev/status": '{"attempt": 0, "launchedAttempt": 0}'}
    job = parse_tfjob(tfjob({"tfReplicaSpecs": replicas}, namespace="ns", uid="u", annotations=launched))
    assert job.mount_path == "shared/" and job.claim_name == "data"
    for forged in ("{", '{"launchedAttempt": "0"}', "[]", "x" * (64 * 1024 + 1)):
        with pytest.raises(ConversionError):
            parse_tfjob(
                tfjob(
                    {"tfReplicaSpecs": replicas},
                    namespace="ns",
                    uid="u",
                    annotations={**annotations, "tfmw.dev/status": forged},
                )
            )


def test_the_shared_volume_annotations_as_the_crd_takes_them() -> None:
    annotations = {"tfmw.dev/shared-claim": "team.data-1", "tfmw.dev/shared-mount-path": "/data"}
    converted = convert(tfjob({"tfReplicaSpecs": {"Worker": replica()}}, annotations=annotations))
    assert converted.manifest["spec"]["sharedVolume"] == {"claimName": "team.data-1", "mountPath": "/data"}


def test_a_lone_chief_counts_one_and_an_empty_set_is_dropped() -> None:
    converted = convert(
        tfjob({"tfReplicaSpecs": {"Chief": replica(1), "Worker": replica(1), "PS": replica(0)}})
    )
    assert "parameterServers" not in converted.manifest["spec"]
    assert converted.distributed
    assert converted.replica_types == {"chief": "Chief", "worker": "Worker"}
    assert (
        convert(tfjob({"tfReplicaSpecs": {"Worker": replica(2), "Evaluator": replica(0)}})).manifest["spec"][
            "workers"
        ]
        == 2
    )


def test_every_note_of_a_conversion_word_for_word_and_the_manifest_it_goes_with() -> None:
    job = tfjob(
        {
            "tfReplicaSpecs": {
                "Master": replica(1, "Always", **port(2000)),
                "Worker": replica(2, "ExitCode", **port(2000)),
                "PS": {
                    **replica(1, "OnFailure"),
                    "template": {"spec": {"restartPolicy": "OnFailure", **replica()["template"]["spec"]}},
                },
                "Evaluator": replica(1),
            },
            "successPolicy": "AllWorkers",
            "runPolicy": {
                "managedBy": "kubeflow.org/tf-operator",
                "activeDeadlineSeconds": 600,
                "suspend": False,
                "schedulingPolicy": {"minAvailable": 5, "queue": "team-a", "priorityClass": "high"},
            },
        },
        namespace="ns",
        labels={"app": "x", "bad": 3},
        annotations={"tfmw.dev/shared-claim": "claim", "tfmw.dev/shared-mount-path": "/data"},
    )
    converted = convert(job)
    assert converted.notes == (
        Note(
            "spec.runPolicy.schedulingPolicy.queue",
            "metadata.labels[kueue.x-k8s.io/queue-name]: team-a (a Kueue LocalQueue)",
        ),
        Note(
            "spec.runPolicy.schedulingPolicy.priorityClass",
            "every pod's priorityClassName, where its template sets none",
        ),
        Note("spec.port", "2000, the replicas' tfjob-port (the pods get it as port tfmw)"),
        Note("spec.tfReplicaSpecs.PS.template.spec.restartPolicy", "dropped: tfmw restarts pods itself"),
        Note(
            "spec.tfReplicaSpecs.Master",
            "runs as TensorFlow 2's chief: pod <job>-chief-0, TF_CONFIG type chief (Kubeflow's: "
            "<job>-master-0, master); its replica-type label stays master",
        ),
        Note("spec.successPolicy", "ChiefExitCode: with a Chief, TFJob ends on the chief's exit"),
        Note(
            "spec.tfReplicaSpecs.Master.restartPolicy",
            "Always: a pod that exits 0 is not restarted (OnFailure's rule)",
        ),
        Note("spec.runPolicy.cleanPodPolicy", "None, TFJob's default (tfmw's own is Running)"),
        Note("spec.runPolicy.backoffLimit", "unset: no limit, as TFJob has none"),
        Note("spec.runPolicy.managedBy", "dropped: a TFMultiWorkerJob is always tfmw's"),
        Note(
            "spec.tfReplicaSpecs.Evaluator",
            "the evaluator is not in TF_CONFIG's cluster (TensorFlow's rule; TFJob put it there)",
        ),
    )
    spec = converted.manifest["spec"]
    assert converted.manifest["metadata"] == {
        "name": "dist",
        "namespace": "ns",
        "labels": {"app": "x", "kueue.x-k8s.io/queue-name": "team-a"},
    }
    assert spec["workers"] == 2 and spec["port"] == 2000
    assert spec["completion"] == {"policy": "ChiefExitCode"}
    assert spec["parameterServers"]["replicas"] == 1
    assert spec["sharedVolume"] == {"claimName": "claim", "mountPath": "/data"}
    assert spec["runPolicy"] == {
        "restartPolicy": "Never",
        "failureRules": [
            {"onRoles": ["chief"], "onDisruption": True, "action": "RestartNotCounted"},
            {"onRoles": ["chief"], "action": "Restart"},
            {"onRoles": ["worker"], "onDisruption": True, "action": "RestartNotCounted"},
            {"onRoles": ["worker"], "onExitCodes": list(range(1, 128)), "action": "Fail"},
            {"onRoles": ["worker"], "onDisruption": False, "action": "RestartNotCounted"},
            {"onRoles": ["ps"], "onDisruption": True, "action": "RestartNotCounted"},
            {"onRoles": ["ps"], "action": "Restart"},
            {"onRoles": ["evaluator"], "action": "Fail"},
        ],
        "cleanPodPolicy": "None",
        "backoffLimit": 2**31 - 1,
        "activeDeadlineSeconds": 600,
        "suspend": False,
    }
    # What each rule stands for, which a served TFJob's messages name (parse_tfjob).
    assert converted.rule_origins == (
        *["spec.tfReplicaSpecs.Master.restartPolicy Always"] * 2,
        *["spec.tfReplicaSpecs.Worker.restartPolicy ExitCode"] * 3,
        *["spec.tfReplicaSpecs.PS.restartPolicy OnFailure"] * 2,
        "spec.tfReplicaSpecs.Evaluator.restartPolicy Never",
    )
    for template in (spec["template"], spec["chief"]["template"], spec["evaluator"]["template"]):
        assert template["spec"]["priorityClassName"] == "high"
        assert "ports" not in template["spec"]["containers"][0] and "restartPolicy" not in template["spec"]
    assert spec["parameterServers"]["template"] == {
        "spec": {"containers": [{"name": "tensorflow", "image": "img:1"}], "priorityClassName": "high"}
    }


def test_a_lone_worker_without_a_chief_gets_all_workers_completion_when_asked_and_a_note_on_tf_config() -> (
    None
):
    converted = convert(
        tfjob(
            {
                "tfReplicaSpecs": {"Worker": replica(1, "Never")},
                "successPolicy": "AllWorkers",
                "runPolicy": {"cleanPodPolicy": "All", "backoffLimit": 3},
            }
        )
    )
    assert converted.notes == (
        Note("TF_CONFIG", "set for the lone task too (TFJob sets none for a job of one replica)"),
    )
    spec = converted.manifest["spec"]
    assert spec["completion"] == {"policy": "AllWorkersExitCode"}
    assert spec["runPolicy"]["failureRules"] == [{"onRoles": ["worker", "chief"], "action": "Fail"}]
    assert spec["runPolicy"]["cleanPodPolicy"] == "All" and spec["runPolicy"]["backoffLimit"] == 3
    assert not converted.distributed and converted.manifest["metadata"] == {"name": "dist"}
    assert "sharedVolume" not in spec and spec["port"] == 2222


def test_the_lone_task_note_is_for_tfmw_convert_only_as_the_served_tfjob_gets_no_tf_config() -> None:
    """The TFMultiWorkerJob `tfmw convert` prints sets TF_CONFIG for its lone task; the TFJob
    tfmw serves does not, as Kubeflow's isDistributed (pkg/controller.v1/tensorflow/util.go),
    so its PodsCreated Event must not say it does."""
    lone = tfjob({"tfReplicaSpecs": {"Worker": replica(1, "Never")}})
    assert any(note.field == "TF_CONFIG" for note in convert(lone).notes)
    served = parse_tfjob(lone)
    assert not served.tf_config
    assert not [n for n in served.conversion_notes if n.startswith("TF_CONFIG")]
    assert served.conversion_notes  # the other notes stay


def test_replicas_default_to_one_and_the_manifest_is_a_tfmultiworkerjob() -> None:
    unset = {k: v for k, v in replica().items() if k != "replicas"}
    converted = convert(tfjob({"tfReplicaSpecs": {"Chief": unset, "Worker": unset}}))
    assert converted.manifest["apiVersion"] == API_VERSION and converted.manifest["kind"] == KIND
    assert converted.manifest["spec"]["workers"] == 1 and converted.distributed


def test_a_parsed_tfjob_without_namespace_or_uid_is_in_default_and_has_no_folder_check_unless_given() -> None:
    job = tfjob({"tfReplicaSpecs": {"Worker": replica()}}, annotations={"tfmw.dev/shared-claim": "claim"})
    parsed = parse_tfjob(job)
    assert (parsed.namespace, parsed.uid, parsed.folder_check_image) == ("default", "", "")
    assert parse_tfjob(job, "check:1").folder_check_image == "check:1"


@pytest.mark.parametrize(
    ("replica_specs", "said"),
    [
        ({}, "spec.tfReplicaSpecs: is required: at least a Worker or a Chief"),
        (["Worker"], "spec.tfReplicaSpecs: is required: at least a Worker or a Chief"),
        ("Worker", "spec.tfReplicaSpecs: is required: at least a Worker or a Chief"),
    ],
)
def test_replica_specs_empty_or_not_a_map_are_refused_as_missing(replica_specs: Any, said: str) -> None:
    with pytest.raises(ConversionError) as refused:
        convert(tfjob({"tfReplicaSpecs": replica_specs}))
    assert str(refused.value) == said


def test_only_the_tensorflow_containers_tfjob_port_sets_the_jobs_port() -> None:
    sidecar = {"name": "sidecar", "image": "proxy:1", **port(3333)}
    worker = replica(2, ports=[{"name": "metrics", "containerPort": 9090}])
    worker["template"]["spec"]["containers"].append(sidecar)
    converted = convert(tfjob({"tfReplicaSpecs": {"Worker": worker}}))
    assert converted.manifest["spec"]["port"] == 2222  # neither the sidecar's nor a port of another name
    assert "spec.port" not in {n.field for n in converted.notes}
    containers = converted.manifest["spec"]["template"]["spec"]["containers"]
    assert containers[0]["ports"] == [{"name": "metrics", "containerPort": 9090}]


def test_a_tfjob_port_without_a_number_is_tfjobs_default_and_only_it_leaves_the_container() -> None:
    ported = replica(2, ports=[{"name": "metrics", "containerPort": 9090}, {"name": "tfjob-port"}])
    converted = convert(tfjob({"tfReplicaSpecs": {"Worker": ported}}))
    assert converted.manifest["spec"]["port"] == 2222
    assert (
        Note("spec.port", "2222, the replicas' tfjob-port (the pods get it as port tfmw)") in converted.notes
    )
    container = converted.manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9090}]


@pytest.mark.parametrize(
    "ps",
    [
        {"replicas": 1},  # no template
        {"replicas": 1, "template": {"spec": {"containers": []}}},
        {"replicas": 1, "template": {"spec": {"containers": [{"name": "trainer", "image": "img:1"}]}}},
    ],
)
def test_a_replica_without_a_tensorflow_container_is_refused_naming_it(ps: Json) -> None:
    """As Kubeflow's webhook refuses it: its controller gives TF_CONFIG to that container."""
    with pytest.raises(ConversionError) as refused:
        convert(tfjob({"tfReplicaSpecs": {"Worker": replica(2), "PS": ps}}))
    assert refused.value.field == "spec.tfReplicaSpecs.PS.template.spec.containers"
    assert "must have a container named tensorflow" in str(refused.value)


def test_a_templates_own_priority_class_is_kept_and_none_is_added_without_one() -> None:
    own = replica(2)
    own["template"]["spec"]["priorityClassName"] = "low"
    scheduled = {"schedulingPolicy": {"priorityClass": "high"}}
    spec = convert(
        tfjob({"tfReplicaSpecs": {"Chief": replica(1), "Worker": own}, "runPolicy": scheduled})
    ).manifest["spec"]
    assert spec["template"]["spec"]["priorityClassName"] == "low"
    assert spec["chief"]["template"]["spec"]["priorityClassName"] == "high"
    plain = convert(tfjob({"tfReplicaSpecs": {"Worker": replica(2)}})).manifest["spec"]
    assert "priorityClassName" not in plain["template"]["spec"]
    empty = convert(
        tfjob(
            {
                "tfReplicaSpecs": {"Worker": replica(2)},
                "runPolicy": {"schedulingPolicy": {"priorityClass": "", "queue": ""}},
            }
        )
    )
    assert "priorityClassName" not in empty.manifest["spec"]["template"]["spec"]
    assert empty.notes == (
        Note("spec.runPolicy.cleanPodPolicy", "None, TFJob's default (tfmw's own is Running)"),
        Note("spec.runPolicy.backoffLimit", "unset: no limit, as TFJob has none"),
    )
    assert "labels" not in empty.manifest["metadata"]


def test_a_queue_label_the_tfjob_sets_itself_wins_over_its_scheduling_policys_queue() -> None:
    converted = convert(
        tfjob(
            {
                "tfReplicaSpecs": {"Worker": replica(2)},
                "runPolicy": {"schedulingPolicy": {"queue": "team-a", "priorityClass": "high"}},
            },
            labels={"kueue.x-k8s.io/queue-name": "own"},
        )
    )
    assert converted.manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "own"}
    assert "spec.runPolicy.schedulingPolicy.queue" not in {n.field for n in converted.notes}
    # Without a queue, no label is made up.
    unqueued = convert(
        tfjob(
            {
                "tfReplicaSpecs": {"Worker": replica(2)},
                "runPolicy": {"schedulingPolicy": {"priorityClass": "high"}},
            }
        )
    )
    assert "labels" not in unqueued.manifest["metadata"]


def test_an_empty_shared_claim_or_mount_path_annotation_is_no_value() -> None:
    workers = {"tfReplicaSpecs": {"Worker": replica(2)}}
    unclaimed = convert(tfjob(workers, annotations={"tfmw.dev/shared-claim": ""})).manifest["spec"]
    assert "sharedVolume" not in unclaimed
    unmounted = convert(
        tfjob(workers, annotations={"tfmw.dev/shared-claim": "c", "tfmw.dev/shared-mount-path": ""})
    ).manifest["spec"]
    assert unmounted["sharedVolume"] == {"claimName": "c"}


def test_a_parsed_tfjob_keeps_its_namespace_and_parse_tfjob_spec_passes_the_folder_check_image() -> None:
    job = tfjob({"tfReplicaSpecs": {"Worker": replica()}}, namespace="team-a", uid="u-1")
    job["metadata"]["annotations"] = {"tfmw.dev/shared-claim": "claim"}
    assert (parse_tfjob(job).namespace, parse_tfjob(job).uid) == ("team-a", "u-1")
    given = parse_tfjob_spec(job, "check:1")
    assert isinstance(given, JobSpec) and given.folder_check_image == "check:1"
    unset = parse_tfjob_spec(job)
    assert isinstance(unset, JobSpec) and unset.folder_check_image == ""
    refused = parse_tfjob_spec(tfjob({"tfReplicaSpecs": {}}))
    assert isinstance(refused, ConversionError) and refused.field == "spec.tfReplicaSpecs"


def test_a_malformed_value_anywhere_in_a_tfjob_is_refused_naming_a_field_never_a_crash() -> None:
    """Kubeflow's CRD types a TFJob on the cluster, but `tfmw convert` reads files: whatever a
    file holds, the answer is a ConversionError or SpecError (a field and a fix), or a job."""
    rich = tfjob(
        {
            "tfReplicaSpecs": {
                "Chief": replica(1, "ExitCode", **port(2222)),
                "PS": replica(1, "Always"),
                "Worker": replica(2, "OnFailure", command=["python", "train.py"], args=["--epochs", "2"]),
                "Evaluator": replica(1, "Never"),
            },
            "runPolicy": {
                "cleanPodPolicy": "All",
                "backoffLimit": 3,
                "activeDeadlineSeconds": 600,
                "ttlSecondsAfterFinished": 60,
                "schedulingPolicy": {"queue": "team-a", "priorityClass": "high"},
            },
            "successPolicy": "",
        },
        namespace="ns",
        uid="uid-dist",
        labels={"team": "a"},
        annotations={"tfmw.dev/shared-claim": "tfmw-shared"},
    )
    parse_tfjob(rich)  # the document itself is valid
    crashed: list[str] = []
    for path, changed in every_malformed(rich):
        try:
            parse_job(convert(changed).manifest)
            parse_tfjob(changed)
        except SpecError:
            pass
        except Exception as error:
            crashed.append(f"{'.'.join(map(str, path))}: {type(error).__name__}: {error}")
    assert not crashed, "\n".join(sorted(set(crashed)))
