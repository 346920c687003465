"""The docs' fenced blocks: the marker convention parses as documented, and every block the
docs tests run or take out of the docs exists (docs/development.md, "Docs that run")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from tfmw_operator.core.policies.progress_deadline import (
    AWAITING_PROGRESS,
    NO_PROGRESS_REPORTED,
    PROGRESS_ADVANCING,
    PROGRESS_STALLED,
)
from unit.docs.blocks import (
    REPO,
    FenceError,
    all_blocks,
    doc_files,
    named_block,
    parse_blocks,
    runnable_blocks,
)

README_MAX_LINES = 250
PROGRAM_MAX_LINES = 60
DOCS = [
    "architecture.md",
    "cli.md",
    "install.md",
    "reference.md",
    "training-program.md",
    "troubleshooting.md",
    "storage.md",
    "supervisor.md",
    "kueue.md",
    "local-cluster.md",
    "benchmarks.md",
    "development.md",
    "tfjob.md",
]


def test_a_runnable_block_is_marked_by_its_info_string() -> None:
    text = (
        "Intro.\n\n"
        "```sh runnable\nkubectl get tfmwjobs\n```\n\n"
        "```sh\nmake demo\n```\n\n"
        "```yaml name=job\nkind: TFMultiWorkerJob\n```\n"
    )
    first, second, third = parse_blocks(text, Path("x.md"))
    assert (first.language, first.runnable, first.text, first.line) == (
        "sh",
        True,
        "kubectl get tfmwjobs\n",
        3,
    )
    assert (second.runnable, second.name) == (False, None)
    assert (third.language, third.runnable, third.name, third.line) == ("yaml", False, "job", 11)


def test_block_bodies_keep_their_own_indentation() -> None:
    text = "```python name=p\ndef f():\n    return 1\n```\n"
    (block,) = parse_blocks(text)
    assert block.text == "def f():\n    return 1\n"


def test_an_indented_fence_loses_its_indentation_only() -> None:
    text = "1. A step:\n\n   ```sh runnable\n   echo one\n     echo two\n   ```\n"
    (block,) = parse_blocks(text)
    assert block.text == "echo one\n  echo two\n"


def test_longer_fences_and_tildes_hold_shorter_fences() -> None:
    text = "````md\n```sh runnable\nnot a block of its own\n```\n````\n~~~sh runnable\necho hi\n~~~\n"
    outer, tilde = parse_blocks(text)
    assert outer.language == "md" and "```sh runnable" in outer.text
    assert tilde.runnable and tilde.text == "echo hi\n"


def test_an_unclosed_fence_is_an_error() -> None:
    with pytest.raises(FenceError, match="never closes"):
        parse_blocks("```sh runnable\necho hi\n", Path("x.md"))


def test_only_shell_blocks_can_be_runnable() -> None:
    with pytest.raises(FenceError, match="only shell blocks"):
        parse_blocks("```python runnable\nprint(1)\n```\n", Path("x.md"))


def test_every_doc_exists_and_its_fences_pair_up() -> None:
    paths = doc_files()
    assert [p.name for p in paths if p.parent == REPO / "docs"] == sorted(DOCS)
    assert all_blocks()  # parsing every doc raised no FenceError


def test_the_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    headings = [line for line in lines if line.startswith("## ")]
    for wanted in (
        "Install on your cluster",
        "Quick start",
        "Your first job",
        "Watching it",
        "When it fails",
    ):
        assert any(wanted in heading for heading in headings), wanted


def test_the_install_section_has_at_most_15_lines_of_commands() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Install on your cluster", 1)[1].split("\n## ", 1)[0]
    commands = [b for b in parse_blocks(section) if b.language in ("sh", "bash")]
    assert commands
    assert sum(len(b.text.splitlines()) for b in commands) <= 15


def test_the_runnable_blocks_the_docs_test_expects_exist() -> None:
    where = {(block.path.name, block.text.splitlines()[0]) for block in runnable_blocks()}
    assert ("README.md", "kubectl apply -f deploy/samples/mnist-2-workers.yaml") in where
    assert ("README.md", "kubectl apply -f - <<'EOF'") in where
    assert any(name == "storage.md" for name, _ in where)
    assert any(name == "local-cluster.md" for name, _ in where)


def test_every_runnable_block_cleans_up_what_it_creates() -> None:
    for block in runnable_blocks():
        commands = re.sub(r"(^|\s)#.*", "", block.text)  # not the comments
        creates = re.findall(r"kubectl (?:apply|create)\b", commands)
        deletes = re.findall(r"kubectl delete\b", commands)
        assert len(deletes) >= len(creates), f"{block.where}: creates without deleting"


def test_the_minimal_program_is_complete_and_short() -> None:
    program = named_block("minimal-program")
    assert program.path.name == "training-program.md" and program.language == "python"
    assert len(program.text.splitlines()) <= PROGRAM_MAX_LINES
    compile(program.text, program.where, "exec")
    for needed in (
        "MultiWorkerMirroredStrategy",
        "TFMW_MARKER_PATH",
        "TFMW_PROGRESS_PATH",
        "jobUid",
        "SIGTERM",
    ):
        assert needed in program.text, needed
    assert "job_uid" not in program.text  # the marker's key is jobUid


def test_the_minimal_job_runs_the_program_from_its_configmap() -> None:
    job = yaml.safe_load(named_block("minimal-job").text)
    assert job["kind"] == "TFMultiWorkerJob"
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["command"] == ["python3", "/program/train.py"]
    assert [v["configMap"]["name"] for v in spec["volumes"]] == ["my-training-program"]


def test_relative_links_between_the_docs_lead_to_files() -> None:
    link = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")
    for path in doc_files():
        for target in link.findall(path.read_text()):
            assert (path.parent / target).exists(), f"{path.relative_to(REPO)}: broken link {target}"


def test_the_reference_names_every_reason_the_operator_writes() -> None:
    """Every reason in the operator's source (a Fail verdict, a condition, an Event) is in
    docs/reference.md, so a new reason cannot ship undocumented."""
    source = "\n".join(p.read_text() for p in sorted((REPO / "operator" / "tfmw_operator").rglob("*.py")))
    found = set(re.findall(r'Fail\(\s*"([A-Za-z]+)"', source))
    found |= set(
        re.findall(r'\.condition\(\s*ConditionType\.[A-Z_]+,\s*(?:True|False),\s*"([A-Za-z]+)"', source)
    )
    found |= set(re.findall(r'\.event\(\s*"(?:Normal|Warning)",\s*"([A-Za-z]+)"', source))
    found |= set(re.findall(r'\("Warning", "([A-Za-z]+)"', source))
    # Success reasons: the marker's, and what the exit-code completion policies return.
    found |= set(re.findall(r'_succeed\(\s*step,\s*job,\s*"([A-Za-z]+)"', source))
    found |= set(re.findall(r'return "([A-Za-z]+Succeeded)", ', source))
    # Reasons the progress deadline writes through its verdict, named once as constants there.
    found |= {PROGRESS_STALLED, PROGRESS_ADVANCING, AWAITING_PROGRESS, NO_PROGRESS_REPORTED}
    assert {"WorkerFailed", "InvalidSpec", "MarkerWritten", "GangRestart", "ChiefSucceeded"} <= found
    reference = (REPO / "docs" / "reference.md").read_text()
    stall_reasons = {"ErrImageNeverPull", "InvalidImageName", "ImagePullBackOff", "Unschedulable"}
    missing = sorted(reason for reason in found | stall_reasons if f"`{reason}`" not in reference)
    assert not missing, f"docs/reference.md does not name {missing}"
