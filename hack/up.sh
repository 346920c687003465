#!/usr/bin/env bash
# The local cluster with the operator deployed: the images built while the cluster starts
# (neither waits on the other), then loaded into its node, then
# `kubectl apply -k deploy/overlays/local`. Each step does only what is not done yet.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$repo/hack/stage.sh" "images built (hack/images.sh build)" "$repo/hack/images.sh" build &
images=$!
trap 'kill "$images" 2>/dev/null || true' EXIT
"$repo/hack/stage.sh" "cluster (control plane and node)" "$repo/hack/cluster.sh" up
wait "$images"
"$repo/hack/stage.sh" "images loaded" "$repo/hack/images.sh"
"$repo/hack/stage.sh" "operator (kubectl apply -k deploy/overlays/local)" "$repo/hack/deploy.sh"
