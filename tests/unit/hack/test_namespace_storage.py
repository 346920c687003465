"""hack/namespace-storage.sh --print: a namespace's volume is its own folder, and only that,
and the namespace enforces Pod Security (without it the folder wall does not hold). What the
script does on a cluster (refusals, re-runs, --delete): tests/integration/test_walls.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "namespace-storage.sh"


def printed(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run([str(SCRIPT), "--print", *args], check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_namespaces_volume_is_its_folder_bound_to_its_claim() -> None:
    namespace, volume, claim = printed("team-a")
    assert namespace["metadata"]["name"] == "team-a"
    assert volume["spec"]["hostPath"]["path"] == "/var/lib/tfmw/shared/team-a"
    assert volume["spec"]["claimRef"] == {"namespace": "team-a", "name": "tfmw-shared"}
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert (claim["metadata"]["name"], claim["metadata"]["namespace"], claim["spec"]["volumeName"]) == (
        "tfmw-shared",
        "team-a",
        "tfmw-shared-team-a",
    )


def test_the_namespace_enforces_baseline_and_warns_of_anything_less_than_restricted() -> None:
    namespace, volume, claim = printed("team-a")
    assert namespace["metadata"]["labels"] == {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "latest",
        "tfmw.dev/shared-storage": "true",
    }
    # What the operator and --delete recognise as set up this way.
    assert volume["metadata"]["labels"]["tfmw.dev/namespace"] == "team-a"
    assert claim["metadata"]["labels"]["tfmw.dev/shared-storage"] == "true"


def test_restricted_can_be_asked_for() -> None:
    namespace, _, _ = printed("--pod-security", "restricted", "team-a")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_names_that_could_climb_or_take_the_operators_claim_are_refused() -> None:
    for bad in ("..", "a/../b", "Team", "", "tfmw-system", "operator", "-a"):
        result = subprocess.run([str(SCRIPT), "--print", bad], capture_output=True, text=True)
        assert result.returncode == 2 and not result.stdout, bad


@pytest.mark.parametrize(
    "args",
    [
        ["--print", "--pod-security", "privileged", "team-a"],  # less than the wall needs
        ["--print", "--pod-security", "team-a"],
        ["--print", "team-a", "team-b"],
        ["--print", "--purge", "team-a"],  # --purge only with --delete
        ["--print", "--unknown", "team-a"],
    ],
)
def test_wrong_usage_is_refused_before_anything_is_done(args: list[str]) -> None:
    result = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True)
    assert result.returncode == 2 and not result.stdout, args
    assert "usage:" in result.stderr
