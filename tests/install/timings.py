"""How long each step of the install path took; printed at the end (conftest.py)."""

from __future__ import annotations

TIMINGS: list[tuple[str, float]] = []
