#!/usr/bin/env bash
# The machine-local image registry: the CNCF Distribution registry, built from its Go
# module (DISTRIBUTION_VERSION in versions.env) into hack/bin, serving plain HTTP on
# $LOCAL_REGISTRY (localhost only), its storage under /var/lib/tfmw/registry. The local
# cluster's containerd pulls from it (hack/node.sh: a hosts.toml for that host:port).
#   hack/registry.sh up       build (once), start, wait until it answers
#   hack/registry.sh down     stop it (the stored images stay: `down --purge` removes them)
#   hack/registry.sh status
#   hack/registry.sh config   print the registry's configuration
# It stores what `make push` sends and serves pulls; nothing is ever deleted through it
# (storage.delete off: a DELETE of a manifest or blob is refused, 405), so a client that
# reaches it (kind's nodes do, through hack/kind/registry_forward.py, which passes pulls
# only) cannot take away the images the nodes run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_prefix=registry
storage=${TFMW_REGISTRY_DIR:-/var/lib/tfmw/registry}
# Its own run folder, not the cluster's: the registry outlives make cluster-down.
run=${TFMW_REGISTRY_RUN:-$repo/.registry}
logs=$run
config=$run/config.yml

answers() { curl -fsS --max-time 2 "http://$LOCAL_REGISTRY/v2/" >/dev/null; }

configuration() {
  cat <<CONFIG
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $storage}
  delete: {enabled: false}
http:
  addr: 127.0.0.1:$REGISTRY_PORT
CONFIG
}

up() {
  go_tool github.com/distribution/distribution/v3/cmd/registry "$DISTRIBUTION_VERSION" registry
  mkdir -p "$run" "$storage"
  configuration >"$config"
  if ! alive registry && answers; then
    echo "something else serves $LOCAL_REGISTRY already; stop it or set REGISTRY_PORT" >&2
    exit 1
  fi
  start registry env OTEL_TRACES_EXPORTER=none "$bin/registry" serve "$config"
  wait_for "the registry on $LOCAL_REGISTRY" 30 answers
  log "registry $DISTRIBUTION_VERSION serves http://$LOCAL_REGISTRY (storage $storage)"
}

down() {
  stop registry
  if [[ ${1:-} == --purge ]]; then rm -rf "$storage"; log "removed $storage"; fi
}

case ${1:-up} in
  up) up ;;
  down) shift; down "$@" ;;
  config) configuration ;;
  status) if alive registry && answers; then echo "registry: serving http://$LOCAL_REGISTRY"; else echo "registry: down"; exit 1; fi ;;
  *) echo "usage: $0 up|down [--purge]|status|config" >&2; exit 2 ;;
esac
