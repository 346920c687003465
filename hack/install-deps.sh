#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine: Debian packages for the
# local node and image builds, the project's Python virtual environment (.venv), and the
# cluster binaries (hack/build.sh) and Helm.
#
# Python: nothing is installed into the system's Python (Debian marks it externally
# managed, PEP 668). .venv is made from Debian's /usr/bin/python3 with python3-venv, or
# from $TFMW_PYTHON, and holds the project (editable) with its operator, trainer and dev
# extras. The Makefile puts .venv/bin first on the PATH, so every target, hack/ script and
# test that runs `python3` gets it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
packages=(containerd runc buildah debootstrap containernetworking-plugins iptables conntrack
  iproute2 socat curl openssl util-linux procps
  python3 python3-venv # the project's .venv (Debian's python3 lacks ensurepip without it)
  chromium) # chromium: the e2e test renders TensorBoard in it, headless
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv=${TFMW_VENV:-$repo/.venv}
base_python=${TFMW_PYTHON:-/usr/bin/python3}
[[ -x $base_python ]] || base_python=$(command -v python3)
# A venv whose interpreter is gone (its base Python removed or upgraded) is made anew.
if ! "$venv/bin/python3" -c '' 2>/dev/null; then
  rm -rf "$venv"
  echo "creating $venv from $base_python ($("$base_python" --version 2>&1))"
  "$base_python" -m venv "$venv"
fi
"$venv/bin/python3" -m pip install -q --disable-pip-version-check -e "$repo[operator,trainer,dev]"
"$repo/hack/build.sh"
# Helm: make lint runs helm lint on charts/tfmw, a unit test renders it.
go_tool helm.sh/helm/v3/cmd/helm "$HELM_VERSION" helm
