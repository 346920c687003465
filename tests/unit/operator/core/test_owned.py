"""What the views keep of a pod or Service (core/owned.py): its name and its owners' UIDs."""

from __future__ import annotations

from tfmw_operator.core.owned import Owned, owner_uids
from wrappers import job, pod


def test_only_owner_references_with_a_uid_count() -> None:
    raw = {
        "metadata": {
            "name": "mnist-worker-0",
            "ownerReferences": [
                {"kind": "TFMultiWorkerJob", "uid": "u-1"},
                {"kind": "Other"},
                {"uid": ""},
                "junk",
            ],
        }
    }
    assert owner_uids(raw) == frozenset({"u-1"})
    assert owner_uids({"metadata": None}) == frozenset()


def test_a_pod_or_service_is_kept_by_its_name_and_a_nameless_one_by_none() -> None:
    raw = pod(job().obj(), 0).running().obj()
    kept = Owned.pod_of(raw)
    assert kept.name == "mnist-worker-0" and kept.owners == frozenset({"uid-mnist"}) and kept.pod is not None
    assert Owned.service_of({"metadata": {"name": "mnist", "ownerReferences": [{"uid": "u"}]}}) == Owned(
        "mnist", frozenset({"u"})
    )
    assert Owned.service_of({}) == Owned("", frozenset())
    assert Owned.pod_of({"metadata": {}}).name == ""
