#!/usr/bin/env bash
# The local cluster with the operator deployed: cluster (control plane and node), then
# the images, then `kubectl apply -k deploy/overlays/local`. Each step does only what is
# not done yet.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$repo/hack/stage.sh" "cluster (control plane and node)" "$repo/hack/cluster.sh" up
"$repo/hack/stage.sh" "images" "$repo/hack/images.sh"
"$repo/hack/stage.sh" "operator (kubectl apply -k deploy/overlays/local)" "$repo/hack/deploy.sh"
