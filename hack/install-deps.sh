#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine: Debian packages for the
# local node and image builds, the project's Python virtual environment (.venv), and the
# cluster's binaries (hack/build.sh).
#
#   hack/install-deps.sh            all of it (make install): the packages, then .venv and the
#                                   binaries side by side (pip waits on disk and network, the
#                                   Go build on the CPU)
#   hack/install-deps.sh packages   the packages the local cluster and the image builds need
#                                   (make demo; all of it adds chromium, for the e2e tests)
#   hack/install-deps.sh venv [EXTRA...]   .venv only, with those extras (default: operator
#                                   trainer dev; make demo's: client, for the tfmw command)
#
# Helm, kind, kwok and the registry are built by the targets that use them (hack/build.sh
# helm, hack/kind.sh, hack/kwok.sh, hack/registry.sh), not here: make demo needs none.
#
# Python: nothing is installed into the system's Python (Debian marks it externally
# managed, PEP 668). .venv is made from Debian's /usr/bin/python3 with python3-venv, or
# from $TFMW_PYTHON, and holds the project (editable) with its operator, trainer and dev
# extras (hack/pip_requirements.py lists them; tf-keras comes without its dependencies, so
# pip installs one TensorFlow, not two). The Makefile puts .venv/bin first on the PATH, so
# every target, hack/ script and test that runs `python3` gets it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

cluster_packages=(containerd runc buildah debootstrap containernetworking-plugins iptables conntrack
  iproute2 socat curl openssl util-linux procps
  python3 python3-venv) # the project's .venv (Debian's python3 lacks ensurepip without it)
test_packages=(chromium) # the e2e test renders TensorBoard in it, headless

packages() { # package...: those not installed yet
  local p missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    echo "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

venv() { # extra...
  local venv=${TFMW_VENV:-$repo/.venv} base_python=${TFMW_PYTHON:-/usr/bin/python3}
  [[ -x $base_python ]] || base_python=$(command -v python3)
  # A venv whose interpreter is gone (its base Python removed or upgraded) is made anew.
  if ! "$venv/bin/python3" -c '' 2>/dev/null; then
    rm -rf "$venv"
    echo "creating $venv from $base_python ($("$base_python" --version 2>&1))"
    "$base_python" -m venv "$venv"
  fi
  local pip=("$venv/bin/python3" -m pip install -q --disable-pip-version-check) no_deps
  "${pip[@]}" -e "$repo" -r <("$base_python" "$repo/hack/pip_requirements.py" "$repo/pyproject.toml" "$@")
  no_deps=$("$base_python" "$repo/hack/pip_requirements.py" --no-deps "$repo/pyproject.toml" "$@")
  [[ -z $no_deps ]] || "${pip[@]}" --no-deps -r <(echo "$no_deps")
}

case ${1:-all} in
  packages) packages "${cluster_packages[@]}" ;;
  venv)
    shift
    (($#)) || set -- operator trainer dev
    venv "$@"
    ;;
  all)
    packages "${cluster_packages[@]}" "${test_packages[@]}"
    "$repo/hack/build.sh" &
    binaries=$!
    status=0
    venv operator trainer dev || status=$?
    wait "$binaries" || status=1
    exit "$status"
    ;;
  *) echo "usage: $0 [packages | venv]" >&2; exit 2 ;;
esac
