"""Time held to the calendar (api/times.py): a limit past its ends never fires."""

from __future__ import annotations

from datetime import timedelta

from tfmw_operator.api.times import DAWN, NEVER, later


def test_a_time_a_fraction_of_a_second_past_the_calendars_end_is_never() -> None:
    assert later(NEVER, 0.5) == NEVER
    assert later(NEVER - timedelta(seconds=1), 1.5) == NEVER
    assert later(DAWN, -0.5) == DAWN
    assert later(NEVER, 0) == NEVER and later(DAWN, 0) == DAWN  # no step: no overflow
