#!/usr/bin/env bash
# The benchmark's peer: Kubeflow's training-operator (TFJob controller), built from its Go
# module (TFJOB_VERSION in versions.env) into .tfjob/, once per version. Prints its path.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cache=$repo/.tfjob
binary=$cache/training-operator-$TFJOB_VERSION
if [[ ! -x $binary ]]; then
  log "building the training-operator $TFJOB_VERSION from its Go module (about 2 minutes warm, 5 cold) ..." >&2
  start=$(date +%s)
  go_install "github.com/kubeflow/training-operator/cmd/training-operator.v1@$TFJOB_VERSION" "$binary" >&2
  log "built in $(( $(date +%s) - start ))s" >&2
fi
# Its TFJob CRD, from the same module.
module=$(module_dir "github.com/kubeflow/training-operator@$TFJOB_VERSION")
ln -sfn "$module/manifests/base/crds/kubeflow.org_tfjobs.yaml" "$cache/tfjobs-crd.yaml"
echo "$binary"
