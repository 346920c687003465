"""`tfmw` (and `kubectl tfmw`): submit, watch, read every attempt's logs of, and explain
TFMultiWorkerJobs. docs/cli.md documents every command.

Start-up is kept close to kubectl's: this module imports only the standard library, and each
command imports what it needs when it runs (the `kubernetes` package only for commands that
call the API; docs/benchmarks.md, "The CLI's start time").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from tfmw_client import names
from tfmw_client.errors import EXIT_ERROR, EXIT_OK, ApiError, TfmwError

Json = dict[str, Any]
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
PROG = "tfmw"


class Parser(argparse.ArgumentParser):
    """Usage errors exit 1, as kubectl's do (2 is tfmw wait's timeout)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: {message}\nSee '{self.prog} --help'.\n")
        raise SystemExit(EXIT_ERROR)


def parse_duration(text: str) -> float:
    """kubectl's durations: 90s, 10m, 1h30m, 500ms, or plain seconds; negative: no limit."""
    text = text.strip()
    if text.startswith("-"):
        return -1.0
    try:
        return float(text)
    except ValueError:
        pass
    total, position = 0.0, 0
    for found in _DURATION.finditer(text):
        if found.start() != position:
            break
        value, unit = float(found.group(1)), found.group(2)
        total += value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
        position = found.end()
    if position != len(text) or not text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (for example 90s, 10m, 1h30m)")
    return total


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def job_name(text: str) -> str:
    """A job's name as the CRD takes it, checked before it reaches a URL (argparse names the
    argument in its error)."""
    if not names.is_job_name(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a job's name: {names.JOB_NAME_RULE}")
    return text


def namespace_name(text: str) -> str:
    if not names.is_namespace(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace: {names.NAMESPACE_RULE}")
    return text


def _connection_flags(parser: argparse.ArgumentParser) -> None:
    """kubectl's flags; SUPPRESS, so that one given before the command is not reset after it."""
    group = parser.add_argument_group("cluster")
    group.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    group.add_argument("--context", default=argparse.SUPPRESS, help="the kubeconfig context to use")
    group.add_argument(
        "-n",
        "--namespace",
        type=namespace_name,
        default=argparse.SUPPRESS,
        help="the namespace (default: the context's)",
    )
    group.add_argument(
        "--operator-namespace",
        type=namespace_name,
        default=argparse.SUPPRESS,
        help="where tfmw's operator runs (default: $TFMW_OPERATOR_NAMESPACE or tfmw-system)",
    )


def build_parser() -> Parser:
    parser = Parser(
        prog=PROG,
        description="Submit, watch, read the logs of and explain TFMultiWorkerJobs "
        "(TensorFlow multi-worker training).",
        epilog="Every command: docs/cli.md. Also runs as `kubectl tfmw ...`.",
    )
    _connection_flags(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    submit = commands.add_parser(
        "submit",
        help="run a script (or a folder) as a new job",
        description="Packages the script or folder into a ConfigMap owned by the job (at most 1 MiB) and "
        "creates the job that runs it, from the job's shared folder. Arguments after -- go to the program.",
    )
    submit.add_argument(
        "path",
        help="a Python script ('-': from standard input), or a folder (train.py, main.py or --entrypoint); "
        "then -- ARGS for the program",
    )
    submit.add_argument("--workers", type=positive, default=1, help="worker pods (default 1)")
    submit.add_argument(
        "--image",
        help="an image with Python and TensorFlow (default: $TFMW_IMAGE, or the one the cluster publishes)",
    )
    submit.add_argument(
        "--pip",
        action="append",
        default=[],
        metavar="PKG",
        help="install a package at start (repeat for more); needs the package index reachable from the pods",
    )
    submit.add_argument("--claim", help="the shared volume's claim in the namespace (default tfmw-shared)")
    submit.add_argument("--name", help="the job's name (default: the script's, with a random suffix)")
    submit.add_argument("--entrypoint", help="for a folder: the script to run, relative to it")
    submit.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable (repeat for more)",
    )
    submit.add_argument("--cpu", help="CPU request per worker, e.g. 500m")
    submit.add_argument("--memory", help="memory request and limit per worker, e.g. 2Gi")
    submit.add_argument(
        "--marker",
        choices=["auto", "program"],
        default="auto",
        help="auto (default): when the program returns on the chief without writing the completion marker, "
        "tfmw writes it; program: the program writes it itself",
    )
    submit.add_argument(
        "--dry-run", action="store_true", help="print the ConfigMap and the job; create nothing"
    )
    submit.add_argument(
        "-o",
        "--output",
        choices=["yaml", "json", "name"],
        help="with --dry-run: yaml (default) or json; else: name prints only the job's",
    )
    submit.add_argument("--wait", action="store_true", help="then wait for it, as tfmw wait does")
    submit.add_argument(
        "--timeout", type=parse_duration, default=parse_duration("10m"), help="with --wait (default 10m)"
    )
    _connection_flags(submit)

    get = commands.add_parser("get", help="list jobs, or show one, with a progress bar")
    get.add_argument(
        "job", nargs="?", type=job_name, help="a job's name (default: every job in the namespace)"
    )
    get.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    get.add_argument(
        "-o",
        "--output",
        choices=["wide", "yaml", "json", "name"],
        help="wide, yaml, json or name, as kubectl",
    )
    _connection_flags(get)

    describe = commands.add_parser(
        "describe", help="one job: phase, progress, pods by role, conditions, history, events"
    )
    describe.add_argument("job", type=job_name)
    _connection_flags(describe)

    logs = commands.add_parser(
        "logs",
        help="a job's logs: live from its pods, or any earlier attempt's from the shared volume",
        description="Default: the chief of the current attempt. Logs of an attempt whose pods are gone are "
        "read from the shared volume by a short-lived pod in your namespace "
        "(you need to be allowed to create pods there).",
    )
    logs.add_argument("job", type=job_name)
    who = logs.add_mutually_exclusive_group()
    who.add_argument("--worker", type=non_negative, metavar="I", help="worker I")
    who.add_argument("--role", choices=["chief", "worker", "ps", "evaluator"], help="every pod of a role")
    who.add_argument(
        "--all", action="store_true", help="every pod of the attempt, each line prefixed [<pod stem>]"
    )
    logs.add_argument(
        "--attempt", type=non_negative, metavar="A", help="attempt A (default: the current one)"
    )
    logs.add_argument(
        "-f", "--follow", action="store_true", help="stream the logs as they are written (live pods only)"
    )
    logs.add_argument("--tail", type=non_negative, metavar="N", help="only the last N lines of each log")
    logs.add_argument("--image", help="the image of the pod that reads saved logs (default: the job's own)")
    logs.add_argument(
        "--reader-timeout",
        type=parse_duration,
        default=120.0,
        metavar="DURATION",
        help="how long that pod may take (default 2m)",
    )
    _connection_flags(logs)

    wait = commands.add_parser(
        "wait",
        help="wait for a job; exit 0 when it gets there, 1 when it fails (with the reason), 2 on timeout",
    )
    wait.add_argument("job", type=job_name)
    wait.add_argument(
        "--for",
        dest="target",
        default="Succeeded",
        choices=["Succeeded", "Running", "Failed", "Finished"],
        help="default Succeeded; Finished: Succeeded or Failed",
    )
    wait.add_argument(
        "--timeout",
        type=parse_duration,
        default=parse_duration("10m"),
        help="e.g. 30m, 2h (default 10m; negative: no limit)",
    )
    _connection_flags(wait)

    delete = commands.add_parser(
        "delete", help="delete jobs (their pods, Service and program ConfigMap go with them)"
    )
    delete.add_argument("jobs", nargs="+", type=job_name, metavar="JOB")
    delete.add_argument("--ignore-not-found", action="store_true")
    _connection_flags(delete)

    version = commands.add_parser(
        "version", help="the client's and the operator's versions, and whether they fit"
    )
    version.add_argument("--client", action="store_true", help="only the client's (no cluster needed)")
    version.add_argument("-o", "--output", choices=["yaml", "json"])
    _connection_flags(version)

    convert = commands.add_parser(
        "convert", help="Kubeflow TFJob manifests as TFMultiWorkerJobs (other objects kept as they are)"
    )
    convert.add_argument("-f", "--filename", required=True, help="the TFJob manifest ('-': standard input)")
    convert.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    return parser


# ---- commands ----


def _client(args: argparse.Namespace) -> Any:
    from tfmw_client.sdk import Client

    return Client(
        namespace=getattr(args, "namespace", None),
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        operator_namespace=getattr(args, "operator_namespace", None),
    )


def _dump(documents: Sequence[Json], output: str, out: TextIO) -> None:
    """yaml: documents separated by ---; json: one object, or a List of them (as kubectl)."""
    if output == "json":
        shown: object = (
            documents[0]
            if len(documents) == 1
            else {"apiVersion": "v1", "kind": "List", "items": list(documents)}
        )
        out.write(json.dumps(shown, indent=4) + "\n")
        return
    import yaml

    out.write(yaml.safe_dump_all(list(documents), sort_keys=False, default_flow_style=False))


def _ascii(out: TextIO) -> bool:
    return "utf" not in (getattr(out, "encoding", "") or "").lower()


def run_submit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    client = _client(args)
    submission = client.submit(
        args.path,
        args.args,
        entrypoint=args.entrypoint,
        name=args.name,
        dry_run=args.dry_run,
        workers=args.workers,
        image=args.image,
        packages=args.pip,
        claim=args.claim,
        env=args.env,
        cpu=args.cpu,
        memory=args.memory,
        marker=args.marker,
    )
    for warning in submission.warnings:
        err.write(f"warning: {warning}\n")
    if args.dry_run:
        _dump(submission.objects, args.output or "yaml", out)
        return EXIT_OK
    if args.output == "name":
        out.write(f"tfmwjob.tfmw.dev/{submission.name}\n")
    else:
        configmap = submission.objects[0]["metadata"]["name"]
        out.write(f"configmap/{configmap} created\ntfmwjob.tfmw.dev/{submission.name} created\n")
        if not args.wait:
            out.write(f"follow it: tfmw wait {submission.name}   (logs: tfmw logs {submission.name} -f)\n")
    out.flush()
    if args.wait:
        return _wait(client, submission.name, "Succeeded", args.timeout, submission.namespace, out, err)
    return EXIT_OK


def run_get(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from datetime import UTC, datetime

    from tfmw_client import render

    client = _client(args)
    if args.job and args.all_namespaces:
        raise TfmwError("a job's name and -A together: name the job with -n NAMESPACE instead")
    jobs = [client.get(args.job)] if args.job else client.list_jobs(all_namespaces=args.all_namespaces)
    if args.output in ("yaml", "json"):
        # One job as itself; a listing as a List, as kubectl prints them.
        _dump(jobs if args.job else [{"apiVersion": "v1", "kind": "List", "items": jobs}], args.output, out)
        return EXIT_OK
    if args.output == "name":
        named = [render.as_str(render.as_dict(j.get("metadata")).get("name")) for j in jobs]
        out.write("".join(f"tfmwjob.tfmw.dev/{render.escape_controls(n)}\n" for n in named if n))
        if not all(named):
            err.write(f"warning: left out {named.count('')} listed item(s) without metadata.name\n")
        return EXIT_OK
    if not jobs:
        where = "any namespace" if args.all_namespaces else f"{client.namespace} namespace"
        err.write(f"No resources found in {where}.\n")
        return EXIT_OK
    out.write(
        render.job_table(jobs, datetime.now(UTC), args.output == "wide", args.all_namespaces, _ascii(out))
        + "\n"
    )
    return EXIT_OK


def run_describe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    out.write(_client(args).describe(args.job, ascii_only=_ascii(out)))
    return EXIT_OK


def run_logs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tfmw_client.render import escape_controls
    from tfmw_client.sdk import NoLivePods

    client = _client(args)
    if args.follow:
        prefix = args.all or args.role not in (None, "chief")
        try:
            lines = client.follow_logs(
                args.job, args.worker, args.role, args.all, args.tail, attempt=args.attempt
            )
        except NoLivePods:
            err.write("its pods are gone: printing the saved logs, which do not grow\n")
        else:
            for stem, line in lines:
                shown = f"[{escape_controls(stem)}] {line}" if prefix else line
                out.write(f"{shown}\n")
                out.flush()
            return EXIT_OK

    def waiting(message: str) -> None:
        err.write(f"{message}\n")
        err.flush()

    found = client.logs(
        args.job,
        args.worker,
        args.role,
        args.attempt,
        args.all,
        args.tail,
        image=args.image or "",
        reader_timeout=args.reader_timeout,
        on_wait=waiting,
    )
    text = found.text()
    out.write(text)  # as the program wrote it, as kubectl logs prints it
    if text and not text.endswith("\n"):
        out.write("\n")
    return EXIT_OK


def _wait(
    client: Any, name: str, target: str, timeout: float, namespace: str | None, out: TextIO, err: TextIO
) -> int:
    from tfmw_client.wait import JobFailed

    try:
        client.wait(
            name, target, timeout=timeout if timeout >= 0 else float("inf"), namespace=namespace, out=out
        )
    except JobFailed as failed:
        out.flush()
        raise failed from None
    out.write(f"tfmwjob.tfmw.dev/{name} {target if target != 'Finished' else 'finished'}\n")
    return EXIT_OK


def run_wait(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return _wait(_client(args), args.job, args.target, args.timeout, None, out, err)


def run_delete(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    client = _client(args)
    status = EXIT_OK
    for name in args.jobs:
        try:
            client.delete(name)
        except TfmwError as error:
            # Only the job's absence (a 404 for it, not for the API): a 403 or 500 is told.
            if args.ignore_not_found and isinstance(error, ApiError) and error.not_found:
                continue
            err.write(f"error: {_escaped_lines(error.message)}\n")  # an admission message may quote a tenant
            status = EXIT_ERROR
            continue
        out.write(f'tfmwjob.tfmw.dev "{name}" deleted\n')
    return status


def run_version(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tfmw_client.version import client_version

    if args.client:
        document: Json = {"client": client_version()}
    else:
        document = _client(args).version()
    if args.output:
        _dump([document], args.output, out)
        return EXIT_OK
    out.write(f"Client Version: {document['client']}\n")
    if args.client:
        return EXIT_OK
    # Read from a ConfigMap and the API server's answers: escaped, as every other field shown.
    source = _escaped_lines(str(document["operatorSource"]))
    out.write(f"Operator Version: {_escaped_lines(str(document['operator']))} ({source})\n")
    served = document["served"]
    api = ", ".join(served or []) or ("not served: is tfmw installed?" if served == [] else "unknown")
    out.write(f"API: tfmw.dev {api}\n")
    compatible = {True: "yes", False: "NO", None: "unknown"}[document["compatible"]]
    out.write(f"Compatible: {compatible} ({document['reason']})\n")
    if document["compatible"] is False:
        err.write("warning: this client and the cluster's tfmw do not fit: install the operator's version\n")
    return EXIT_OK


def run_convert(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import yaml

    from tfmw_client.convert import check_expansion, convert

    source = "standard input" if args.filename == "-" else args.filename
    try:
        if args.filename == "-":
            text = sys.stdin.read()
        else:
            with open(args.filename) as file:
                text = file.read()
    except OSError as error:
        raise TfmwError(f"cannot read {args.filename}: {error.strerror}") from None
    try:
        documents: list[object] = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise TfmwError(f"{source} is not YAML: {error}") from None
    check_expansion(documents, source)
    converted = convert(documents, source)
    if args.output == "json":
        for item in converted:
            for note in item.notes:
                err.write(f"note: {note}\n")
        _dump([item.document for item in converted], "json", out)
        return EXIT_OK
    for index, item in enumerate(converted):
        # What was changed, as comments above the object (kubectl apply ignores them).
        if index:
            out.write("---\n")
        if item.notes:
            out.write(f"# Converted from a Kubeflow TFJob by tfmw convert {_client_version()}.\n")
        out.writelines(f"# {note}\n" for note in item.notes)
        out.write(yaml.safe_dump(item.document, sort_keys=False, default_flow_style=False))
    return EXIT_OK


def _client_version() -> str:
    from tfmw_client.version import client_version

    return client_version()


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO, TextIO], int]] = {
    "submit": run_submit,
    "get": run_get,
    "describe": run_describe,
    "logs": run_logs,
    "wait": run_wait,
    "delete": run_delete,
    "version": run_version,
    "convert": run_convert,
}


def _terminate(signum: int, frame: object) -> None:
    # As Ctrl-C does: `finally` blocks run, so a log-reading pod is deleted.
    raise KeyboardInterrupt


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The flags, and after the first `--` the program's own arguments (tfmw submit only)."""
    words = list(argv)
    split = words.index("--") if "--" in words else len(words)
    parser = build_parser()
    args = parser.parse_args(words[:split])
    args.args = words[split + 1 :]
    if split < len(words) and args.command != "submit":
        parser.error("arguments after -- are for tfmw submit's program only")
    return args


def _escaped_lines(text: str) -> str:
    """An error's lines kept (a failed job's last log lines), anything else that could drive
    the terminal in them escaped: the message may quote the API server or a job."""
    from tfmw_client.render import escape_controls

    return "\n".join(escape_controls(line) for line in text.split("\n"))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.command:
        build_parser().print_help(out)
        return EXIT_OK
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return COMMANDS[args.command](args, out, err)
    except TfmwError as error:
        out.flush()
        err.write(f"error: {_escaped_lines(error.message)}\n")
        if error.fix:
            err.write(f"{_escaped_lines(error.fix)}\n")
        return error.exit_code
    except RecursionError:
        # Whatever was nested too deeply to read (an answer, a YAML file) got past the
        # readers that name it: still a message, not a traceback.
        out.flush()
        err.write("error: the input is nested too deeply to read (more than about 1,000 levels)\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except BrokenPipeError:  # | head
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
