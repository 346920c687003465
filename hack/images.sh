#!/usr/bin/env bash
# Builds the images the local node runs, without a registry, and imports them into
# containerd's k8s.io namespace:
#   tfmw-base:bookworm   debootstrap'd Debian 12 with Python 3.11 (the Dockerfile's BASE)
#   tfmw-pause:dev       the pod sandbox (hack/pause)
#   tfmw-operator:dev, tfmw-trainer:dev   the Dockerfile's targets
# Each image is rebuilt only when its inputs changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
out=$repo/.images
mkdir -p "$out"
has_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

start=$(date +%s)
if ! has_image tfmw-base:bookworm; then
  log "debootstrap Debian 12 with Python 3.11 (about a minute) ..."
  rm -rf "$out/rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$out/rootfs" >"$out/debootstrap.log" 2>&1 || { tail -20 "$out/debootstrap.log"; exit 1; }
  rm -rf "$out/rootfs/var/cache/apt/archives/"*.deb "$out/rootfs/var/lib/apt/lists/"*
  container=$(buildah from scratch)
  buildah copy -q "$container" "$out/rootfs" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$container"
  buildah commit -q "$container" tfmw-base:bookworm >/dev/null
  buildah rm "$container" >/dev/null
  rm -rf "$out/rootfs"
  log "built tfmw-base:bookworm"
fi

pause_hash=$(sha256sum "$repo/hack/pause/main.go" | cut -c1-16)
if ! has_image "tfmw-pause:$pause_hash"; then
  (cd "$repo/hack" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/pause" ./pause)
  container=$(buildah from scratch)
  buildah copy -q "$container" "$out/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$container"
  buildah commit -q "$container" "tfmw-pause:$pause_hash" >/dev/null
  buildah rm "$container" >/dev/null
  buildah tag "tfmw-pause:$pause_hash" tfmw-pause:dev
  log "built tfmw-pause:dev"
fi

# Wheels are fetched once on the host and offered to pip inside the build.
wheels=$image_store/wheels
mkdir -p "$wheels"
if [[ ! -f $wheels/.complete || $repo/pyproject.toml -nt $wheels/.complete ]]; then
  log "downloading wheels for the images ..."
  python3 -m pip download -q -d "$wheels" "$repo[operator,trainer]" setuptools wheel >/dev/null
  rm -f "$wheels"/tfmw-*
  touch "$wheels/.complete"
fi

for target in operator trainer; do
  inputs=$(cd "$repo" && cat Dockerfile pyproject.toml \
    $(git ls-files -co --exclude-standard "$target" | grep -v __pycache__ | sort) | sha256sum | cut -c1-16)
  if ! has_image "tfmw-$target:$inputs"; then
    log "building tfmw-$target ..."
    t0=$(date +%s)
    buildah bud -q --pull=never --network host --isolation chroot --layers \
      -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
      -v "$wheels:/wheels:ro" \
      --build-arg BASE=tfmw-base:bookworm --build-arg PIP_FIND_LINKS=/wheels \
      --target "$target" -t "tfmw-$target:$inputs" -f "$repo/Dockerfile" "$repo" >"$out/build-$target.log" 2>&1 \
      || { tail -30 "$out/build-$target.log"; exit 1; }
    buildah tag "tfmw-$target:$inputs" "tfmw-$target:dev"
    # Earlier builds of this target only take disk space.
    buildah images --format '{{.Name}}:{{.Tag}}' | grep -E "/tfmw-$target:[0-9a-f]{16}\$" |
      grep -v ":$inputs\$" | xargs -r buildah rmi >/dev/null 2>&1 || true
    buildah rmi --prune >/dev/null 2>&1 || true
    log "built tfmw-$target:dev in $(( $(date +%s) - t0 ))s"
  fi
done

for name in tfmw-pause:dev tfmw-operator:dev tfmw-trainer:dev; do import_image "$name" "$out"; done
log "images ready in $(( $(date +%s) - start ))s"
