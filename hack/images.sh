#!/usr/bin/env bash
# Builds the images the local node runs, without a registry, and loads them into the
# cluster hack/ targets (lib.sh's load_image: the local node's containerd, or the kind
# cluster's node under TFMW_KIND_CLUSTER):
#   tfmw-base:bookworm   debootstrap'd Debian 12 with Python 3.11 (the Dockerfile's BASE)
#   tfmw-pause:dev       the local node's pod sandbox (hack/pause)
#   tfmw-operator:dev, tfmw-trainer:dev   the Dockerfile's targets, also tagged as released:
#     $TFMW_REGISTRY/tfmw-<target>:$TFMW_IMAGE_TAG (the local registry, hack/versions.env's
#     LOCAL_REGISTRY, and pyproject.toml's version, unless make's REGISTRY and VERSION say)
# Each image is rebuilt only when its inputs changed (so a reused build's revision label
# names the commit that built it, one with the same inputs). The one way the operator and
# trainer images are built, for the local cluster and for kind alike.
#
#   hack/images.sh         all of them, loaded
#   hack/images.sh build   all of them, not loaded (make demo builds them while it builds the
#                          cluster's binaries, and loads them once the node runs)
#   hack/images.sh pause   tfmw-pause:dev only, not loaded (kind's node image takes it)
#   hack/images.sh push    the two targets, pushed to $TFMW_REGISTRY (make push), not loaded
#   hack/images.sh sandbox tfmw-pause:dev only, loaded: the node's own sandbox image (as a
#                          kind node image carries its pause), for a node that pulls the rest
# With TFMW_IMAGE_BUILDER=docker (the kind path on a machine with Docker and a registry)
# the two targets are `docker build` with the Dockerfile's own base instead.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
out=$repo/.images
mkdir -p "$out"

# What the images say about themselves (the Dockerfile's VERSION, REVISION, SOURCE and
# LICENSES): pyproject.toml's version, license and home page, and the commit checked out.
read -r version licenses source < <(python3 -c 'import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
print(p["version"], p["license"], p["urls"]["Homepage"])' "$repo/pyproject.toml")
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
[[ -z $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]] || revision+=-dirty
registry=${TFMW_REGISTRY:-$LOCAL_REGISTRY}
tag=${TFMW_IMAGE_TAG:-$version}
labels=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "SOURCE=$source"
  --build-arg "LICENSES=$licenses")

base() {
  has_image tfmw-base:bookworm && return 0
  log "debootstrap Debian 12 with Python 3.11 (about a minute) ..."
  rm -rf "$out/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$out/rootfs" >"$out/debootstrap.log" 2>&1 || { tail -20 "$out/debootstrap.log"; exit 1; }
  rm -rf "$out/rootfs/var/cache/apt/archives/"*.deb "$out/rootfs/var/lib/apt/lists/"*
  scratch_image tfmw-base:bookworm "$out/rootfs" / \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 --cmd python3
  rm -rf "$out/rootfs"
  log "built tfmw-base:bookworm"
}

pause() {
  local hash
  hash=$(inputs_hash "$repo/hack/pause/main.go")
  if has_image "tfmw-pause:$hash"; then
    buildah tag "tfmw-pause:$hash" tfmw-pause:dev  # as for the targets below
    return 0
  fi
  (cd "$repo/hack" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/pause" ./pause)
  scratch_image "tfmw-pause:$hash" "$out/pause" /pause --entrypoint '["/pause"]' --user 65535:65535
  buildah tag "tfmw-pause:$hash" tfmw-pause:dev
  log "built tfmw-pause:dev"
}

# The build with what it says about itself (the Dockerfile's LABEL and ENV from VERSION,
# REVISION, SOURCE, LICENSES), set with buildah config on a layer of metadata only, so the
# build args never reach the layer cache; made once per build (a reused build's revision
# names the commit that built it, one with the same inputs). Tagged :dev and as released.
released() { # target inputs-hash
  local target=$1 inputs=$2 container
  if ! has_image "tfmw-$target:$inputs-labelled"; then
    container=$(buildah from --pull=never "tfmw-$target:$inputs")
    buildah config --label "org.opencontainers.image.title=tfmw-$target" \
      --label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.revision=$revision" \
      --label "org.opencontainers.image.source=$source" --label "org.opencontainers.image.licenses=$licenses" \
      --env "TFMW_VERSION=$version" --env "TFMW_REVISION=$revision" "$container"
    buildah commit -q --rm "$container" "tfmw-$target:$inputs-labelled" >/dev/null
  fi
  buildah tag "tfmw-$target:$inputs-labelled" "tfmw-$target:dev" "$registry/tfmw-$target:$tag"
}

# pip in the build trusts the host's CA bundle (PIP_CERT), as pip on the host does: a
# network whose TLS is inspected signs with a CA of its own, which only that bundle holds.
ca_bundle=/etc/ssl/certs/ca-certificates.crt

target() { # operator|trainer: tfmw-<target>:dev, tagged with a hash of what makes it
  local target=$1 inputs t0 sources="$1 hack/pip_requirements.py"
  # The trainer image carries the wire contract it shares with the operator.
  [[ $target != trainer ]] || sources+=" operator/tfmw_operator/__init__.py operator/tfmw_operator/contract.py"
  # shellcheck disable=SC2046,SC2086 # one file a word
  inputs=$(cd "$repo" && inputs_hash Dockerfile pyproject.toml \
    $(git ls-files -co --exclude-standard $sources | grep -v __pycache__ | sort))
  # :dev is what gets loaded. The image store is shared by every clone on the machine,
  # so another clone may have moved it to its own build: point it at this one's.
  if has_image "tfmw-$target:$inputs"; then
    released "$target" "$inputs"
    return 0
  fi
  log "building tfmw-$target ..."
  t0=$(date +%s)
  local cert=()
  [[ ! -f $ca_bundle ]] || cert=(-v "$ca_bundle:$ca_bundle:ro" --build-arg "PIP_CERT=$ca_bundle")
  buildah bud -q --pull=never --network host --isolation chroot --layers "${cert[@]}" \
    --build-arg BASE=tfmw-base:bookworm \
    --target "$target" -t "tfmw-$target:$inputs" -f "$repo/Dockerfile" "$repo" >"$out/build-$target.log" 2>&1 \
    || { tail -30 "$out/build-$target.log"; exit 1; }
  released "$target" "$inputs"
  # Earlier builds of this target only take disk space (their layers go in prune, once no
  # build runs beside: a running build's cached steps are untagged images too).
  buildah images --format '{{.Name}}:{{.Tag}}' | grep -E "/tfmw-$target:[0-9a-f]{16}(-labelled)?\$" |
    grep -v -E ":$inputs(-labelled)?\$" | xargs -r buildah rmi >/dev/null 2>&1 || true
  touch "$out/.prune"
  log "built tfmw-$target:dev in $(( $(date +%s) - t0 ))s"
}

# The targets side by side, the trainer first (the longest: pip unpacks TensorFlow on one
# core while the operator's build takes the other), then what no image uses any more.
targets() { # name...
  local name pids=() status=0
  for name in "$@"; do
    target "$name" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  ((status == 0)) || exit 1
  if [[ -f $out/.prune ]]; then
    buildah rmi --prune >/dev/null 2>&1 || true
    rm -f "$out/.prune"
  fi
}

start=$(date +%s)
if [[ ${1:-} == pause ]]; then
  pause
  exit 0
fi
if [[ ${1:-} == sandbox ]]; then
  pause
  load_image tfmw-pause:dev "$out"
  exit 0
fi
if [[ ${1:-} == push ]]; then
  base
  targets trainer operator
  for name in operator trainer; do
    # Plain HTTP for the machine-local registry only.
    tls=true
    [[ $registry != "$LOCAL_REGISTRY" ]] || tls=false
    buildah push -q --tls-verify=$tls "$registry/tfmw-$name:$tag" "docker://$registry/tfmw-$name:$tag"
    log "pushed $registry/tfmw-$name:$tag"
  done
  exit 0
fi
# TFMW_IMAGES="operator": that image alone (a cluster short of disk for the trainer's).
read -ra wanted <<<"${TFMW_IMAGES:-trainer operator}"
loaded=()
for name in "${wanted[@]}"; do loaded+=("tfmw-$name:dev"); done
if [[ ${TFMW_IMAGE_BUILDER:-buildah} == docker ]]; then
  for name in "${wanted[@]}"; do
    docker build -q --target "$name" "${labels[@]}" -t "tfmw-$name:dev" -t "$registry/tfmw-$name:$tag" "$repo" >/dev/null
  done
else
  base
  pause
  targets "${wanted[@]}"
  # The pause image is the local node's sandbox; a kind node has its own.
  [[ -n $kind_cluster ]] || loaded=(tfmw-pause:dev "${loaded[@]}")
fi
if [[ ${1:-} == build ]]; then
  log "images built in $(( $(date +%s) - start ))s (not loaded)"
  exit 0
fi
for name in "${loaded[@]}"; do load_image "$name" "$out"; done
log "images ready in $(( $(date +%s) - start ))s"
