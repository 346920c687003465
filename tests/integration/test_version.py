"""`tfmw version` for a user who may do nothing else: the install's version ConfigMap and
its Role (deploy/base/version.yaml, as `kubectl kustomize deploy/` renders them) let every
authenticated user read the operator's version, and that one object alone. The version in it
is the running operator's own, written as it starts with its service account's rights
(deploy/base/rbac.yaml, tfmw-operator-version), not the install's."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.test_admission_policy import kubeconfig_for
from integration.test_rbac import token_kubeconfig
from kube import REPO, ClusterClient, kubectl, wait_for
from operator_process import OperatorProcess
from tfmw_client import cli

Json = dict[str, Any]
PUBLISHED = {
    ("ConfigMap", "tfmw-version"),
    ("Role", "tfmw-version-reader"),
    ("RoleBinding", "tfmw-version-reader"),
}


def shipped() -> list[Json]:
    rendered = kubectl("kustomize", str(REPO / "deploy")).stdout
    return [d for d in yaml.safe_load_all(rendered) if d and (d["kind"], d["metadata"]["name"]) in PUBLISHED]


@pytest.fixture
def published(kube: ClusterClient) -> Iterator[list[Json]]:
    """The shipped objects applied; what was not there before removed after."""
    documents = shipped()
    assert len(documents) == 3
    made_namespace = kubectl("get", "namespace", "tfmw-system", check=False).returncode != 0
    if made_namespace:
        kubectl("create", "namespace", "tfmw-system")
    before = {}  # what was there, put back after (a deployed install's own)
    for d in documents:
        found = kubectl(
            "get", d["kind"], d["metadata"]["name"], "-n", "tfmw-system", "-o", "json", check=False
        )
        if found.returncode == 0:
            kept = json.loads(found.stdout)
            for field in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
                kept["metadata"].pop(field, None)
            before[d["kind"], d["metadata"]["name"]] = kept
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
    try:
        yield documents
    finally:
        if made_namespace:
            kubectl("delete", "namespace", "tfmw-system", "--wait=false", check=False)
        for d in documents:
            key = (d["kind"], d["metadata"]["name"])
            if key in before:
                kubectl("replace", "-f", "-", input=json.dumps(before[key]), check=False)
            elif not made_namespace:
                kubectl("delete", d["kind"], d["metadata"]["name"], "-n", "tfmw-system", check=False)


@pytest.fixture
def nobody(kube: ClusterClient, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A service account granted nothing, in a namespace of its own, and its kubeconfig."""
    namespace = kube.new_namespace("tfmw-version")
    kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    try:
        yield f"system:serviceaccount:{namespace}:nobody", kubeconfig_for(namespace, "nobody", tmp_path)
    finally:
        kube.delete_namespace(namespace)


def test_any_authenticated_user_reads_the_running_operators_version_and_nothing_else(
    kube: ClusterClient, published: list[Json], nobody: tuple[str, str], shared_root: Path, tmp_path: Path
) -> None:
    user, kubeconfig = nobody
    (config_map,) = [d for d in published if d["kind"] == "ConfigMap"]
    assert "version" not in config_map["data"]  # the install does not say it

    def can(*args: str) -> str:
        return kubectl(
            "auth", "can-i", *args, "-n", "tfmw-system", f"--as={user}", check=False
        ).stdout.strip()

    assert can("get", "configmap/tfmw-version") == "yes"
    assert can("get", "configmap/kube-root-ca.crt") == "no"
    assert can("list", "configmaps") == "no"
    assert can("get", "deployments") == "no"
    # The operator, as its service account, built as another version than the install's
    # (what an image set by hand, or a moved tag, runs): it writes its own.
    running = OperatorProcess(
        kube.new_namespace("tfmw-version-op"),
        shared_root,
        token_kubeconfig("tfmw-system", "tfmw-operator", tmp_path / "operator.kubeconfig"),
        env={"TFMW_VERSION": "0.1.7", "TFMW_REVISION": "f00dfeed"},
    ).start()

    def written() -> Json:
        found = kubectl("get", "configmap", "tfmw-version", "-n", "tfmw-system", "-o", "json").stdout
        return dict(json.loads(found)["data"])

    try:
        running.wait_started(timeout=60)  # it writes before it starts serving
        wait_for(
            "the operator's version in the ConfigMap", lambda: written().get("version") == "0.1.7", timeout=5
        )
    finally:
        running.kill()
    assert not [line for line in running.log_lines() if "version not published" in line]
    assert written() == {**config_map["data"], "version": "0.1.7", "revision": "f00dfeed"}
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["--kubeconfig", kubeconfig, "version", "-o", "json"], out=out, err=err) == 0, (
        err.getvalue()
    )
    shown = json.loads(out.getvalue())
    assert (shown["operator"], shown["operatorSource"]) == ("0.1.7", "ConfigMap tfmw-system/tfmw-version")
    assert shown["served"] == ["v1alpha1"] and shown["compatible"] is True, shown
