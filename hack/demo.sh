#!/usr/bin/env bash
# make demo: a real 2-worker TensorFlow job on the local cluster, from nothing to Succeeded.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
shared=$shared_dir
job=mnist
start=$(date +%s)

"$repo/hack/up.sh"
# TensorBoard beside the operator (deploy/tensorboard, an optional component).
kubectl apply -k "$repo/deploy/tensorboard" >/dev/null

echo "=== kubectl apply -f deploy/samples/mnist-2-workers.yaml"
kubectl delete tfmwjob "$job" --ignore-not-found --wait >/dev/null
kubectl apply -f "$repo/deploy/samples/mnist-2-workers.yaml"
echo "=== kubectl get tfmwjobs -w (until the job finishes)"
"$bin/kubectl" --kubeconfig "$kubeconfig" get tfmwjobs "$job" -w &  # the binary itself, so $! is its pid
watcher=$!
trap 'kill $watcher 2>/dev/null || true' EXIT
phase=""
for _ in $(seq 900); do
  phase=$(kubectl get tfmwjob "$job" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ $phase == Succeeded || $phase == Failed ]] && break
  sleep 1
done
sleep 1  # the watch prints the last change
kill $watcher 2>/dev/null || true
wait $watcher 2>/dev/null || true
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
echo "=== demo finished in $(( $(date +%s) - start ))s with phase ${phase:-unknown}"
echo "TensorBoard (run default/$job): open http://localhost:6006 after"
echo "  kubectl -n tfmw-system port-forward svc/tfmw-tensorboard 6006:6006"
[[ $phase == Succeeded ]]
