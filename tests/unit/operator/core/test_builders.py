import dataclasses
import json
from typing import Any

import pytest
from tfmw_operator.api.spec import JobSpec, Member, SpecError, parse_job
from tfmw_operator.core.builders import (
    build_event,
    build_pod,
    build_service,
    build_tf_config,
    cluster_hosts,
    pod_group_name_prefix,
    renamed_hosts,
)
from tfmw_operator.core.pods import ObservedPod
from tfmw_operator.core.reports import PodReport
from wrappers import SUPERVISOR_IMAGE, TRAINER_COMMAND, at, container_env, every_malformed, job


def test_tf_config_per_worker_matches_the_contract_exactly() -> None:
    spec = parse_job(job("mnist", namespace="team-a").workers(3).obj())
    for index in range(3):
        assert json.loads(build_tf_config(spec, Member.worker(index))) == {
            "cluster": {
                "worker": [
                    "mnist-worker-0.mnist.team-a.svc:2222",
                    "mnist-worker-1.mnist.team-a.svc:2222",
                    "mnist-worker-2.mnist.team-a.svc:2222",
                ]
            },
            "task": {"type": "worker", "index": index},
        }


def test_a_tfmultiworkerjobs_tf_config_byte_for_byte_has_no_environment() -> None:
    spec = parse_job(job("mnist", namespace="team-a").workers(2).obj())
    assert build_tf_config(spec, Member.worker(1)) == (
        '{"cluster":{"worker":["mnist-worker-0.mnist.team-a.svc:2222","mnist-worker-1.mnist.team-a.svc:2222"]},'
        '"task":{"type":"worker","index":1}}'
    )


def test_a_tfjobs_tf_config_says_environment_cloud_as_kubeflows_does() -> None:
    """Kubeflow's genTFConfigJSONStr (pkg/controller.v1/tensorflow/tensorflow.go) always
    writes it, after cluster and task; a program may read tf_config["environment"]."""
    from tfmw_operator.api.tfjob import parse_tfjob

    container = {"name": "tensorflow", "image": "img:1"}
    tfjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u"},
        "spec": {
            "tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}
        },
    }
    spec = parse_tfjob(tfjob)
    tf_config = build_tf_config(spec, Member.worker(1))
    assert tf_config.endswith(',"task":{"type":"worker","index":1},"environment":"cloud"}')
    assert (
        json.loads(container_env(build_pod(spec, Member.worker(0), 0)["spec"]["containers"][0])["TF_CONFIG"])[
            "environment"
        ]
        == "cloud"
    )


def _cluster(spec: JobSpec, index: int, attempt: int) -> str:
    built = build_pod(spec, Member.worker(index), attempt)
    return json.dumps(json.loads(container_env(built["spec"]["containers"][0])["TF_CONFIG"])["cluster"])


def test_tf_config_cluster_is_identical_across_the_workers_of_an_attempt() -> None:
    spec = parse_job(job().workers(4).port(3333).obj())
    for attempt in range(3):
        clusters = {_cluster(spec, i, attempt) for i in range(4)}
        assert len(clusters) == 1
        assert ":3333" in next(iter(clusters))


def test_a_pod_made_again_gets_a_new_host_name_and_a_survivor_keeps_its_own() -> None:
    """A re-created pod has a new address, and DNS may still answer its name with the old
    one for a few seconds (gRPC then waits 30 s to ask again): a pod made for a later attempt
    has a name of that attempt, whether its whole gang was made again or it alone (a gang
    restarted in place). A survivor keeps the name it was made with, and the made pod's
    TF_CONFIG names it so; the control file tells the survivors the new names."""
    spec = parse_job(job().workers(2).obj())
    first, second = build_pod(spec, Member.worker(1), 0), build_pod(spec, Member.worker(1), 2)
    assert (first["spec"]["hostname"], second["spec"]["hostname"]) == ("mnist-worker-1", "worker-1-a2")
    assert second["metadata"]["name"] == "mnist-worker-1" and second["spec"]["subdomain"] == "mnist"
    assert json.loads(_cluster(spec, 0, 2))["worker"] == [
        "worker-0-a2.mnist.default.svc:2222",
        "worker-1-a2.mnist.default.svc:2222",
    ]

    in_place = parse_job(job().commanded().workers(3).obj(), supervisor_image=SUPERVISOR_IMAGE)

    def reading(stem: str, reads: bool = True) -> PodReport:
        return PodReport(stem, f"uid-{stem}", 3, "waiting", reads_hosts=reads)

    survivors = [
        ObservedPod("mnist-worker-0", 0, 0, "Running", hostname="mnist-worker-0", report=reading("worker-0")),
        ObservedPod("mnist-worker-2", 2, 1, "Running", hostname="worker-2-a1", report=reading("worker-2")),
        ObservedPod("mnist-worker-1", 1, 0, "Running", deleting=True, hostname="mnist-worker-1"),
    ]
    hosts = cluster_hosts(in_place, 3, survivors)
    made = build_pod(in_place, Member.worker(1), 3, hosts=hosts)
    assert made["spec"]["hostname"] == "worker-1-a3"
    assert json.loads(container_env(made["spec"]["containers"][0])["TF_CONFIG"])["cluster"]["worker"] == [
        "mnist-worker-0.mnist.default.svc:2222",
        "worker-1-a3.mnist.default.svc:2222",
        "worker-2-a1.mnist.default.svc:2222",
    ]
    assert renamed_hosts(in_place, hosts) == {"worker-1": "worker-1-a3", "worker-2": "worker-2-a1"}
    # A job whose TF_CONFIG is the template's own (a TFJob of one replica): nothing to rename in it.
    assert renamed_hosts(dataclasses.replace(in_place, tf_config=False), hosts) == {}
    # A survivor whose supervisor an older operator placed cannot learn a new name (its report
    # does not say readsHosts), nor can one not heard from yet: the pod's own name, as before.
    for report in (reading("worker-0", reads=False), None):
        older = [dataclasses.replace(survivors[0], report=report), *survivors[1:]]
        assert cluster_hosts(in_place, 3, older)[Member.worker(1)] == "mnist-worker-1"
        made = build_pod(in_place, Member.worker(1), 3, hosts=cluster_hosts(in_place, 3, older))
        assert made["spec"]["hostname"] == "mnist-worker-1"


def test_headless_service() -> None:
    spec = parse_job(job("mnist").port(2345).obj())
    service = build_service(spec)
    assert service["metadata"]["name"] == "mnist"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"tfmw.dev/job-name": "mnist"}
    assert service["spec"]["ports"] == [{"name": "tfmw", "port": 2345, "targetPort": 2345}]
    assert service["metadata"]["ownerReferences"][0]["controller"] is True


def test_pod_names_labels_and_identity() -> None:
    spec = parse_job(job("mnist").workers(2).obj())
    chief, worker = build_pod(spec, Member.worker(0), 2), build_pod(spec, Member.worker(1), 2)
    assert chief["metadata"]["name"] == "mnist-worker-0"
    assert chief["metadata"]["labels"] == {
        "tfmw.dev/job-name": "mnist",
        "tfmw.dev/replica-type": "worker",
        "tfmw.dev/replica-index": "0",
        "tfmw.dev/attempt": "2",
        "tfmw.dev/role": "chief",
    }
    assert worker["metadata"]["labels"]["tfmw.dev/role"] == "worker"
    assert chief["spec"]["hostname"] == "worker-0-a2"  # attempt 2 of a gang re-created whole
    assert chief["spec"]["subdomain"] == "mnist"
    assert chief["spec"]["restartPolicy"] == "Never"
    owner = chief["metadata"]["ownerReferences"][0]
    assert owner == {
        "apiVersion": "tfmw.dev/v1alpha1",
        "kind": "TFMultiWorkerJob",
        "name": "mnist",
        "uid": "uid-mnist",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_env_injected_into_every_container_and_init_container() -> None:
    template = {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "initContainers": [{"name": "fetch", "image": "busybox"}],
            "containers": [
                {"name": "sidecar", "image": "busybox", "env": [{"name": "KEEP", "value": "1"}]},
                {"name": "tensorflow", "image": "tfmw-trainer:dev"},
            ],
        },
    }
    spec = parse_job(job("mnist", namespace="ns1").template(template).completion(markerFile="out/done").obj())
    pod = build_pod(spec, Member.worker(1), 0)
    containers = pod["spec"]["initContainers"] + pod["spec"]["containers"]
    for container in containers:
        env = container_env(container)
        assert env["TFMW_JOB_NAME"] == "mnist"
        assert env["TFMW_JOB_UID"] == "uid-mnist"
        assert env["TFMW_NAMESPACE"] == "ns1"
        assert env["TFMW_WORKER_INDEX"] == "1"
        assert env["TFMW_NUM_WORKERS"] == "2"
        assert env["TFMW_ATTEMPT"] == "0"
        assert env["TFMW_SHARED_DIR"] == "/shared"
        assert env["TFMW_MARKER_PATH"] == "/shared/out/done"
        assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
        assert {"name": "tfmw-shared", "mountPath": "/shared", "subPath": "mnist"} in container[
            "volumeMounts"
        ]
    assert container_env(pod["spec"]["containers"][0])["KEEP"] == "1"
    assert pod["metadata"]["labels"]["team"] == "ml"
    # The port goes on the container named tensorflow, not the first one.
    assert "ports" not in pod["spec"]["containers"][0]
    assert pod["spec"]["containers"][1]["ports"] == [
        {"name": "tfmw", "containerPort": 2222, "protocol": "TCP"}
    ]
    assert {"name": "tfmw-shared", "persistentVolumeClaim": {"claimName": "tfmw-shared"}} in pod["spec"][
        "volumes"
    ]


def test_every_container_gets_fast_grpc_reconnects_unless_its_template_sets_them() -> None:
    template = {
        "spec": {
            "initContainers": [{"name": "fetch", "image": "busybox"}],
            "containers": [
                {"name": "tensorflow", "image": "tfmw-trainer:dev"},
                {
                    "name": "own",
                    "image": "busybox",
                    "env": [{"name": "TF_GRPC_DEFAULT_OPTIONS", "value": "grpc.keepalive_time_ms=1"}],
                },
                {
                    "name": "from-secret",
                    "image": "busybox",
                    "env": [
                        {
                            "name": "TF_GRPC_DEFAULT_OPTIONS",
                            "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                        }
                    ],
                },
                {"name": "from-map", "image": "busybox", "envFrom": [{"configMapRef": {"name": "grpc"}}]},
            ],
        },
    }
    pod = build_pod(parse_job(job("mnist").template(template).obj()), Member.worker(0), 0)
    fetch, tensorflow, own, from_secret, from_map = pod["spec"]["initContainers"] + pod["spec"]["containers"]
    for container in (fetch, tensorflow):
        assert container_env(container)["TF_GRPC_DEFAULT_OPTIONS"] == "grpc.initial_reconnect_backoff_ms=50"
    assert [e for e in own["env"] if e["name"] == "TF_GRPC_DEFAULT_OPTIONS"] == [
        {"name": "TF_GRPC_DEFAULT_OPTIONS", "value": "grpc.keepalive_time_ms=1"}
    ]
    assert [e for e in from_secret["env"] if e["name"] == "TF_GRPC_DEFAULT_OPTIONS"] == [
        {"name": "TF_GRPC_DEFAULT_OPTIONS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    ]
    # An env entry would override what the ConfigMap may set.
    assert "TF_GRPC_DEFAULT_OPTIONS" not in {e["name"] for e in from_map["env"]}


def test_port_goes_to_first_container_without_one_named_tensorflow() -> None:
    template = {"spec": {"containers": [{"name": "train", "image": "x"}, {"name": "side", "image": "y"}]}}
    pod = build_pod(parse_job(job().template(template).obj()), Member.worker(0), 0)
    assert pod["spec"]["containers"][0]["ports"][0]["name"] == "tfmw"
    assert "ports" not in pod["spec"]["containers"][1]


def test_builders_do_not_modify_the_job_template() -> None:
    obj = job().obj()
    before = json.dumps(obj, sort_keys=True)
    build_pod(parse_job(obj), Member.worker(0), 0)
    assert json.dumps(obj, sort_keys=True) == before


def test_every_container_reports_its_log_tail_on_failure_unless_it_says_otherwise() -> None:
    template = {
        "spec": {
            "initContainers": [{"name": "init", "image": "x"}],
            "containers": [
                {"name": "tensorflow", "image": "t"},
                {"name": "side", "image": "s", "terminationMessagePolicy": "File"},
            ],
        }
    }
    pod = build_pod(parse_job(job().template(template).obj()), Member.worker(0), 0)
    policies = [
        c.get("terminationMessagePolicy") for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]
    ]
    assert policies == ["FallbackToLogsOnError", "FallbackToLogsOnError", "File"]


def test_an_event_names_the_job_and_is_cut_to_the_api_limit() -> None:
    j = job("mnist", namespace="team-a").obj()
    event = build_event(j, "Warning", "GangRestart", "x" * 5000, at(3), "abc123")
    assert event == {
        "metadata": {"name": "mnist.abc123", "namespace": "team-a"},
        "involvedObject": {
            "apiVersion": "tfmw.dev/v1alpha1",
            "kind": "TFMultiWorkerJob",
            "name": "mnist",
            "namespace": "team-a",
            "uid": "uid-mnist",
        },
        "type": "Warning",
        "reason": "GangRestart",
        "message": "x" * 1024,
        "firstTimestamp": "2026-01-01T12:00:03Z",
        "lastTimestamp": "2026-01-01T12:00:03Z",
        "count": 1,
        "source": {"component": "tfmw-operator"},
        "reportingComponent": "tfmw-operator",
    }


def test_priority_class_and_scheduler_of_the_template_reach_every_worker() -> None:
    spec = parse_job(job().queue("q").pod_spec(priorityClassName="high", schedulerName="my-scheduler").obj())
    for index in range(2):
        created = build_pod(spec, Member.worker(index), 0)["spec"]
        assert created["priorityClassName"] == "high" and created["schedulerName"] == "my-scheduler"


def test_tf_config_of_the_largest_job_the_crd_accepts_fits_one_environment_string() -> None:
    # 1,024 workers allow a 51-character name; a namespace may have 63 characters.
    name, namespace = "a" * 51, "n" * 63
    largest = parse_job(job(name, namespace=namespace).workers(1024).port(65535).obj())
    tf_config = build_tf_config(largest, Member.worker(1023))
    assert len("TF_CONFIG=") + len(tf_config) + 1 <= 131072  # Linux's MAX_ARG_STRLEN
    workers = json.loads(tf_config)["cluster"]["worker"]
    assert workers[1023] == f"{name}-worker-1023.{name}:65535"  # completed by the DNS search path


def test_tf_config_names_the_namespace_while_it_fits() -> None:
    small = parse_job(job("mnist", namespace="team-a").workers(2).obj())
    assert json.loads(build_tf_config(small, Member.worker(0)))["cluster"]["worker"] == [
        "mnist-worker-0.mnist.team-a.svc:2222",
        "mnist-worker-1.mnist.team-a.svc:2222",
    ]


def test_workers_mount_their_job_folder_inside_the_namespace_volume() -> None:
    """A namespace's claim exposes <root>/<namespace>: the subPath is the job's name alone."""
    spec = parse_job(job("mnist", namespace="team-a").obj())
    assert spec.directory == "team-a/mnist" and spec.sub_path == "mnist"
    mounts = build_pod(spec, Member.worker(0), 0)["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "tfmw-shared", "mountPath": "/shared", "subPath": "mnist"} in mounts


def test_folder_check_runs_first_in_the_operator_image_when_configured() -> None:
    template = {
        "spec": {
            "initContainers": [{"name": "fetch", "image": "x"}],
            "containers": [{"name": "tensorflow", "image": "my/own:1"}],
        }
    }
    obj = (
        job("mnist", namespace="team-a")
        .template(template)
        .spec(sharedVolume={"claimName": "data", "mountPath": "/ckpt"})
        .obj()
    )
    pod = build_pod(parse_job(obj, folder_check_image="tfmw-operator:9"), Member.worker(1), 0)
    check, fetch = pod["spec"]["initContainers"]
    assert fetch["name"] == "fetch"
    assert check["name"] == "tfmw-folder-check" and check["image"] == "tfmw-operator:9"
    assert check["command"] == ["python3", "-m", "tfmw_operator.folder_check", "--claim=data"]
    assert container_env(check) == {"TFMW_JOB_UID": "uid-mnist", "TFMW_SHARED_DIR": "/ckpt"}
    assert check["volumeMounts"] == [
        {"name": "tfmw-shared", "mountPath": "/ckpt", "subPath": "mnist", "readOnly": True}
    ]
    assert check["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert check["securityContext"]["allowPrivilegeEscalation"] is False
    assert check["securityContext"]["runAsNonRoot"] is True and check["securityContext"]["runAsUser"] == 1000
    assert check["resources"]["limits"]["memory"]
    assert check["imagePullPolicy"] == "IfNotPresent" and check["terminationMessagePolicy"] == "File"
    assert check["securityContext"]["readOnlyRootFilesystem"] is True
    assert check["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # Without an image (the operator run out of cluster) there is no check.
    plain = build_pod(parse_job(obj), Member.worker(1), 0)
    assert [c["name"] for c in plain["spec"]["initContainers"]] == ["fetch"]
    assert "initContainers" not in build_pod(parse_job(job().obj()), Member.worker(0), 0)["spec"]


def test_a_supervised_pod_runs_the_supervisor_from_the_jobs_control_folder_with_no_init_container() -> None:
    manifest = job().commanded().spec(sharedVolume={"claimName": "data", "mountPath": "/ckpt/"}).obj()
    spec = parse_job(manifest, supervisor_image=SUPERVISOR_IMAGE)
    built = build_pod(spec, Member.worker(0), 0)
    main = built["spec"]["containers"][0]
    assert main["command"][:4] == ["python3", "-I", "-S", "-c"]
    assert "sys.argv[0]='/ckpt/.tfmw/supervisor.py'" in main["command"][4]
    assert "initContainers" not in built["spec"]  # nothing to place: the operator wrote the file
    assert [v["name"] for v in built["spec"]["volumes"]] == ["tfmw-shared"]
    # The first pods of a claim still get the folder check, and only it.
    checked = parse_job(manifest, folder_check_image=SUPERVISOR_IMAGE, supervisor_image=SUPERVISOR_IMAGE)
    (check,) = build_pod(checked, Member.worker(0), 0)["spec"]["initContainers"]
    assert check["command"] == ["python3", "-m", "tfmw_operator.folder_check", "--claim=data"]


def test_workers_get_no_api_token_unless_their_template_asks_for_one() -> None:
    assert (
        build_pod(parse_job(job().obj()), Member.worker(0), 0)["spec"]["automountServiceAccountToken"]
        is False
    )
    asked = parse_job(job().pod_spec(automountServiceAccountToken=True).obj())
    assert build_pod(asked, Member.worker(1), 0)["spec"]["automountServiceAccountToken"] is True
    # A named service account is there to be used: its own automount setting decides.
    named = parse_job(job().pod_spec(serviceAccountName="trainer").obj())
    assert "automountServiceAccountToken" not in build_pod(named, Member.worker(0), 0)["spec"]


def _required_terms(pod_obj: dict[str, Any]) -> list[dict[str, Any]]:
    node_affinity = pod_obj["spec"]["affinity"]["nodeAffinity"]
    return node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # type: ignore[no-any-return]


def test_nodes_kept_out_are_added_to_every_term_of_the_templates_own_affinity() -> None:
    """Terms are ORed: the exclusion must hold in each, beside what each already requires."""
    own = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big-1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }
    j = job().pod_spec(affinity=own).obj()
    built = build_pod(dataclasses.replace(parse_job(j), avoid_nodes=("n2", "n1")), Member.worker(0), 1)
    keep_off = {"key": "metadata.name", "operator": "NotIn", "values": ["n1", "n2"]}
    assert _required_terms(built) == [
        {
            "matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}],
            "matchFields": [keep_off],
        },
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big-1"]}, keep_off]},
    ]
    affinity = built["spec"]["affinity"]
    assert affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 1, "preference": {}}
    ]
    assert affinity["podAntiAffinity"] == own["podAntiAffinity"]
    assert j["spec"]["template"]["spec"]["affinity"] == own  # the template is not changed


@pytest.mark.parametrize("affinity", [None, {}, {"nodeAffinity": None}, {"nodeAffinity": {}}])
def test_nodes_kept_out_make_an_affinity_where_the_template_has_none(affinity: object) -> None:
    j = job().pod_spec(affinity=affinity).obj()
    built = build_pod(dataclasses.replace(parse_job(j), avoid_nodes=("n1",)), Member.worker(0), 0)
    assert _required_terms(built) == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
    ]


def test_no_node_kept_out_leaves_the_affinity_as_written() -> None:
    assert "affinity" not in build_pod(parse_job(job().obj()), Member.worker(0), 0)["spec"]


def test_an_event_about_a_tfjob_names_it_as_a_tfjob() -> None:
    j = job("mnist", namespace="team-a").obj()
    j.update(apiVersion="kubeflow.org/v1", kind="TFJob")
    involved = build_event(j, "Normal", "Created", "m", at(3), "x")["involvedObject"]
    assert (involved["apiVersion"], involved["kind"]) == ("kubeflow.org/v1", "TFJob")
    del j["apiVersion"], j["kind"]
    involved = build_event(j, "Normal", "Created", "m", at(3), "x")["involvedObject"]
    assert (involved["apiVersion"], involved["kind"]) == ("tfmw.dev/v1alpha1", "TFMultiWorkerJob")


def test_a_pod_group_name_keeps_40_characters_of_the_jobs_name() -> None:
    assert pod_group_name_prefix("a" * 50, "0123456789") == f"tfmw-{'a' * 40}-01234567-"


def supervised_main(manifest: dict[str, Any]) -> dict[str, Any]:
    """The main container of worker 0, built by an operator that knows its own image."""
    built = build_pod(parse_job(manifest, supervisor_image=SUPERVISOR_IMAGE), Member.worker(0), 0)
    main: dict[str, Any] = built["spec"]["containers"][0]
    return main


@pytest.mark.parametrize(("grace", "given"), [(0, "0"), (90, "90"), (None, "30"), (-1, "30"), ("60", "30")])
def test_the_supervisor_stops_the_command_within_the_pod_s_grace_period(grace: object, given: str) -> None:
    manifest = job().commanded("--epochs=1").obj()
    if grace is not None:
        manifest["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    command = supervised_main(manifest)["command"]
    assert command[-7:] == ["--grace-seconds", given, "--", *TRAINER_COMMAND, "--epochs=1"]


def test_a_warm_start_reaches_the_supervisor_of_every_supervised_pod() -> None:
    warm = parse_job(
        job().commanded().run_policy(warmStart={"preload": ["tensorflow", "numpy"]}).obj(),
        supervisor_image=SUPERVISOR_IMAGE,
    )
    command = build_pod(warm, Member.worker(1), 0)["spec"]["containers"][0]["command"]
    options = command[: command.index("--")]
    assert options[-2:] == ["--warm-start", "tensorflow,numpy"]
    cold = parse_job(job().commanded().obj(), supervisor_image=SUPERVISOR_IMAGE)
    assert "--warm-start" not in build_pod(cold, Member.worker(1), 0)["spec"]["containers"][0]["command"]


def test_a_command_without_args_runs_under_the_supervisor() -> None:
    main = supervised_main(job().container(command=["train"]).obj())
    assert main["command"][-2:] == ["--", "train"] and "args" not in main


def test_every_job_that_parses_builds_its_pods_and_service_whatever_its_template_holds() -> None:
    """A template's fields the operator does not read are passed on for the API server to judge;
    those it reads (env, ports, command, volumes...) must not crash the builders."""
    rich = (
        job("rich")
        .chief()
        .parameter_servers(1)
        .evaluator()
        .commanded("--epochs", "3")
        .container(
            env=[{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
            ports=[{"name": "tfmw", "containerPort": 2222}],
            volumeMounts=[{"name": "data", "mountPath": "/data"}],
            securityContext={"runAsUser": 1000},
        )
        .pod_spec(volumes=[{"name": "data", "emptyDir": {}}], securityContext={"runAsNonRoot": True})
        .obj()
    )
    crashed: list[str] = []
    for path, changed in every_malformed(rich):
        try:
            spec = parse_job(changed, folder_check_image="check:1", supervisor_image=SUPERVISOR_IMAGE)
        except SpecError:
            continue
        try:
            build_service(spec)
            for member in spec.members:
                build_pod(spec, member, 0)
        except Exception as error:  # every crash is listed, not only the first
            crashed.append(f"{'.'.join(map(str, path))}: {type(error).__name__}: {error}")
    assert not crashed, "\n".join(sorted(set(crashed)))
