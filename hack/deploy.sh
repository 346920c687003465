#!/usr/bin/env bash
# Deploys the operator the way users do (kubectl apply -k, the local overlay of deploy/) and waits until it runs
# the image just built: a rebuilt image rolls the Deployment.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# Server-side: the CRD (four pod template schemas) is too large for client-side apply's annotation.
kubectl apply --server-side --force-conflicts -k "$repo/deploy/overlays/local" >/dev/null
kubectl wait --for condition=established crd/tfmwjobs.tfmw.dev --timeout=60s >/dev/null
image_id=$(buildah inspect --type image --format '{{.FromImageID}}' tfmw-operator:dev 2>/dev/null | cut -c1-16 || true)
if [[ -n $image_id ]]; then
  kubectl -n tfmw-system patch deployment tfmw-operator --type merge \
    -p "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"tfmw.dev/image-id\":\"$image_id\"}}}}}" >/dev/null
fi
kubectl -n tfmw-system rollout status deployment/tfmw-operator --timeout=180s
