"""Names the client checks before the API server does: a final newline is not a name's end."""

from __future__ import annotations

import pytest
from tfmw_client import names


@pytest.mark.parametrize("name", ["mnist\n", "mnist\n\n", "\nmnist"])
def test_a_job_name_with_a_newline_is_refused(name: str) -> None:
    assert names.JOB_NAME_PATTERN.match(name) is None


def test_a_plain_job_name_is_taken() -> None:
    assert names.JOB_NAME_PATTERN.match("mnist-2") is not None
