#!/usr/bin/env bash
# The local cluster's one node: containerd, kubelet, kube-proxy and CoreDNS on this machine.
# Called by hack/cluster.sh (up/down); the control plane must be running.
#
# Settings this VM needs, and why:
# - kubelet cgroupDriver: cgroupfs and containerd SystemdCgroup=false: no systemd runs here.
# - kubelet failCgroupV1: false: the VM has hybrid cgroups (v1 controllers); 1.34 still
#   allows v1 when told to, 1.35 refuses it.
# - kubelet failSwapOn: false: do not depend on the machine's swap settings.
# - imageGCHighThresholdPercent: 100: imported images cannot be pulled again (no
#   registry), so image garbage collection must never remove them.
# - evictionHard with small thresholds: the disk may be nearly full on a dev VM and a
#   node under DiskPressure would refuse every pod.
# - containerd restrict_oom_score_adj = true: lowering oom_score_adj is refused here
#   ("failed to update /proc/self/oom_score_adj: Permission denied" from runc).
# - localStorageCapacityIsolation: false: no ephemeral-storage accounting, which needs
#   a rootfs the kubelet can measure.
# - node address 10.87.0.1 on lo (this kernel has no dummy links): the API server
#   advertises it, kube-proxy routes the kubernetes Service to it, pods reach it.
# - CoreDNS on the host at the node address, as the pods' nameserver; no forwarding,
#   because this machine reaches no outside resolver.
# - bridge-nf-call-iptables=1 and ip_forward=1: Service traffic between pods on one
#   bridge must pass kube-proxy's iptables rules.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
containerd_dir=$dir/containerd
sock=$containerd_dir/containerd.sock
kubelet_dir=$dir/kubelet
cni_dir=$dir/cni

# Files are rewritten only when their content changes (kube-proxy exits when its file is
# touched at all); a component whose file changed is restarted by node_up.
changed=()
write_if_changed() { # file, content on stdin
  local file=$1 new; new=$(cat)
  if [[ ! -f $file || $(cat "$file") != "$new" ]]; then
    printf '%s\n' "$new" >"$file"
    changed+=("$file")
  fi
}

restart_changed() {
  local -A config_of=([containerd]=$containerd_dir/config.toml [kubelet]=$kubelet_dir/config.yaml
    [kube-proxy]=$dir/kube-proxy.yaml [coredns]=$dir/Corefile)
  local component file
  for component in $(components part=node); do
    file=${config_of[$component]:-}
    if [[ -n $file ]] && alive "$component" && [[ " ${changed[*]} " == *" $file "* ]]; then stop "$component"; fi
  done
}

write_configs() {
  mkdir -p "$containerd_dir" "$kubelet_dir" "$cni_dir/net.d" "$shared_dir/default"
  # Workers and the operator run as non-root users. The root is sticky: an entry there (a
  # namespace's folder) is renamed or removed only by its owner.
  chmod 1777 "$shared_dir"
  chmod 0777 "$shared_dir/default"
  write_if_changed "$containerd_dir/config.toml" <<EOF
version = 2
root = "$containerd_dir/root"
state = "$containerd_dir/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "tfmw-pause:dev"
  # This VM forbids lowering oom_score_adj (the kubelet asks -998 for sandboxes).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$cni_dir/net.d"
  # Registry hosts (hosts.toml): the machine-local registry (make registry-up), plain HTTP.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$containerd_dir/certs.d"
EOF
  mkdir -p "$containerd_dir/certs.d/$LOCAL_REGISTRY"
  write_if_changed "$containerd_dir/certs.d/$LOCAL_REGISTRY/hosts.toml" <<EOF
server = "http://$LOCAL_REGISTRY"
[host."http://$LOCAL_REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
  write_if_changed "$cni_dir/net.d/10-tfmw.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "tfmw",
  "plugins": [
    {
      "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$cni_dir/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  write_if_changed "$kubelet_dir/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [$node_ip]
clusterDomain: $cluster_domain
resolvConf: $kubelet_dir/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
localStorageCapacityIsolation: false
serializeImagePulls: false
readOnlyPort: 0
maxPods: 200
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
EOF
  # Pods with dnsPolicy Default get this: nothing outside the cluster resolves here.
  echo "nameserver $node_ip" | write_if_changed "$kubelet_dir/resolv.conf"
  write_if_changed "$dir/Corefile" <<EOF
.:53 {
    bind $node_ip
    errors
    health $node_ip:18080
    ready $node_ip:18181
    kubernetes $cluster_domain in-addr.arpa ip6.arpa {
        kubeconfig $dir/coredns.kubeconfig
        pods insecure
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
    loadbalance
}
EOF
  write_if_changed "$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
hostnameOverride: $node_name
clusterCIDR: $pod_cidr
mode: iptables
conntrack: {maxPerCore: 0}
nodePortAddresses: [$node_ip/32]
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
EOF
}

network_setup() {
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

coredns_rbac() {
  kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "tfmw:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "tfmw:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "tfmw:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "tfmw:coredns"}
EOF
}

node_ready() {
  [[ $(kubectl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

dns_answers() {
  getent ahostsv4 kubernetes.default.svc.$cluster_domain >/dev/null 2>&1 ||
    python3 - "$node_ip" <<'EOF'
import socket, struct, sys
query = struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0)
query += b"".join(bytes([len(p)]) + p.encode() for p in "kubernetes.default.svc.cluster.local".split(".")) + b"\0"
query += struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(query, (sys.argv[1], 53))
answer = s.recv(512)
sys.exit(0 if struct.unpack(">H", answer[6:8])[0] > 0 else 1)
EOF
}

node_up() {
  mkdir -p "$logs" "$run"
  alive containerd || remove_leftovers
  write_configs
  restart_changed
  network_setup
  start containerd containerd --config "$containerd_dir/config.toml"
  wait_for containerd 30 ctr --address "$sock" version
  start kubelet "$bin/kubelet" --config "$kubelet_dir/config.yaml" \
    --kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$kubelet_dir/root" \
    --hostname-override "$node_name" --node-ip "$node_ip" --v 1
  start kube-proxy "$bin/kube-proxy" --config "$dir/kube-proxy.yaml" --v 1
  coredns_rbac
  start coredns "$bin/coredns" -conf "$dir/Corefile"
  wait_for "node $node_name Ready" 120 node_ready
  wait_for "cluster DNS" 60 dns_answers
  log "node $node_name is Ready and DNS answers at $node_ip"
}

node_down() {
  local name
  for name in $(components part=node | tac); do
    if [[ $name == containerd ]] && alive containerd; then
      # Stop every pod's processes before containerd goes: runc containers outlive it.
      for task in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
        ctr --address "$sock" -n k8s.io tasks kill -s KILL "$task" >/dev/null 2>&1 || true
      done
      sleep 1
    fi
    stop "$name"
  done
  remove_leftovers
}

# Whatever runc and the CNI plugins left behind: shims, containers, the sandboxes'
# network namespaces and mounts, the bridge, kube-proxy's rules. Also run before a start,
# so that a node killed without `down` (a reboot, a CI run after a session) starts clean.
remove_leftovers() {
  pkill -9 -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $sock" 2>/dev/null || true
  for state in /run/containerd/runc/k8s.io "$containerd_dir/state"/*/runc/k8s.io; do
    [[ -d $state ]] || continue
    for container in "$state"/*; do
      [[ -d $container ]] && runc --root "$state" delete --force "$(basename "$container")" >/dev/null 2>&1 || true
    done
  done
  { grep -E " ($dir|/run/netns/cni-|/var/run/netns/cni-)" /proc/mounts || true; } | awk '{print $2}' | sort -r |
    while read -r mount; do umount -l "$mount" 2>/dev/null || true; done
  for netns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns delete "$netns" 2>/dev/null || true; done
  ip link show "$bridge" >/dev/null 2>&1 && ip link delete "$bridge" 2>/dev/null || true
  # kube-proxy's rules; left alone they would keep routing Service IPs to dead pods.
  if [[ -x "$bin/kube-proxy" ]] && iptables -t nat -S KUBE-SERVICES >/dev/null 2>&1; then
    "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  # The kubelet's own chains.
  while iptables -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
  while iptables -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
  local table chain
  for table in filter nat mangle; do
    for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
      iptables -t "$table" -F "$chain" 2>/dev/null && iptables -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
  rm -rf "$cni_dir/ipam"
}

case "${1:-}" in
  up) node_up ;;
  down) node_down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
