"""deploy/admission: who creates or changes a job must be allowed to create its pods.

Against the real API server, as real ServiceAccounts (their own tokens, not impersonation):
RBAC alone lets a ServiceAccount allowed TFMultiWorkerJobs but not Pods create a job whose
pods are hostPID with the host's / mounted; the ValidatingAdmissionPolicy refuses it with
a message naming the reason and the fix. The operator's status writes, a subresource, are
not matched, and the garbage collector's finalizer removal (a metadata-only update by a
user that may not create pods) goes through.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import REPO, ClusterClient, SimulatedKubelet, applied, kubectl, wait_for
from operator_process import OperatorProcess
from wrappers import job, simulated_job

Json = dict[str, Any]
POLICY = REPO / "deploy" / "admission" / "policy.yaml"
JOBS = "tfmwjobs.tfmw.dev"


def hostile_job(name: str) -> Json:
    """What a pod of its own would need pod rights for: the host's PIDs and its /."""
    return (
        job(name)
        .pod_spec(hostPID=True, volumes=[{"name": "host", "hostPath": {"path": "/"}}])
        .container(volumeMounts=[{"name": "host", "mountPath": "/host"}])
        .manifest()
    )


def role(namespace: str, name: str, rules: list[Json]) -> list[Json]:
    """A ServiceAccount `name`, allowed exactly `rules` in `namespace`."""
    meta = {"name": name, "namespace": namespace}
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [subject],
        },
    ]


JOB_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
JOBS_ONLY = [{"apiGroups": ["tfmw.dev"], "resources": ["tfmwjobs"], "verbs": JOB_VERBS}]
JOBS_AND_PODS = [*JOBS_ONLY, {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]}]
STATUS_ONLY = [
    {"apiGroups": ["tfmw.dev"], "resources": ["tfmwjobs"], "verbs": ["get"]},
    {
        "apiGroups": ["tfmw.dev"],
        "resources": ["tfmwjobs/status"],
        "verbs": ["get", "patch"],
    },  # kubectl reads first
]


def kubeconfig_for(namespace: str, account: str, folder: Path) -> str:
    """A kubeconfig holding a real token of the ServiceAccount."""
    token = kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "local", "user": account}}],
        "current-context": account,
    }
    path = folder / f"{namespace}-{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


class Tenant:
    def __init__(self, namespace: str, account: str, kubeconfig: str) -> None:
        self.namespace = namespace
        self.username = f"system:serviceaccount:{namespace}:{account}"
        self.kubeconfig = kubeconfig

    def kubectl(self, *args: str, input: str | None = None) -> Any:
        return kubectl("--kubeconfig", self.kubeconfig, "-n", self.namespace, *args, input=input, check=False)

    def create(self, manifest: Json) -> Any:
        return self.kubectl("create", "-f", "-", input=yaml.safe_dump(manifest))

    def merge_patch(self, name: str, patch: str, *extra: str) -> Any:
        return self.kubectl("patch", JOBS, name, "--type=merge", "-p", patch, *extra)


def make_tenants(
    kube: ClusterClient, prefix: str, accounts: dict[str, list[Json]], folder: Path
) -> dict[str, Tenant]:
    """A namespace of their own, and in it one ServiceAccount per entry, allowed exactly its rules."""
    namespace = kube.new_namespace(prefix)
    objects = [obj for account, rules in accounts.items() for obj in role(namespace, account, rules)]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    return {name: Tenant(namespace, name, kubeconfig_for(namespace, name, folder)) for name in accounts}


def refused(tenant: Tenant) -> bool:
    """Whether the policy refuses the tenant's job (and not some other check)."""
    result = tenant.create(hostile_job("probe"))
    if result.returncode == 0:
        tenant.kubectl("delete", JOBS, "probe")
    return "tfmw-job-creator-may-create-pods" in result.stderr


@pytest.fixture(scope="module")
def policy(kube: ClusterClient) -> Iterator[bool]:
    """The policy as deploy/ installs it (True: in force); the cluster as it was afterwards."""
    with applied(POLICY):
        yield True


@pytest.fixture(scope="module")
def tenants(
    kube: ClusterClient, policy: bool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Tenant]]:
    accounts = {"jobs-only": JOBS_ONLY, "jobs-and-pods": JOBS_AND_PODS, "status-only": STATUS_ONLY}
    made = make_tenants(kube, "vap", accounts, tmp_path_factory.mktemp("tenants"))
    namespace = made["jobs-only"].namespace
    # RBAC alone would let jobs-only create jobs, and not pods: the policy is all that stands.
    assert made["jobs-only"].kubectl("auth", "can-i", "create", JOBS).stdout.strip() == "yes"
    assert made["jobs-only"].kubectl("auth", "can-i", "create", "pods").stdout.strip() == "no"
    if policy:  # a new policy takes a moment to reach admission: wait until it bites
        wait_for(
            "the admission policy in force", lambda: refused(made["jobs-only"]), timeout=30, interval=0.5
        )
    yield made
    kube.delete_namespace(namespace)


def test_a_service_account_allowed_jobs_but_not_pods_is_refused_with_the_reason_and_the_fix(
    tenants: dict[str, Tenant],
) -> None:
    tenant = tenants["jobs-only"]
    result = tenant.create(hostile_job("hostile"))
    assert result.returncode != 0, "a job with a hostPID pod was admitted for a user who may not create pods"
    message = result.stderr
    assert "ValidatingAdmissionPolicy 'tfmw-job-creator-may-create-pods'" in message, message
    assert f"{tenant.username} may not create pods in namespace {tenant.namespace}" in message, message
    assert 'Fix: grant that user "create" on "pods"' in message, message
    assert tenant.kubectl("get", JOBS, "hostile").returncode != 0  # nothing was stored
    # Not the pod's shape: a plain job is refused the same way, for the same reason.
    plain = tenant.create(job("plain").manifest())
    assert plain.returncode != 0 and "may not create pods" in plain.stderr, plain.stderr


def test_a_service_account_allowed_jobs_and_pods_is_admitted(tenants: dict[str, Tenant]) -> None:
    tenant = tenants["jobs-and-pods"]
    result = tenant.create(hostile_job("allowed"))
    assert result.returncode == 0, result.stderr
    changed = tenant.merge_patch("allowed", '{"spec":{"runPolicy":{"backoffLimit":5}}}')
    assert changed.returncode == 0, changed.stderr


def test_changing_a_job_needs_pod_rights_too_but_removing_a_finalizer_does_not(
    kube: ClusterClient, tenants: dict[str, Tenant]
) -> None:
    """A change can start pods (suspend: false, a higher backoffLimit, a queue label): it
    is checked like a creation. One that leaves spec, labels and annotations as they were
    cannot, and is let through: the garbage collector, which may not create pods, removes
    finalizers that way."""
    tenant, owner = tenants["jobs-only"], tenants["jobs-and-pods"]
    manifest = job("suspended").run_policy(suspend=True).manifest()
    manifest["metadata"]["finalizers"] = ["example.com/hold"]
    assert owner.create(manifest).returncode == 0
    try:
        for patch in (
            '{"spec":{"runPolicy":{"suspend":false}}}',
            '{"spec":{"runPolicy":{"backoffLimit":100}}}',
            '{"metadata":{"labels":{"kueue.x-k8s.io/queue-name":"other"}}}',
            '{"metadata":{"annotations":{"note":"x"}}}',
        ):
            result = tenant.merge_patch("suspended", patch)
            assert result.returncode != 0 and "may not create pods" in result.stderr, (patch, result.stderr)
        unchanged = tenant.merge_patch("suspended", '{"spec":{"runPolicy":{"suspend":true}}}')
        assert unchanged.returncode == 0, unchanged.stderr
        released = tenant.merge_patch("suspended", '{"metadata":{"finalizers":null}}')
        assert released.returncode == 0, released.stderr
    finally:  # as admin, whatever happened: a finalizer left behind would hold the namespace
        kube.patch_job(tenant.namespace, "suspended", {"metadata": {"finalizers": None}})


def test_the_garbage_collector_still_finishes_a_foreground_deletion(
    kube: ClusterClient, tenants: dict[str, Tenant]
) -> None:
    owner = tenants["jobs-and-pods"]
    assert owner.create(job("foreground").manifest()).returncode == 0
    deleted = owner.kubectl("delete", JOBS, "foreground", "--cascade=foreground", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    wait_for(
        "the job gone after a foreground deletion",
        lambda: kube.get_job(owner.namespace, "foreground") is None,
        timeout=60,
        interval=0.5,
    )


def test_status_writes_are_not_matched(kube: ClusterClient, tenants: dict[str, Tenant]) -> None:
    """A writer of tfmwjobs/status alone, with no pod rights, still writes it."""
    owner, writer = tenants["jobs-and-pods"], tenants["status-only"]
    assert owner.create(job("status").manifest()).returncode == 0
    result = writer.merge_patch("status", '{"status":{"phase":"Pending"}}', "--subresource=status")
    assert result.returncode == 0, result.stderr
    assert kube.status(owner.namespace, "status").get("phase") == "Pending"


def test_the_operator_with_its_service_account_runs_a_job_under_the_policy(
    kube: ClusterClient,
    kubelet: SimulatedKubelet,
    tenants: dict[str, Tenant],
    tmp_path: Path,
    operator_process: Callable[..., OperatorProcess],
) -> None:
    """deploy/'s operator, with its own token: it creates pods, and patches the status."""
    owner = tenants["jobs-and-pods"]
    namespace = owner.namespace
    operator = kubeconfig_for("tfmw-system", "tfmw-operator", tmp_path)
    operator_process(namespace, operator)
    assert owner.create(simulated_job("trained").manifest()).returncode == 0
    kube.wait_pods(namespace, "trained", 2, timeout=60)
    kubelet.run_all(namespace, "trained")
    status = kube.wait_phase(namespace, "trained", "Running", timeout=30)
    assert status.get("attempt") == 0


# The TFJob policy (deploy/overlays/tfjob/component): the same rule, and Kueue's TFJob
# integration let through for what it does. Kueue admits a TFJob by setting its spec's
# runPolicy.suspend false and merging its pod sets' node selectors (tolerations, scheduling
# gates, labels, annotations), and evicts it by setting it true and restoring them, as its own
# ServiceAccount, whose role may not create pods but may update workloads/status.
TFJOB_POLICY = REPO / "deploy" / "overlays" / "tfjob" / "component" / "tfjob-admission-policy.yaml"
TFJOBS = "tfjobs.kubeflow.org"
TFJOB_VERBS = [{"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": JOB_VERBS}]
TFJOBS_AND_PODS = [*TFJOB_VERBS, {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
# Kueue v0.17.0's manager role, as far as it touches these (config/components/rbac/role.yaml).
KUEUE_LIKE = [
    {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": JOB_VERBS},
    {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs/status"], "verbs": ["get", "update", "patch"]},
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["delete", "get", "list", "patch", "update", "watch"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "update", "patch"]},
]


def tfjob(name: str, suspend: bool = True, managed_by: str | None = None) -> Json:
    container = {"name": "tensorflow", "image": "tfmw-trainer:dev", "command": ["true"]}
    run_policy: Json = (
        {"suspend": suspend} if managed_by is None else {"suspend": suspend, "managedBy": managed_by}
    )
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "runPolicy": run_policy,
            "tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}},
        },
    }


def scheduling(suspend: bool, node_selector: Json | None) -> str:
    """A merge patch as Kueue's admission (suspend false) or eviction (true) makes it."""
    return json.dumps(
        {
            "spec": {
                "runPolicy": {"suspend": suspend},
                "tfReplicaSpecs": {"Worker": {"template": {"spec": {"nodeSelector": node_selector}}}},
            }
        }
    )


@pytest.fixture(scope="module")
def tfjob_tenants(
    kube: ClusterClient, tfjob_crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Tenant]]:
    accounts = {"tfjobs-only": TFJOB_VERBS, "kueue": KUEUE_LIKE, "tfjobs-and-pods": TFJOBS_AND_PODS}
    made = make_tenants(kube, "vap-tfjob", accounts, tmp_path_factory.mktemp("tfjob-tenants"))
    namespace = made["kueue"].namespace
    assert made["kueue"].kubectl("auth", "can-i", "create", "pods").stdout.strip() == "no"

    def bites() -> bool:
        result = made["tfjobs-only"].create(tfjob("probe"))
        if result.returncode == 0:
            kubectl("-n", namespace, "delete", TFJOBS, "probe")
        return "tfmw-tfjob-creator-may-create-pods" in result.stderr

    def holds() -> bool:
        # A server-side dry run passes admission and stores nothing.
        resize = '{"spec":{"tfReplicaSpecs":{"Worker":{"replicas":2}}}}'
        result = kubectl(
            "-n",
            namespace,
            "patch",
            TFJOBS,
            "probe-sets",
            "--dry-run=server",
            "--type=merge",
            "-p",
            resize,
            check=False,
        )
        return "tfmw-tfjob-spec-held" in result.stderr

    with applied(TFJOB_POLICY):
        wait_for("the TFJob admission policy in force", bites, timeout=30, interval=0.5)
        admin_creates(namespace, tfjob("probe-sets", suspend=False))
        wait_for("the TFJob sets policy in force", holds, timeout=30, interval=0.5)
        yield made
        kube.delete_namespace(namespace)


def admin_creates(namespace: str, manifest: Json) -> None:
    assert kubectl("-n", namespace, "create", "-f", "-", input=yaml.safe_dump(manifest)).returncode == 0


def stored_spec(namespace: str, name: str) -> Json:
    spec: Json = yaml.safe_load(kubectl("-n", namespace, "get", TFJOBS, name, "-o", "yaml").stdout)["spec"]
    return spec


def test_a_tfjob_from_one_who_may_not_create_pods_is_refused_with_the_fix(
    tfjob_tenants: dict[str, Tenant],
) -> None:
    for account in ("tfjobs-only", "kueue"):  # Kueue creates no TFJob: refused too
        tenant = tfjob_tenants[account]
        result = tenant.create(tfjob("refused"))
        assert result.returncode != 0
        assert "ValidatingAdmissionPolicy 'tfmw-tfjob-creator-may-create-pods'" in result.stderr, (
            result.stderr
        )
        assert f"{tenant.username} may not create pods in namespace {tenant.namespace}" in result.stderr
        assert "Kueue may only suspend or admit a job" in result.stderr


def test_kueue_admits_and_evicts_a_queued_tfjob_and_a_tenant_may_not(
    tfjob_tenants: dict[str, Tenant],
) -> None:
    """What Kueue's TFJob integration does, as a ServiceAccount with Kueue's rights: admit
    (suspend false, a node selector set), then evict (suspend true, the selector restored).
    Before the policy let that through, a queued TFJob stayed suspended for ever."""
    kueue, tenant = tfjob_tenants["kueue"], tfjob_tenants["tfjobs-only"]
    admin_creates(kueue.namespace, tfjob("queued"))
    admission = scheduling(False, {"kubernetes.io/os": "linux"})
    refused = tenant.kubectl("patch", TFJOBS, "queued", "--type=merge", "-p", admission)
    assert refused.returncode != 0 and "may not create pods" in refused.stderr, refused.stderr
    admitted = kueue.kubectl("patch", TFJOBS, "queued", "--type=merge", "-p", admission)
    assert admitted.returncode == 0, admitted.stderr
    spec = stored_spec(kueue.namespace, "queued")
    assert spec["runPolicy"]["suspend"] is False
    assert spec["tfReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] == {
        "kubernetes.io/os": "linux"
    }
    evicted = kueue.kubectl("patch", TFJOBS, "queued", "--type=merge", "-p", scheduling(True, None))
    assert evicted.returncode == 0, evicted.stderr
    assert stored_spec(kueue.namespace, "queued")["runPolicy"]["suspend"] is True


@pytest.mark.parametrize(
    "patch",
    [
        # what the pods run, while suspended
        {
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {
                        "template": {
                            "spec": {
                                "containers": [{"name": "tensorflow", "image": "evil:1", "command": ["sh"]}]
                            }
                        }
                    }
                }
            }
        },
        {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"hostPID": True}}}}}},
        {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"serviceAccountName": "admin"}}}}}},
        {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 5}}}},
        {
            "spec": {
                "tfReplicaSpecs": {
                    "PS": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "evil:1"}]}},
                    }
                }
            }
        },
        {"spec": {"runPolicy": {"backoffLimit": 100}}},
        {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}},
        # the scheduling fields of a job running, neither suspended before nor after
        {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}}},
    ],
    ids=[
        "image",
        "hostPID",
        "serviceAccount",
        "replicas",
        "a new replica type",
        "backoffLimit",
        "queue label",
        "running",
    ],
)
def test_kueues_right_changes_nothing_but_the_scheduling_of_a_suspended_job(
    tfjob_tenants: dict[str, Tenant], patch: Json
) -> None:
    kueue = tfjob_tenants["kueue"]
    name = f"held-{uuid.uuid4().hex[:6]}"
    running = "nodeSelector" in json.dumps(patch)
    admin_creates(kueue.namespace, tfjob(name, suspend=not running))
    result = kueue.kubectl("patch", TFJOBS, name, "--type=merge", "-p", json.dumps(patch))
    assert result.returncode != 0
    # A running job's sets are held by the second policy too; which of two refusals the API
    # server reports is its own choice.
    refusals = ["may not create pods", *([SPEC_HELD] if running else [])]
    assert any(refusal in result.stderr for refusal in refusals), result.stderr


# The second TFJob policy: a TFJob tfmw serves keeps its replica sets while it is not
# suspended, whoever changes it (here one who may create pods, so the first policy passes).
SPEC_HELD = "ValidatingAdmissionPolicy 'tfmw-tfjob-spec-held'"
NEW_WORKER = {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}}
NEW_IMAGE = {
    "spec": {
        "tfReplicaSpecs": {
            "Worker": {"template": {"spec": {"containers": [{"name": "tensorflow", "image": "other:2"}]}}}
        }
    }
}
NEW_PS = {
    "spec": {
        "tfReplicaSpecs": {
            "PS": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x:1"}]}},
            }
        }
    }
}


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        (NEW_WORKER, "spec.tfReplicaSpecs.Worker of TFJob"),
        (NEW_IMAGE, "spec.tfReplicaSpecs.Worker of TFJob"),
        (NEW_PS, "spec.tfReplicaSpecs.PS of TFJob"),
        ({"spec": {"successPolicy": "AllWorkers"}}, "spec.successPolicy of TFJob"),
        ({"spec": {"enableDynamicWorker": True}}, "spec.enableDynamicWorker of TFJob"),
    ],
    ids=["replicas", "image", "a new replica type", "successPolicy", "enableDynamicWorker"],
)
def test_a_tfjob_not_suspended_keeps_its_replica_sets_with_the_field_and_the_fix(
    tfjob_tenants: dict[str, Tenant], patch: Json, named: str
) -> None:
    owner = tfjob_tenants["tfjobs-and-pods"]
    name = f"held-{uuid.uuid4().hex[:6]}"
    admin_creates(owner.namespace, tfjob(name, suspend=False))
    before = stored_spec(owner.namespace, name)
    result = owner.kubectl("patch", TFJOBS, name, "--type=merge", "-p", json.dumps(patch))
    assert result.returncode != 0
    assert SPEC_HELD in result.stderr, result.stderr
    assert f"{named} {name} cannot change while it is not suspended" in result.stderr, result.stderr
    assert "Fix: set spec.runPolicy.suspend to true" in result.stderr
    assert stored_spec(owner.namespace, name) == before


def test_a_tfjob_not_suspended_may_change_its_run_policy_and_labels_and_a_suspended_one_its_sets(
    tfjob_tenants: dict[str, Tenant],
) -> None:
    owner = tfjob_tenants["tfjobs-and-pods"]
    name = f"free-{uuid.uuid4().hex[:6]}"
    admin_creates(owner.namespace, tfjob(name, suspend=False))

    def patched(patch: Json) -> None:
        result = owner.kubectl("patch", TFJOBS, name, "--type=merge", "-p", json.dumps(patch))
        assert result.returncode == 0, (patch, result.stderr)

    patched({"spec": {"runPolicy": {"backoffLimit": 7, "activeDeadlineSeconds": 600}}})
    patched({"metadata": {"labels": {"team": "vision"}, "annotations": {"note": "longer"}}})
    # Suspending and resizing in one change: the pods go, and the next attempt has 2 workers.
    patched({"spec": {"runPolicy": {"suspend": True}, "tfReplicaSpecs": {"Worker": {"replicas": 2}}}})
    patched(NEW_IMAGE)  # while suspended
    patched({"spec": {"runPolicy": {"suspend": False}}})
    spec = stored_spec(owner.namespace, name)
    assert spec["tfReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] == "other:2"
    assert spec["runPolicy"] == {"suspend": False, "backoffLimit": 7, "activeDeadlineSeconds": 600}


def test_a_tfjob_another_controller_serves_is_left_to_it(tfjob_tenants: dict[str, Tenant]) -> None:
    """managedBy naming a controller other than tfmw and Kubeflow's (whose jobs tfmw serves
    in `all` mode): its rules, not tfmw's (docs/tfjob.md)."""
    owner = tfjob_tenants["tfjobs-and-pods"]
    name = f"theirs-{uuid.uuid4().hex[:6]}"
    admin_creates(owner.namespace, tfjob(name, suspend=False, managed_by="example.com/other"))
    result = owner.kubectl("patch", TFJOBS, name, "--type=merge", "-p", json.dumps(NEW_WORKER))
    assert result.returncode == 0, result.stderr
    assert stored_spec(owner.namespace, name)["tfReplicaSpecs"]["Worker"]["replicas"] == 2


@pytest.mark.parametrize(
    ("before", "after", "suspend"),
    [
        (None, "example.com/other", False),  # handed away, to change its sets unheld after
        (None, "example.com/other", True),  # even while suspended (Kubeflow's webhook's rule)
        ("kubeflow.org/training-operator", None, False),
        ("example.com/other", "tfmw.dev/tfjob-controller", False),  # taken back, after
    ],
    ids=["unset to another", "suspended", "Kubeflow's to unset", "another to tfmw"],
)
def test_the_controller_a_tfjob_names_cannot_change(
    tfjob_tenants: dict[str, Tenant], before: str | None, after: str | None, suspend: bool
) -> None:
    owner = tfjob_tenants["tfjobs-and-pods"]
    name = f"handed-{uuid.uuid4().hex[:6]}"
    admin_creates(owner.namespace, tfjob(name, suspend=suspend, managed_by=before))
    patch = {"spec": {"runPolicy": {"managedBy": after}}}
    result = owner.kubectl("patch", TFJOBS, name, "--type=merge", "-p", json.dumps(patch))
    assert result.returncode != 0
    assert SPEC_HELD in result.stderr, result.stderr
    assert f"spec.runPolicy.managedBy of TFJob {name} is immutable" in result.stderr
    assert stored_spec(owner.namespace, name)["runPolicy"].get("managedBy") == before
