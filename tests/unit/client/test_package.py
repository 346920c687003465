"""A program in a ConfigMap: what is packaged, how, and the 1 MiB limit checked first."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from tfmw_client import package
from tfmw_client.errors import TfmwError

LAUNCHER = b"# the launcher\n"


def test_a_script_is_one_file_run_by_its_name(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    program = package.collect(script)
    assert program.entrypoint == "train.py"
    assert [(f.path, f.content) for f in program.files] == [("train.py", b"print('hi')\n")]


def test_a_folder_leaves_out_hidden_files_caches_and_links(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "net.py").write_text("NET = 1\n")
    (tmp_path / "main.py").write_text("import model.net\n")
    (tmp_path / ".env").write_text("SECRET=1\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "link.py").symlink_to("/etc/hostname")
    program = package.collect(tmp_path)
    assert program.entrypoint == "main.py"
    assert sorted(f.path for f in program.files) == ["main.py", "model/net.py"]
    assert program.skipped == ("link.py (a symbolic link)",)


def test_a_folder_needs_a_script_to_run(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text("")
    with pytest.raises(TfmwError, match=r"no train\.py, main\.py or __main__\.py") as raised:
        package.collect(tmp_path)
    assert "--entrypoint" in raised.value.fix
    assert package.collect(tmp_path, "lib.py").entrypoint == "lib.py"
    with pytest.raises(TfmwError, match="not a file of"):
        package.collect(tmp_path, "missing.py")


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(TfmwError, match="no such file or folder"):
        package.collect(tmp_path / "nope.py")


def test_more_than_a_configmap_holds_is_refused_naming_the_largest_files(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "data.csv").write_bytes(b"1," * 400_000)
    (tmp_path / "weights.bin").write_bytes(b"\1" * 300_000)
    program = package.collect(tmp_path)
    with pytest.raises(TfmwError) as raised:
        package.check_size(program, LAUNCHER)
    assert "more than a ConfigMap holds (1 MiB)" in raised.value.message
    assert raised.value.message.index("data.csv (781.2 KiB)") < raised.value.message.index("weights.bin")
    assert "build an image" in raised.value.fix


def test_exactly_the_limit_fits() -> None:
    body = b"x" * (package.CONFIGMAP_LIMIT - len(LAUNCHER))
    package.check_size(package.Program((package.ProgramFile("train.py", body),), "train.py"), LAUNCHER)
    with pytest.raises(TfmwError):
        package.check_size(
            package.Program((package.ProgramFile("train.py", body + b"x"),), "train.py"), LAUNCHER
        )


def test_paths_become_valid_unique_keys_and_binary_files_go_to_binary_data() -> None:
    files = (
        package.ProgramFile("train.py", b"print(1)\n"),
        package.ProgramFile("model/net.py", b"NET = 1\n"),
        package.ProgramFile("model__net.py", b"OTHER = 1\n"),
        package.ProgramFile("data/réseau weights.bin", b"\xff\x00\x01"),
    )
    packed = package.pack(package.Program(files, "train.py"), LAUNCHER)
    keys = [item["key"] for item in packed.items]
    assert len(set(keys)) == 4 and all(
        key.replace("-", "").replace("_", "").replace(".", "").isalnum() for key in keys
    )
    assert [item["path"] for item in packed.items] == [f.path for f in files]
    assert packed.data[package.LAUNCHER_KEY] == LAUNCHER.decode()
    (binary_key,) = packed.binary_data
    assert base64.b64decode(packed.binary_data[binary_key]) == b"\xff\x00\x01"
