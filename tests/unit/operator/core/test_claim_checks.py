from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tfmw_operator.core.claim_checks import Claim, FolderReached, OwnPods, ReachedClaims, trusted_pass
from tfmw_operator.core.pods import ObservedPod, observe_pod, same_image
from wrappers import job, pod

CREATED = "2026-12-03T10:00:00Z"
CHECKED = datetime(2026, 12, 3, 10, 5, tzinfo=UTC)  # a check that started after the claim was made


def claim(
    uid: str = "uid-1", volume: str = "pv-1", phase: str = "Bound", created: str = CREATED, **meta: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "tfmw-shared", "uid": uid, "creationTimestamp": created, **meta},
        "spec": {"volumeName": volume},
        "status": {"phase": phase},
    }


def test_a_claim_is_known_by_its_uid_and_volume_once_bound() -> None:
    assert Claim.of(claim()).identity == ("uid-1", "pv-1")
    assert Claim.of(claim(phase="Pending")).identity is None
    assert Claim.of(claim(volume="")).identity is None
    assert Claim.of({"metadata": {"uid": 7}, "spec": "junk", "status": None}).identity is None


def test_a_claims_phase_is_read_as_written_or_as_none() -> None:
    assert Claim.of(claim(phase="Lost")).phase == "Lost"
    assert Claim.of({"status": {"phase": 3}}).phase == ""
    assert Claim.of({}).phase == ""


def test_a_reached_claim_is_vouched_for_in_its_namespace_only() -> None:
    reached = ReachedClaims()
    reached.record("team-a", Claim.of(claim()), FolderReached("first", 0), CHECKED)
    assert reached.reached("team-a", Claim.of(claim())) == FolderReached("first", 0)
    assert reached.reached("team-b", Claim.of(claim())) is None
    assert reached.reached("team-a", None) is None


def test_a_claim_made_again_or_bound_elsewhere_is_another_claim() -> None:
    reached = ReachedClaims()
    reached.record("team-a", Claim.of(claim()), FolderReached("first", 0), CHECKED)
    assert reached.reached("team-a", Claim.of(claim(uid="uid-2"))) is None
    assert reached.reached("team-a", Claim.of(claim(volume="pv-2"))) is None
    assert reached.reached("team-a", Claim.of(claim(phase="Lost"))) is None


def test_an_unbound_or_unseen_claim_is_never_recorded() -> None:
    reached = ReachedClaims()
    reached.record("team-a", None, FolderReached("first", 0), CHECKED)
    reached.record("team-a", Claim.of(claim(phase="Pending")), FolderReached("first", 0), CHECKED)
    assert len(reached) == 0


def test_the_first_record_of_a_claim_stays_and_the_oldest_is_forgotten_first() -> None:
    reached = ReachedClaims(limit=2)
    reached.record("a", Claim.of(claim("u1")), FolderReached("first", 0), CHECKED)
    reached.record("a", Claim.of(claim("u1")), FolderReached("second", 1), CHECKED)
    assert reached.reached("a", Claim.of(claim("u1"))) == FolderReached("first", 0)
    reached.record("a", Claim.of(claim("u2")), FolderReached("j2", 0), CHECKED)
    reached.record("a", Claim.of(claim("u3")), FolderReached("j3", 0), CHECKED)
    assert len(reached) == 2
    assert reached.reached("a", Claim.of(claim("u1"))) is None
    assert reached.reached("a", Claim.of(claim("u3"))) == FolderReached("j3", 0)


def test_a_claim_being_deleted_is_neither_recorded_nor_vouched_for() -> None:
    reached = ReachedClaims()
    reached.record("a", Claim.of(claim()), FolderReached("first", 0), CHECKED)
    going = Claim.of(claim(deletionTimestamp="2026-12-03T11:00:00Z"))
    assert going.identity is None and reached.reached("a", going) is None
    reached.record("b", going, FolderReached("first", 0), CHECKED)
    assert len(reached) == 1


def test_only_a_check_that_started_after_the_claim_was_made_can_vouch_for_it() -> None:
    reached = ReachedClaims()
    # Made under the same name after the check had read its predecessor (the pod's view lagging).
    reached.record("a", Claim.of(claim(created="2026-12-03T10:05:00Z")), FolderReached("first", 0), CHECKED)
    reached.record("a", Claim.of(claim(created="absurd")), FolderReached("first", 0), CHECKED)
    reached.record("a", Claim.of(claim()), FolderReached("first", 0), None)
    assert len(reached) == 0


def test_a_uid_or_volume_that_is_not_a_string_is_none_and_the_message_names_who_reached_it() -> None:
    assert Claim.of(claim(uid=7)).identity is None  # type: ignore[arg-type]
    assert Claim.of(claim(volume=["pv-1"])).identity is None  # type: ignore[arg-type]
    assert FolderReached("mnist", 2).message("tfmw-shared") == (
        "claim tfmw-shared reached job mnist's folder for its worker 2; the same claim gives this job "
        "its own folder, so its workers start without the folder check"
    )


IMAGE = "localhost:5001/tfmw-operator:dev"


def checked(uid: str, image: str = IMAGE, ran: str | None = None, code: int = 0) -> ObservedPod:
    """A running worker whose folder check (spec image `image`, run as `ran`) exited `code`."""
    raw = pod(job().obj(), 1).running().obj()
    raw["metadata"]["uid"] = uid
    raw["spec"]["initContainers"] = [
        {"name": "tfmw-folder-check", "image": image, "command": ["sh", "-c", "exit 0"]}
    ]
    raw["status"]["initContainerStatuses"] = [
        {"name": "tfmw-folder-check", "image": ran or image, "state": {"terminated": {"exitCode": code}}}
    ]
    observed = observe_pod(raw)
    assert observed is not None
    return observed


def test_a_tenants_own_pod_with_a_check_of_the_name_poisons_nothing() -> None:
    """The attack of issue 34: the tenant's own pod, owned by its job and labelled as a worker,
    with an init container named tfmw-folder-check that runs `exit 0`, even the operator's
    image. Only a pod whose UID the operator recorded at creation counts."""
    own = OwnPods()
    own.add("made-by-the-operator")
    forged = checked("made-by-the-tenant")
    assert forged.folder_checked  # it did pass, as the kubelet says
    assert trusted_pass([forged], own, IMAGE) is None
    real = checked("made-by-the-operator")
    assert trusted_pass([forged, real], own, IMAGE) is real
    # A check that failed, or a pod not up any more, vouches for nothing either.
    assert trusted_pass([checked("made-by-the-operator", code=3)], own, IMAGE) is None
    assert trusted_pass([real], own, "") is None


def test_an_operators_pod_whose_check_image_was_changed_counts_not() -> None:
    """A pod's image may be changed after it is made: the spec changed, or changed back after
    the tenant's image ran (the kubelet reports what ran)."""
    own = OwnPods()
    own.add("u")
    assert trusted_pass([checked("u", image="tenant/exit-zero:1")], own, IMAGE) is None
    assert trusted_pass([checked("u", ran="tenant/exit-zero:1")], own, IMAGE) is None
    assert trusted_pass([checked("u")], own, IMAGE) is not None


@pytest.mark.parametrize(
    ("written", "reported", "same"),
    [
        ("tfmw-operator:dev", "docker.io/library/tfmw-operator:dev", True),
        ("me/tfmw-operator:dev", "docker.io/me/tfmw-operator:dev", True),
        ("tfmw-operator", "docker.io/library/tfmw-operator:latest", True),
        (IMAGE, IMAGE, True),
        (IMAGE, "localhost:5001/tfmw-operator:other", False),
        ("tfmw-operator:dev", "evil/tfmw-operator:dev", False),
        ("", "", False),
    ],
)
def test_the_image_a_kubelet_reports_is_matched_as_the_runtime_completes_names(
    written: str, reported: str, same: bool
) -> None:
    assert same_image(written, reported) is same


def test_own_pods_are_bounded_the_oldest_forgotten_first() -> None:
    own = OwnPods(limit=2)
    for uid in ("a", "b", "c", "", None):
        own.add(uid)
    assert "a" not in own and "b" in own and "c" in own and len(own) == 2
    assert "" not in own and None not in own
