"""charts/tfmw against the kustomize base: with default values the chart renders the same
objects as `kubectl kustomize deploy/` (but the Namespace, which `helm install
--create-namespace` makes), so the two ways to install cannot drift. Rendered by the Helm
and kubectl of hack/bin (helm template, kubectl kustomize): no cluster."""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from unit.deploy.test_kustomize import REPO, documents, kube_version, local_registry, render, version
from unit.docs.blocks import all_blocks, doc_files

HELM = REPO / "hack" / "bin" / "helm"
CHART = REPO / "charts" / "tfmw"
Json = dict[str, Any]
Key = tuple[str, str, str, str]


def helm_template(*options: str) -> list[Json]:
    """The objects `helm template` makes with these options."""
    return documents(
        str(HELM),
        "template",
        "tfmw",
        str(CHART),
        "--namespace",
        "tfmw-system",
        "--include-crds",
        "--kube-version",
        kube_version(),
        *options,
    )


def by_key(docs: list[Json]) -> dict[Key, Json]:
    keyed = {
        (d["apiVersion"], d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
    }
    assert len(keyed) == len(docs), "two objects of one name"
    return keyed


def test_default_values_render_the_kustomize_base_object_by_object() -> None:
    base = {k: v for k, v in by_key(render("deploy")).items() if k[1] != "Namespace"}
    chart = by_key(helm_template())
    assert sorted(chart) == sorted(base)
    for key, wanted in base.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/base differ"


def test_the_namespace_is_helms_to_make() -> None:
    (namespace,) = [d for d in render("deploy") if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "tfmw-system"
    assert not [d for d in helm_template() if d["kind"] == "Namespace"]


def test_the_charts_crd_is_the_crd() -> None:
    assert filecmp.cmp(
        CHART / "crds" / "tfmwjobs.tfmw.dev.yaml", REPO / "crds" / "tfmwjobs.tfmw.dev.yaml", shallow=False
    )


def test_the_chart_is_pyprojects_version_from_the_local_registry() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["registry"] == local_registry()


def operator_container(docs: list[Json]) -> Json:
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "tfmw-operator"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_image_replicas_and_resources_come_from_the_values() -> None:
    docs = helm_template(
        "--set", "image.registry=registry.example.com/ml", "--set", "image.tag=1.2.3", "--set", "replicas=3",
        "--set", "resources.limits.memory=1Gi",
    )  # fmt: skip
    container = operator_container(docs)
    assert container["image"] == "registry.example.com/ml/tfmw-operator:1.2.3"
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3


def test_the_shared_claim_is_the_rwx_overlays_when_the_chart_makes_it() -> None:
    (wanted,) = [d for d in render("deploy/overlays/rwx") if d["kind"] == "PersistentVolumeClaim"]
    docs = helm_template("--set", "sharedClaim.create=true", "--set", "sharedClaim.storageClassName=rwx")
    (claim,) = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    # ... and Helm keeps it (an uninstall, create: false, a new name): it holds every
    # namespace's checkpoints and logs, which a Delete reclaim policy would take with it.
    assert claim["metadata"].pop("annotations") == {"helm.sh/resource-policy": "keep"}
    assert claim == wanted


def test_tensorboard_is_the_kustomize_components_with_the_released_trainer_image() -> None:
    wanted = by_key(render("deploy/tensorboard"))  # the component on its own
    docs = by_key(helm_template("--set", "tensorboard.enabled=true"))
    for key, obj in wanted.items():
        if obj["kind"] == "Deployment":
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            assert container["image"] == "tfmw-trainer:dev"
            container["image"] = f"{local_registry()}/tfmw-trainer:{version()}"
        assert docs[key] == obj, key


def test_metrics_off_means_no_port_no_service() -> None:
    docs = helm_template("--set", "metrics.enabled=false")
    assert not [d for d in docs if d["kind"] == "Service"]
    container = operator_container(docs)
    assert "--metrics-port=0" in container["args"]
    assert [p["name"] for p in container["ports"]] == ["health"]


def operator_cluster_role(docs: list[Json]) -> Json:
    (role,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tfmw-operator"]
    return role


def test_kueue_off_drops_the_workload_rights_only() -> None:
    def rules(docs: list[Json]) -> list[Json]:
        return list(operator_cluster_role(docs)["rules"])

    on, off = rules(helm_template()), rules(helm_template("--set", "kueue.enabled=false"))
    assert [r for r in on if r not in off] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "delete"]}
    ]


def test_the_admission_policy_can_be_turned_off_or_to_warn() -> None:
    off = helm_template("--set", "admissionPolicy.enabled=false")
    assert not [d for d in off if d["apiVersion"].startswith("admissionregistration")]
    warn = helm_template("--set", "admissionPolicy.validationActions={Warn,Audit}")
    (binding,) = [d for d in warn if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]


def test_helm_lint_is_clean() -> None:
    done = subprocess.run(
        [str(HELM), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


def test_watch_namespaces_render_the_namespaced_overlay_object_by_object() -> None:
    overlay = {k: v for k, v in by_key(render("deploy/overlays/namespaced")).items() if k[1] != "Namespace"}
    chart = by_key(helm_template("--set", "watchNamespaces={default}"))
    assert sorted(chart) == sorted(overlay)
    for key, wanted in overlay.items():
        assert chart[key] == wanted, f"{key}: the chart and deploy/overlays/namespaced differ"


def test_each_namespace_served_gets_a_role_and_nothing_cluster_wide_touches_pods() -> None:
    docs = helm_template("--set", "watchNamespaces={team-a,team-b}")
    cluster_role = operator_cluster_role(docs)
    assert {r for rule in cluster_role["rules"] for r in rule["resources"]} == {
        "customresourcedefinitions",
        "namespaces",
    }
    assert {v for rule in cluster_role["rules"] for v in rule["verbs"]} == {"list", "watch"}
    roles = {
        d["metadata"]["namespace"]: d
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"] == "tfmw-operator"
    }
    bindings = {
        d["metadata"]["namespace"]: d
        for d in docs
        if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "tfmw-operator"
    }
    assert set(roles) == set(bindings) == {"team-a", "team-b"}
    default_role = operator_cluster_role(helm_template())
    for namespace in ("team-a", "team-b"):
        assert roles[namespace]["rules"] + cluster_role["rules"] == default_role["rules"]
        assert bindings[namespace]["subjects"] == [
            {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
        ]
    assert [a for a in operator_container(docs)["args"] if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    # Every namespace: no --namespace, and no Role of ours but the Lease's and the version's
    # (the operator patches one ConfigMap, which every user may `get`).
    default = helm_template()
    assert not [a for a in operator_container(default)["args"] if a.startswith("--namespace")]
    names = sorted(d["metadata"]["name"] for d in default if d["kind"] == "Role")
    assert names == ["tfmw-operator-leader", "tfmw-operator-version", "tfmw-version-reader"]


def test_kueue_off_drops_the_workload_rights_from_each_namespaces_role() -> None:
    docs = helm_template("--set", "watchNamespaces={team-a}", "--set", "kueue.enabled=false")
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "tfmw-operator"]
    assert "kueue.x-k8s.io" not in {g for rule in role["rules"] for g in rule["apiGroups"]}


def helm_says(*options: str, command: str = "template") -> tuple[int, str]:
    """What `helm template` (or `helm lint --strict`) returns and says with these options."""
    if command == "template":
        args = [
            "template",
            "tfmw",
            str(CHART),
            "--namespace",
            "tfmw-system",
            "--kube-version",
            kube_version(),
        ]
    else:
        args = ["lint", "--strict", str(CHART), "--namespace", "tfmw-system"]
    done = subprocess.run(
        [str(HELM), *args, *options], capture_output=True, text=True, timeout=60, check=False
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def refusal(*options: str) -> str:
    """What `helm template` says as it refuses these options (as `helm install` would)."""
    code, said = helm_says(*options)
    assert code != 0, f"helm template {' '.join(options)} was accepted"
    return said


# A value, and what the refusal says: the value's path (the schema's /a/b, or a.b from the
# templates), and why where the templates say it.
BAD_VALUES = [
    ("tfjob.serve=bogus", "'/tfjob/serve': value must be one of 'off', 'managedBy', 'all'"),
    ("tfjob.serve=false", "'/tfjob/serve'"),  # a bare `off` in a values file is YAML's false
    ("tfjob.kubeflowNamespace=Kubeflow", "'/tfjob/kubeflowNamespace'"),
    ("tfjob.enable=true", "'/tfjob': additional properties 'enable' not allowed"),
    ("metrics.port=8081", "metrics.port: 8081 is the operator's health port"),
    ("metrics.port=80", "'/metrics/port': minimum"),
    ("metrics.port=65536", "'/metrics/port': maximum"),
    ("metrics.port=http", "'/metrics/port': got string, want integer"),
    ("replicas=two", "'/replicas': got string, want integer"),
    ("replicas=0", "'/replicas': minimum"),
    ("replica=3", "additional properties 'replica' not allowed"),
    ("podDisruptionBudget.minAvailable=2", "podDisruptionBudget.minAvailable: 2 of 2 replicas"),
    ("podDisruptionBudget.minAvailable=0", "'/podDisruptionBudget/minAvailable': minimum"),
    ("admissionPolicy.validationActions={Bogus}", "'/admissionPolicy/validationActions/0'"),
    ("admissionPolicy.validationActions={Deny,Warn}", "admissionPolicy.validationActions: Deny and Warn"),
    ("admissionPolicy.validationActions=null", "'/admissionPolicy': missing property 'validationActions'"),
    ("watchNamespaces={Team-A}", "'/watchNamespaces/0': 'Team-A' does not match pattern"),
    ("watchNamespaces={team-*}", "'/watchNamespaces/0': 'team-*' does not match pattern"),
    ("watchNamespaces={team_a}", "'/watchNamespaces/0'"),
    (f"watchNamespaces={{{'a' * 64}}}", "'/watchNamespaces/0': maxLength"),
    ("watchNamespaces={a,b,a}", "'/watchNamespaces': items at 0 and 2 are equal"),
    ("watchNamespaces=team-a", "'/watchNamespaces': got string, want array"),
    ("watchNamespaces={tfmw-system}", 'watchNamespaces: "tfmw-system" is the release\'s namespace'),
    ("image.pullPolicy=Sometimes", "'/image/pullPolicy'"),
    ("image.registry=https://registry", "'/image/registry'"),
    ("image.tag=1.0/../x", "'/image/tag'"),
    ("image.tag=2", "'/image/tag': got number, want string"),
    ("imagePullSecrets={Reg_Cred}", "'/imagePullSecrets/0'"),
    ("imagePullSecrets=regcred", "'/imagePullSecrets': got string, want array"),
    ("sharedClaim.name=Shared_Claim", "'/sharedClaim/name'"),
    ("sharedClaim.size=lots", "'/sharedClaim/size'"),
    ("sharedClaim.create=yes", "'/sharedClaim/create': got string, want boolean"),
    ("resources.limits.memory=lots", "'/resources/limits/memory'"),
    ("kueue.enabled=1", "'/kueue/enabled'"),
    ("aggregateToUserRoles=no", "'/aggregateToUserRoles': got string, want boolean"),
]


# Checked by the templates, not the schema (it cannot compare two values, or name the
# release's namespace): `helm lint` logs a template's `fail` as [INFO] and passes, by Helm's
# design; `helm template`, `install` and `upgrade` refuse.
TEMPLATE_CHECKS = {
    "metrics.port=8081",
    "podDisruptionBudget.minAvailable=2",
    "admissionPolicy.validationActions={Deny,Warn}",
    "watchNamespaces={tfmw-system}",
}


@pytest.mark.parametrize(("option", "message"), BAD_VALUES)
def test_a_bad_value_is_refused_by_name(option: str, message: str) -> None:
    """Each value the operator would refuse, or that would make a broken install, stops
    `helm template` (so `helm install`) with its name; `helm lint --strict` refuses it too
    when the schema does, and says it in any case."""
    said = refusal("--set", option)
    assert message in said, said
    code, said = helm_says("--set", option, command="lint")
    assert message in said, said
    assert (code != 0) == (option not in TEMPLATE_CHECKS), said


def documented_set_options() -> list[tuple[str, tuple[str, ...]]]:
    """Every `helm install` or `helm upgrade` of the README and docs/ (a shell block's
    command, its continued lines joined), and every `--set` the prose shows on its own: the
    options each gives the chart, $REGISTRY as a registry."""
    registry = f"{local_registry()}/ml"
    found: list[tuple[str, tuple[str, ...]]] = []
    for block in all_blocks():
        if block.language not in ("sh", "bash"):
            continue
        for command in block.text.replace("\\\n", " ").splitlines():
            command = command.split(" #", 1)[0].replace("$REGISTRY", registry)
            if re.match(r"\s*helm (install|upgrade)\b", command):
                options = tuple(
                    o
                    for flag, value in re.findall(r"(--set(?:-string)?)[ =](\S+)", command)
                    for o in (flag, value)
                )
                found.append((f"{block.where}: {command.strip()}", options))
    for path in doc_files():
        for value in re.findall(r"`--set ([^`\s]+)`", path.read_text()):
            found.append((f"{path.name}: --set {value}", ("--set", value)))
    return found


def test_the_defaults_and_every_documented_set_render() -> None:
    documented = documented_set_options()
    assert any("sharedClaim.create=true" in options for _, options in documented)  # the README's
    assert any("tfjob.enabled=true" in options for _, options in documented)  # docs/tfjob.md's
    assert helm_template()
    for where, options in documented:
        done = subprocess.run(
            [str(HELM), "template", "tfmw", str(CHART), "--namespace", "tfmw-system", "--kube-version",
             kube_version(), *options],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{where}: {done.stderr}"


def pdb(docs: list[Json]) -> list[Json]:
    return [d for d in docs if d["kind"] == "PodDisruptionBudget"]


def test_the_disruption_budget_never_stops_a_drain() -> None:
    """A crash-looping replica may always go (AlwaysAllow); one replica gets no budget
    (minAvailable 1 beside it would stop every drain); minAvailable must stay below replicas."""
    (budget,) = pdb(helm_template())
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb(helm_template("--set", "replicas=1")) == []
    assert pdb(helm_template("--set", "podDisruptionBudget.enabled=false")) == []
    (three,) = pdb(helm_template("--set", "replicas=3", "--set", "podDisruptionBudget.minAvailable=2"))
    assert (three["spec"]["minAvailable"], three["spec"]["unhealthyPodEvictionPolicy"]) == (2, "AlwaysAllow")
    said = refusal("--set", "replicas=3", "--set", "podDisruptionBudget.minAvailable=3")
    assert "podDisruptionBudget.minAvailable: 3 of 3 replicas would let no replica be evicted" in said


def test_metrics_may_take_the_health_port_only_when_off() -> None:
    container = operator_container(helm_template("--set", "metrics.port=9090"))
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"metrics": 9090, "health": 8081}
    assert "--metrics-port=9090" in container["args"]
    container = operator_container(
        helm_template("--set", "metrics.enabled=false", "--set", "metrics.port=8081")
    )
    assert [p["name"] for p in container["ports"]] == ["health"]


def test_image_pull_secrets_reach_the_operator_and_tensorboard_pods() -> None:
    def secrets(docs: list[Json]) -> dict[str, list[Json] | None]:
        return {
            d["metadata"]["name"]: d["spec"]["template"]["spec"].get("imagePullSecrets")
            for d in docs
            if d["kind"] == "Deployment"
        }

    assert secrets(helm_template("--set", "tensorboard.enabled=true")) == {
        "tfmw-operator": None,
        "tfmw-tensorboard": None,
    }
    options = ("--set", "tensorboard.enabled=true", "--set", "imagePullSecrets={regcred,mirror}")
    wanted = [{"name": "regcred"}, {"name": "mirror"}]
    assert secrets(helm_template(*options)) == {"tfmw-operator": wanted, "tfmw-tensorboard": wanted}


def user_role_rights(docs: list[Json]) -> dict[str, tuple[dict[str, str], set[tuple[str, str, str]]]]:
    """The ClusterRoles aggregated into the built-in user roles: their aggregation labels,
    and (group, resource, verb) for every rule."""
    prefix = "rbac.authorization.k8s.io/aggregate-to-"
    return {
        d["metadata"]["name"]: (
            d["metadata"]["labels"],
            {
                (g, r, v)
                for rule in d["rules"]
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            },
        )
        for d in docs
        if d["kind"] == "ClusterRole" and any(k.startswith(prefix) for k in d["metadata"].get("labels") or {})
    }


EDIT_VERBS = ("create", "update", "patch", "delete", "deletecollection", "get", "list", "watch")


def wanted_user_roles(
    name: str, group: str, resource: str
) -> dict[str, tuple[dict[str, str], set[tuple[str, str, str]]]]:
    """edit and admin may do everything to the jobs, view may read them; never their status."""
    return {
        f"tfmw-{name}-edit": (
            {
                "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                "rbac.authorization.k8s.io/aggregate-to-edit": "true",
            },
            {(group, resource, verb) for verb in EDIT_VERBS},
        ),
        f"tfmw-{name}-view": (
            {"rbac.authorization.k8s.io/aggregate-to-view": "true"},
            {(group, resource, verb) for verb in ("get", "list", "watch")},
        ),
    }


def test_the_built_in_user_roles_get_jobs_but_never_their_status() -> None:
    jobs = wanted_user_roles("jobs", "tfmw.dev", "tfmwjobs")
    assert user_role_rights(helm_template()) == jobs
    assert user_role_rights(render("deploy")) == jobs
    assert user_role_rights(helm_template("--set", "aggregateToUserRoles=false")) == {}


def test_values_yaml_and_its_schema_name_the_same_values() -> None:
    """Every value of values.yaml is in the schema, and the schema names no value values.yaml
    has not (but Helm's `global`, for the chart as a dependency)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def paths(properties: dict[str, Any], prefix: str = "") -> set[str]:
        found = set()
        for key, sub in properties.items():
            found.add(prefix + key)
            if "properties" in sub:
                found |= paths(sub["properties"], f"{prefix}{key}.")
        return found

    def keys(mapping: dict[str, Any], prefix: str = "") -> set[str]:
        found = set()
        for key, value in mapping.items():
            found.add(prefix + key)
            if isinstance(value, dict) and key not in ("requests", "limits"):  # resource names: free
                found |= keys(value, f"{prefix}{key}.")
        return found

    assert paths(schema["properties"]) - {"global", "resources.claims"} == keys(values)
    assert set(schema["required"]) == set(values)


def test_the_operators_version_is_written_by_the_operator_and_readable_by_every_user() -> None:
    """The install's ConfigMap carries the trainer image and no version: the operator that
    leads writes its own (runtime/published_version.py), patching that one object alone;
    every authenticated user may `get` it. The chart and deploy/ alike."""

    def published(docs: list[Json]) -> tuple[Json, Json, Json, Json, Json]:
        def one(kind: str, name: str) -> Json:
            (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
            return found

        return (
            one("ConfigMap", "tfmw-version"),
            one("Role", "tfmw-version-reader"),
            one("RoleBinding", "tfmw-version-reader"),
            one("Role", "tfmw-operator-version"),
            one("RoleBinding", "tfmw-operator-version"),
        )

    for docs in (render("deploy"), helm_template(), helm_template("--set", "image.tag=1.2.3")):
        config_map, reader, readers, writer, writers = published(docs)
        assert "version" not in config_map["data"], config_map
        assert reader["rules"] == [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["tfmw-version"],
                "verbs": ["get"],
            }
        ]
        assert readers["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
        ]
        assert writer["rules"] == [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["tfmw-version"],
                "verbs": ["patch"],
            }
        ]
        assert writers["subjects"] == [
            {"kind": "ServiceAccount", "name": "tfmw-operator", "namespace": "tfmw-system"}
        ]
        assert writer["metadata"]["namespace"] == config_map["metadata"]["namespace"] == "tfmw-system"
        # The operator writes into its own namespace's: the Deployment tells it which.
        env = {e["name"]: e for e in operator_container(docs).get("env", [])}
        assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    (config_map,) = [d for d in render("deploy") if d["kind"] == "ConfigMap"]
    assert config_map["data"]["trainerImage"] == f"{local_registry()}/tfmw-trainer:{version()}"
    (local,) = [d for d in render("deploy/overlays/local") if d["metadata"]["name"] == "tfmw-version"]
    assert local["data"] == {"trainerImage": "tfmw-trainer:dev"}


def notes(tmp_path: Path, *options: str) -> str:
    """NOTES.txt as `helm install` prints it. `helm template` renders no NOTES, so a copy of
    the chart renders it into a ConfigMap of its own, with the same values."""
    chart = tmp_path / "tfmw"
    shutil.copytree(CHART, chart)
    (chart / "files").mkdir()
    (chart / "templates" / "NOTES.txt").rename(chart / "files" / "notes.txt")
    (chart / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data: {notes: {{ tpl (.Files.Get "files/notes.txt") . | quote }}}\n'
    )
    (config_map,) = documents(
        str(HELM), "template", "tfmw", str(chart), "--namespace", "tfmw-system", "--kube-version", kube_version(),
        "--show-only", "templates/notes.yaml", *options,
    )  # fmt: skip
    return str(config_map["data"]["notes"])


def test_the_notes_say_what_an_uninstall_keeps_and_how_to_upgrade(tmp_path: Path) -> None:
    said = notes(tmp_path)
    assert "kubectl apply --server-side --force-conflicts -f charts/tfmw/crds/" in said
    assert "helm uninstall keeps the CRD tfmwjobs.tfmw.dev" in said
    assert "delete pvc" not in said and "tfjobs.kubeflow.org" not in said  # nothing else of ours is kept
    said = notes(tmp_path / "kept", "--set", "sharedClaim.create=true", "--set", "tfjob.enabled=true")
    assert "kubectl -n tfmw-system delete pvc tfmw-shared" in said
    assert "kubectl delete crd tfjobs.kubeflow.org" in said
    said = notes(tmp_path / "theirs", "--set", "tfjob.enabled=true", "--set", "tfjob.installCRD=false")
    assert "tfjobs.kubeflow.org" not in said  # Kubeflow's CRD is not the chart's to keep
    assert "pull secret" in notes(tmp_path / "private", "--set", "imagePullSecrets={regcred}")
