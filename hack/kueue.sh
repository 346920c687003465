#!/usr/bin/env bash
# Kueue on the local cluster, built from its Go module (KUEUE_VERSION in versions.env):
#   hack/kueue.sh up     build (once), image (once), apply its manifests, wait until it serves
#   hack/kueue.sh down   remove it (its CRDs and everything in kueue-system)
# Namespaces opt in with the label tfmw.dev/kueue=enabled (see hack/kueue/kustomization.yaml).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$repo/hack/versions.env"
cache=$repo/.kueue
binary=$cache/kueue-$KUEUE_VERSION

build() {
  [[ -x $binary ]] && return 0
  log "building Kueue $KUEUE_VERSION from its Go module (about 5 minutes cold) ..."
  mkdir -p "$cache/gobin"
  (cd "$repo/hack" && CGO_ENABLED=0 GOBIN="$cache/gobin" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION")
  mv "$cache/gobin/kueue" "$binary"
}

image() {
  local tag id stamp=$cache/image-imported
  tag=tfmw-kueue:$KUEUE_VERSION
  if ! buildah inspect --type image "$tag" >/dev/null 2>&1; then
    local container; container=$(buildah from scratch)
    buildah copy -q "$container" "$binary" /manager >/dev/null
    buildah config --entrypoint '["/manager"]' --user 65532:65532 "$container"
    buildah commit -q "$container" "$tag" >/dev/null
    buildah rm "$container" >/dev/null
    log "built $tag"
  fi
  buildah tag "$tag" tfmw-kueue:dev
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "$tag")
  if [[ -f $stamp && $(cat "$stamp") == "$id" ]]; then return 0; fi
  rm -f "$cache/kueue.tar"
  buildah push -q tfmw-kueue:dev "docker-archive:$cache/kueue.tar:tfmw-kueue:dev" >/dev/null
  ctr --address "$dir/containerd/containerd.sock" -n k8s.io images import "$cache/kueue.tar" >/dev/null
  rm -f "$cache/kueue.tar"
  echo "$id" >"$stamp"
  log "imported tfmw-kueue:dev into containerd"
}

manifests() { # the module's config/ (read-only in the module cache) with our overlay beside it
  local module config=$cache/config
  module=$(cd "$repo/hack" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$config"
  cp -r "$module/config" "$config"
  chmod -R u+w "$config"
  cp -r "$repo/hack/kueue" "$config/tfmw"
  "$bin/kubectl" kustomize --load-restrictor LoadRestrictionsNone "$config/tfmw" |
    python3 "$repo/hack/kueue_webhooks.py" >"$cache/kueue.yaml"
}

up() {
  build
  image
  manifests
  # The Workload CRD is too big for client-side apply's annotation.
  kubectl apply --server-side --force-conflicts -f "$cache/kueue.yaml" >/dev/null
  kubectl -n kueue-system rollout restart deployment/kueue-controller-manager >/dev/null 2>&1 || true
  kubectl -n kueue-system rollout status deployment/kueue-controller-manager --timeout=180s
  # Serving means its webhooks answer: until then a ClusterQueue cannot be created.
  wait_for "Kueue's webhooks" 120 kubectl create --dry-run=server -f - <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tfmw-probe}
YAML
  log "Kueue $KUEUE_VERSION is up; label a namespace tfmw.dev/kueue=enabled to use it"
}

down() {
  [[ -f $cache/kueue.yaml ]] || manifests
  kubectl delete --ignore-not-found --wait=true -f "$cache/kueue.yaml" >/dev/null 2>&1 || true
  log "Kueue removed"
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
