"""The watch-backed view: what it holds after events, our own writes, and a re-list."""

import json
from typing import Any
from unittest.mock import patch

from tfmw_operator.api.objects import cut_spec_reason
from tfmw_operator.core.claim_checks import Claim
from tfmw_operator.core.owned import Owned
from tfmw_operator.kube.informer import Informer, LatestJobs, Tombstones, ignore_changes, own_name

Json = dict[str, Any]
JOB = ("ns", "job")


def pod(name: str, version: int, deleting: bool = False) -> Json:
    meta: Json = {
        "name": name,
        "namespace": "ns",
        "resourceVersion": str(version),
        "uid": f"uid-{name}-{version}",
        "labels": {"tfmw.dev/job-name": "job", "tfmw.dev/replica-index": "0", "tfmw.dev/attempt": "0"},
        "ownerReferences": [{"uid": "job-uid"}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": "Pending"}}


def view() -> tuple[Informer[Owned], list[tuple[str, str]]]:
    told: list[tuple[str, str]] = []
    return Informer(None, "/api/v1/pods", Owned.pod_of, told.append), told  # type: ignore[arg-type]


def names(informer: Informer[Owned]) -> dict[str, bool]:
    return {o.name: bool(o.pod and o.pod.deleting) for o in informer.of_job(JOB)}


def test_events_are_kept_by_job_and_each_change_tells_the_job() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("MODIFIED", pod("job-worker-0", 6, deleting=True))
    assert names(informer) == {"job-worker-0": True}
    informer._apply("DELETED", pod("job-worker-0", 7, deleting=True))
    assert names(informer) == {}
    assert told == [JOB, JOB, JOB]


def test_a_change_the_reduced_view_does_not_show_tells_nobody_but_its_version_is_kept() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    heartbeat = pod("job-worker-0", 6)
    heartbeat["metadata"]["uid"] = "uid-job-worker-0-5"  # the same pod
    heartbeat["metadata"]["annotations"] = {"kubelet": "status written again"}
    informer._apply("MODIFIED", heartbeat)
    assert told == [JOB]
    informer._apply("MODIFIED", pod("job-worker-0", 6, deleting=True))  # not newer than what is held
    assert names(informer) == {"job-worker-0": False}
    informer._apply("MODIFIED", pod("job-worker-0", 7, deleting=True))
    assert told == [JOB, JOB] and names(informer) == {"job-worker-0": True}


def test_a_pod_relabelled_to_another_job_tells_both_even_when_it_reads_the_same() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    moved = pod("job-worker-0", 6)
    moved["metadata"]["labels"]["tfmw.dev/job-name"] = "other"
    informer._apply("MODIFIED", moved)
    assert told == [JOB, JOB, ("ns", "other")]
    assert names(informer) == {}


def test_an_own_write_goes_in_silently_and_its_echo_or_an_older_answer_changes_nothing() -> None:
    informer, told = view()
    informer.put(pod("job-worker-0", 10, deleting=True))
    informer._apply("MODIFIED", pod("job-worker-0", 10, deleting=True))  # the echo
    informer.put(pod("job-worker-0", 8))  # a late answer, older than what is held
    assert names(informer) == {"job-worker-0": True}
    assert told == []


def test_a_deletion_with_the_version_held_removes_and_nothing_older_brings_it_back() -> None:
    informer, _ = view()
    informer.put(pod("job-worker-0", 10))  # a deletion answered at once carries its final version
    informer._apply("DELETED", pod("job-worker-0", 10))
    informer.put(pod("job-worker-0", 10))  # that answer arriving after the event
    informer._apply("MODIFIED", pod("job-worker-0", 9))
    assert names(informer) == {}
    informer._apply("ADDED", pod("job-worker-0", 12))  # a new pod of the same name
    assert names(informer) == {"job-worker-0": False}


def test_removing_after_a_refused_delete_spares_a_newer_namesake() -> None:
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 12))
    informer.remove("ns", "job-worker-0", lambda held: held.pod is not None and held.pod.uid == "uid-old")
    assert names(informer) == {"job-worker-0": False}


def test_a_relist_replaces_the_view_but_keeps_own_writes_newer_than_the_list() -> None:
    informer, told = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("ADDED", pod("job-worker-9", 6))  # deleted while the watch was down
    informer.put(pod("job-worker-1", 30))  # created by us after the list was taken
    informer._replace(informer.sightings([pod("job-worker-0", 5)]), listed_at=20)
    assert names(informer) == {"job-worker-0": False, "job-worker-1": False}
    assert JOB in told


def test_a_listed_object_is_reduced_as_its_page_comes_and_one_of_no_job_is_left_out() -> None:
    informer, _ = view()
    stray = pod("other-worker-0", 5)
    del stray["metadata"]["labels"]["tfmw.dev/job-name"]
    found = informer.sightings([pod("job-worker-0", 5), stray, {"metadata": {}}])
    assert [(s.okey, s.at, s.job) for s in found] == [(("ns", "job-worker-0"), 5, JOB)]
    assert isinstance(found[0].reduced, Owned)


def test_a_relist_taken_before_a_deletion_seen_since_does_not_bring_the_object_back() -> None:
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    listed = informer.sightings([pod("job-worker-0", 5)])  # the list, taken at 6
    informer._apply("DELETED", pod("job-worker-0", 7))  # a deletion our write saw meanwhile
    informer._replace(listed, listed_at=6)
    assert names(informer) == {}


def test_the_newest_job_is_kept_and_a_deleted_one_never_returns() -> None:
    jobs = LatestJobs()
    job: Json = {"metadata": {"namespace": "ns", "name": "job", "uid": "u1", "resourceVersion": "5"}}
    newer: Json = {"metadata": {**job["metadata"], "resourceVersion": "7"}}
    assert jobs.put(newer)
    assert not jobs.put(job)  # older
    assert not jobs.put(newer)  # the echo of our own write
    assert jobs.get(JOB) is newer
    jobs.remove(newer)
    assert not jobs.put({"metadata": {**job["metadata"], "resourceVersion": "9"}})  # late answer
    assert jobs.get(JOB) is None


def test_a_job_is_held_without_its_managed_fields_and_the_object_given_is_untouched() -> None:
    jobs = LatestJobs()
    fields = [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:workers": {}}}}]
    job: Json = {
        "metadata": {
            "namespace": "ns",
            "name": "job",
            "uid": "u1",
            "resourceVersion": "5",
            "managedFields": fields,
        },
        "spec": {"workers": 2},
    }
    assert jobs.put(job)
    held = jobs.get(JOB)
    assert held is not None and "managedFields" not in held["metadata"]
    assert held["metadata"]["resourceVersion"] == "5" and held["spec"] == {"workers": 2}
    assert job["metadata"]["managedFields"] is fields  # kopf's object, as it was


def test_a_write_answered_without_a_version_never_brings_a_deleted_pod_back() -> None:
    # A pod deleted with no grace can come back from the DELETE with no resourceVersion;
    # held, it could never be ordered against its DELETED event and stayed for ever.
    informer, _ = view()
    informer._apply("ADDED", pod("job-worker-0", 5))
    informer._apply("DELETED", pod("job-worker-0", 7, deleting=True))
    answer = pod("job-worker-0", 0, deleting=True)
    del answer["metadata"]["resourceVersion"]
    informer.put(answer)
    assert names(informer) == {}


def test_objects_not_ours_are_kept_by_their_own_name_without_any_label() -> None:
    path = "/api/v1/persistentvolumeclaims"
    claims: Informer[Claim] = Informer(None, path, Claim.of, ignore_changes, "", own_name)  # type: ignore[arg-type]
    raw = {
        "metadata": {"name": "tfmw-shared", "namespace": "ns", "uid": "c1", "resourceVersion": "3"},
        "spec": {"volumeName": "pv"},
        "status": {"phase": "Bound"},
    }
    claims._apply("ADDED", raw)
    assert claims.of_job(("ns", "tfmw-shared")) == [Claim("c1", "pv", True, phase="Bound")]
    claims._apply("DELETED", {**raw, "metadata": {**raw["metadata"], "resourceVersion": "4"}})
    assert claims.of_job(("ns", "tfmw-shared")) == []


def test_tombstones_are_forgotten_oldest_first_only_beyond_the_kept_number_and_once_old() -> None:
    stones: Tombstones[str, int] = Tombstones(kept=3, seconds=10)
    for i in range(3):
        stones.put(f"p{i}", i, now=0)
    assert [stones.get(f"p{i}") for i in range(3)] == [0, 1, 2]  # old, but only 3
    stones.put("p0", 7, now=5)  # deleted again: now the youngest
    stones.put("p3", 3, now=11)  # 4 held: p1 (put at 0) is old enough to go, and only it
    assert "p1" not in stones and len(stones) == 3
    assert (stones.get("p0"), stones.get("p2"), stones.get("p3")) == (7, 2, 3)
    stones.put("p4", 4, now=12)  # p2 goes (put at 0); p0 (put at 5) is 7 s old: stays
    assert "p2" not in stones and stones.get("p0") == 7
    for i in range(5, 10):
        stones.put(f"p{i}", i, now=12)  # young ones all stay, however many
    assert len(stones) == 8 and stones.get("p0") == 7
    stones.put("p10", 10, now=30)  # everything old enough leaves, down to the kept 3
    assert len(stones) == 3 and {"p8", "p9", "p10"} == {
        k for k in (f"p{i}" for i in range(11)) if k in stones
    }


def test_a_pod_deleted_among_thousands_in_one_cleanup_never_comes_back() -> None:
    """A cleanup deletes thousands of pods within the window: every tombstone is kept, so a
    late event of any of them brings none back."""
    informer, _ = view()
    for i in range(2500):
        informer._apply("ADDED", pod(f"job-worker-{i}", 10))
    for i in range(2500):
        informer._apply("DELETED", pod(f"job-worker-{i}", 20, deleting=True))
    for i in range(2500):
        informer._apply("MODIFIED", pod(f"job-worker-{i}", 15, deleting=True))  # late
    assert names(informer) == {}


def _job_with_env(values: int, generation: int, version: str, managed_by: str | None = None) -> Json:
    env = [{"name": f"V{i}", "value": "x" * 500} for i in range(values)]
    spec: Json = {"workers": 2, "template": {"spec": {"containers": [{"name": "c", "env": env}]}}}
    if managed_by is not None:
        spec["runPolicy"] = {"managedBy": managed_by}
    meta = {
        "namespace": "ns",
        "name": "job",
        "uid": "u1",
        "resourceVersion": version,
        "generation": generation,
    }
    return {"kind": "TFJob", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def test_a_spec_too_large_to_hold_is_held_cut_to_why_with_its_controller_and_status() -> None:
    jobs = LatestJobs()
    assert jobs.put(_job_with_env(300, 1, "5", managed_by="tfmw.dev/tfjob-controller"))
    held = jobs.get(JOB)
    assert held is not None
    why = cut_spec_reason(held)
    assert why is not None and "characters of JSON, more than the 131,072" in why and "envFrom" in why
    assert held["spec"]["runPolicy"] == {"managedBy": "tfmw.dev/tfjob-controller"}  # who serves it
    assert held["status"] == {"phase": "Running"} and held["metadata"]["uid"] == "u1"
    assert len(json.dumps(held)) < 2_000


def test_a_cut_spec_is_measured_once_per_generation_and_held_whole_when_it_fits_again() -> None:
    jobs = LatestJobs()
    jobs.put(_job_with_env(300, 1, "5"))
    echo = _job_with_env(300, 1, "6")  # a status write's answer: the same spec
    with patch("tfmw_operator.kube.informer.held_job", side_effect=AssertionError("measured again")):
        assert jobs.put(echo)
    assert cut_spec_reason(jobs.get(JOB) or {}) is not None
    fits = _job_with_env(3, 2, "7")  # the owner shortened it
    assert jobs.put(fits)
    assert jobs.get(JOB) is fits


def test_a_long_managed_by_is_not_kept_so_no_cut_can_name_tfmw() -> None:
    jobs = LatestJobs()
    jobs.put(_job_with_env(300, 1, "5", managed_by="tfmw.dev/tfjob-controller" + "x" * 300))
    held = jobs.get(JOB)
    assert held is not None and "runPolicy" not in held["spec"]
