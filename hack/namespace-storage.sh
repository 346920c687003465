#!/usr/bin/env bash
# Gives a namespace its shared storage on a hostPath cluster (the local one, or kind), walled:
#   hack/namespace-storage.sh [--pod-security baseline|restricted] [--set-pod-security] NAMESPACE
#   hack/namespace-storage.sh --delete [--purge] NAMESPACE   # takes the claim and volume away again
#   hack/namespace-storage.sh --print [--pod-security LEVEL] NAMESPACE  # the objects, for a cluster elsewhere
# (make namespace-storage NAMESPACE=team-a, make namespace-storage-delete NAMESPACE=team-a;
# kind-namespace-storage and kind-namespace-storage-delete on kind.)
#
# It makes the namespace's folder <shared root>/NAMESPACE (mode 0777, for workers running as
# any user) in the host folder $TFMW_SHARED_DIR, and applies a PersistentVolume on that
# folder alone, bound to the claim tfmw-shared in NAMESPACE. Pods of NAMESPACE reach that
# folder and nothing above it through the claim; the wall holds only because Pod Security
# refuses them a hostPath volume of their own (a plain pod with hostPath on the shared root
# would read and write every namespace's folder). So the namespace must enforce at least
# the `baseline` profile (docs/storage.md, "The wall needs Pod Security"):
# - a namespace it creates enforces LEVEL (baseline by default; restricted warns);
# - an existing one that enforces less (or nothing) is refused, with the fix, unless
#   --set-pod-security raises its label to LEVEL; one that enforces more is left as it is;
# - and before any storage is given, a server-side dry run of a pod with a hostPath volume
#   must be refused there: the wall is tried, not assumed from a label.
# Run again, it changes nothing that is right already, and it binds again a volume whose
# namespace was deleted and created anew (the Retain volume kept the old claim's UID and
# stayed Released for ever). The namespace and its two objects carry the label
# tfmw.dev/shared-storage=true (docs/storage.md).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log_prefix=namespace-storage

usage() {
  cat >&2 <<EOF
usage: $0 [--pod-security baseline|restricted] [--set-pod-security] NAMESPACE
       $0 --delete [--purge] NAMESPACE
       $0 --print [--pod-security baseline|restricted] NAMESPACE
EOF
  exit 2
}

action=apply level=baseline set_level=false purge=false namespace=
while (($#)); do
  case $1 in
    --print) action=print ;;
    --delete) action=delete ;;
    --purge) purge=true ;;
    --set-pod-security) set_level=true ;;
    --pod-security) level=${2:-}; shift ;;
    --pod-security=*) level=${1#*=} ;;
    -*) usage ;;
    *) [[ -z $namespace ]] || usage; namespace=$1 ;;
  esac
  shift
done
[[ $namespace =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || {
  echo "$0: give a namespace's exact name" >&2
  usage
}
[[ $level == baseline || $level == restricted ]] || { echo "--pod-security: baseline or restricted" >&2; usage; }
[[ $action == delete || $purge == false ]] || { echo "--purge goes with --delete" >&2; usage; }
[[ $namespace != tfmw-system ]] || { echo "tfmw-system's claim is the operator's (the whole root)" >&2; exit 2; }
# Its volume would be named tfmw-shared-operator: the operator's own, on the whole root.
[[ $namespace != operator ]] || { echo "namespace 'operator' would take the operator's volume name; use another" >&2; exit 2; }

claim=tfmw-shared
volume=tfmw-shared-$namespace
node_path=/var/lib/tfmw/shared/$namespace  # in the node (deploy/kind/cluster.yaml mounts the host folder there)
mark=tfmw.dev/shared-storage
enforce=pod-security.kubernetes.io/enforce

namespace_object() {
  cat <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $namespace
  labels:
    $enforce: $level
    $enforce-version: latest
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/warn-version: latest
    $mark: "true"
YAML
}

storage_objects() {
  cat <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $volume
  labels: {app.kubernetes.io/name: tfmw-operator, tfmw.dev/namespace: $namespace, $mark: "true"}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: tfmw-hostpath
  hostPath: {path: $node_path, type: DirectoryOrCreate}
  claimRef: {namespace: $namespace, name: $claim}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: $claim
  namespace: $namespace
  labels: {tfmw.dev/namespace: $namespace, $mark: "true"}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: tfmw-hostpath
  volumeName: $volume
  resources: {requests: {storage: 10Gi}}
YAML
}

if [[ $action == print ]]; then
  namespace_object
  echo ---
  storage_objects
  exit 0
fi

rank() { # a Pod Security level's strength; 0 for none, privileged or anything else
  case $1 in baseline) echo 1 ;; restricted) echo 2 ;; *) echo 0 ;; esac
}

# kubectl get ... -o jsonpath, empty when the object does not exist (other errors fail).
field() { # kind name jsonpath [kubectl options...]
  local kind=$1 name=$2 path=$3
  shift 3
  kubectl get "$kind" "$name" --ignore-not-found -o "jsonpath=$path" "$@"
}

# Ours: this script's (or deploy/overlays/local's) volume for this namespace's claim, on
# this namespace's folder; anything else of that name is left alone.
volume_is_ours() {
  local found
  found=$(field pv "$volume" '{.metadata.labels.tfmw\.dev/namespace}|{.spec.hostPath.path}|{.spec.claimRef.namespace}/{.spec.claimRef.name}')
  [[ $found == "$namespace|$node_path|$namespace/$claim" || $found == "$namespace|$node_path|/" ]]
}

refuse() { echo "namespace-storage: $*" >&2; exit 3; }

# A pod with a hostPath volume on the shared root, asked for with a server-side dry run (the
# admission chain runs, nothing is stored): Pod Security must refuse it.
probe_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: tfmw-wall-probe, namespace: $namespace}
spec:
  containers: [{name: probe, image: tfmw-wall-probe, volumeMounts: [{name: root, mountPath: /root-of-all}]}]
  volumes: [{name: root, hostPath: {path: /var/lib/tfmw/shared}}]
YAML
}

wall_holds() {
  local out
  if out=$(probe_pod | kubectl create --dry-run=server -f - 2>&1); then
    refuse "the wall does not hold in $namespace: a pod with a hostPath volume on the shared root was" \
      "admitted (server-side dry run) although the namespace enforces Pod Security" \
      "'$(field namespace "$namespace" "{.metadata.labels.pod-security\.kubernetes\.io/enforce}")'." \
      "Is the API server's PodSecurity admission plugin off, or the namespace (or you) exempt in its" \
      "configuration? No storage was given."
  fi
  [[ $out == *"violates PodSecurity"* ]] ||
    refuse "could not try the wall in $namespace (a dry-run pod was refused for another reason): $out"
}

walled_namespace() {
  local phase found
  phase=$(field namespace "$namespace" '{.status.phase}')
  if [[ -z $phase ]]; then
    namespace_object | kubectl create -f - >/dev/null
    # The wall's dry-run pod needs the namespace's default service account, which the
    # controller manager makes a moment later (admission waits for it about a second only).
    kubectl -n "$namespace" wait --for=create serviceaccount/default --timeout=60s >/dev/null
    log "namespace $namespace created, enforcing Pod Security $level"
    return 0
  fi
  [[ $phase != Terminating ]] || refuse "namespace $namespace is being deleted; run this again once it is gone"
  found=$(field namespace "$namespace" "{.metadata.labels.pod-security\.kubernetes\.io/enforce}")
  if (($(rank "$found") >= $(rank "$level"))); then
    return 0
  fi
  if ! $set_level; then
    local shown="'$found'"
    [[ -n $found ]] || shown="nothing (no label: the cluster's default, privileged unless configured)"
    refuse "namespace $namespace enforces Pod Security $shown," \
      "less than $level: any pod there could mount the shared root by hostPath and read and write every" \
      "namespace's folder. Raise it and run this again:
  kubectl label --overwrite namespace $namespace $enforce=$level $enforce-version=latest
or run this again with --set-pod-security (the same label; the API server then warns of any pod
there that breaks $level). Nothing was changed."
  fi
  # The API server answers with a warning for each running pod that breaks the new level.
  kubectl label --overwrite namespace "$namespace" "$enforce=$level" "$enforce-version=latest"
  log "namespace $namespace: Pod Security raised from '${found:-none}' to $level"
}

# A Retain volume whose claim is gone (its namespace deleted, or the claim) keeps that
# claim's UID in its claimRef and stays Released: no new claim of the same name binds it.
# Cleared only when the claim it names is not there (no claim of that name, or one with
# another UID), and only if that UID is still the one read (a JSON patch `test`).
release_stale_claim_ref() {
  local held current
  held=$(field pv "$volume" '{.spec.claimRef.uid}')
  [[ -n $held ]] || return 0
  current=$(field pvc "$claim" '{.metadata.uid}' -n "$namespace")
  [[ $held != "$current" ]] || return 0
  kubectl patch pv "$volume" --type json -p "[
    {\"op\": \"test\", \"path\": \"/spec/claimRef/uid\", \"value\": \"$held\"},
    {\"op\": \"replace\", \"path\": \"/spec/claimRef\", \"value\": {\"namespace\": \"$namespace\", \"name\": \"$claim\"}}
  ]" >/dev/null
  log "volume $volume: the claim it was bound to (uid $held) is gone; it binds $namespace/$claim again"
}

apply() {
  local bound_to
  [[ ! -L $shared_dir/$namespace ]] || refuse "$shared_dir/$namespace is a symbolic link; it must be a folder"
  if [[ -n $(field pv "$volume" '{.metadata.name}') ]] && ! volume_is_ours; then
    refuse "a PersistentVolume $volume exists that is not $namespace's folder ($node_path) for $namespace/$claim;" \
      "remove or rename it first"
  fi
  walled_namespace
  wall_holds
  bound_to=$(field pvc "$claim" '{.spec.volumeName}' -n "$namespace")
  [[ -z $bound_to || $bound_to == "$volume" ]] ||
    refuse "the claim $namespace/$claim exists, on the volume '$bound_to', not $volume; delete it first (the namespace's jobs must be stopped)"
  mkdir -p "$shared_dir/$namespace"
  chmod 0777 "$shared_dir/$namespace"
  release_stale_claim_ref
  storage_objects | kubectl apply -f - >/dev/null
  # Bound at once, or at the volume controller's next periodic pass (every 15 s).
  if ! kubectl -n "$namespace" wait "pvc/$claim" --for=jsonpath='{.status.phase}'=Bound --timeout=60s >/dev/null; then
    refuse "the claim $namespace/$claim did not bind to $volume within 60 s: kubectl describe pv $volume"
  fi
  kubectl label --overwrite namespace "$namespace" "$mark=true" >/dev/null
  log "namespace $namespace (Pod Security $(field namespace "$namespace" "{.metadata.labels.pod-security\.kubernetes\.io/enforce}")):" \
    "claim $claim bound, on $shared_dir/$namespace (in the node: $node_path)"
}

delete() {
  local users
  if [[ -n $(field namespace "$namespace" '{.metadata.name}') ]]; then
    # Pods that still run on the claim would hold it (and so the volume) until they end.
    users=$(kubectl -n "$namespace" get pods -o \
      "jsonpath={range .items[*]}{.status.phase} {.metadata.name} {.spec.volumes[*].persistentVolumeClaim.claimName}{\"\\n\"}{end}" |
      awk -v claim="$claim" '$1 != "Succeeded" && $1 != "Failed" { for (i = 3; i <= NF; i++) if ($i == claim) print $2 }')
    [[ -z $users ]] || refuse "pods of $namespace still use the claim $claim (delete their jobs first):" $users
    if [[ -n $(field pvc "$claim" '{.metadata.name}' -n "$namespace") ]]; then
      [[ $(field pvc "$claim" '{.spec.volumeName}' -n "$namespace") == "$volume" ]] ||
        refuse "the claim $namespace/$claim is not on $volume: not made by this script, left alone"
      kubectl -n "$namespace" delete pvc "$claim" --wait=true --timeout=60s >/dev/null
      log "claim $namespace/$claim deleted"
    fi
    kubectl label namespace "$namespace" "$mark-" >/dev/null 2>&1 || true
  fi
  if [[ -n $(field pv "$volume" '{.metadata.name}') ]]; then
    volume_is_ours || refuse "the PersistentVolume $volume is not $namespace's folder: not made by this script, left alone"
    kubectl delete pv "$volume" --wait=true --timeout=60s >/dev/null
    log "volume $volume deleted"
  fi
  if $purge; then
    rm -rf -- "${shared_dir:?}/$namespace"  # rm never follows the links inside
    log "folder $shared_dir/$namespace removed"
  elif [[ -e $shared_dir/$namespace ]]; then
    log "folder $shared_dir/$namespace kept (its jobs' checkpoints and logs); --purge removes it." \
      "The namespace keeps its Pod Security labels."
  fi
}

$action
