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
# kwok also serves the nodes' kubelet API, for container logs: the operator reads a
# deleted worker's log through the API server (pods/log, proxied to the node's kubelet
# endpoint) before deleting the pod, and asks again for 11 s while it cannot; nodes that
# serve no logs made a gang restart at scale wait out those retries, the benchmark
# measuring a missing kubelet instead of the operator. Every container's log is one line
# (container_log). A followed log (follow=true) never ends on kwok (it cannot tell the
# container stopped): the reader's own timeout ends it, where a kubelet ends it at the
# container's exit.
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
# kwok's server, every fake node's kubelet endpoint (the node's InternalIP and
# daemonEndpoints port, which the API server proxies pods/log to): on the node address,
# beside the real kubelet's 10250; 10247 is kwokctl's port for it.
kubelet_port=10247
# The log every container on a fake node has, in its own folder: a followed log watches
# the folder of its file, and woke at every pid file written beside it in run/.
log_dir=$run/kwok-logs
log_text="kwok: this simulated node ran no container; this line stands in for its log"

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

# Every container's log, in any namespace: no selector matches every pod, a log with no
# containers every container (kwok checks neither that the pod exists nor where it runs;
# the API server asks only for pods bound to kwok's nodes).
cluster_logs() {
  cat <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: every-container
spec:
  logs:
  - logsFile: $log_dir/container.log
EOF
}

# One line in the CRI log format a kubelet reads (time, stream, P/F for a partial or full
# line, text): what a deleted worker leaves, which the operator archives as a real one's.
container_log() {
  printf '%s stdout F %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" "$log_text"
}

ready_nodes() {
  kubectl get nodes -l "$label=true" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True
}

# One container log read as the operator reads a worker's: through the API server, which
# proxies it to the pod's node's kubelet endpoint, kwok's server. A pod bound to a fake
# node by name, force-deleted after (kwok finishes no deletion). kwok's server starts just
# after its nodes go Ready: a few tries.
check_logs() {
  local pod=kwok-logs-check node=kwok-node-0 began text deadline=$((SECONDS + 15))
  kubectl -n default delete pod "$pod" --grace-period 0 --force --ignore-not-found >/dev/null 2>&1 || true
  # Its warnings (default warns of Pod Security's restricted level) only when it fails.
  text=$(kubectl -n default create -f - 2>&1 >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $pod}
spec:
  nodeName: $node
  tolerations: [{key: $label, operator: Exists, effect: NoSchedule}]
  containers: [{name: main, image: tfmw-trainer:dev}]
EOF
  ) || { log "could not create a pod on $node: $text"; exit 1; }
  until began=$EPOCHREALTIME; text=$(kubectl -n default logs "$pod" --request-timeout 5s 2>&1); do
    if ((SECONDS >= deadline)); then
      kubectl -n default delete pod "$pod" --grace-period 0 --force --wait=false >/dev/null 2>&1 || true
      log "kubectl logs of a pod on $node failed: $text; see $logs/kwok.log"
      exit 1
    fi
    sleep 1
  done
  kubectl -n default delete pod "$pod" --grace-period 0 --force --wait=false >/dev/null 2>&1 || true
  [[ $text == "$log_text" ]] ||
    { log "kubectl logs of a pod on $node answered, but not kwok's log: $text"; exit 1; }
  log "kubectl logs of a pod on $node answered in $(awk "BEGIN {printf \"%.2f\", $EPOCHREALTIME - $began}") s"
}

up() {
  local nodes=${1:-100}
  build
  kubectl get --raw /readyz >/dev/null || { log "the control plane is not up: hack/cluster.sh up [--no-node]"; exit 1; }
  # Stopped first: one started before with other stages or flags would keep them, and
  # would make the nodes created below Ready its own way, before this one starts.
  stop kwok
  # An earlier run's nodes whose kubelet endpoint is not kwok's server are made again: kwok
  # writes a node's address and port only while it is not Ready, and keeps an address once
  # set. Nodes beyond NODES from an earlier, larger run go too.
  local endpoints='{range .items[*]}{.metadata.name} {.status.daemonEndpoints.kubeletEndpoint.Port} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}'
  kubectl get nodes -l "$label=true" -o jsonpath="$endpoints" |
    awk -v n="$nodes" -v served="$kubelet_port $node_ip" \
      '{i = $1; sub(/.*-/, "", i)} i + 0 >= n || ($2 " " $3) != served {print "node/" $1}' |
    xargs -r "$bin/kubectl" --kubeconfig "$kubeconfig" delete >/dev/null
  node_manifests "$nodes" | kubectl apply --server-side --force-conflicts -f - >/dev/null
  mkdir -p "$run" "$log_dir"
  container_log >"$log_dir/container.log"
  { stages; echo ---; cluster_logs; } >"$run/kwok-config.yaml"
  # Its server is the kubelet of every node it manages (--node-ip, --node-port: their
  # status), over TLS with the real kubelet's certificate, which names the node address.
  # The API server checks no kubelet's certificate (no --kubelet-certificate-authority) and
  # kwok no client's: nothing else to set up.
  start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$run/kwok-config.yaml" \
    --manage-nodes-with-label-selector "$label=true" \
    --cidr "$pod_cidr_fake" --node-lease-duration-seconds 40 -v WARN \
    --server-address "$node_ip:$kubelet_port" --node-ip "$node_ip" --node-port "$kubelet_port" \
    --tls-cert-file "$pki/kubelet.crt" --tls-private-key-file "$pki/kubelet.key"
  local deadline=$((SECONDS + 120))
  until [[ $(ready_nodes) == "$nodes" ]]; do
    ((SECONDS < deadline)) || { log "timed out waiting for $nodes kwok nodes Ready; see $logs/kwok.log"; exit 1; }
    sleep 1
  done
  log "$nodes kwok nodes Ready (label $label=true, taint $label=true:NoSchedule)"
  check_logs
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
