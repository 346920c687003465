#!/usr/bin/env bash
# Regenerates the pod template schema in crds/tfmwjobs.tfmw.dev.yaml (and its copy in
# charts/tfmw/crds) from the local API server's OpenAPI (the pinned Kubernetes version);
# run after changing KUBE_VERSION.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$repo/hack/cluster.sh" up --no-node >/dev/null
openapi=$(mktemp)
trap 'rm -f "$openapi"' EXIT
kubectl get --raw /openapi/v3/api/v1 >"$openapi"
python3 "$repo/hack/gen_template_schema.py" "$openapi" "$repo/crds/tfmwjobs.tfmw.dev.yaml"
# The chart ships the same CRD (Helm installs crds/ first and never deletes it).
cp "$repo/crds/tfmwjobs.tfmw.dev.yaml" "$repo/charts/tfmw/crds/tfmwjobs.tfmw.dev.yaml"
