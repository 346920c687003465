#!/usr/bin/env bash
# The local cluster: etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
# and (unless --no-node) one real node: containerd, kubelet, kube-proxy and CoreDNS.
#
#   hack/cluster.sh up [--no-node]   start what is not running yet, wait until healthy
#   hack/cluster.sh down             stop everything and remove mounts, netns and bridge
#   hack/cluster.sh status
#
# State lives in $TFMW_CLUSTER_DIR (default .cluster/): pki/, logs/ (one file per
# component), run/ (pid files), the kubeconfig, and etcd's and containerd's data.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

write_kubeconfig() { # file identity
  local file=$1 identity=$2
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tfmw-local
  cluster:
    server: https://127.0.0.1:${api_port}
    certificate-authority: ${pki}/ca.crt
users:
- name: ${identity}
  user:
    client-certificate: ${pki}/${identity}.crt
    client-key: ${pki}/${identity}.key
contexts:
- name: tfmw-local
  context: {cluster: tfmw-local, user: ${identity}}
current-context: tfmw-local
EOF
}

node_address() {
  # No `| grep -q` under pipefail: grep quitting early makes `ip` die of SIGPIPE, the
  # pipeline fail, and the address be added twice.
  [[ $(ip addr show dev lo) == *" $node_ip/"* ]] || ip addr add "$node_ip/32" dev lo
}

# The operator's own requests, to check its RBAC grants against what it really does.
write_audit_policy() {
  cat >"$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: ["system:serviceaccount:tfmw-system:tfmw-operator"]
  - level: None
EOF
}

control_plane_up() {
  mkdir -p "$dir"
  write_audit_policy
  "$repo/hack/pki.sh"
  for identity in $(components -o identity identity!=-); do
    write_kubeconfig "$dir/$identity.kubeconfig" "$identity"
  done
  cp "$dir/admin.kubeconfig" "$kubeconfig"
  start etcd "$bin/etcd" --name tfmw --data-dir "$dir/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster tfmw=http://127.0.0.1:2380 --quota-backend-bytes 4294967296 \
    --unsafe-no-fsync   # a throw-away test cluster: durability is not worth the fsync latency
  wait_for etcd 30 curl -fsS http://127.0.0.1:2379/health
  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address 0.0.0.0 --secure-port "$api_port" --advertise-address "$node_ip" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --service-account-issuer https://kubernetes.default.svc.${cluster_domain} \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$service_cidr" \
    --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
    --kubelet-preferred-address-types InternalIP \
    --max-requests-inflight 1000 --max-mutating-requests-inflight 500 \
    --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$logs/audit.log" \
    --audit-log-format json --audit-log-maxsize 50 --audit-log-maxbackup 1 \
    --profiling=false --v 1
  wait_for kube-apiserver 90 curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" \
    --key "$pki/admin.key" "https://127.0.0.1:${api_port}/readyz"
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" \
    --concurrent-gc-syncs 50 --kube-api-qps 200 --kube-api-burst 400 --v 1
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --v 1
  wait_for "the default service account" 60 kubectl -n default get serviceaccount default
}

cluster_up() {
  local with_node=$1
  mkdir -p "$logs" "$run"
  [[ -x "$bin/kubeall" ]] || "$repo/hack/build.sh"
  node_address
  control_plane_up
  if [[ $with_node == yes ]]; then
    "$repo/hack/node.sh" up
  fi
  log "ready. Use it with:"
  echo "  export KUBECONFIG=$kubeconfig PATH=$bin:\$PATH"
  echo "  kubectl get nodes,ns"
}

cluster_down() {
  "$repo/hack/kwok.sh" down || true  # simulated nodes (make kwok-up), while the API server still runs
  [[ -x "$repo/hack/node.sh" ]] && "$repo/hack/node.sh" down || true
  for name in $(components part=control-plane | tac); do stop "$name"; done
  ip addr del "$node_ip/32" dev lo 2>/dev/null || true
}

case "${1:-}" in
  up) if [[ "${2:-}" == --no-node ]]; then cluster_up no; else cluster_up yes; fi ;;
  down) cluster_down ;;
  status)
    for name in $(components part!=client); do
      if alive "$name"; then echo "$name: running (pid $(cat "$run/$name.pid"))"; else echo "$name: stopped"; fi
    done ;;
  *) echo "usage: $0 up [--no-node] | down | status" >&2; exit 2 ;;
esac
