"""Each kind parses its spec with the images the operator gives it (api/kinds.py)."""

from __future__ import annotations

from tfmw_operator.api.kinds import TFJOBS, TFMW_JOBS, kind_of
from tfmw_operator.api.spec import JobSpec
from wrappers import job

TFJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {
        "name": "dist",
        "namespace": "ns",
        "uid": "u",
        "annotations": {"tfmw.dev/shared-claim": "c"},
    },
    "spec": {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "img:1"}]}},
            }
        }
    },
}


def test_a_tfmultiworkerjob_gets_the_folder_check_image_and_a_supervisor_only_when_given() -> None:
    commanded = job().commanded().obj()
    checked = TFMW_JOBS.parse(commanded, "check:1", "tfmw-operator:dev")
    assert isinstance(checked, JobSpec)
    assert (checked.folder_check_image, checked.supervisor_image) == ("check:1", "tfmw-operator:dev")
    plain = TFMW_JOBS.parse(commanded, "")
    assert isinstance(plain, JobSpec) and (plain.folder_check_image, plain.supervisor_image) == ("", "")


def test_a_tfjob_gets_the_folder_check_image_and_never_a_supervisor() -> None:
    assert kind_of(TFJOB) is TFJOBS and kind_of({}) is TFMW_JOBS
    checked = TFJOBS.parse(TFJOB, "check:1", "tfmw-operator:dev")
    assert isinstance(checked, JobSpec)
    assert (checked.folder_check_image, checked.supervisor_image) == ("check:1", "")
    plain = TFJOBS.parse(TFJOB, "")
    assert isinstance(plain, JobSpec) and plain.folder_check_image == ""


def test_a_tfmultiworkerjobs_status_is_its_status_subresource_and_written_as_a_merge_patch() -> None:
    from tfmw_operator.api.kinds import StatusWrites
    from tfmw_operator.api.status import JobStatus, Phase
    from wrappers import at

    obj = job().launched(phase="Running").obj()
    recorded = TFMW_JOBS.recorded_status(obj)
    assert (recorded.phase, recorded.attempt) == (Phase.RUNNING, 0)
    assert TFMW_JOBS.recorded_status(job().obj()) == JobStatus()
    obj["status"] = recorded.to_json()  # as the operator wrote it
    same = TFMW_JOBS.status_writes(obj, recorded, None, at(1))
    assert same == StatusWrites(metadata=None, status=None)  # nothing changed: nothing written
    moved = TFMW_JOBS.status_writes(
        obj, JobStatus.from_json({**obj["status"], "phase": "Succeeded"}), None, at(1)
    )
    assert moved == StatusWrites(metadata=None, status={"phase": "Succeeded"})


def test_an_object_of_no_known_kind_is_a_tfmultiworkerjob() -> None:
    assert kind_of(TFJOB) is TFJOBS
    assert kind_of(job().obj()) is TFMW_JOBS
    assert kind_of({}) is TFMW_JOBS
    assert kind_of({"kind": "PyTorchJob"}) is TFMW_JOBS
