from tfmw_operator.controller import status_patch


def test_status_patch_sends_changes_and_nulls_for_removed_keys() -> None:
    old = {"phase": "Running", "message": "gang restart 1/3", "restarts": 1}
    new = {"phase": "Running", "restarts": 1, "readyWorkers": "2/2"}
    assert status_patch(old, new) == {"readyWorkers": "2/2", "message": None}


def test_status_patch_is_empty_when_nothing_changed() -> None:
    assert status_patch({"phase": "Pending"}, {"phase": "Pending"}) == {}
