"""The command line: flags as kubectl spells them, exit codes as kubectl's, no cluster needed."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tfmw_client import cli
from tfmw_client.errors import EXIT_ERROR

REPO = Path(__file__).resolve().parents[3]


def parse(*argv: str) -> Any:
    return cli.parse_args(argv)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("500ms", 0.5), ("2.5m", 150), ("-1s", -1)],
)
def test_durations_as_kubectl_takes_them(text: str, seconds: float) -> None:
    assert cli.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "m10", "10m x", "1h-"])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(Exception, match="not a duration"):
        cli.parse_duration(text)


def test_submit_takes_the_programs_arguments_after_a_double_dash() -> None:
    args = parse(
        "submit",
        "train.py",
        "--workers",
        "2",
        "--pip",
        "pandas",
        "--pip",
        "scikit-learn>=1.5",
        "--",
        "--epochs",
        "3",
    )
    assert (args.path, args.args, args.workers, args.pip) == (
        "train.py",
        ["--epochs", "3"],
        2,
        ["pandas", "scikit-learn>=1.5"],
    )
    assert args.marker == "auto" and args.dry_run is False


def test_connection_flags_work_before_and_after_the_command() -> None:
    before = parse("-n", "team-a", "--context", "lab", "get")
    after = parse("get", "-n", "team-a", "--kubeconfig", "/k")
    assert (before.namespace, before.context) == ("team-a", "lab")
    assert (after.namespace, after.kubeconfig) == ("team-a", "/k")
    assert not hasattr(parse("get"), "namespace")  # unset: the context's own


def test_logs_takes_a_worker_or_a_role_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("logs", "mnist", "--attempt", "0", "--worker", "1", "--tail", "5")
    assert (args.job, args.attempt, args.worker, args.role, args.tail, args.all, args.follow) == (
        "mnist",
        0,
        1,
        None,
        5,
        False,
        False,
    )
    with pytest.raises(SystemExit) as ended:
        parse("logs", "mnist", "--worker", "1", "--role", "ps")
    assert ended.value.code == EXIT_ERROR  # kubectl's 1, not argparse's 2 (2 is wait's timeout)
    assert "not allowed with argument" in capsys.readouterr().err


def test_only_submit_takes_arguments_after_a_double_dash() -> None:
    with pytest.raises(SystemExit):
        parse("get", "--", "x")


def test_wait_defaults_to_succeeded_within_ten_minutes() -> None:
    args = parse("wait", "mnist")
    assert (args.target, args.timeout) == ("Succeeded", 600)
    assert parse("wait", "mnist", "--for", "Finished", "--timeout", "2h").timeout == 7200


def test_help_and_no_command_print_usage_and_exit_0() -> None:
    out = io.StringIO()
    assert cli.main([], out=out) == 0
    assert "submit" in out.getvalue() and "logs" in out.getvalue()


def test_convert_reads_a_file_or_standard_input_and_names_the_field_it_refuses(tmp_path: Path) -> None:
    manifest = tmp_path / "tfjob.yaml"
    manifest.write_text("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: x}\n")
    err = io.StringIO()
    assert cli.main(["convert", "-f", str(manifest)], out=io.StringIO(), err=err) == EXIT_ERROR
    assert f"error: {manifest}, document 1 (TFJob x): spec.tfReplicaSpecs: is required" in err.getvalue()
    assert parse("convert", "-f", "-").filename == "-"


def _run(*code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "client")}
    return subprocess.run(
        [sys.executable, "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


def test_help_and_the_client_version_never_import_the_kubernetes_package() -> None:
    """What keeps `tfmw --help` and `tfmw version --client` as quick to start as kubectl."""
    result = _run(
        "import io, sys",
        "from tfmw_client.cli import main",
        "out = io.StringIO()",
        "assert main(['version', '--client'], out=out) == 0, out.getvalue()",
        "try:",
        "    main(['--help'], out=io.StringIO())",
        "except SystemExit:",
        "    pass",
        "print(out.getvalue().strip())",
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3', 'yaml')))",
    )
    assert result.returncode == 0, result.stderr
    version, imported = result.stdout.splitlines()[-2:]
    assert version.startswith("Client Version: ")
    assert imported == "[]"


def test_an_unreachable_cluster_is_an_error_that_names_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]\n"
    )
    err = io.StringIO()
    assert cli.main(["--kubeconfig", str(config), "get"], out=io.StringIO(), err=err) == EXIT_ERROR
    text = err.getvalue()
    assert text.startswith("error: cannot reach the API server at https://127.0.0.1:1")
    assert "--kubeconfig and --context" in text


def test_a_missing_context_is_an_error_that_names_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n")
    err = io.StringIO()
    assert (
        cli.main(["--kubeconfig", str(config), "--context", "nope", "get"], out=io.StringIO(), err=err)
        == EXIT_ERROR
    )
    assert "cannot use the kubeconfig" in err.getvalue() and "get-contexts" in err.getvalue()


# The official client and what it brings (tfmw_client.transport, tfmw_client.official); its
# Configuration's module (tfmw_client.connection) and PyYAML (tfmw_client.plain_yaml).
GET_DOES_NOT_IMPORT = (
    "kubernetes",
    "urllib3",
    "pydantic",
    "oauthlib",
    "requests",
    "kubernetes.config.kube_config",
    "kubernetes.client.configuration",
    "multiprocessing",
    "urllib.request",
    "yaml",
)


def test_get_loads_none_of_the_other_commands_machinery(tmp_path: Path) -> None:
    """`tfmw get` pays for the standard library's HTTP (tfmw_client.transport), not for the
    official client (urllib3 alone took longer than kubectl's `get`), the function checks,
    packaging, log reading or waiting it does not use, nor for the official Configuration's
    module and PyYAML where its kubeconfig does not need them (docs/benchmarks.md, "The CLI's
    start time")."""
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    result = _run(
        "import io, sys",
        f"HEAVY = {GET_DOES_NOT_IMPORT!r}",
        "from tfmw_client.cli import main",
        f"assert main(['--kubeconfig', {str(config)!r}, 'get'], out=io.StringIO(), err=io.StringIO()) == 1",
        "print(sorted(m for m in sys.modules if m.startswith('tfmw_client.')))",
        "print(sorted(m for m in HEAVY if m in sys.modules))",
    )
    assert result.returncode == 0, result.stderr
    modules, heavy = result.stdout.splitlines()[-2:]
    assert heavy == "[]"
    assert modules == str(
        [
            "tfmw_client.cli",
            "tfmw_client.connection",
            "tfmw_client.errors",
            "tfmw_client.kube",
            "tfmw_client.kubeconfig",
            "tfmw_client.names",
            "tfmw_client.plain_yaml",
            "tfmw_client.render",
            "tfmw_client.sdk",
            "tfmw_client.transport",
        ]
    )
