"""Deaths alone: tfmw serving a TFJob (`OnFailure`, the template giving only args), worker
1's trainer SIGKILLed once checkpointed, N times; each death's phases, and the new pods' whole
logs when the gang took more than 15 s to be back (docs/benchmarks/history.md, "A gang
re-created: 30 s lost to a stale DNS answer").

    PYTHONPATH=tests:operator:trainer:client python3 -m bench.tfjob_deaths [N]

The cluster up with its node and images (hack/up.sh); the deployed operator is paused.
"""

from __future__ import annotations

import os
import sys

from bench.control_plane import terminating_namespaces
from bench.felt import namespace_with_storage, remove_namespace
from bench.peer import CERT_DIR, install_tfjob_crd, remove_tfjob_crd
from bench.stats import say
from bench.tfjob_node import TfmwTFJobSide, death_job, deployed_images
from kube import LOCAL_KUBECONFIG, REPO, ClusterClient, pause_deployed_operator, wait_for

SLOW_SECONDS = 15.0


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    os.environ["PATH"] = f"{REPO / 'hack' / 'bin'}:{os.environ['PATH']}"
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    resume = pause_deployed_operator()
    kube = ClusterClient()
    install_tfjob_crd(kube)
    namespace = namespace_with_storage(kube, "deaths")
    side = None
    try:
        side = TfmwTFJobSide(kube, namespace, deployed_images())
        side.restart_policy, side.command = "OnFailure", False
        for run in range(runs):
            job = f"deaths-{run}"
            out = death_job(side, job)
            if (out.get("all_up") or float("inf")) > SLOW_SECONDS:
                for record in side.timeline.records(job, side.job_label):
                    say(f"---- {record.name} uid={record.uid[:8]}")
                    for at, line in side.timeline.log(record.uid)[-400:]:
                        say(f"{at:.3f} {line[:300]}")
    finally:
        if side is not None:
            side.close()
        remove_namespace(kube, namespace)
        wait_for("bench namespaces gone", lambda: not terminating_namespaces(kube), timeout=300, interval=1)
        remove_tfjob_crd(kube)
        for cert in CERT_DIR.glob("*"):
            cert.unlink()
        resume()


if __name__ == "__main__":
    main()
