# Sourced by every hack/ script: where the local cluster, the shared folder and the image
# store live, the cluster's fixed addresses, and how its processes are started and stopped.
# shellcheck shell=bash
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${TFMW_CLUSTER_DIR:-$repo/.cluster}
# The node's shared storage: deploy/storage.yaml's hostPath volumes point here.
shared_dir=${TFMW_SHARED_DIR:-/var/lib/tfmw/shared}
# Built images are a machine-wide cache, like Go's build cache: every clone reuses them.
image_store=${TFMW_IMAGE_STORE:-/var/lib/tfmw/buildah}
bin=$repo/hack/bin
pki=$dir/pki
logs=$dir/logs
run=$dir/run
kubeconfig=$dir/kubeconfig
node_name=tfmw-node
node_ip=10.87.0.1            # on lo (this kernel has no dummy links): reachable from this machine only
service_cidr=10.96.0.0/16
pod_cidr=10.88.0.0/16
bridge=tfmw-br0
api_port=6443
cluster_domain=cluster.local

log_prefix=${log_prefix:-$(basename "$0" .sh)}

log() { printf '[%s %s] %s\n' "$log_prefix" "$(date +%H:%M:%S)" "$*"; }

# hack/ manages the local cluster: its own kubeconfig, whatever $KUBECONFIG says. Under
# `make kind-e2e` (TFMW_KIND_CLUSTER set) what it installs (Kueue) goes to the kind
# cluster instead: kubectl talks to it and images are loaded into its node.
kind_cluster=${TFMW_KIND_CLUSTER:-}
target_kubeconfig=$kubeconfig
[[ -z $kind_cluster ]] || target_kubeconfig=${TFMW_KIND_KUBECONFIG:-$HOME/.kube/config}
kubectl() { "$bin/kubectl" --kubeconfig "$target_kubeconfig" "$@"; }

buildah() { command buildah --root "$image_store/storage" --runroot "$image_store/run" --storage-driver overlay "$@"; }

# Puts a built image into the node's containerd (k8s.io namespace), unless it holds that
# build already; `folder` keeps the stamp. Skipped while containerd is not running
# (hack/node.sh starts it first).
import_image() { # name folder
  local name=$1 folder=$2 sock=$dir/containerd/containerd.sock
  if [[ -n $kind_cluster ]]; then load_into_kind "$name"; return 0; fi
  local archive=$folder/${name%%:*}.tar stamp=$folder/${name%%:*}.imported id
  [[ -S $sock ]] || { log "containerd is not running; $name built but not imported"; return 0; }
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "$name")
  if [[ -f $stamp && $(cat "$stamp") == "$id" ]] &&
    [[ $(ctr --address "$sock" -n k8s.io images ls -q)$'\n' == *"/${name}"$'\n'* ]]; then
    return 0
  fi
  rm -f "$archive"
  buildah push -q "$name" "docker-archive:$archive:$name" >/dev/null
  ctr --address "$sock" -n k8s.io images import --no-unpack=false "$archive" >/dev/null
  rm -f "$archive"
  echo "$id" >"$stamp"
  log "imported $name into containerd"
}

# Linker flags that stamp a Kubernetes component with its release, as upstream's build
# does: kubectl version, kubeadm's choice of images and the node's version read it.
kube_ldflags() { # version
  local minor=${1#v1.} pkg flags="-s -w" built
  minor=${minor%%.*}
  built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=$1 -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${built}"
  done
  echo "$flags"
}

# Where a Go module's source is (read-only, in the module cache), fetched if need be:
# manifests and files that other projects ship beside their code.
module_dir() { # module@version
  (cd "$repo/hack" && go mod download -json "$1") | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
}

# A built image into the kind cluster's node, by way of Docker (skipped when Docker holds
# that build already; kind skips a node that holds it).
load_into_kind() { # name
  local id
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "$1")
  if [[ $(docker image inspect -f '{{.Id}}' "$1" 2>/dev/null) != "sha256:$id" ]]; then
    buildah push -q "$1" "docker-daemon:$1" >/dev/null
  fi
  kind load docker-image --name "$kind_cluster" "$1" >/dev/null
}

alive() { [[ -f "$run/$1.pid" ]] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }

start() { # name command...: start in its own process group unless already running
  local name=$1; shift
  alive "$name" && return 0
  mkdir -p "$logs" "$run"
  setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
  log "started $name (pid $!, log $logs/$name.log)"
}

stop() { # name: TERM the process group, KILL it after 10 s
  local name=$1
  if alive "$name"; then
    local pid; pid=$(cat "$run/$name.pid")
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- "-$pid" 2>/dev/null || true
    log "stopped $name"
  fi
  rm -f "$run/$name.pid"
}

wait_for() { # description seconds command...
  local what=$1 limit=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      log "timed out waiting for $what; see $logs/"
      return 1
    fi
    sleep 0.5
  done
}
