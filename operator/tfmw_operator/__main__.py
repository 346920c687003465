"""`tfmw-operator`: run the operator in a cluster or against any kubeconfig."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import kopf

from tfmw_operator.handlers import METRICS_PORT_ENV, SHARED_ROOT_ENV


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tfmw-operator", description=__doc__)
    parser.add_argument("--shared-root", required=True, help="where the jobs' shared storage is mounted")
    parser.add_argument("--namespace", action="append", default=[], help="watch only these (repeatable)")
    parser.add_argument("--metrics-port", type=int, default=8080, help="Prometheus /metrics; 0 turns it off")
    parser.add_argument("--liveness", default="http://0.0.0.0:8081/healthz", help="liveness endpoint URL")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    os.environ[SHARED_ROOT_ENV] = args.shared_root
    os.environ[METRICS_PORT_ENV] = str(args.metrics_port)
    kopf.configure(verbose=args.verbose)
    if not args.verbose:
        # kopf logs every handler call; at thousands of pods that is most of the CPU.
        logging.getLogger("kopf").setLevel(logging.WARNING)
    kopf.run(
        standalone=True,
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        liveness_endpoint=args.liveness or None,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
