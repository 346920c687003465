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
