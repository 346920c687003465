"""The operator's peak RSS while it launches the largest job the CRD accepts.

    PYTHONPATH=tests python3 -m bench.worst_job      (the local control plane, no node)

1,024 workers, a 51-character name (the longest 1,024 workers allow), in a namespace of
63 characters, so each pod carries the longest TF_CONFIG there can be (127 KB).
TFMW_WORST_CONTAINERS (1 by default) repeats it in that many containers; ten make every
pod 1.2 MB, 1.3 GB in etcd, more than a small control plane should be asked to hold. The
operator runs as a process of its own, as the image runs it; the script waits until the
job's status says every pod was created, prints the operator's peak RSS (VmHWM) and the
time the launch took, and removes what it made.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from bench.peer import image_malloc_env
from kube import LOCAL_KUBECONFIG, REPO, ClusterClient, kubectl, wait_for
from operator_process import OperatorProcess
from wrappers import job

WORKERS = 1024
NAME = "w" * 51
CONTAINERS = int(os.environ.get("TFMW_WORST_CONTAINERS", "1"))


def main() -> None:
    os.environ.setdefault("KUBECONFIG", LOCAL_KUBECONFIG)
    kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds" / "tfmwjobs.tfmw.dev.yaml")
    )
    kube = ClusterClient()
    namespace = f"worst-{'n' * 45}-{int(time.time()) % 10**10:010d}"[:63]
    kube.core.create_namespace({"metadata": {"name": namespace}})
    containers = [
        {"name": "tensorflow" if i == 0 else f"sidecar-{i}", "image": "tfmw-trainer:dev", "command": ["true"]}
        for i in range(CONTAINERS)
    ]
    manifest = (
        job(NAME).workers(WORKERS).port(65535).template({"spec": {"containers": containers}}).manifest()
    )
    with tempfile.TemporaryDirectory() as shared:
        operator = OperatorProcess(namespace, Path(shared), env=image_malloc_env(REPO))
        try:
            operator.start().wait_started()
            idle = operator.peak_rss_mb()
            started = time.monotonic()
            kube.create_job(namespace, manifest)
            # The status is written once every pod exists (listing 1,024 such pods is heavy).
            wait_for(
                f"{WORKERS} pods",
                lambda: kube.status(namespace, NAME).get("launchedAttempt") == 0 or None,
                timeout=900,
                interval=1,
            )
            took = time.monotonic() - started
            time.sleep(5)  # the status write and Events after the last pod
            print(f"worst job ({WORKERS} workers, {len(NAME)}-character name, {CONTAINERS} containers):")
            print(f"  operator peak RSS {operator.peak_rss_mb():.1f} MB (idle before it: {idle:.1f} MB)")
            print(f"  all pods created in {took:.1f} s")
        finally:
            operator.stop()
            kube.delete_namespace(namespace)


if __name__ == "__main__":
    main()
