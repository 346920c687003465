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
from tfmw_client.errors import EXIT_ERROR, ApiError, TfmwError

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


class Refusing:
    """A client whose every call fails with `error`, or lists `jobs`."""

    def __init__(self, error: TfmwError | None = None, jobs: list[Any] | None = None) -> None:
        self.error, self.jobs, self.namespace = error, jobs or [], "team"

    def delete(self, name: str) -> None:
        if self.error:
            raise self.error

    def list_jobs(self, all_namespaces: bool = False) -> list[Any]:
        if self.error:
            raise self.error
        return self.jobs


def run_with(client: Refusing, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setattr(cli, "_client", lambda args: client)
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def test_ignore_not_found_ignores_only_a_404_for_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = ApiError(404, "NotFound", 'tfmwjobs.tfmw.dev "x" not found')
    assert run_with(Refusing(gone), monkeypatch, "delete", "x", "--ignore-not-found")[0] == 0
    forbidden = ApiError(403, "Forbidden", 'tfmwjobs.tfmw.dev "x" is forbidden: role not found')
    code, _, err = run_with(Refusing(forbidden), monkeypatch, "delete", "x", "--ignore-not-found")
    assert code == EXIT_ERROR and "forbidden" in err
    unserved = ApiError(404, "", "the tfmw.dev API is not served", type_missing=True)
    assert run_with(Refusing(unserved), monkeypatch, "delete", "x", "--ignore-not-found")[0] == EXIT_ERROR
    # An admission policy's message may quote what a tenant wrote: escaped, as every error.
    denied = ApiError(422, "Invalid", "denied: team \x1b]52;c;owned\x07")
    assert (
        run_with(Refusing(denied), monkeypatch, "delete", "x")[2]
        == "error: denied: team ^[]52;c;owned\\x07\n"
    )


def test_get_o_name_leaves_out_an_item_without_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [{"metadata": {"name": "a"}}, {"kind": "TFMultiWorkerJob"}, {"metadata": {"name": "b\x1b"}}]
    code, out, err = run_with(Refusing(jobs=jobs), monkeypatch, "get", "-o", "name")
    assert code == 0 and out == "tfmwjob.tfmw.dev/a\ntfmwjob.tfmw.dev/b^[\n"
    assert "left out 1 listed item(s) without metadata.name" in err


def test_an_error_s_lines_are_kept_and_its_control_characters_escaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hostile = TfmwError("boom\x1b]0;owned\x07\nlast line\r", "fix\x1b[2J")
    code, _, err = run_with(Refusing(hostile), monkeypatch, "get")
    assert code == EXIT_ERROR
    assert err == "error: boom^[]0;owned\\x07\nlast line\\r\nfix^[[2J\n"


def test_input_nested_too_deeply_is_an_error_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("[" * 5000 + "]" * 5000))
    code, _, err = run_with(Refusing(), monkeypatch, "convert", "-f", "-")
    assert code == EXIT_ERROR and "nested too deeply" in err


@pytest.mark.parametrize("command", ["get", "describe", "logs", "wait", "delete"])
@pytest.mark.parametrize("name", ["..", ".", "a%2Fb", "a/b", "Mnist", "9lives", "x" * 55, "a\x1b[2J"])
def test_a_job_name_no_job_can_have_is_refused_before_any_request(
    command: str, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No client is ever made: the name is refused while the arguments are read.
    monkeypatch.setattr(cli, "_client", lambda args: pytest.fail("a request was about to be made"))
    with pytest.raises(SystemExit) as ended:
        cli.main([command, name])
    err = capsys.readouterr().err
    assert ended.value.code == EXIT_ERROR
    assert "argument" in err and "is not a job's name" in err and "DNS-1035 label" in err
    assert "\x1b" not in err


@pytest.mark.parametrize("flag", ["-n", "--operator-namespace"])
@pytest.mark.parametrize("namespace", ["..", ".", "a/b", "Team", "-team", "x" * 64])
def test_a_namespace_that_cannot_be_one_is_refused_before_any_request(
    flag: str, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        parse("get", "mnist", f"{flag}={namespace}")
    err = capsys.readouterr().err
    assert ended.value.code == EXIT_ERROR and "is not a namespace" in err and "DNS-1123 label" in err


def test_valid_names_and_namespaces_are_taken() -> None:
    args = parse("delete", "mnist-2", "a" * 54, "-n", "0-team")
    assert (args.jobs, args.namespace) == (["mnist-2", "a" * 54], "0-team")
