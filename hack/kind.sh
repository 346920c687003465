#!/usr/bin/env bash
# kind, for users and on this machine:  hack/kind.sh up | deploy | down | leftovers | node-image
#
# With Docker and kind already installed (a user's machine), this is plain kind: kind's
# own node image and `docker build`. On a machine with neither a running Docker engine
# nor a registry (this one), it sets them up first, machine-local and undone by `down`:
# - Docker from Debian (docker.io), started here with its data under $docker_root,
#   `--iptables=false --ip-forward=false` so it never touches the rules the local
#   cluster's kube-proxy keeps (kind's one node needs no NAT: the API port is reached
#   through docker-proxy), and, where root lacks a capability that `--privileged`
#   asks for (CAP_SYS_RESOURCE here), hack/kind/runc_capped.py as its default runtime;
# - kind built from its Go module (KIND_VERSION in versions.env) into hack/bin;
# - the node image hack/kind-node.sh builds without any registry, and the operator and
#   trainer images hack/images.sh builds with buildah, as for the local cluster.
#
# Env: KIND_NODE_IMAGE=<image> uses that node image; KIND_NODE_IMAGE=build always
# builds ours. KIND_CLUSTER (tfmw), KIND_KUBECONFIG (~/.kube/config), KIND_SHARED_DIR
# (/tmp/tfmw-shared: deploy/kind/cluster.yaml's hostPath), KIND_WORKERS (0: worker nodes
# beside the control plane, each mounting the shared folder at the same path).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_prefix=kind
export PATH=$bin:$PATH  # our kind, once built
state=$kind_state
cluster=${KIND_CLUSTER:-tfmw}
kind_kubeconfig=${KIND_KUBECONFIG:-$HOME/.kube/config}
kind_shared=${KIND_SHARED_DIR:-/tmp/tfmw-shared}
# Worker nodes beside the control plane (0: one node that runs everything). Every node
# mounts $kind_shared at /var/lib/tfmw/shared: one folder standing in for ReadWriteMany.
kind_workers=${KIND_WORKERS:-0}
# Docker's data is a machine-wide cache, like the image store: a warm node image
# survives `down` and fresh clones. Only what runs is stopped.
docker_root=${TFMW_DOCKER_ROOT:-/var/lib/tfmw/docker}
node_image=$kind_node_image
kind_cluster=$cluster target_kubeconfig=$kind_kubeconfig  # lib.sh's kubectl and load_into_kind
mkdir -p "$state"

ours() { [[ -f $state/dockerd.pid ]] && kill -0 "$(cat "$state/dockerd.pid")" 2>/dev/null; }

missing_capabilities() { # prints 1 when root's bounding set lacks one a privileged container asks for
  python3 - <<'EOF'
bits = int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("CapBnd:")), 16)
last = int(open("/proc/sys/kernel/cap_last_cap").read())
print(1 if any(not bits >> b & 1 for b in range(last + 1)) else 0)
EOF
}

ensure_docker() {
  docker info >/dev/null 2>&1 && return 0
  if ! command -v dockerd >/dev/null; then
    [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null || {
      echo "no Docker engine is running: start one (kind needs it), then run this again" >&2
      exit 1
    }
    log "installing Docker from Debian (docker.io) ..."
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
  fi
  local runtime=()
  if [[ $(missing_capabilities) == 1 ]]; then
    runtime=(--add-runtime "capped=$repo/hack/kind/runc_capped.py" --default-runtime capped)
  fi
  mkdir -p "$docker_root" "$state/logs"
  log "starting dockerd (data $docker_root${runtime:+, runtime hack/kind/runc_capped.py}) ..."
  (close_inherited_fds; exec setsid dockerd --data-root "$docker_root" --pidfile "$state/dockerd.pid" \
    --iptables=false --ip-forward=false --ip-masq=false --bridge=none "${runtime[@]}" \
    >>"$state/logs/dockerd.log" 2>&1 </dev/null) &
  for _ in $(seq 100); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  tail -20 "$state/logs/dockerd.log" >&2
  echo "dockerd did not start; its log: $state/logs/dockerd.log" >&2
  exit 1
}

ensure_kind() { # ours (hack/bin, pinned) if built, else the user's, else build ours
  if [[ -x $bin/kind ]]; then
    [[ $("$bin/kind" version) == *"$KIND_VERSION "* ]] && return 0
  elif command -v kind >/dev/null; then
    return 0
  fi
  log "building kind $KIND_VERSION from its Go module ..."
  go_install "sigs.k8s.io/kind@$KIND_VERSION" "$bin/kind"
}

node_image() { # ours (hack/kind-node.sh), rebuilt when what makes it changed
  "$repo/hack/kind-node.sh" build
  # What that replaced (now untagged) only takes disk space; only our own Docker's.
  ! ours || docker image prune -f >/dev/null
}

# The image kind-up uses: KIND_NODE_IMAGE if set; ours where we started Docker here.
chosen_image() {
  case ${KIND_NODE_IMAGE:-} in
    build) echo "$node_image" ;;
    "") if ours; then echo "$node_image"; fi ;;
    *) echo "$KIND_NODE_IMAGE" ;;
  esac
}

up() {
  local t0 image config=$state/cluster.yaml
  t0=$(date +%s)
  ensure_docker
  ensure_kind
  [[ -d $kind_shared ]] || made made-shared
  mkdir -p "$kind_shared/default" && chmod 1777 "$kind_shared" && chmod 0777 "$kind_shared/default"  # the root sticky
  [[ -d /lib/modules ]] || { made made-lib-modules; mkdir -p /lib/modules; }  # kind mounts it
  [[ -e $kind_kubeconfig ]] || made made-kubeconfig
  image=$(chosen_image)
  if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    log "kind cluster $cluster is up"
    return 0
  fi
  local args=(--name "$cluster" --kubeconfig "$kind_kubeconfig" --wait 180s)
  if [[ $image == "$node_image" ]]; then
    node_image
    "$repo/hack/kind-node.sh" config "$repo/deploy/kind/cluster.yaml" "$kind_workers" >"$config"
  else
    python3 "$repo/hack/kind/cluster_config.py" "$repo/deploy/kind/cluster.yaml" "$kind_workers" >"$config"
  fi
  [[ -n $image ]] && args+=(--image "$image")
  kind create cluster "${args[@]}" --config "$config"
  echo "$image" >"$state/image"
  registry_for_nodes
  [[ $kind_workers == 0 ]] || kubectl wait node --all --for=condition=Ready --timeout=180s >/dev/null
  log "kind cluster $cluster up ($(( kind_workers + 1 )) nodes) in $(( $(date +%s) - t0 ))s, Kubernetes $(kubectl version -o json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"
}

# The machine-local registry (make registry-up) for the nodes: each node's containerd
# resolves $LOCAL_REGISTRY through a hosts.toml to the kind network's gateway, where a
# forwarder passes connections to the registry on the host's localhost. The same image
# names as on the local cluster, pulled, never loaded. The forwarder answers the nodes'
# addresses only, and passes only pulls (GET/HEAD of manifests and blobs): the registry has
# no credentials, and pods reach the gateway through their node (hack/kind/registry_forward.py).
registry_for_nodes() {
  local gateway node nodes=() allow=() address
  gateway=$(docker network inspect kind -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}' |
    tr ' ' '\n' | grep -m1 -E '^[0-9]+([.][0-9]+){3}$') || {
    log "no IPv4 gateway on the kind network: the nodes cannot pull from $LOCAL_REGISTRY"
    return 0
  }
  mapfile -t nodes < <(kind get nodes --name "$cluster")
  for node in "${nodes[@]}"; do
    address=$(docker inspect -f '{{with index .NetworkSettings.Networks "kind"}}{{.IPAddress}}{{end}}' "$node")
    [[ -n $address ]] || { log "node $node has no address on the kind network"; return 1; }
    allow+=(--allow "$address")
  done
  # Started again each time: the allowed addresses are this cluster's nodes'.
  run=$state logs=$state/logs stop registry-forward
  run=$state logs=$state/logs start registry-forward \
    python3 "$repo/hack/kind/registry_forward.py" "$gateway:$REGISTRY_PORT" "127.0.0.1:$REGISTRY_PORT" "${allow[@]}"
  for node in "${nodes[@]}"; do
    printf 'server = "http://%s"\n[host."http://%s:%s"]\n  capabilities = ["pull", "resolve"]\n' \
      "$LOCAL_REGISTRY" "$gateway" "$REGISTRY_PORT" |
      docker exec -i "$node" sh -c "mkdir -p '/etc/containerd/certs.d/$LOCAL_REGISTRY' &&
        cat >'/etc/containerd/certs.d/$LOCAL_REGISTRY/hosts.toml'"
  done
  log "the nodes pull $LOCAL_REGISTRY/... from the machine-local registry (through $gateway:$REGISTRY_PORT, pulls only)"
}

deploy() {
  local t0 builder=docker existed
  t0=$(date +%s)
  # Our node image: no registry here to pull a Python base from, so buildah builds on
  # the Debian base hack/images.sh makes, as for the local cluster.
  [[ $(cat "$state/image" 2>/dev/null) != "$node_image" ]] || builder=buildah
  TFMW_IMAGE_BUILDER=$builder TFMW_KIND_CLUSTER=$cluster TFMW_KIND_KUBECONFIG=$kind_kubeconfig "$repo/hack/images.sh"
  existed=$(kubectl -n tfmw-system get deployment/tfmw-operator -o name 2>/dev/null || true)
  kubectl apply --server-side --force-conflicts -k "$repo/deploy/overlays/local" >/dev/null
  # The same tag with a new build: the running pods must start again to take it.
  [[ -z $existed ]] || kubectl -n tfmw-system rollout restart deployment/tfmw-operator >/dev/null
  kubectl -n tfmw-system rollout status deployment/tfmw-operator --timeout=180s >/dev/null
  log "deployed in $(( $(date +%s) - t0 ))s"
}

down() {
  local started=0
  ! ours || started=1
  if command -v kind >/dev/null && docker info >/dev/null 2>&1; then
    kind delete cluster --name "$cluster" --kubeconfig "$kind_kubeconfig" >/dev/null 2>&1 || true
    docker network rm kind >/dev/null 2>&1 || true
  fi
  run=$state logs=$state/logs stop registry-forward
  if ours; then
    local pid
    pid=$(cat "$state/dockerd.pid")
    kill "$pid"
    wait_gone "$pid" 30 || true
    log "stopped dockerd"
  fi
  rm -f "$state/dockerd.pid" "$state/image"
  undo made-lib-modules rmdir /lib/modules
  undo made-shared find "$kind_shared" -depth -type d -empty -delete
  # kind leaves the kubeconfig it made with no cluster in it.
  undo made-kubeconfig sh -c "! grep -q 'server:' '$kind_kubeconfig' && rm -f '$kind_kubeconfig'"
  [[ $started == 0 ]] || leftovers
}

# `up` notes what it made on this machine (a flag file in .kind); `down` takes it away.
made() { touch "$state/$1"; }
undo() { # flag command...
  local flag=$state/$1; shift
  [[ -f $flag ]] || return 0
  "$@" 2>/dev/null || true
  rm -f "$flag"
}

# What Docker started here would leave behind if it had not been stopped cleanly: none of
# it may outlive `down`, so that the local cluster finds the machine as it was.
leftovers() {
  local found
  found=$( { pgrep -a -f '^(dockerd|containerd --config /var/run/docker)' || true
    ip -o link show | awk -F': ' '$2 ~ /^(docker0|br-)/ {print "link " $2}'
    iptables-save 2>/dev/null | grep -i docker | sed 's/^/iptables /' || true
    findmnt -rn -o TARGET | grep -E "^($docker_root|/run/docker|/var/run/docker)" | sed 's/^/mount /' || true
  } )
  if [[ -n $found ]]; then
    printf 'left behind by Docker or kind:\n%s\n' "$found" >&2
    exit 1
  fi
}

case ${1:-} in
  up) up ;;
  deploy) deploy ;;
  down) down ;;
  leftovers) leftovers ;;
  node-image) ensure_docker; node_image ;;
  *) echo "usage: $0 up|deploy|down|leftovers|node-image" >&2; exit 2 ;;
esac
