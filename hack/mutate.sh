#!/usr/bin/env bash
# Mutation testing of the pure core (make mutate): mutmut changes the code one small way at
# a time and runs the unit tests; a mutant they do not notice is a rule no test holds.
# mutmut names modules after their path below ./ or src/, so it runs in a staged copy
# (build/mutate/) where operator/ is src/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
python3 -m pip install -q --disable-pip-version-check mutmut==3.8.1
stage=$repo/build/mutate
# MUTATE_RESUME=1 keeps the last run's results (build/mutate/mutants): mutmut mutates again only
# the functions that changed, collects coverage for new tests, and the survivors and the
# mutants no test reached are tried again with today's tests (a whole run is about 40 min on
# 2 cores; docs/benchmarks.md, run mutate-41).
resume=
if [[ -n "${MUTATE_RESUME:-}" && -d "$stage/mutants" ]]; then
  resume=1
  (cd "$stage" && rm -rf src trainer client tests crds charts deploy pyproject.toml)
else
  rm -rf "$stage"
fi
mkdir -p "$stage"
cp -r "$repo/operator" "$stage/src"
cp -r "$repo/trainer" "$repo/client" "$repo/tests" "$repo/crds" "$repo/charts" "$repo/deploy" "$stage/"
sed 's|^pythonpath = \["operator", |pythonpath = ["src", |' "$repo/pyproject.toml" >"$stage/pyproject.toml"
cd "$stage"
start=$(date +%s)
# Fewer property-test examples per mutant: each of them runs the unit tests again.
export TFMW_HYPOTHESIS_EXAMPLES=100
mutmut run --max-children "$(nproc)" || true
if [[ -n "$resume" ]]; then
  mapfile -t again < <(mutmut results --all true | sed -n 's/^ *\([^ :]*\): \(survived\|no tests\)$/\1/p')
  (( ${#again[@]} == 0 )) || mutmut run --max-children "$(nproc)" "${again[@]}" || true
fi
python3 "$repo/hack/mutation_score.py"
echo "mutation testing took $(( $(date +%s) - start ))s"
