"""Scope Kueue's webhooks to what tfmw uses: reads the built manifests on stdin, writes them out.

Kueue's webhooks fail closed. A webhook for a framework that is not enabled (Deployments,
StatefulSets, Jobs...) would refuse those objects cluster-wide whenever Kueue is down, so
it is dropped; the pod and TFJob webhooks are kept, for namespaces labelled
tfmw.dev/kueue=enabled only. Webhooks for Kueue's own resources (queues, workloads,
flavors) stay as they are.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

KUEUE_GROUP = "kueue.x-k8s.io"
NAMESPACES = {"matchLabels": {"tfmw.dev/kueue": "enabled"}}


def groups_and_resources(webhook: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (group, resource)
        for rule in webhook.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
    }


def scoped(webhook: dict[str, Any]) -> dict[str, Any] | None:
    targets = groups_and_resources(webhook)
    if all(group == KUEUE_GROUP for group, _ in targets):
        return webhook
    if targets in ({("", "pods")}, {("kubeflow.org", "tfjobs")}):
        return {**webhook, "namespaceSelector": NAMESPACES}
    return None


def main() -> None:
    documents = [d for d in yaml.safe_load_all(sys.stdin) if d]
    for document in documents:
        if document["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            document["webhooks"] = [w for w in map(scoped, document["webhooks"]) if w is not None]
    yaml.safe_dump_all(documents, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
