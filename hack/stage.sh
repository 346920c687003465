#!/usr/bin/env bash
# Runs one stage of a longer run and prints how long it took.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
name=$1; shift
start=$(date +%s)
echo "=== ${name}: start $(date +%H:%M:%S)"
"$@"
code=$?
echo "=== ${name}: $(( $(date +%s) - start ))s (exit ${code})"
exit $code
