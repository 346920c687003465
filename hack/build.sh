#!/usr/bin/env bash
# Builds the local cluster's binaries into hack/bin, only when they are missing or when
# what makes them changed: versions.env, the go.mod, the sources, hack/components. The Go
# build cache is kept, so a rebuild after a version bump recompiles only what changed.
#
#   hack/build.sh        kubeall (the Kubernetes components and etcd) and coredns
#   hack/build.sh helm   Helm, for the targets that run it (make lint, test-unit,
#                        test-integration, test-install), not for make demo
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [[ ${1:-} == helm ]]; then
  go_tool helm.sh/helm/v3/cmd/helm "$HELM_VERSION" helm
  exit 0
fi
cd "$repo/hack"
stamp="$bin/.versions"
# Pins of what is built elsewhere (Kueue, the TFJob peer, kind, kwok, the registry, Helm)
# and the registry's address do not rebuild the cluster's binaries.
want=$(inputs_hash <(grep -v -E '^(KUEUE|TFJOB|KIND|KWOK|DISTRIBUTION|HELM|REGISTRY|LOCAL_REGISTRY)_?' versions.env) go.mod kubeall/main.go \
  coredns/main.go coredns/go.mod components)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$bin/kubeall" && -x "$bin/coredns" ]]; then
  exit 0
fi
pinned_coredns=$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' coredns/go.mod)
if [[ $pinned_coredns != "$COREDNS_VERSION" ]]; then
  echo "versions.env pins CoreDNS $COREDNS_VERSION but coredns/go.mod requires $pinned_coredns" >&2
  exit 1
fi
mkdir -p "$bin"
start=$(date +%s)
# Side by side: kubeall's link runs on one core, which leaves the other to coredns.
echo "building kubeall (Kubernetes ${KUBE_VERSION}, etcd ${ETCD_VERSION}) and coredns ${COREDNS_VERSION} ..."
(cd coredns && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/coredns" .) &
coredns=$!
trap 'kill "$coredns" 2>/dev/null || true' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "$(kube_ldflags "$KUBE_VERSION")" -o "$bin/kubeall" ./kubeall
for c in $(components binary=kubeall); do ln -sf kubeall "$bin/$c"; done
wait "$coredns"
trap - EXIT
echo "$want" > "$stamp"
echo "built in $(( $(date +%s) - start ))s"
