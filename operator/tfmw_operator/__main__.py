"""`tfmw-operator`: run the operator in a cluster or against any kubeconfig."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import sys
from pathlib import Path

if "--leader-elect" not in sys.argv:
    # kopf imports the client library, when installed, only to recognise its objects; the
    # operator never hands it any, and starts sooner and smaller without it (docs/benchmarks.md).
    # (The leader elector uses it: with --leader-elect it is loaded.)
    sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]

import kopf
import uvloop
from prometheus_client import start_http_server

from tfmw_operator.api.tfjob import KUBEFLOW_NAMESPACE, SERVE_MODES, SERVE_OFF
from tfmw_operator.core.progress import DEFAULT_PROGRESS_INTERVAL_SECONDS
from tfmw_operator.handlers import operate
from tfmw_operator.kube.client import connection_info
from tfmw_operator.runtime import published_version, server_version
from tfmw_operator.runtime.health import Health
from tfmw_operator.runtime.settings import Settings
from tfmw_operator.runtime.version import describe

# A namespace's exact name (a DNS label), as --namespace and --kubeflow-namespace take it.
NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tfmw-operator", description=__doc__)
    parser.add_argument("--version", action="version", version=describe())
    parser.add_argument("--shared-root", required=True, help="where the jobs' shared storage is mounted")
    parser.add_argument("--namespace", action="append", default=[], help="watch only these (repeatable)")
    parser.add_argument("--metrics-port", type=int, default=8080, help="Prometheus /metrics; 0 turns it off")
    parser.add_argument(
        "--liveness",
        default="http://0.0.0.0:8081/healthz",
        help="where /healthz and /readyz are served (host and port of this URL); empty: not served",
    )
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=DEFAULT_PROGRESS_INTERVAL_SECONDS,
        help="at most one status.progress write per job per this many seconds",
    )
    parser.add_argument(
        "--folder-check-image",
        default=os.environ.get("TFMW_FOLDER_CHECK_IMAGE", ""),
        help="the operator's own image: every worker's first init container checks with it that the "
        "job's claim reaches the job's folder (default $TFMW_FOLDER_CHECK_IMAGE; empty: no check)",
    )
    parser.add_argument(
        "--supervisor-image",
        default=os.environ.get("TFMW_SUPERVISOR_IMAGE", os.environ.get("TFMW_FOLDER_CHECK_IMAGE", "")),
        help="the operator's own image: an init container of it places the in-pod supervisor into the "
        "pods of a gang whose template gives its command, so that a gang restart keeps the pods that run "
        "(default $TFMW_SUPERVISOR_IMAGE, else $TFMW_FOLDER_CHECK_IMAGE; empty: every gang restart "
        "re-creates every pod)",
    )
    parser.add_argument(
        "--folder-retention",
        type=float,
        default=7 * 24 * 3600.0,
        help="seconds a deleted job's folder is kept before the operator removes it; negative: never",
    )
    parser.add_argument(
        "--tfjobs",
        choices=SERVE_MODES,
        default=SERVE_OFF,
        help="serve Kubeflow's TFJobs (kubeflow.org/v1): managedBy (only those whose runPolicy.managedBy "
        "names tfmw) or all (also those naming no controller, once Kubeflow's is gone); docs/tfjob.md",
    )
    parser.add_argument(
        "--kubeflow-namespace",
        default=KUBEFLOW_NAMESPACE,
        help="where Kubeflow's training-operator runs, if anywhere: with --tfjobs=all, a TFJob naming no "
        "controller is not launched while a pod of it runs there (pods elsewhere prove nothing); "
        "empty: looked for nowhere, for a cluster without Kubeflow where tenants may make that "
        "namespace; docs/tfjob.md",
    )
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--leader-elect", action="store_true", help="run only while holding the Lease (for several replicas)"
    )
    parser.add_argument("--leader-election-namespace", default=os.environ.get("POD_NAMESPACE", "tfmw-system"))
    parser.add_argument("--leader-election-lease", default="tfmw-operator")
    parser.add_argument(
        "--version-configmap",
        default=published_version.default_target(),
        help="NAMESPACE/NAME of the ConfigMap where the leading operator writes its version for "
        "`tfmw version` (default $POD_NAMESPACE, else tfmw-system, /tfmw-version); empty: not written",
    )
    args = parser.parse_args(argv)
    if args.version_configmap:
        try:
            published_version.parse_target(args.version_configmap)
        except ValueError as error:
            parser.error(f"--version-configmap: {error}")
    for namespace in args.namespace:
        if not NAMESPACE_NAME.fullmatch(namespace):
            parser.error(f"--namespace {namespace!r}: give a namespace's exact name (no patterns)")
    if args.kubeflow_namespace and not NAMESPACE_NAME.fullmatch(args.kubeflow_namespace):
        parser.error(
            f"--kubeflow-namespace {args.kubeflow_namespace!r}: give a namespace's exact name, or ''"
        )
    if args.progress_interval < 1:
        parser.error("--progress-interval must be at least 1 second")
    settings = Settings(
        shared_root=Path(args.shared_root),
        namespaces=tuple(args.namespace),
        progress_interval=args.progress_interval,
        folder_check_image=args.folder_check_image,
        supervisor_image=args.supervisor_image,
        folder_retention_seconds=None if args.folder_retention < 0 else args.folder_retention,
        tfjobs=args.tfjobs,
        kubeflow_namespace=args.kubeflow_namespace,
    )
    health = Health()
    if args.liveness:
        # Served from the start, also by a standby replica waiting for the lease.
        health.serve(args.liveness)
    if args.metrics_port:
        start_http_server(args.metrics_port)
    kopf.configure(verbose=args.verbose)
    if not args.verbose:
        # kopf logs every handler call; at thousands of pods that is most of the CPU.
        logging.getLogger("kopf").setLevel(logging.WARNING)
    # Before anything else talks to it: an API server older than the minimum is refused.
    refused = asyncio.run(server_version.check(connection_info()))
    if refused:
        logging.getLogger("tfmw_operator").error("tfmw operator refuses to start: %s", refused)
        raise SystemExit(2)
    if args.leader_elect:
        from tfmw_operator.runtime import leader  # the client library, loaded only for the elector

        logging.basicConfig(level=logging.INFO)
        # The elector tells every 2 s try of leader and standby alike at INFO; only its
        # warnings are news (ours say when leadership is gained and lost).
        logging.getLogger("leaderelection").setLevel(logging.WARNING)
        me = leader.identity()
        leader.lead(args.leader_election_namespace, args.leader_election_lease, me, health)
    if args.version_configmap:
        # The one that leads says which version runs (a standby of a rolling update waits).
        unpublished = asyncio.run(
            published_version.publish(
                connection_info(), *published_version.parse_target(args.version_configmap)
            )
        )
        if unpublished:
            logging.getLogger("tfmw_operator").warning("version not published: %s", unpublished)
    # uvloop: a launch's path through the event loop (watch event, reconcile, TLS request)
    # is a few milliseconds shorter than on asyncio's own loop.
    with (
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
        contextlib.suppress(asyncio.CancelledError),
    ):
        runner.run(operate(settings, health))
    if args.leader_elect:
        leader.release(args.leader_election_namespace, args.leader_election_lease, me)


if __name__ == "__main__":
    main(sys.argv[1:])
