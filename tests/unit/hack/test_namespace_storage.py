"""hack/namespace-storage.sh --print: a namespace's volume is its own folder, and only that."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "namespace-storage.sh"


def test_the_namespaces_volume_is_its_folder_bound_to_its_claim() -> None:
    out = subprocess.run(
        [str(SCRIPT), "--print", "team-a"], check=True, capture_output=True, text=True
    ).stdout
    namespace, volume, claim = yaml.safe_load_all(out)
    assert namespace["metadata"]["name"] == "team-a"
    assert volume["spec"]["hostPath"]["path"] == "/var/lib/tfmw/shared/team-a"
    assert volume["spec"]["claimRef"] == {"namespace": "team-a", "name": "tfmw-shared"}
    assert (claim["metadata"], claim["spec"]["volumeName"]) == (
        {"name": "tfmw-shared", "namespace": "team-a"},
        "tfmw-shared-team-a",
    )


def test_names_that_could_climb_or_take_the_operators_claim_are_refused() -> None:
    for bad in ("..", "a/../b", "Team", "", "tfmw-system", "operator"):
        result = subprocess.run([str(SCRIPT), "--print", bad], capture_output=True, text=True)
        assert result.returncode == 2 and not result.stdout, bad
