#!/usr/bin/env bash
# Gives a namespace its shared storage on a hostPath cluster (the local one, or kind):
#   hack/namespace-storage.sh NAMESPACE          # or: make namespace-storage NAMESPACE=team-a
#   hack/namespace-storage.sh --print NAMESPACE  # only print the objects, for a cluster elsewhere
# It makes the namespace's folder <shared root>/NAMESPACE (mode 0777, for workers running
# as any user) in the host folder $TFMW_SHARED_DIR, and applies a PersistentVolume on that
# folder alone, bound to the claim tfmw-shared in NAMESPACE (the namespace is created if
# missing). Pods of NAMESPACE see that folder and nothing above it (docs/storage.md).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
print=false
[[ ${1:-} == --print ]] && { print=true; shift; }
namespace=${1:-}
[[ $namespace =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || {
  echo "usage: $0 [--print] NAMESPACE (a namespace's exact name)" >&2
  exit 2
}
[[ $namespace != tfmw-system ]] || { echo "tfmw-system's claim is the operator's (the whole root)" >&2; exit 2; }
# Its volume would be named tfmw-shared-operator: the operator's own, on the whole root.
[[ $namespace != operator ]] || { echo "namespace 'operator' would take the operator's volume name; use another" >&2; exit 2; }
objects() {
  cat <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $namespace}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: tfmw-shared-$namespace
  labels: {app.kubernetes.io/name: tfmw-operator, tfmw.dev/namespace: $namespace}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: tfmw-hostpath
  hostPath: {path: /var/lib/tfmw/shared/$namespace, type: DirectoryOrCreate}
  claimRef: {namespace: $namespace, name: tfmw-shared}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: tfmw-shared
  namespace: $namespace
spec:
  accessModes: [ReadWriteMany]
  storageClassName: tfmw-hostpath
  volumeName: tfmw-shared-$namespace
  resources: {requests: {storage: 10Gi}}
YAML
}
if $print; then
  objects
  exit 0
fi
mkdir -p "$shared_dir/$namespace"
chmod 0777 "$shared_dir/$namespace"
objects | kubectl apply -f -
log "namespace $namespace: claim tfmw-shared on $shared_dir/$namespace (in the node: /var/lib/tfmw/shared/$namespace)"
