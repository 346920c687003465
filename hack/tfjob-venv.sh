#!/usr/bin/env bash
# Kubeflow's Python SDK as its users install it (kubeflow-training 1.9.4 from PyPI, pinned in
# tests/tfjob/requirements-kubeflow.txt) in a virtual environment of its own,
# .tfjob/venv-kubeflow, apart from the project's .venv (the SDK wants kubernetes < 36). Made
# from Debian's python3, again only when the requirements change. Prints its python.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
venv=$repo/.tfjob/venv-kubeflow
requirements=$repo/tests/tfjob/requirements-kubeflow.txt
stamp=$venv/.installed
want=$(inputs_hash "$requirements")
if [[ ! -x $venv/bin/python || $(cat "$stamp" 2>/dev/null) != "$want" ]]; then
  log "making $venv (kubeflow-training from PyPI) ..." >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" >&2
  echo "$want" >"$stamp"
fi
echo "$venv/bin/python"
