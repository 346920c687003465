"""How much of a deleted worker's log is kept: the whole tail alone, a share when many go."""

from __future__ import annotations

from tfmw_operator.shell.worker_deletion import (
    LOG_ARCHIVE_BYTES,
    LOG_MEMORY_BYTES,
    LOG_MIN_BYTES,
    log_tail_bytes,
)


def test_a_few_workers_keep_the_whole_tail() -> None:
    assert log_tail_bytes(1) == log_tail_bytes(16) == LOG_ARCHIVE_BYTES


def test_a_large_gang_shares_the_budget_but_keeps_a_useful_tail() -> None:
    assert log_tail_bytes(64) * 64 <= LOG_MEMORY_BYTES
    assert log_tail_bytes(10 * 1024) == LOG_MIN_BYTES  # 1,024 workers of ten containers


def test_never_more_than_the_budget_until_the_floor() -> None:
    for reading in range(1, 5000, 7):
        kept = log_tail_bytes(reading)
        assert kept == LOG_MIN_BYTES or kept * reading <= LOG_MEMORY_BYTES
