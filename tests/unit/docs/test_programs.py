"""The sample programs of deploy/samples/programs/, their jobs in deploy/samples/ and
docs/training-program.md: the doc shows each program and each job exactly as its file is (the
files are what tests/programs and tests/e2e/test_topologies.py run), each program is complete
and short, and each job runs its program from the ConfigMap its comment says to create."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from unit.docs.blocks import REPO, all_blocks, named_block

SAMPLES = REPO / "deploy" / "samples"
PROGRAMS = SAMPLES / "programs"
PROGRAM_MAX_LINES = 100
PROGRAM_FILES = sorted(PROGRAMS.glob("*.py"))
# The job that runs each program, a sample of deploy/samples/ like any other.
JOBS = {
    "parameter_server.py": "parameter-server.yaml",
    "chief_evaluator.py": "chief-evaluator.yaml",
    "preemption.py": "preemption.yaml",
    "exit_code.py": "exit-code.yaml",
}
JOB_FILES = [SAMPLES / job for job in sorted(JOBS.values())]
ROLES = ("chief", "parameterServers", "evaluator")
# What each program must contain to do its part (docs/training-program.md, "Programs for every topology").
NEEDS = {
    "parameter_server.py": ["ParameterServerStrategy", "tf.distribute.Server", "BackupAndRestore"],
    "chief_evaluator.py": ["MultiWorkerMirroredStrategy", "SidecarEvaluator", "TFMW_EVALUATION_PATH"],
    "preemption.py": ["MultiWorkerMirroredStrategy", "PreemptionCheckpointHandler", "sys.exit(42)"],
    "exit_code.py": ["MultiWorkerMirroredStrategy"],
}
WRITES_MARKER = {"parameter_server.py", "chief_evaluator.py", "preemption.py"}


def test_every_program_has_its_needs_listed_and_its_job() -> None:
    assert [path.name for path in PROGRAM_FILES] == sorted(NEEDS) == sorted(JOBS)
    assert not list(PROGRAMS.glob("*.yaml")), "jobs are samples of deploy/samples/, not beside the programs"


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda path: path.name)
def test_the_doc_shows_the_program_as_its_file_is(path: Path) -> None:
    block = named_block(path.name)
    assert block.path.name == "training-program.md" and block.language == "python"
    assert block.text == path.read_text(), f"{block.where} differs from {path.relative_to(REPO)}"


def test_every_program_block_in_the_docs_is_a_file() -> None:
    shown = {block.name for block in all_blocks() if block.name and block.name.endswith(".py")}
    assert shown == {path.name for path in PROGRAM_FILES}


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda path: path.name)
def test_the_doc_shows_the_job_as_its_file_is_after_its_program(path: Path) -> None:
    block = named_block(path.name)
    assert block.path.name == "training-program.md" and block.language == "yaml"
    assert block.text == path.read_text(), f"{block.where} differs from {path.relative_to(REPO)}"
    (program,) = [name for name, job in JOBS.items() if job == path.name]
    assert named_block(program).line < block.line, f"{block.where}: shown before {program}"


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda path: path.name)
def test_a_program_is_complete_and_short(path: Path) -> None:
    text = path.read_text()
    compile(text, str(path), "exec")
    assert len(text.splitlines()) <= PROGRAM_MAX_LINES
    for needed in ["SIGTERM", 'os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")', *NEEDS[path.name]]:
        assert needed in text, needed
    imported = set(re.findall(r"^(?:import|from) (\w+)", text, re.M))
    assert imported <= {"json", "os", "signal", "sys", "threading", "time", "numpy", "tensorflow"}
    if path.name in WRITES_MARKER:
        for needed in ("TFMW_MARKER_PATH", "TFMW_PROGRESS_PATH", "TFMW_SHARED_DIR", '"jobUid"'):
            assert needed in text, needed
    else:  # ends by its exit code: needs no shared folder, so reads nothing of the operator's
        assert "TFMW_" not in text


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda path: path.name)
def test_a_job_runs_its_program_from_the_configmap_it_says_to_create(path: Path) -> None:
    text = path.read_text()
    job = yaml.safe_load(text)
    assert job["kind"] == "TFMultiWorkerJob" and job["metadata"]["name"] == path.stem
    spec = job["spec"]
    templates = [spec["template"], *(spec[role]["template"] for role in ROLES if role in spec)]
    configmaps = set()
    for template in templates:  # every role runs the same program, which picks its part
        pod = template["spec"]
        (container,) = pod["containers"]
        program = Path(container["command"][-1]).name
        assert JOBS[program] == path.name
        (volume,) = [v for v in pod["volumes"] if "configMap" in v]
        configmaps.add(volume["configMap"]["name"])
    (configmap,) = configmaps
    create = f"kubectl create configmap {configmap} --from-file=deploy/samples/programs/{program}"
    assert create in text
    assert f"kubectl apply -f deploy/samples/{path.name}" in text
