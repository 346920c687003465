#!/usr/bin/env bash
# make demo: a real 2-worker TensorFlow job on the local cluster, from nothing to Succeeded.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
shared=$shared_dir
job=mnist
start=$(date +%s)

"$repo/hack/up.sh"

echo "=== kubectl apply -f deploy/samples/mnist-2-workers.yaml"
kubectl delete tfmwjob "$job" --ignore-not-found --wait >/dev/null
kubectl apply -f "$repo/deploy/samples/mnist-2-workers.yaml"
echo "=== kubectl get tfmwjobs -w (until the job finishes)"
last="" phase=""
kubectl get tfmwjobs "$job" | head -1
for _ in $(seq 900); do
  # Print a line whenever phase, readiness or restarts change (AGE changes every second).
  state=$(kubectl get tfmwjob "$job" -o jsonpath='{.status.phase}/{.status.readyWorkers}/{.status.restarts}' 2>/dev/null || true)
  if [[ $state != "$last" ]]; then
    kubectl get tfmwjobs "$job" --no-headers 2>/dev/null || true
    last=$state
  fi
  phase=$(kubectl get tfmwjob "$job" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Succeeded || $phase == Failed ]] && break
  sleep 1
done
echo
kubectl get tfmwjob "$job" -o wide
for i in 0 1; do
  echo "=== kubectl logs $job-worker-$i"
  kubectl logs "$job-worker-$i" 2>/dev/null | grep -E "^worker=" ||
    cat "$shared/default/$job/logs/"attempt-*/"worker-$i.log" 2>/dev/null | grep -E "^worker=" || true
done
echo "=== the marker the chief wrote: $shared/default/$job/multiworker-complete.txt"
cat "$shared/default/$job/multiworker-complete.txt" 2>/dev/null || echo "(none)"
echo "=== checkpoints and TensorBoard logs in $shared/default/$job/"
ls -l "$shared/default/$job/checkpoints" "$shared/default/$job/tensorboard" 2>/dev/null || true
echo "=== demo finished in $(( $(date +%s) - start ))s with phase ${phase:-unknown}"
[[ $phase == Succeeded ]]
