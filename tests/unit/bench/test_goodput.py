"""The goodput bench's pure parts: where a failure's time went, from the workers' stamped
log lines, and the table of it."""

from __future__ import annotations

import pytest
from bench.felt import LogLine
from bench.goodput import PHASES, Fault, Result, phase_table, resumed_step, split, step_seconds

FAULT = 100.0


def worker(index: int, *, up: float, imported: float, cluster: float, attempt: int = 1) -> list[LogLine]:
    """A worker's lines: the attempt before the fault, then the new attempt's."""
    return [
        (50.0, f"worker={index} process_up attempt={attempt - 1}"),
        (54.0, f"worker={index} tensorflow_imported seconds=4.000"),
        (55.0, f"worker={index} start cluster_workers=2 replicas=2 global_batch=16 mode=loop attempt=0"),
        (up, f"worker={index} process_up attempt={attempt}"),
        (imported, f"worker={index} tensorflow_imported seconds=3.000"),
        (
            cluster,
            f"worker={index} start cluster_workers=2 replicas=2 global_batch=16 mode=loop attempt={attempt}",
        ),
    ]


def gang() -> dict[int, list[LogLine]]:
    chief = [
        *worker(0, up=101.0, imported=104.0, cluster=106.0),
        (56.0, "worker=0 resumed_from_epoch=0 resumed_from_step=0 resumed_from_example=0"),
        (57.0, "worker=0 first_step attempt=0 step=1"),
        (106.5, "worker=0 resumed_from_epoch=3 resumed_from_step=300 resumed_from_example=4800"),
        (107.0, "worker=0 first_step attempt=1 step=301"),
    ]
    return {0: chief, 1: worker(1, up=102.0, imported=105.5, cluster=105.9)}


def test_each_phase_is_the_gap_to_the_last_worker_that_reached_it() -> None:
    phases = split(FAULT, 100.4, gang(), 1, steps_lost=50, step_seconds=0.04)
    assert list(phases) == list(PHASES)
    expected = {
        "detect": 0.4,  # the status said so
        "start": 1.6,  # worker 1's process, the later one, at 102.0
        "import": 3.5,  # worker 1 imported TensorFlow at 105.5
        "cluster up": 0.5,  # the chief's strategy at 106.0, after worker 1's at 105.9
        "restore": 0.5,
        "first step": 0.5,
        "redo": 2.0,  # 50 steps of 0.04 s
    }
    assert phases == pytest.approx(expected)


def test_a_restart_seen_late_by_the_poll_makes_no_phase_negative() -> None:
    # The bench polls the status: it saw the attempt raised after the processes were up.
    phases = split(FAULT, 103.0, gang(), 1, steps_lost=0, step_seconds=0.04)
    assert phases["start"] == 0.0 and phases["import"] == pytest.approx(2.5)
    assert all(v is not None and v >= 0 for v in phases.values())


def test_lines_of_an_earlier_attempt_or_before_the_fault_are_not_the_restarts() -> None:
    logs = gang()
    logs[1] = [line for line in logs[1] if "attempt=1" not in line[1]]  # worker 1 never came back
    phases = split(FAULT, 100.4, logs, 1, steps_lost=None, step_seconds=None)
    assert phases["detect"] == pytest.approx(0.4)
    assert all(phases[name] is None for name in PHASES[1:])


def test_a_step_takes_the_global_batch_over_the_examples_per_second() -> None:
    assert step_seconds({"examplesPerSecond": 400.0}, gang()) == pytest.approx(0.04)
    assert step_seconds({}, gang()) is None
    assert step_seconds({"examplesPerSecond": 0}, gang()) is None
    assert step_seconds({"examplesPerSecond": 400.0}, {0: []}) is None


def test_the_table_has_a_row_per_contender_and_kind_with_the_median_of_its_faults() -> None:
    fast = Fault("SIGKILL", phases=dict.fromkeys(PHASES, 1.0))
    slow = Fault("SIGKILL", phases={**dict.fromkeys(PHASES, 3.0), "redo": None})
    text = phase_table([Result("tfmw-in-place", faults=[fast, slow])])
    row = text.splitlines()[2]
    assert row.startswith("| tfmw-in-place | SIGKILL | 2.00 |")
    assert row.endswith("| 1.00 | 13.00 |")  # redo: the one fault that knew it; the sum of the medians
    assert "pod deleted" not in text


def test_the_step_resumed_from_is_the_chiefs_first_after_the_fault() -> None:
    assert resumed_step(gang(), FAULT) == 300
    assert resumed_step(gang(), 40.0) == 0  # attempt 0's, before it
    assert resumed_step({1: gang()[1]}, FAULT) is None


def test_a_peers_restart_has_no_detect_and_its_start_spans_it_in_lines_of_any_attempt() -> None:
    """TFJob's and the floor's pods say no attempt the bench can match, and no status says
    when their restart was decided: the phases run from the fault in whatever lines follow."""
    logs = gang()
    phases = split(FAULT, None, logs, None, steps_lost=0, step_seconds=0.04)
    assert phases["detect"] is None
    assert phases["start"] == pytest.approx(2.0)  # worker 1's process at 102.0, from the fault
    assert phases["import"] == pytest.approx(3.5) and phases["first step"] == pytest.approx(0.5)
    # Lines before the fault are never the restart's, whatever their attempt.
    assert split(200.0, None, logs, None, steps_lost=0, step_seconds=0.04)["start"] is None
