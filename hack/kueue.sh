#!/usr/bin/env bash
# Kueue on the local cluster, built from its Go module (KUEUE_VERSION in versions.env):
#   hack/kueue.sh up     build (once), image (once), apply its manifests, wait until it serves
#   hack/kueue.sh down   remove it (its CRDs and everything in kueue-system)
# Namespaces opt in with the label tfmw.dev/kueue=enabled (see hack/kueue/kustomization.yaml).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cache=$repo/.kueue
binary=$cache/kueue-$KUEUE_VERSION

build() {
  [[ -x $binary ]] && return 0
  log "building Kueue $KUEUE_VERSION from its Go module (about 5 minutes cold) ..."
  go_install "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" "$binary"
}

image() {
  local tag=tfmw-kueue:$KUEUE_VERSION
  if ! has_image "$tag"; then
    scratch_image "$tag" "$binary" /manager --entrypoint '["/manager"]' --user 65532:65532
    log "built $tag"
  fi
  buildah tag "$tag" tfmw-kueue:dev
  load_image tfmw-kueue:dev "$cache"
}

manifests() { # the module's config/ (read-only in the module cache) with our overlay beside it
  local module config=$cache/config
  module=$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")
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
  # A new image or configuration (a ConfigMap: no rollout of its own) needs a restart.
  local applied; applied=$(inputs_hash "$cache/kueue.yaml" "$cache/tfmw-kueue.imported")
  if [[ $(cat "$cache/applied" 2>/dev/null) != "$applied" ]]; then
    kubectl -n kueue-system rollout restart deployment/kueue-controller-manager >/dev/null
    echo "$applied" >"$cache/applied"
  fi
  kubectl -n kueue-system rollout status deployment/kueue-controller-manager --timeout=180s
  # Serving means its webhooks answer: until then a ClusterQueue cannot be created.
  printf 'apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: tfmw-probe}\n' >"$cache/probe.yaml"
  wait_for "Kueue's webhooks" 120 kubectl create --dry-run=server -f "$cache/probe.yaml"
  log "Kueue $KUEUE_VERSION is up; label a namespace tfmw.dev/kueue=enabled to use it"
}

down() {
  [[ -f $cache/kueue.yaml ]] || manifests
  # Kueue's objects first, while Kueue runs to clear their finalizers: a CRD whose objects
  # still carry finalizers would wait for ever once the controller is gone.
  local kind
  for kind in workloads localqueues clusterqueues resourceflavors cohorts; do
    kubectl delete "$kind.kueue.x-k8s.io" --all --all-namespaces --ignore-not-found --wait=true \
      --timeout=120s >/dev/null 2>&1 || true
  done
  kubectl delete --ignore-not-found --wait=true --timeout=180s -f "$cache/kueue.yaml" >/dev/null
  rm -f "$cache/applied"
  log "Kueue removed"
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
