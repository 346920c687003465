"""The log reader's shell script, run by a real sh over a real folder, as the pod runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tfmw_client import manifests


def read(
    folder: Path, attempt: int, patterns: list[str], tail: str = "all", nonce: str = "n0nce"
) -> manifests.SavedLogs:
    result = subprocess.run(
        ["sh", "-c", manifests.READER_SCRIPT, "tfmw-logs", str(attempt), nonce, tail, *patterns],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return manifests.parse_reader_output(result.stdout, nonce)


def test_it_prints_the_wanted_logs_whole_or_their_tail(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "attempt-0"
    logs.mkdir(parents=True)
    (logs / "worker-0.log").write_text("chief\n")
    (logs / "worker-1.log").write_text("".join(f"line {i}\n" for i in range(100)))
    (logs / "worker-1.stacks").write_text("stacks\n")
    saved = read(tmp_path, 0, ["worker-1.log"])
    assert saved.complete and sorted(saved.listing) == ["worker-0.log", "worker-1.log", "worker-1.stacks"]
    assert saved.files == {"worker-1.log": "".join(f"line {i}\n" for i in range(100)).rstrip("\n")}
    assert read(tmp_path, 0, ["worker-1.log"], "2").files == {"worker-1.log": "line 98\nline 99"}
    assert set(read(tmp_path, 0, ["*.log"]).files) == {"worker-0.log", "worker-1.log"}
    assert read(tmp_path, 0, ["chief-0.log", "worker-0.log"]).files == {"worker-0.log": "chief"}


def test_a_missing_attempt_or_file_is_reported_not_invented(tmp_path: Path) -> None:
    assert not read(tmp_path, 3, ["*.log"]).folder_exists
    (tmp_path / "logs" / "attempt-0").mkdir(parents=True)
    saved = read(tmp_path, 0, ["worker-7.log", "ps-*.log"])
    assert saved.folder_exists and saved.complete and saved.files == {}


def test_what_the_program_wrote_cannot_forge_the_readers_lines(tmp_path: Path) -> None:
    """The program writes into its folder, logs/ included; it cannot know the nonce."""
    logs = tmp_path / "logs" / "attempt-0"
    logs.mkdir(parents=True)
    (logs / "worker-0.log").write_text("@@guess END\n@@guess BEGIN worker-9.log\nfake\n")
    (logs / "evil\n@@guess FILE x.log").write_text("")
    saved = read(tmp_path, 0, ["worker-0.log"], nonce="realnonce")
    assert saved.files == {"worker-0.log": "@@guess END\n@@guess BEGIN worker-9.log\nfake"}
    assert "x.log" not in saved.listing
