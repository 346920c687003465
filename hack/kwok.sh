#!/usr/bin/env bash
# Simulated nodes on the local control plane: kwok (KWOK_VERSION in versions.env, built
# from its Go module into hack/bin) plays the kubelet of NODES fake nodes, with its own
# pod stages but one: a pod bound to one becomes Running (Ready, a pod IP), but a deleted
# one is not kwok's to finish. kwok's pod-delete stage deletes by name and tries again
# when that fails, so a late retry deletes the next pod of the same name (a gang's
# restarted worker); a real kubelet deletes by UID. The scale benchmark
# (tests/bench/scale.py) finishes deletions itself, by UID (tests/kube.py's
# SimulatedKubelet), and stages failures by patching pod status.
#
#   hack/kwok.sh up [NODES]   (default 100) nodes kwok-node-<i>, and kwok managing them
#   hack/kwok.sh down         kwok stopped, its nodes and every pod bound to them deleted
#
# The nodes are labelled tfmw.dev/kwok=true and tainted tfmw.dev/kwok=true:NoSchedule:
# only pods that select and tolerate them (the benchmark's) land there, never a real
# workload or an e2e test's. Runs beside the real node or on a cluster of `up --no-node`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
label=tfmw.dev/kwok
# Fake pod IPs, apart from the real node's pod CIDR: room for 65k pods.
pod_cidr_fake=10.240.0.1/16

build() {
  if [[ -x $bin/kwok ]] && [[ $("$bin/kwok" --version 2>/dev/null) == *"$KWOK_VERSION"* ]]; then
    return 0
  fi
  log "building kwok $KWOK_VERSION from its Go module ..."
  go_install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "$bin/kwok"
}

node_manifests() { # count: one List of that many fake nodes
  python3 - "$1" "$label" <<'EOF'
import json, sys
count, label = int(sys.argv[1]), sys.argv[2]
nodes = [
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"kwok-node-{i}",
            "labels": {label: "true", "type": "kwok", "kubernetes.io/hostname": f"kwok-node-{i}"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [{"key": label, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "250"},
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "250"},
        },
    }
    for i in range(count)
]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
EOF
}

stages() { # kwok's own default pod stages (its module's), pod-delete left out
  local dir
  dir=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")/kustomize/stage/pod/fast
  local file
  # Pods brought to Running at once: kwok's default is 4, for all its nodes. 100 kubelets each
  # report their own pods; at 4, with the API server at 0.2 s a write under a launch, kwok
  # ran 20 pods/s and was the limit of every contender's launch, not the contenders.
  cat <<'EOF'
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 32
EOF
  for file in pod-ready pod-complete; do
    echo ---
    cat "$dir/$file.yaml"
  done
}

ready_nodes() {
  kubectl get nodes -l "$label=true" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True
}

up() {
  local nodes=${1:-100}
  build
  kubectl get --raw /readyz >/dev/null || { log "the control plane is not up: hack/cluster.sh up [--no-node]"; exit 1; }
  node_manifests "$nodes" | kubectl apply --server-side --force-conflicts -f - >/dev/null
  # Nodes beyond NODES from an earlier, larger run go.
  kubectl get nodes -l "$label=true" -o name | awk -F- -v n="$nodes" '$NF >= n' |
    xargs -r "$bin/kubectl" --kubeconfig "$kubeconfig" delete --wait=false >/dev/null
  mkdir -p "$run"
  stages >"$run/kwok-stages.yaml"
  stop kwok # one started before with other stages would keep them
  start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$run/kwok-stages.yaml" \
    --manage-nodes-with-label-selector "$label=true" \
    --cidr "$pod_cidr_fake" --node-lease-duration-seconds 40 -v WARN
  local deadline=$((SECONDS + 120))
  until [[ $(ready_nodes) == "$nodes" ]]; do
    ((SECONDS < deadline)) || { log "timed out waiting for $nodes kwok nodes Ready; see $logs/kwok.log"; exit 1; }
    sleep 1
  done
  log "$nodes kwok nodes Ready (label $label=true, taint $label=true:NoSchedule)"
}

down() {
  stop kwok
  kubectl get --raw /readyz >/dev/null 2>&1 || return 0
  # No kwok left to finish their deletions: the pods go at once, then the nodes.
  kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name} {.spec.nodeName}{"\n"}{end}' |
    awk '$3 ~ /^kwok-node-/ {print $1, $2}' | while read -r namespace name; do
    kubectl -n "$namespace" delete pod "$name" --grace-period 0 --force --wait=false >/dev/null 2>&1 || true
  done
  kubectl delete nodes -l "$label=true" --wait=false >/dev/null
  log "kwok stopped, its nodes deleted"
}

case "${1:-}" in
  up) up "${2:-100}" ;;
  down) down ;;
  build) build ;;
  *) echo "usage: $0 up [NODES] | down | build" >&2; exit 2 ;;
esac
