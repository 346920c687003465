import json

import pytest
from tfmw_trainer.cluster import ConfigError, placement


def tf_config(index: int, workers: int = 2) -> str:
    cluster = {"worker": [f"w{i}.svc:2222" for i in range(workers)]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def test_single_worker_without_tf_config() -> None:
    place = placement({})
    assert (place.index, place.num_workers, place.is_chief) == (0, 1, True)


def test_reads_index_size_and_operator_variables() -> None:
    place = placement(
        {
            "TF_CONFIG": tf_config(2, workers=3),
            "TFMW_ATTEMPT": "4",
            "TFMW_JOB_UID": "u1",
            "TFMW_SHARED_DIR": "/shared",
            "TFMW_MARKER_PATH": "/shared/done.txt",
        }
    )
    assert (place.index, place.num_workers, place.attempt, place.job_uid) == (2, 3, 4, "u1")
    assert not place.is_chief
    assert str(place.marker_path) == "/shared/done.txt"


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        json.dumps({"cluster": {}}),
        json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}),
        json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}),
    ],
)
def test_bad_tf_config_is_a_clear_error(raw: str) -> None:
    with pytest.raises(ConfigError, match="TF_CONFIG"):
        placement({"TF_CONFIG": raw})
