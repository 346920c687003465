"""hack/components, the table every hack/ script reads, against the multi-call binary it names."""

from __future__ import annotations

import re

from kube import REPO

COMMANDS = re.compile(r'^\s*"([a-z-]+)":\s*func\(\)', re.M)


def components() -> dict[str, str]:
    """Each component's name and the binary that runs it, from the table."""
    rows = (line.split() for line in (REPO / "hack/components").read_text().splitlines())
    return {row[0]: row[1] for row in rows if row and not row[0].startswith("#")}


def test_every_kubeall_component_is_a_command_of_kubeall_and_the_reverse() -> None:
    table = {name for name, binary in components().items() if binary == "kubeall"}
    commands = set(COMMANDS.findall((REPO / "hack/kubeall/main.go").read_text()))
    assert table, "the table names no kubeall component"
    assert table == commands, f"only in the table: {table - commands}; only in main.go: {commands - table}"
