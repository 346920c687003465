"""Prints the mutation score of the last `mutmut run` and the mutants that survived it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

subprocess.run(["mutmut", "export-cicd-stats"], check=True, capture_output=True)
stats = json.loads(Path("mutants/mutmut-cicd-stats.json").read_text())
killed, survived = stats["killed"], stats["survived"]
timeouts, suspicious = stats.get("timeout", 0), stats.get("suspicious", 0)
judged = killed + survived + timeouts + suspicious
score = (killed + timeouts) / judged if judged else 0.0
survivors = subprocess.run(["mutmut", "results"], capture_output=True, text=True, check=False).stdout
print(survivors.rstrip())
print(
    f"mutants: {stats['total']}, killed {killed}, timed out {timeouts}, survived {survived}, "
    f"suspicious {suspicious}, not checked {stats.get('not_checked', 0)}, no tests {stats.get('no_tests', 0)}"
)
print(f"mutation score: {score:.1%} (killed or timed out / judged)")
sys.exit(0)
