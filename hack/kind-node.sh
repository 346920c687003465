#!/usr/bin/env bash
# The kind node image built here, without any registry: what hack/kind.sh up uses where
# it started Docker itself (a machine with no registry) or with KIND_NODE_IMAGE=build.
#
#   hack/kind-node.sh build         tfmw-kind-node:$KUBE_VERSION, rebuilt only when what
#                                   makes it changed (Docker must be running:
#                                   `hack/kind.sh node-image` starts it first)
#   hack/kind-node.sh config FILE N FILE, a kind cluster config with N workers, made for this node image
#
# The way kind's own builder does it, by hand:
# - a Debian 12 base made by debootstrap to kind's base-image contract (systemd,
#   containerd, runc, CNI plugins and kind's own files from its module);
# - our pinned Kubernetes binaries (hack/build.sh) with kubeadm, in the node as
#   hack/components says (kind column);
# - the images `kubeadm init` runs, built from the same binaries under the image
#   repository tfmw.local. The config tells kubeadm to use that repository and that our
#   pod network, baked into the node (hack/kind/tfmw-podnet: each node's bridge on the
#   pod CIDR it was given, and routes between the nodes' pod CIDRs), replaces kindnetd.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_prefix=kind
state=$kind_state
node_image=$kind_node_image
base_image=tfmw-kind-base:bookworm
repository=tfmw.local
mkdir -p "$state"

# What makes each image, so a change to any of it (and only that) rebuilds it: the
# functions that build it, the files they copy, the versions they pin.
base_inputs() {
  inputs_hash <(declare -f build_base image_tag; echo "$KIND_VERSION $KUBE_VERSION") "$repo/hack/kind/runc_capped.py"
}
node_inputs() {
  inputs_hash <(declare -f build_node build_control_plane_images image_tag scratch_image) \
    "$repo/hack/versions.env" "$bin/.versions" "$repo/hack/components" "$repo/hack/kind/tfmw-podnet" "$repo/hack/kind/tfmw-podnet.service" \
    <(docker image inspect -f '{{.Id}}' "$base_image")
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

# The images `kubeadm init` runs, from our binaries, saved as docker archives in $1: one
# for each component hack/components marks `image` in the kind column, the pause, and
# kube-proxy (`base-image`). Those that are kubeall share one layer of it, so the node
# holds it once.
build_control_plane_images() {
  local out=$1 kubeall name binary tag container mount layer=$repository/kubeall:$KUBE_VERSION
  kubeall=$(readlink -f "$bin/kubeall")
  scratch_image "$layer" "$kubeall" /usr/local/bin/kubeall --env PATH=/usr/local/bin
  while read -r name binary <&3; do
    tag=$repository/$name:$(image_tag "$name")
    if [[ $binary == kubeall ]]; then
      container=$(buildah from "$layer")
      mount=$(buildah mount "$container")
      ln -s kubeall "$mount/usr/local/bin/$name"
      buildah umount "$container" >/dev/null
      buildah config --entrypoint "[\"/usr/local/bin/$name\"]" "$container"
      buildah commit -q --rm "$container" "$tag" >/dev/null
    else
      scratch_image "$tag" "$bin/$binary" "/$binary" --entrypoint "[\"/$binary\"]"
    fi
    buildah push -q "$tag" "docker-archive:$out/$name.tar:$tag" >/dev/null
  done 3< <(components -o name,binary kind=image)
  "$repo/hack/images.sh" pause
  tag=$repository/pause:$(image_tag pause)
  buildah tag tfmw-pause:dev "$tag"
  buildah push -q "$tag" "docker-archive:$out/pause.tar:$tag" >/dev/null
  # kube-proxy programs iptables: it runs on the node's own userland.
  for name in $(components kind=base-image); do
    tag=$repository/$name:$(image_tag "$name")
    container=$(docker create "$base_image")
    docker cp "$kubeall" "$container:/usr/local/bin/$name" >/dev/null
    docker commit --change "ENTRYPOINT [\"/usr/local/bin/$name\"]" "$container" "$tag" >/dev/null
    docker rm "$container" >/dev/null
    docker save "$tag" -o "$out/$name.tar"
  done
}

# The tag kubeadm asks for under our repository: our release of each, and for pause the
# one kubeadm names (our own pause binary stands in for it).
image_tag() {
  case $1 in
    etcd) echo "$ETCD_VERSION" ;;
    coredns) echo "$COREDNS_VERSION" ;;
    pause) "$state/bin/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" \
      --image-repository "$repository" 2>/dev/null | sed -n "s|^$repository/pause:||p" ;;
    *) echo "$KUBE_VERSION" ;;
  esac
}

build_node() {
  local hash=$1 images=$state/images container links=""
  rm -rf "$images" && mkdir -p "$images"
  log "building the control-plane images from our binaries ..."
  build_control_plane_images "$images"
  log "assembling $node_image ..."
  container=$(docker run -d --privileged --entrypoint sleep "$base_image" infinity)
  trap "docker rm -f -v $container >/dev/null 2>&1 || true; trap - RETURN" RETURN
  docker cp "$(readlink -f "$bin/kubeall")" "$container:/usr/bin/kubeall" >/dev/null
  docker cp "$state/bin/kubeadm" "$container:/usr/bin/kubeadm" >/dev/null
  for name in $(components kind=host); do links+="ln -sf kubeall /usr/bin/$name; "; done
  docker exec "$container" sh -ec "$links
    echo $KUBE_VERSION >/kind/version; mkdir -p /etc/cni/net.d"
  # Pod networking between nodes: routes between the nodes' pod CIDRs (hack/kind/tfmw-podnet).
  docker cp "$repo/hack/kind/tfmw-podnet" "$container:/usr/local/bin/tfmw-podnet" >/dev/null
  docker cp "$repo/hack/kind/tfmw-podnet.service" "$container:/etc/systemd/system/" >/dev/null
  docker exec "$container" sh -ec 'mkdir -p /etc/systemd/system/multi-user.target.wants
    ln -sf /etc/systemd/system/tfmw-podnet.service /etc/systemd/system/multi-user.target.wants/'
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

build_kubeadm() {
  [[ -x $state/bin/kubeadm && $(cat "$state/bin/.kubeadm" 2>/dev/null) == "$KUBE_VERSION" ]] && return 0
  log "building kubeadm $KUBE_VERSION ..."
  mkdir -p "$state/bin"
  (cd "$repo/hack" && CGO_ENABLED=0 go build -trimpath -ldflags "$(kube_ldflags "$KUBE_VERSION")" \
    -o "$state/bin/kubeadm" ./kubeadm)
  echo "$KUBE_VERSION" >"$state/bin/.kubeadm"
}

build() { # ours, when its inputs changed
  local t0 hash
  t0=$(date +%s)
  docker info >/dev/null 2>&1 || { echo "no Docker engine is running (hack/kind.sh node-image starts one)" >&2; exit 1; }
  "$repo/hack/build.sh"
  build_kubeadm
  hash=$(base_inputs)
  [[ $(label_of "$base_image") == "$hash" ]] || build_base "$hash"
  hash=$(node_inputs)
  [[ $(label_of "$node_image") == "$hash" ]] || build_node "$hash"
  log "node image $node_image ready in $(( $(date +%s) - t0 ))s"
}

case ${1:-} in
  build) build ;;
  config) python3 "$repo/hack/kind/cluster_config.py" "$2" "${3:-0}" "$repository" "$ETCD_VERSION" "$COREDNS_VERSION" ;;
  *) echo "usage: $0 build | config CLUSTER_YAML WORKERS" >&2; exit 2 ;;
esac
