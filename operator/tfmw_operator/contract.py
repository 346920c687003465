"""The wire contract with a training program: what it sees and what it writes.

The operator sets the environment below in each worker's main container; the chief
writes the completion marker and, optionally, the progress document in the job's
folder on the shared volume. The operator and the reference trainer both import this
module, so the two sides cannot drift; it uses the standard library alone, and any
program may copy it. docs/training-program.md describes it for people.

Keys are camelCase, as in the Kubernetes API. Markers written before 0.2.0 spelled the
job's UID `job_uid`: that spelling is still read, for one release (see CHANGELOG.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Final

# ---- what a worker sees: set by the operator, refused in a job's template ----

TF_CONFIG: Final = "TF_CONFIG"
RESERVED_ENV_PREFIX: Final = "TFMW_"
JOB_NAME_ENV: Final = "TFMW_JOB_NAME"
JOB_UID_ENV: Final = "TFMW_JOB_UID"
NAMESPACE_ENV: Final = "TFMW_NAMESPACE"
# The pod's place: its role (chief, worker, ps, evaluator; worker 0 is the chief when the
# job has no chief of its own), its replica set and its index in that set.
ROLE_ENV: Final = "TFMW_ROLE"
REPLICA_TYPE_ENV: Final = "TFMW_REPLICA_TYPE"
REPLICA_INDEX_ENV: Final = "TFMW_REPLICA_INDEX"
WORKER_INDEX_ENV: Final = "TFMW_WORKER_INDEX"  # only in the worker set's pods: their index
NUM_WORKERS_ENV: Final = "TFMW_NUM_WORKERS"  # pods in the worker set in this attempt
ATTEMPT_ENV: Final = "TFMW_ATTEMPT"
# Where the job has a shared volume:
SHARED_DIR_ENV: Final = "TFMW_SHARED_DIR"  # the job's folder, as the pod mounts it
MARKER_PATH_ENV: Final = "TFMW_MARKER_PATH"
PROGRESS_PATH_ENV: Final = "TFMW_PROGRESS_PATH"
EVALUATION_PATH_ENV: Final = "TFMW_EVALUATION_PATH"  # the evaluator's metrics
STEP_TIMES_PATH_ENV: Final = "TFMW_STEP_TIMES_PATH"  # each training pod's own compute time per step
STACKS_PATH_ENV: Final = "TFMW_STACKS_PATH"  # where a program dumps its threads' stacks on SIGUSR1

# ---- runPolicy.warmStart: what a supervisor's standby may import ahead (the supervisor repeats these) ----

MODULE_NAME_PATTERN: Final = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"  # the CRD's, within ^...$
MAX_MODULE_NAME_CHARS: Final = 128
MAX_WARM_MODULES: Final = 16

# ---- a default the operator gives every container, kept out when the template sets it ----

# TensorFlow reads its gRPC channels' defaults from this variable (tsl's grpc_channel.cc,
# CreateDefaultChannelArguments): comma-separated `name=value`.
GRPC_OPTIONS_ENV: Final = "TF_GRPC_DEFAULT_OPTIONS"
# gRPC waits its initial reconnect backoff, 1 s, before it calls a peer again that refused a
# connection: a worker whose TensorFlow came up before the chief's coordination service
# listened lost that second in every start and restart (docs/benchmarks.md, "cluster up").
GRPC_OPTIONS: Final = "grpc.initial_reconnect_backoff_ms=50"
# The pod's own UID (the downward API's metadata.uid), for the in-pod supervisor: its reports
# name the pod incarnation that wrote them.
POD_UID_ENV: Final = "TFMW_POD_UID"

# The replica sets, and the pods' roles.
CHIEF: Final = "chief"
WORKER: Final = "worker"
PS: Final = "ps"
EVALUATOR: Final = "evaluator"

# ---- what the operator writes in the job's folder, and the workers' check of it ----

# The job's UID, written by the operator into each job folder before any worker starts.
OWNER_FILE: Final = ".tfmw-job-uid"
MAX_OWNER_BYTES: Final = 256
# The folder check's exit code when the claim does not reach the job's folder (folder_check.py).
FOLDER_CHECK_MISMATCH_EXIT_CODE: Final = 3

# ---- what the chief writes in the job's folder ----

DEFAULT_MARKER_FILE: Final = "multiworker-complete.txt"  # spec.completion.markerFile
PROGRESS_FILE: Final = "progress.json"
EVALUATION_FILE: Final = "evaluation.json"  # written by the evaluator
STEP_TIMES_FOLDER: Final = "steps"  # steps/<pod stem>.json: each training pod's compute times
LOGS_FOLDER: Final = "logs"  # logs/attempt-<a>/<pod stem>.log and .stacks

# ---- the in-pod supervisor's files (supervisor.py repeats these; docs/supervisor.md) ----

CONTROL_FOLDER: Final = ".tfmw"  # made by the operator before a job's first pod
CONTROL_FILE: Final = "control.json"  # .tfmw/control.json: the operator's word, written by it alone
REPORTS_FOLDER: Final = "pods"  # .tfmw/pods/<pod stem>.json: each supervisor's report
CONTROL_JOB_UID: Final = "jobUid"
CONTROL_ATTEMPT: Final = "attempt"
CONTROL_START: Final = "start"
CONTROL_STACKS: Final = "stacks"
CONTROL_EXIT: Final = "exit"
CONTROL_STOP_SECONDS: Final = "stopSeconds"
CONTROL_HOSTS: Final = "hosts"  # stem -> hostname, for the gang's pods not named as their pods
# A report's field: its supervisor puts the control file's hosts into TF_CONFIG (an older one
# does not, and its pod's peers must keep their names).
REPORT_READS_HOSTS: Final = "readsHosts"
# A report's states: the child of `attempt` runs; it ended on its own; no child, waiting for
# the control file to start `attempt`.
REPORT_RUNNING: Final = "running"
REPORT_EXITED: Final = "exited"
REPORT_WAITING: Final = "waiting"
STACKS_FILE_SUFFIX: Final = ".stacks"


def pod_stem(replica_type: str, index: int) -> str:
    """How a pod of a job is named in its files: `worker-3`, `chief-0`, `ps-1`, `evaluator-0`
    (the pod's own name is `<job>-<stem>`)."""
    return f"{replica_type}-{index}"


def attempt_logs_folder(attempt: int) -> str:
    """Inside the job's folder: where an attempt's logs and stacks are kept."""
    return f"{LOGS_FOLDER}/attempt-{attempt}"


# How the operator runs a command under the supervisor: `python3 -I -S -c BOOTSTRAP [options]
# -- COMMAND...`. The bootstrap blocks the signals the supervisor forwards before Python reads
# the file, then runs it as a script (docs/supervisor.md, "Signals while Python starts").
# supervisor.py has the same (it stands alone in a worker's image); a unit test holds them equal.
# The file is the operator's copy in the job's control folder, written before any pod is made:
# no init container places it (each costs its pod a container start: docs/benchmarks.md).
SUPERVISOR_FILE: Final = "supervisor.py"  # .tfmw/supervisor.py
SUPERVISOR_BOOTSTRAP_HEAD: Final = (
    "import signal;"
    "signal.pthread_sigmask(signal.SIG_BLOCK,(signal.SIGTERM,signal.SIGINT,signal.SIGHUP,"
    "signal.SIGQUIT,signal.SIGUSR1,signal.SIGUSR2));"
    "import runpy,sys;"
)


def supervisor_path(mount_path: str) -> str:
    """Where a pod finds the supervisor: the job's control folder, under its shared mount."""
    return f"{mount_path.rstrip('/')}/{CONTROL_FOLDER}/{SUPERVISOR_FILE}"


# The file the operator writes ends with a seal, the sha256 of what precedes it; the bootstrap
# runs the bytes it checked, never the path again. A supervisor missing, cut short (a 0-byte file
# after a crash would exit 0: "Succeeded" under an exit-code completion), a directory, a FIFO or
# a link is refused with SUPERVISOR_UNUSABLE_EXIT_CODE and a line that says so: above 128, so
# the ExitCode preset restarts it as the system's fault, and the operator writes the file again
# before it creates a pod. The seal proves the copy whole, not whose it is: whoever may write
# the job's folder may run code in its pods already (docs/supervisor.md).
SUPERVISOR_SEAL: Final = b"\n# tfmw-sha256: "
SUPERVISOR_UNUSABLE_EXIT_CODE: Final = 199  # no signal's (128 + n, n < 65)
SUPERVISOR_MAX_BYTES: Final = 4 << 20
SUPERVISOR_LOADER: Final = (
    "import hashlib,os,stat,types\n"
    "p=sys.argv[0]\n"
    "try:\n"
    " f=os.open(p,os.O_RDONLY|os.O_NOFOLLOW|os.O_NONBLOCK|os.O_CLOEXEC)\n"
    " try:\n"
    "  if not stat.S_ISREG(os.fstat(f).st_mode):raise OSError('not a regular file')\n"
    "  d=b''\n"
    f"  while len(d)<={SUPERVISOR_MAX_BYTES}:\n"
    "   c=os.read(f,65536)\n"
    "   if not c:break\n"
    "   d+=c\n"
    " finally:os.close(f)\n"
    f" b,_,t=d.rpartition({SUPERVISOR_SEAL!r})\n"
    " if not _ or t.strip()!=hashlib.sha256(b).hexdigest().encode():\n"
    "  raise OSError('cut short or changed: its seal does not match')\n"
    "except OSError as e:\n"
    " sys.stderr.write('tfmw: the supervisor %s cannot be run: %s; '\n"
    "  'the operator writes it again before the next pod\\n'%(p,e))\n"
    f" sys.exit({SUPERVISOR_UNUSABLE_EXIT_CODE})\n"
    "m=types.ModuleType('__main__');m.__file__=p;sys.modules['__main__']=m\n"
    "exec(compile(b,p,'exec'),m.__dict__)"
)


def sealed_supervisor(source: bytes) -> bytes:
    """The supervisor as the operator writes it: its source, then the seal the bootstrap checks."""
    return source + SUPERVISOR_SEAL + hashlib.sha256(source).hexdigest().encode() + b"\n"


def supervised_command(command: Sequence[str], path: str, options: Sequence[str] = ()) -> list[str]:
    """A container's command and args, run under the supervisor at `path`."""
    bootstrap = f"{SUPERVISOR_BOOTSTRAP_HEAD}sys.argv[0]={path!r}\n{SUPERVISOR_LOADER}"
    return ["python3", "-I", "-S", "-c", bootstrap, *options, "--", *command]


def is_supervised_command(command: object) -> bool:
    """Whether a container's command is one supervised_command made (for some path)."""
    return (
        isinstance(command, list)
        and len(command) >= 5
        and command[:4] == ["python3", "-I", "-S", "-c"]
        and isinstance(command[4], str)
        and command[4].startswith(SUPERVISOR_BOOTSTRAP_HEAD)
    )


def reports_folder() -> str:
    """Inside the job's folder: where the supervisors' reports are."""
    return f"{CONTROL_FOLDER}/{REPORTS_FOLDER}"


# The marker: any content ends the job well. A JSON object may name the job it was
# written for (a marker of an earlier job of the same name is then never counted) and
# the attempt that wrote it.
MARKER_JOB_UID: Final = "jobUid"
MARKER_ATTEMPT: Final = "attempt"
LEGACY_MARKER_JOB_UID: Final = "job_uid"  # read until 0.3.0

# The progress document: one JSON object, every key optional.
PROGRESS_EPOCH: Final = "epoch"
PROGRESS_TOTAL_EPOCHS: Final = "totalEpochs"
PROGRESS_STEP: Final = "step"
PROGRESS_TOTAL_STEPS: Final = "totalSteps"
PROGRESS_METRICS: Final = "metrics"
PROGRESS_EXAMPLES_PER_SECOND: Final = "examplesPerSecond"
PROGRESS_UPDATED_AT: Final = "updatedAt"  # RFC 3339 or Unix seconds; else the file's mtime
PROGRESS_JOB_UID: Final = "jobUid"
PROGRESS_ATTEMPT: Final = "attempt"
# The last checkpoint completed (all optional): its epoch and/or step, and where it is
# (a path inside the job's folder, or any URI). A restarted gang resumes from it.
PROGRESS_CHECKPOINT_EPOCH: Final = "checkpointEpoch"
PROGRESS_CHECKPOINT_STEP: Final = "checkpointStep"
PROGRESS_CHECKPOINT_PATH: Final = "checkpointPath"

# The evaluator's document: the progress document's keys (metrics, epoch, step, updatedAt,
# jobUid) and the checkpoint its figures are of.
EVALUATION_CHECKPOINT: Final = "checkpoint"

# steps/<pod stem>.json: each training pod's own compute time per step, written by every
# worker (and the chief) at most about once a second; the operator names a straggler from it.
STEP_TIMES_JOB_UID: Final = "jobUid"
STEP_TIMES_ATTEMPT: Final = "attempt"
STEP_TIMES_ROLE: Final = "role"  # TFMW_ROLE
STEP_TIMES_INDEX: Final = "index"  # TFMW_REPLICA_INDEX
STEP_TIMES_STEP: Final = "step"  # the last step measured
# The recent per-step compute times in seconds, newest last: the worker's own work before the
# step's collective, never the time it waited there for its peers.
STEP_TIMES_COMPUTE_SECONDS: Final = "computeSeconds"
STEP_TIMES_UPDATED_AT: Final = "updatedAt"  # RFC 3339
STEP_TIMES_MAX_SAMPLES: Final = 50


def marker_job_uid(marker: Mapping[str, object]) -> object:
    """The UID a parsed marker names, under either spelling (None: it names none)."""
    if MARKER_JOB_UID in marker:
        return marker[MARKER_JOB_UID]
    return marker.get(LEGACY_MARKER_JOB_UID)
