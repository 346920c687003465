"""The install path (make test-install): prints how long each step took."""

from __future__ import annotations

import pytest
from install.timings import TIMINGS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("install path: seconds per step")
        for step, seconds in TIMINGS:
            terminalreporter.write_line(f"{seconds:8.1f}  {step}")
        terminalreporter.write_line(f"{sum(s for _, s in TIMINGS):8.1f}  in all")
