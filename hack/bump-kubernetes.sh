#!/usr/bin/env bash
# `make bump-kubernetes VERSION=v1.x.y`: moves the local cluster (and the kind node image
# built here) to another Kubernetes release, every step that depends on it in order:
#   1. KUBE_VERSION in hack/versions.env
#   2. hack/gen-gomod.sh: hack/go.mod's require and replace lines, then go.mod/go.sum tidied
#   3. hack/build.sh: kubeall rebuilt (its symlinks from hack/components)
#   4. the local control plane restarted on the new binaries, and hack/gen-crd.sh: the
#      CRD's pod template schema from that API server's OpenAPI; the cluster is left down
# Run with the release the files already pin, it changes nothing and runs every step.
# The kind node image and kubeadm follow KUBE_VERSION by themselves (hack/kind-node.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
version=${1:-}
if [[ ! $version =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
  echo "usage: $0 v1.MINOR.PATCH (now $KUBE_VERSION)" >&2
  exit 2
fi
old=$KUBE_VERSION
step() { log "$*"; }

step "1/4 versions.env: KUBE_VERSION $old -> $version"
if [[ $old != "$version" ]]; then
  sed -i "s/^KUBE_VERSION=.*/KUBE_VERSION=$version/" "$repo/hack/versions.env"
fi
step "2/4 hack/gen-gomod.sh: hack/go.mod and go.sum"
"$repo/hack/gen-gomod.sh"
step "3/4 hack/build.sh: the cluster's binaries"
"$repo/hack/build.sh"
step "4/4 hack/gen-crd.sh: the CRD's pod template schema, from a control plane on the new binaries"
"$repo/hack/cluster.sh" down >/dev/null
"$repo/hack/gen-crd.sh"
"$repo/hack/cluster.sh" down >/dev/null
changed=$(cd "$repo" && git status --short -- hack/versions.env hack/go.mod hack/go.sum crds/ charts/tfmw/crds/)
if [[ -z $changed ]]; then
  log "Kubernetes $version: nothing changed"
else
  log "Kubernetes $version: changed"
  echo "$changed"
  if [[ $old != "$version" ]]; then
    echo "Prose that names $old (review by hand):"
    git -C "$repo" grep -n -F "$old" -- ':!hack/go.sum' ':!hack/coredns' || true
  fi
fi
