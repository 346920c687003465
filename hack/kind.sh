#!/usr/bin/env bash
# kind, for users and on this machine:  hack/kind.sh up | deploy | e2e | down | node-image
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
# - a node image built without any registry (tfmw-kind-node:$KUBE_VERSION): a Debian 12
#   base made by debootstrap to kind's base-image contract (systemd, containerd, runc,
#   CNI plugins and kind's own files from the module), our pinned Kubernetes binaries
#   with kubeadm, and the images `kubeadm init` runs, built from the same binaries under
#   the image repository tfmw.local. kind is then told, in a config derived from
#   deploy/kind/cluster.yaml, to use that repository and our bridge CNI.
#
# Env: KIND_NODE_IMAGE=<image> uses that node image; KIND_NODE_IMAGE=build always
# builds ours. KIND_CLUSTER (tfmw), KIND_KUBECONFIG (~/.kube/config), KIND_SHARED_DIR
# (/tmp/tfmw-shared: deploy/kind/cluster.yaml's hostPath).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_prefix=kind
source "$repo/hack/versions.env"
export PATH=$bin:$PATH  # our kind, once built
state=$repo/.kind
cluster=${KIND_CLUSTER:-tfmw}
kind_kubeconfig=${KIND_KUBECONFIG:-$HOME/.kube/config}
kind_shared=${KIND_SHARED_DIR:-/tmp/tfmw-shared}
# Docker's data is a machine-wide cache, like the image store: a warm node image
# survives `down` and fresh clones. Only what runs is stopped.
docker_root=${TFMW_DOCKER_ROOT:-/var/lib/tfmw/docker}
node_image=tfmw-kind-node:$KUBE_VERSION
base_image=tfmw-kind-base:bookworm
repository=tfmw.local
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
  setsid dockerd --data-root "$docker_root" --pidfile "$state/dockerd.pid" \
    --iptables=false --ip-forward=false --ip-masq=false --bridge=none "${runtime[@]}" \
    >>"$state/logs/dockerd.log" 2>&1 </dev/null &
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
  mkdir -p "$bin"
  GOBIN=$bin CGO_ENABLED=0 go install "sigs.k8s.io/kind@$KIND_VERSION"
}

# What makes each image, so a change to any of it (and only that) rebuilds it: the
# functions that build it, the files they copy, the versions they pin.
base_inputs() {
  { declare -f build_base image_tag; echo "$KIND_VERSION $KUBE_VERSION"; cat "$repo/hack/kind/runc_capped.py"; } |
    sha256sum | cut -c1-16
}
node_inputs() {
  { declare -f build_node build_control_plane_images image_tag; cat "$repo/hack/versions.env" "$bin/.versions"
    cat "$repo/hack/kind/10-tfmw-bridge.conflist"; docker image inspect -f '{{.Id}}' "$base_image"; } |
    sha256sum | cut -c1-16
}
label_of() { docker image inspect -f '{{index .Config.Labels "tfmw.dev/inputs"}}' "$1" 2>/dev/null || true; }

build_base() {
  local rootfs=$state/rootfs files
  files=$(module_dir "sigs.k8s.io/kind@$KIND_VERSION")/images/base/files  # kind's own
  log "debootstrap Debian 12 for kind's base image (a minute or two) ..."
  rm -rf "$rootfs"
  mkdir -p "$image_store/debootstrap"  # the .debs, kept: a rebuild downloads nothing
  debootstrap --variant=minbase --cache-dir="$image_store/debootstrap" \
    --include=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins,python3 \
    bookworm "$rootfs" >"$state/debootstrap.log" 2>&1 || { tail -20 "$state/debootstrap.log" >&2; exit 1; }
  # kind's images/base/Dockerfile, step by step, with Debian's containerd, runc and CNI plugins.
  install -m 0755 "$files"/usr/local/bin/* "$rootfs/usr/local/bin/"
  mkdir -p "$rootfs/kind/bin" "$rootfs/etc/containerd" "$rootfs/etc/kubernetes/manifests" "$rootfs/opt/cni"
  cp -r "$files/kind/." "$rootfs/kind/" && chmod 0755 "$rootfs/kind" "$rootfs"/kind/bin/*
  install -m 0644 "$files/etc/crictl.yaml" "$rootfs/etc/"
  install -m 0644 "$files"/etc/sysctl.d/* "$rootfs/etc/sysctl.d/"
  install -m 0644 "$files"/etc/default/* "$rootfs/etc/default/"
  mkdir -p "$rootfs/etc/systemd/system/kubelet.service.d" "$rootfs/etc/systemd/system/containerd.service.d"
  find "$files/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "$rootfs/etc/systemd/system/" \;
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$rootfs/etc/systemd/system/kubelet.service.d/"
  ln -sf /usr/bin/containerd "$rootfs/usr/local/bin/containerd"  # where kind's unit looks
  ln -sfn /usr/lib/cni "$rootfs/opt/cni/bin"
  install -m 0755 "$repo/hack/kind/runc_capped.py" "$rootfs/usr/local/sbin/runc-capped"
  # kind's containerd config, and: our pause; oom_score_adj only raised (lowering it is
  # refused on this VM, as on the local node); runc through runc-capped.
  sed -e "s|sandbox_image = .*|sandbox_image = \"$repository/pause:$(image_tag pause)\"|" \
    -e 's|restrict_oom_score_adj = false|restrict_oom_score_adj = true|' \
    -e 's|^\(\s*\)SystemdCgroup = true|&\n\1BinaryName = "/usr/local/sbin/runc-capped"|' \
    "$files/etc/containerd/config.toml" >"$rootfs/etc/containerd/config.toml"
  # containerd's unit asks for oom_score_adj -999, which this VM refuses.
  printf '[Service]\nOOMScoreAdjust=0\n' >"$rootfs/etc/systemd/system/containerd.service.d/10-tfmw.conf"
  chroot "$rootfs" sh -c 'ctr oci spec |
    jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" |
    jq "del(.process.rlimits)"' >"$rootfs/etc/containerd/cri-base.json"
  find "$rootfs/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$rootfs"/lib/systemd/system/multi-user.target.wants/* "$rootfs"/etc/systemd/system/*.wants/* \
    "$rootfs"/lib/systemd/system/local-fs.target.wants/* "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* \
    "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl* "$rootfs"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$rootfs/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$rootfs/sbin/init"
  systemctl --root="$rootfs" enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  systemctl --root="$rootfs" mask systemd-binfmt.service >/dev/null 2>&1
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  # (kind's STOPSIGNAL SIGRTMIN+3 is left out: docker import cannot set it, and kind
  # removes its nodes with a kill.)
  tar -C "$rootfs" -c . | docker import --change 'ENV container=docker' --change "LABEL tfmw.dev/inputs=$1" \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$base_image" >/dev/null
  rm -rf "$rootfs"
  log "built $base_image"
}

# The images `kubeadm init` runs, from our binaries, saved as docker archives in $1.
# The four that are kubeall share one layer of it, so the node holds it once.
build_control_plane_images() {
  local out=$1 kubeall component container mount layer=$repository/kubeall:$KUBE_VERSION
  kubeall=$(readlink -f "$bin/kubeall")
  container=$(buildah from scratch)
  buildah copy -q "$container" "$kubeall" /usr/local/bin/kubeall >/dev/null
  buildah config --env PATH=/usr/local/bin "$container"
  buildah commit -q --rm "$container" "$layer" >/dev/null
  for component in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    container=$(buildah from "$layer")
    mount=$(buildah mount "$container")
    ln -s kubeall "$mount/usr/local/bin/$component"
    buildah umount "$container" >/dev/null
    buildah config --entrypoint "[\"/usr/local/bin/$component\"]" "$container"
    save_image "$container" "$repository/$component:$(image_tag "$component")" "$out/$component.tar"
  done
  container=$(buildah from scratch)
  buildah copy -q "$container" "$bin/coredns" /coredns >/dev/null
  buildah config --entrypoint '["/coredns"]' "$container"
  save_image "$container" "$repository/coredns:$COREDNS_VERSION" "$out/coredns.tar"
  "$repo/hack/images.sh" >/dev/null  # builds tfmw-pause:dev among the rest
  save_image "$(buildah from tfmw-pause:dev)" "$repository/pause:$(image_tag pause)" "$out/pause.tar"
  # kube-proxy programs iptables: it runs on the node's own userland.
  container=$(docker create "$base_image")
  docker cp "$kubeall" "$container:/usr/local/bin/kube-proxy" >/dev/null
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' "$container" \
    "$repository/kube-proxy:$KUBE_VERSION" >/dev/null
  docker rm "$container" >/dev/null
  docker save "$repository/kube-proxy:$KUBE_VERSION" -o "$out/kube-proxy.tar"
}

save_image() { # buildah-container name archive: commit it as name, removed, and save name there
  buildah commit -q --rm "$1" "$2" >/dev/null
  buildah push -q "$2" "docker-archive:$3:$2" >/dev/null
}

# The tag kubeadm asks for under our repository: our release of each, and for pause the
# one kubeadm names (our own pause binary stands in for it).
image_tag() {
  case $1 in
    etcd) echo "$ETCD_VERSION" ;;
    pause) "$state/bin/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" \
      --image-repository "$repository" 2>/dev/null | sed -n "s|^$repository/pause:||p" ;;
    *) echo "$KUBE_VERSION" ;;
  esac
}

build_node() {
  local hash=$1 images=$state/images container
  rm -rf "$images" && mkdir -p "$images"
  log "building the control-plane images from our binaries ..."
  build_control_plane_images "$images"
  log "assembling $node_image ..."
  container=$(docker run -d --privileged --entrypoint sleep "$base_image" infinity)
  trap "docker rm -f -v $container >/dev/null 2>&1 || true; trap - RETURN" RETURN
  docker cp "$(readlink -f "$bin/kubeall")" "$container:/usr/bin/kubeall" >/dev/null
  docker cp "$state/bin/kubeadm" "$container:/usr/bin/kubeadm" >/dev/null
  docker exec "$container" sh -ec "ln -sf kubeall /usr/bin/kubelet; ln -sf kubeall /usr/bin/kubectl
    echo $KUBE_VERSION >/kind/version; mkdir -p /etc/cni/net.d"
  docker cp "$repo/hack/kind/10-tfmw-bridge.conflist" "$container:/etc/cni/net.d/" >/dev/null
  docker exec "$container" bash -c 'nohup containerd >/dev/null 2>&1 &
    for i in $(seq 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done
    exit 1'
  for archive in "$images"/*.tar; do
    docker exec -i "$container" ctr -n k8s.io images import --all-platforms --no-unpack --digests - <"$archive" >/dev/null
  done
  docker exec "$container" pkill containerd || true
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change "LABEL tfmw.dev/inputs=$hash" "$container" "$node_image" >/dev/null
  rm -rf "$images"
  log "built $node_image"
}

source_kubeadm() {
  [[ -x $state/bin/kubeadm && $(cat "$state/bin/.kubeadm" 2>/dev/null) == "$KUBE_VERSION" ]] && return 0
  log "building kubeadm $KUBE_VERSION ..."
  mkdir -p "$state/bin"
  (cd "$repo/hack" && CGO_ENABLED=0 go build -trimpath -ldflags "$(kube_ldflags "$KUBE_VERSION")" \
    -o "$state/bin/kubeadm" ./kubeadm)
  echo "$KUBE_VERSION" >"$state/bin/.kubeadm"
}

node_image() { # builds ours when its inputs changed
  local t0 hash
  t0=$(date +%s)
  "$repo/hack/build.sh"
  source_kubeadm
  hash=$(base_inputs)
  [[ $(label_of "$base_image") == "$hash" ]] || build_base "$hash"
  hash=$(node_inputs)
  [[ $(label_of "$node_image") == "$hash" ]] || build_node "$hash"
  # What those replaced (now untagged) only takes disk space; only our own Docker's.
  ! ours || docker image prune -f >/dev/null
  log "node image $node_image ready in $(( $(date +%s) - t0 ))s"
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
  local t0 image config=$repo/deploy/kind/cluster.yaml
  t0=$(date +%s)
  ensure_docker
  ensure_kind
  [[ -d $kind_shared ]] || made made-shared
  mkdir -p "$kind_shared" && chmod 0777 "$kind_shared"
  [[ -d /lib/modules ]] || { made made-lib-modules; mkdir -p /lib/modules; }  # kind mounts it
  [[ -e $kind_kubeconfig ]] || made made-kubeconfig
  image=$(chosen_image)
  if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    log "kind cluster $cluster is up"
    return 0
  fi
  local args=(--name "$cluster" --kubeconfig "$kind_kubeconfig" --wait 120s)
  if [[ $image == "$node_image" ]]; then
    node_image
    config=$state/cluster.yaml
    python3 "$repo/hack/kind/cluster_config.py" "$repo/deploy/kind/cluster.yaml" "$repository" \
      "$ETCD_VERSION" "$COREDNS_VERSION" >"$config"
  fi
  [[ -n $image ]] && args+=(--image "$image")
  kind create cluster "${args[@]}" --config "$config"
  echo "$image" >"$state/image"
  log "kind cluster $cluster up in $(( $(date +%s) - t0 ))s, Kubernetes $(kubectl version -o json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"
}

deploy() {
  local t0 target existed
  t0=$(date +%s)
  if [[ $(cat "$state/image" 2>/dev/null) == "$node_image" ]]; then
    # No registry here to pull a Python base from: the images hack/images.sh builds.
    "$repo/hack/images.sh"
    for target in operator trainer; do load_into_kind "tfmw-$target:dev"; done
  else
    for target in operator trainer; do docker build -q --target "$target" -t "tfmw-$target:dev" "$repo" >/dev/null; done
    kind load docker-image --name "$cluster" tfmw-operator:dev tfmw-trainer:dev >/dev/null
  fi
  existed=$(kubectl -n tfmw-system get deployment/tfmw-operator -o name 2>/dev/null || true)
  kubectl apply -k "$repo/deploy/" >/dev/null
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
  if ours; then
    local pid
    pid=$(cat "$state/dockerd.pid")
    kill "$pid"
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
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
