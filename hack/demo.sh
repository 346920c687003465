#!/usr/bin/env bash
# make demo: a real 2-worker TensorFlow job on the local cluster, from nothing to Succeeded.
#
# From a fresh machine it builds only what the demo needs, and side by side what waits on
# nothing else (two cores: the Go build keeps both busy, while debootstrap, pip and the
# image layers wait on network and disk as much as on the CPU):
#   1. the Debian packages the cluster and the image builds need;
#   2. at once: the cluster's binaries (Go), then the cluster; the images (buildah); and
#      .venv, for the tfmw command and make test afterwards (niced: the demo waits on it last);
#   3. the operator's image loaded into the node and deployed while the trainer's loads;
#   4. the sample trained to Succeeded.
# Each step prints its start and its time (hack/stage.sh), and a table of them ends the run;
# the background steps' output is in .demo/<step>.log. Helm, chromium (for the e2e tests)
# and the rest of make install come with make install or make test.
# TFMW_INSTALLED=1 (set by the Makefile when make install is up to date): no packages, no .venv.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
shared=$shared_dir
job=mnist
start=$(date +%s)
steps=$repo/.demo
mkdir -p "$steps"
: >"$steps/timings"

# A step under hack/stage.sh, its start and end recorded (seconds since the demo began).
# With STEP_LOG (the background steps) its output goes to that file, and its stage lines here.
step() { # name command...
  local name=$1 begun code=0
  shift
  begun=$(date +%s)
  if [[ -z ${STEP_LOG:-} ]]; then
    "$repo/hack/stage.sh" "$name" "$@" || code=$?
  elif "$repo/hack/stage.sh" "$name" "$@" 2>&1 | tee -a "$STEP_LOG" | grep --line-buffered '^=== '; then
    code=0
  else
    code=${PIPESTATUS[0]}
  fi
  printf '%s\t%s\t%s\n' "$name" $((begun - start)) $(($(date +%s) - start)) >>"$steps/timings"
  return "$code"
}

background=()
# Waits for a background step; when it failed, shows the end of its log and ends the demo.
wait_for_step() { # pid log
  if ! wait "$1"; then
    echo "=== failed; the end of $2:"
    tail -30 "$2"
    exit 1
  fi
}
trap 'for pid in "${background[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT

if [[ ${TFMW_INSTALLED:-} != 1 ]]; then
  step "Debian packages (hack/install-deps.sh packages)" "$repo/hack/install-deps.sh" packages
  : >"$steps/venv.log"
  STEP_LOG=$steps/venv.log step ".venv, niced (hack/install-deps.sh venv)" \
    nice -n 10 "$repo/hack/install-deps.sh" venv &
  venv=$!
  background+=("$venv")
fi
: >"$steps/cluster.log"
(
  export STEP_LOG=$steps/cluster.log
  step "Kubernetes binaries from Go (hack/build.sh)" "$repo/hack/build.sh" &&
    step "cluster: control plane and node (hack/cluster.sh up)" "$repo/hack/cluster.sh" up
) &
cluster=$!
background+=("$cluster")
: >"$steps/images.log"
STEP_LOG=$steps/images.log step "images built (hack/images.sh build)" "$repo/hack/images.sh" build &
images=$!
background+=("$images")
wait_for_step "$images" "$steps/images.log"
wait_for_step "$cluster" "$steps/cluster.log"

# The operator first: it is deployed while the trainer's image (the larger) is imported.
step "operator image loaded (hack/images.sh)" env TFMW_IMAGES=operator "$repo/hack/images.sh"
: >"$steps/trainer-load.log"
STEP_LOG=$steps/trainer-load.log step "trainer image loaded (hack/images.sh)" \
  env TFMW_IMAGES=trainer "$repo/hack/images.sh" &
trainer=$!
background+=("$trainer")
step "operator deployed (hack/deploy.sh)" "$repo/hack/deploy.sh"
# TensorBoard beside the operator (deploy/tensorboard, an optional component).
kubectl apply -k "$repo/deploy/tensorboard" >/dev/null
wait_for_step "$trainer" "$steps/trainer-load.log"

train_start=$(date +%s)
echo "=== kubectl apply -f deploy/samples/mnist-2-workers.yaml"
kubectl delete tfmwjob "$job" --ignore-not-found --wait >/dev/null
kubectl apply -f "$repo/deploy/samples/mnist-2-workers.yaml"
echo "=== kubectl get tfmwjobs -w (until the job finishes)"
"$bin/kubectl" --kubeconfig "$kubeconfig" get tfmwjobs "$job" -w &  # the binary itself, so $! is its pid
watcher=$!
background+=("$watcher")
phase=""
for _ in $(seq 900); do
  phase=$(kubectl get tfmwjob "$job" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Succeeded || $phase == Failed ]] && break
  sleep 1
done
sleep 1  # the watch prints the last change
kill $watcher 2>/dev/null || true
wait $watcher 2>/dev/null || true
printf '%s\t%s\t%s\n' "the sample: applied, trained, ${phase:-unknown}" $((train_start - start)) \
  $(($(date +%s) - start)) >>"$steps/timings"
echo
kubectl get tfmwjob "$job" -o wide
for i in 0 1; do
  echo "=== kubectl logs $job-worker-$i"
  kubectl logs "$job-worker-$i" 2>/dev/null | grep -E "^worker=" ||
    cat "$shared/default/$job/logs/"attempt-*/"worker-$i.log" 2>/dev/null | grep -E "^worker=" || true
done
echo "=== the marker the chief wrote: $shared/default/$job/multiworker-complete.txt"
cat "$shared/default/$job/multiworker-complete.txt" 2>/dev/null || echo "(none)"
echo "=== held-out accuracy on real handwritten digits (chance is 0.10)"
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print("eval_accuracy=%.4f on %s, held out" % (m["metrics"]["eval_accuracy"], m.get("data")))' \
  "$shared/default/$job/multiworker-complete.txt" 2>/dev/null || echo "(no marker)"
echo "=== kubectl describe tfmwjob $job (its progress)"
kubectl describe tfmwjob "$job" | sed -n '/^  Progress:/,/^  Ready Workers:/p' | sed '$d'
echo "=== checkpoints and TensorBoard events in $shared/default/$job/"
ls -l "$shared/default/$job/checkpoints" "$shared/default/$job/"events.out.tfevents.* 2>/dev/null || true
kubectl -n tfmw-system rollout status deployment/tfmw-tensorboard --timeout=120s >/dev/null || true
if [[ -n ${venv:-} ]]; then wait_for_step "$venv" "$steps/venv.log"; fi
echo "=== where the time went (seconds since the demo began; steps side by side overlap)"
sort -t$'\t' -k2,2n -s "$steps/timings" |
  awk -F'\t' '{printf "  %-62s %5ds   %4d -> %4d\n", $1, $3 - $2, $2, $3}'
echo "=== demo finished in $(( $(date +%s) - start ))s with phase ${phase:-unknown}"
echo "TensorBoard (run default/$job): open http://localhost:6006 after"
echo "  kubectl -n tfmw-system port-forward svc/tfmw-tensorboard 6006:6006"
[[ $phase == Succeeded ]]
