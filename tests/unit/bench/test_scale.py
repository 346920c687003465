"""The scale benchmark's pure parts: its pods' template, when a gang counts as running or
cleaned, and the ratios of its table."""

from __future__ import annotations

from typing import Any

from bench.scale import (
    ROWS,
    Pod,
    cleaned,
    gang_running,
    kwok_template,
    markdown,
    pairs,
    ratios,
    table,
    with_shared_volume,
)


def pods(phases: list[str], ready: bool = True, deleting: int = 0) -> list[Pod]:
    return [Pod(f"u{i}", phase, ready, i < deleting) for i, phase in enumerate(phases)]


def test_the_template_lands_on_kwok_nodes_only_by_the_default_scheduler() -> None:
    spec = kwok_template()["spec"]
    assert "schedulerName" not in spec
    assert spec["nodeSelector"] == {"tfmw.dev/kwok": "true"}
    assert spec["tolerations"] == [{"key": "tfmw.dev/kwok", "operator": "Exists", "effect": "NoSchedule"}]


def test_tfjob_pods_mount_the_same_claim() -> None:
    spec = with_shared_volume(kwok_template())["spec"]
    assert spec["volumes"][0]["persistentVolumeClaim"] == {"claimName": "tfmw-shared"}
    assert spec["containers"][0]["volumeMounts"][0]["name"] == spec["volumes"][0]["name"]


def test_a_gang_runs_when_all_its_pods_run_ready_and_none_is_the_dead_one() -> None:
    assert gang_running(pods(["Running"] * 8), dead=set())
    assert not gang_running(pods(["Running"] * 7), dead=set())
    assert not gang_running(pods(["Running"] * 7 + ["Pending"]), dead=set())
    assert not gang_running(pods(["Running"] * 8, ready=False), dead=set())
    assert not gang_running(pods(["Running"] * 8), dead={"u3"})
    # A pod being deleted does not count; its replacement does.
    assert gang_running(pods(["Failed"] + ["Running"] * 8, deleting=1), dead={"u0"})
    assert not gang_running(pods(["Running"] * 8, deleting=1), dead=set())


def test_cleaned_leaves_finished_pods_but_no_running_or_pending_one() -> None:
    assert cleaned([]) and cleaned(pods(["Succeeded", "Failed"]))
    assert not cleaned(pods(["Succeeded", "Running"])) and not cleaned(pods(["Pending"]))


def test_ratios_and_table_say_tfmw_over_each_other_and_mark_what_is_missing() -> None:
    side: dict[str, dict[str, Any]] = {
        "tfmw": {"create_to_gang_running": {"median_s": 1.0, "p99_s": 2.0}, "cpu_s": 10.0},
        "tfjob-tuned": {"create_to_gang_running": {"median_s": 4.0, "p99_s": 4.0}, "cpu_s": 0.0},
        "tfjob-shipped": {"did_not_finish": "3 of 10 gangs Running after 300 s"},
    }
    out = ratios(side)
    assert set(out) == {"tfmw/tfjob-tuned", "tfmw/tfjob-shipped"}
    tuned = out["tfmw/tfjob-tuned"]
    assert (
        tuned["create -> gang Running, median (s)"] == 0.25
        and tuned["create -> gang Running, p99 (s)"] == 0.5
    )
    assert tuned["controller CPU, steps 1-4 (s)"] is None  # theirs is 0
    assert all(v is None for v in out["tfmw/tfjob-shipped"].values())
    text = table(side)
    assert len(text.splitlines()) == 2 + len(ROWS) + 1
    assert "tfjob-shipped did not finish: 3 of 10 gangs Running" in text
    rows = markdown(side).splitlines()
    assert (
        rows[0]
        == "| measure | tfmw | tfjob-tuned | tfjob-shipped | tfmw / tfjob-tuned | tfmw / tfjob-shipped |"
    )
    assert rows[2] == "| create -> gang Running, median (s) | 1 | 4 | - | 0.25 | - |"


def test_in_place_is_rated_against_every_peer_and_against_tfmw_re_created() -> None:
    assert pairs(["tfmw", "tfmw-in-place", "tfjob-tuned", "floor"]) == [
        ("tfmw", "tfjob-tuned"),
        ("tfmw", "floor"),
        ("tfmw-in-place", "tfjob-tuned"),
        ("tfmw-in-place", "floor"),
        ("tfmw-in-place", "tfmw"),
    ]
    assert pairs(["tfmw-in-place", "tfjob-tuned"]) == [("tfmw-in-place", "tfjob-tuned")]
