#!/usr/bin/env bash
# Writes Kubeflow's TFJob CRD (kubeflow.org/v1 tfjobs), taken byte for byte from the Go
# module of training-operator at TFJOB_VERSION (hack/versions.env), never retyped, to:
#   deploy/overlays/tfjob/component/kubeflow.org_tfjobs.yaml   as the module ships it
#   charts/tfmw/templates/tfjob-crd.yaml                        the same bytes between a
#     header and a footer: rendered only with tfjob.enabled and tfjob.installCRD
# Run after changing TFJOB_VERSION; tests/unit/charts/test_tfjob_chart.py checks both
# against the module at the pinned version.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
module=$(module_dir "github.com/kubeflow/training-operator@$TFJOB_VERSION")
crd=$module/manifests/base/crds/kubeflow.org_tfjobs.yaml
# Helm would read "{{" in the CRD as a template action; it has none (checked here, so a
# new version that does fails loudly instead of rendering something else).
if grep -q '{{' "$crd"; then
  log "$crd holds '{{': Helm would template it; escape it before shipping" >&2
  exit 1
fi
install -m 0644 "$crd" "$repo/deploy/overlays/tfjob/component/kubeflow.org_tfjobs.yaml"
{
  printf '%s\n' "{{- /* Kubeflow's TFJob CRD, github.com/kubeflow/training-operator@$TFJOB_VERSION manifests/base/crds/kubeflow.org_tfjobs.yaml, written by hack/gen-tfjob-crd.sh: do not edit. */}}"
  printf '%s\n' '{{- if and .Values.tfjob.enabled .Values.tfjob.installCRD }}'
  sed '0,/^  annotations:$/s//&\n    helm.sh\/resource-policy: keep/' "$crd"
  printf '%s\n' '{{- end }}'
} >"$repo/charts/tfmw/templates/tfjob-crd.yaml"
log "wrote the TFJob CRD of training-operator $TFJOB_VERSION into deploy/overlays/tfjob/component and charts/tfmw/templates"
