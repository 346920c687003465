# Sourced by every hack/ script: the pinned versions, where the local cluster, the shared
# folder and the image store live, the cluster's fixed addresses and components, how its
# processes are started and stopped, and how images are built and loaded.
# shellcheck shell=bash
# shellcheck disable=SC2034 # its variables are for the scripts that source it
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Run by hand as well as by make: python3 is the project's .venv (PyYAML and the rest), never
# the system's, once make install has made it.
[[ ! -x $repo/.venv/bin/python3 || :$PATH: == *":$repo/.venv/bin:"* ]] || PATH=$repo/.venv/bin:$PATH
# shellcheck source=/dev/null
source "$repo/hack/versions.env"
dir=${TFMW_CLUSTER_DIR:-$repo/.cluster}
# The node's shared storage: deploy/overlays/local/storage.yaml's hostPath volumes point here.
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
# The kind path's own state (hack/kind.sh, hack/kind-node.sh): kubeadm, the node image's
# build folders, the Docker engine it started; and the node image built here.
kind_state=$repo/.kind
kind_node_image=tfmw-kind-node:$KUBE_VERSION

buildah() { command buildah --root "$image_store/storage" --runroot "$image_store/run" --storage-driver overlay "$@"; }

# Puts a built image into the cluster hack/ targets: the local node's containerd (k8s.io
# namespace), unless it holds that build already (`folder` keeps the stamp; skipped while
# containerd is not running: hack/node.sh starts it first), or under TFMW_KIND_CLUSTER the
# kind cluster's node. The one way every hack/ script loads an image.
load_image() { # name folder
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

# A built image into the kind cluster's node, by way of Docker: buildah's build is pushed
# to Docker first (skipped when Docker holds that build already); with
# TFMW_IMAGE_BUILDER=docker (hack/images.sh) `docker build` put it there. kind skips a
# node that holds it.
load_into_kind() { # name
  local id
  if [[ ${TFMW_IMAGE_BUILDER:-buildah} == buildah ]]; then
    id=$(buildah inspect --type image --format '{{.FromImageID}}' "$1")
    if [[ $(docker image inspect -f '{{.Id}}' "$1" 2>/dev/null) != "sha256:$id" ]]; then
      buildah push -q "$1" "docker-daemon:$1" >/dev/null
    fi
  fi
  kind load docker-image --name "$kind_cluster" "$1" >/dev/null
}

# A one-layer image of one file or folder, built without a registry: the pause, Kueue and
# kind's control-plane images, and the Debian base. The options go to `buildah config`.
scratch_image() { # name source destination [buildah config options...]
  local name=$1 source=$2 destination=$3 container
  shift 3
  container=$(buildah from scratch)
  buildah copy -q "$container" "$source" "$destination" >/dev/null
  if (($#)); then buildah config "$@" "$container"; fi
  buildah commit -q --rm "$container" "$name" >/dev/null
}

has_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# What makes a build, as a short hash: the content of these files (a process
# substitution for text: `inputs_hash <(declare -f f; echo "$VERSION") file`). A build
# stamped or tagged with it is redone when, and only when, one of them changes.
inputs_hash() { # file...: fails when one cannot be read
  (set -o pipefail; cat -- "$@" | sha256sum | cut -c1-16)
}

# A Go command from its module at a pinned version, static and stripped, to `binary`
# (a cache outside the Go module: hack/bin, .kueue/, .tfjob/).
go_install() { # package@version binary
  local gobin
  gobin=$(mktemp -d)
  mkdir -p "$(dirname "$2")"
  (cd "$repo/hack" && CGO_ENABLED=0 GOBIN=$gobin go install -trimpath -ldflags "-s -w" "$1")
  mv "$gobin"/* "$2"
  rmdir "$gobin"
}

# A Go command pinned in versions.env, in hack/bin: built from its module when missing or
# when its pin changed (the stamp hack/bin/.<name>.version). Helm, the registry.
go_tool() { # package version name
  local stamp=$bin/.$3.version
  [[ -x $bin/$3 && $(cat "$stamp" 2>/dev/null) == "$2" ]] && return 0
  log "building $3 $2 from its Go module ..."
  go_install "$1@$2" "$bin/$3"
  echo "$2" >"$stamp"
}

# The cluster's components (hack/components), in start order: by default their names,
# with -o the columns named (comma-separated), of the lines that match every filter.
#   components binary=kubeall            components -o identity,subject identity!=-
components() { # [-o column,...] [column=value | column!=value ...]
  local columns=name
  if [[ ${1:-} == -o ]]; then columns=$2; shift 2; fi
  awk -v columns="$columns" -v filters="$*" -v node_name="$node_name" '
    BEGIN {
      n = split("name binary part kind identity subject", names, " ")
      for (i = 1; i <= n; i++) index_of[names[i]] = i
      n_out = split(columns, out, ",")
      for (i = 1; i <= n_out; i++) if (!(out[i] in index_of)) { print "components: no column " out[i] > "/dev/stderr"; exit 2 }
      n_filters = split(filters, filter, " ")
      for (i = 1; i <= n_filters; i++) {
        negate[i] = filter[i] ~ /!=/
        split(filter[i], pair, negate[i] ? "!=" : "=")
        if (!(pair[1] in index_of)) { print "components: no column " pair[1] > "/dev/stderr"; exit 2 }
        column[i] = index_of[pair[1]]; value[i] = pair[2]
      }
    }
    /^[[:space:]]*(#|$)/ { next }
    {
      for (i = 1; i <= n_filters; i++) if (($(column[i]) == value[i]) == negate[i]) next
      line = ""
      for (i = 1; i <= n_out; i++) {
        field = $(index_of[out[i]])
        gsub(/\$node_name/, node_name, field)
        line = line (i > 1 ? " " : "") field
      }
      print line
    }' "$repo/hack/components"
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

# When a process started, in clock ticks since boot (field 22 of /proc/<pid>/stat, after the
# command name, which may hold spaces and parentheses).
started_at() { # pid
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  read -ra fields <<<"$stat"
  echo "${fields[19]}"
}

# Running, and the very process `start` started: with pid_max at 32768 and TensorFlow's
# threads taking IDs by the hundred, a component's old PID is soon another thread's, and a
# bare `kill -0` can take a stopped component for a running one and skip its start.
alive() {
  [[ -f "$run/$1.pid" ]] || return 1
  local pid; pid=$(cat "$run/$1.pid")
  kill -0 "$pid" 2>/dev/null || return 1
  [[ ! -f "$run/$1.started" || $(started_at "$pid") == "$(cat "$run/$1.started")" ]]
}

# Closes every descriptor but 0, 1 and 2 in this shell. A daemon must not inherit one from
# its caller: under `flock /tmp/tfmw-cluster.lock -c ...` (docs/development.md) the lock's
# descriptor would stay open in it, and the machine-wide lock held, as long as it runs.
close_inherited_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

start() { # name command...: start in its own process group unless already running
  local name=$1; shift
  alive "$name" && return 0
  mkdir -p "$logs" "$run"
  (close_inherited_fds; exec setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null) &
  echo $! >"$run/$name.pid"
  started_at $! >"$run/$name.started" || rm -f "$run/$name.started"
  log "started $name (pid $!, log $logs/$name.log)"
}

stop() { # name: TERM the process group, KILL it after 10 s
  local name=$1
  if alive "$name"; then
    local pid; pid=$(cat "$run/$name.pid")
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || true
    kill -9 -- "-$pid" 2>/dev/null || true
    log "stopped $name"
  fi
  rm -f "$run/$name.pid" "$run/$name.started"
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

wait_gone() { # pid seconds: until that process has exited; fails if it still runs then
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  ! kill -0 "$1" 2>/dev/null
}
