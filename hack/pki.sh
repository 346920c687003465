#!/usr/bin/env bash
# Creates the local cluster's certificates once: a CA, the API server's serving
# certificate, and one client certificate per identity in hack/components (each with the
# name the built-in RBAC bindings expect), plus the service-account signing key.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
mkdir -p "$pki"
cd "$pki"
[[ -f ca.crt ]] || openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt \
  -days 3650 -subj "/CN=tfmw-local-ca" 2>/dev/null
[[ -f sa.key ]] || { openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }

issue() { # name subject [subjectAltName]
  local name=$1 subject=$2 san=${3:-}
  [[ -f "$name.crt" ]] && return 0
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject" 2>/dev/null
  local ext="extendedKeyUsage=clientAuth,serverAuth"
  [[ -n "$san" ]] && ext+=$'\n'"subjectAltName=$san"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" \
    -days 3650 -extfile <(printf '%s\n' "$ext") 2>/dev/null
  rm -f "$name.csr"
}
# The API server's serving certificate.
issue apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:${node_ip},IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
# Each component's client certificate (hack/components); the kubelet's serves its API too.
while read -r identity subject <&3; do
  san=""
  [[ $identity != kubelet ]] || san="IP:127.0.0.1,IP:${node_ip},DNS:${node_name}"
  issue "$identity" "$subject" "$san"
done 3< <(components -o identity,subject identity!=-)
