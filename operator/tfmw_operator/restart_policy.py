"""Which worker failures a gang restart can cure, per `runPolicy.restartPolicy`."""

from __future__ import annotations

from dataclasses import dataclass

from tfmw_operator.api import RestartPolicy
from tfmw_operator.observed import ObservedPod

# Exit codes from 128 up are deaths by signal (137 = SIGKILL, the OOM killer's too):
# something happened to the worker, not a bug in the program.
FIRST_SIGNAL_EXIT_CODE = 128
MESSAGE_TAIL_LINES = 5


@dataclass(frozen=True)
class WorkerFailure:
    index: int
    pod_name: str
    exit_code: int | None
    reason: str
    termination_message: str = ""

    def describe(self) -> str:
        what = f"worker {self.index} (pod {self.pod_name})"
        if self.exit_code is not None:
            what += f" exited with code {self.exit_code}"
        if self.reason:
            what += f" ({self.reason})" if self.exit_code is not None else f": {self.reason}"
        tail = "\n".join(self.termination_message.strip().splitlines()[-MESSAGE_TAIL_LINES:])
        return f"{what}: {tail}" if tail else what


def failure_of(pod: ObservedPod) -> WorkerFailure:
    return WorkerFailure(pod.index, pod.name, pod.exit_code, pod.reason, pod.message)


def vanished(index: int, pod_name: str) -> WorkerFailure:
    return WorkerFailure(index, pod_name, None, "pod disappeared while the job was active")


def is_retryable(failure: WorkerFailure, policy: RestartPolicy) -> bool:
    if policy is RestartPolicy.NEVER:
        return False
    if policy is RestartPolicy.ON_FAILURE:
        return True
    # ExitCode: a program error (1..127) will fail again the same way.
    code = failure.exit_code
    return code is None or code == 0 or code >= FIRST_SIGNAL_EXIT_CODE
