"""Names of the wire contract's fourth round that the trainer uses (/work/notes/contract-additions.md).

MOVES TO contract.py: the lead adds these to `tfmw_operator.contract`, the one home of the
contract's names; then this module re-exports them from there (or goes), and nothing else in
the trainer changes. Until then this is the one place in the trainer that spells them.
Standard library only, like the contract: a program of your own may copy it.
"""

from __future__ import annotations

from typing import Final

# ---- environment (every container of every pod) ----
ROLE_ENV: Final = "TFMW_ROLE"  # chief, worker, ps, evaluator (as the pod's tfmw.dev/role label)
REPLICA_TYPE_ENV: Final = "TFMW_REPLICA_TYPE"  # chief, worker, ps, evaluator (the replica set)
REPLICA_INDEX_ENV: Final = "TFMW_REPLICA_INDEX"  # the index within its set
STEP_TIMES_PATH_ENV: Final = "TFMW_STEP_TIMES_PATH"  # $TFMW_SHARED_DIR/steps/<pod stem>.json
STACKS_PATH_ENV: Final = "TFMW_STACKS_PATH"  # $TFMW_SHARED_DIR/logs/attempt-<a>/<pod stem>.stacks

ROLE_CHIEF: Final = "chief"
ROLE_WORKER: Final = "worker"

# ---- steps/<stem>.json: each training pod's own compute time per step ----
STEP_TIMES_JOB_UID: Final = "jobUid"
STEP_TIMES_ATTEMPT: Final = "attempt"
STEP_TIMES_ROLE: Final = "role"
STEP_TIMES_INDEX: Final = "index"
STEP_TIMES_STEP: Final = "step"  # the last step measured
# The recent per-step compute times in seconds, newest last: the worker's own work before the
# step's collective, never the time it waited there for its peers.
STEP_TIMES_COMPUTE_SECONDS: Final = "computeSeconds"
STEP_TIMES_UPDATED_AT: Final = "updatedAt"  # RFC 3339
STEP_TIMES_MAX_SAMPLES: Final = 50
