#!/usr/bin/env bash
# Deploys the operator the way users do (kubectl apply -k deploy/) and waits until it runs
# the image just built: a rebuilt image rolls the Deployment.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export KUBECONFIG=${KUBECONFIG:-$repo/.cluster/kubeconfig}
kubectl() { "$repo/hack/bin/kubectl" "$@"; }
kubectl apply -k "$repo/deploy/" >/dev/null
kubectl wait --for condition=established crd/tfmwjobs.tfmw.dev --timeout=60s >/dev/null
store=${TFMW_IMAGE_STORE:-/var/lib/tfmw/buildah}
image_id=$(buildah --root "$store/storage" --runroot "$store/run" --storage-driver overlay \
  inspect --type image --format '{{.FromImageID}}' tfmw-operator:dev 2>/dev/null | cut -c1-16 || true)
if [[ -n $image_id ]]; then
  kubectl -n tfmw-system patch deployment tfmw-operator --type merge \
    -p "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"tfmw.dev/image-id\":\"$image_id\"}}}}}" >/dev/null
fi
kubectl -n tfmw-system rollout status deployment/tfmw-operator --timeout=180s
