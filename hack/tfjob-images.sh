#!/usr/bin/env bash
# The images Kubeflow's TFJob e2e test and examples name (at TFJOB_VERSION), built here from
# each example's own Dockerfile over tfmw-trainer:dev with only the data download replaced,
# and loaded into the local node's containerd: tests/tfjob/images.py says how, and
# tests/tfjob/README.md what was replaced. Needs hack/images.sh's trainer image and the
# local node (hack/cluster.sh up). Builds and imports only what changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PYTHONPATH=$repo/tests exec python3 -m tfjob.images
