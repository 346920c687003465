#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine: Debian packages for the
# local node and image builds, the Python packages, and the cluster binaries (hack/build.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
packages=(containerd runc buildah debootstrap containernetworking-plugins iptables conntrack
  iproute2 socat curl openssl util-linux procps
  chromium) # chromium: the e2e test renders TensorBoard in it, headless
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e "$repo[operator,trainer,dev]"
"$repo/hack/build.sh"
