"""The kinds of job tfmw serves, one interface each (as Kueue's jobframework has one per job
kind): where a kind's API lives, how its spec becomes the engine's JobSpec, where the
engine's status is kept on it, and what its own status says. Pure.

A TFMultiWorkerJob keeps the engine's status as its status. A TFJob's status is Kubeflow's
shape, which has no room for attempts or history: the engine's status is kept in an
annotation of the TFJob (`tfmw.dev/status`), and its status is rendered from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from tfmw_operator.api import tfjob
from tfmw_operator.api.names import GROUP, KIND, PLURAL, VERSION
from tfmw_operator.api.objects import Json
from tfmw_operator.api.spec import JobSpec, SpecError, parse_spec
from tfmw_operator.api.status import JobStatus, merge_patch
from tfmw_operator.api.times import format_time


@dataclass(frozen=True)
class StatusWrites:
    """What to write for a status: a merge patch of the object's metadata (first: the engine's
    state must be kept before what it tells), then of its status subresource; None: nothing."""

    metadata: Json | None = None
    status: Json | None = None


class JobKind(Protocol):
    kind: str
    group: str
    version: str
    plural: str

    def parse(self, job: Json, folder_check_image: str, supervisor_image: str = "") -> JobSpec | SpecError:
        """The job as the engine runs it; `supervisor_image`: the image whose supervisor a gang
        with a command of its own runs under (none: every restart re-creates the pods)."""
        ...

    def recorded_status(self, job: Json) -> JobStatus:
        """The engine's status as last written on the object."""
        ...

    def status_writes(
        self, job: Json, status: JobStatus, spec: JobSpec | None, now: datetime
    ) -> StatusWrites:
        """The writes that make the object say `status`."""
        ...


class TFMultiWorkerJobKind:
    kind = KIND
    group = GROUP
    version = VERSION
    plural = PLURAL

    def parse(self, job: Json, folder_check_image: str, supervisor_image: str = "") -> JobSpec | SpecError:
        return parse_spec(job, folder_check_image, supervisor_image)

    def recorded_status(self, job: Json) -> JobStatus:
        return JobStatus.from_json(job.get("status"))

    def status_writes(
        self, job: Json, status: JobStatus, spec: JobSpec | None, now: datetime
    ) -> StatusWrites:
        patch = merge_patch(job.get("status") or {}, status.to_json())
        return StatusWrites(status=patch or None)


class TFJobKind:
    kind = tfjob.TFJOB_KIND
    group = tfjob.GROUP
    version = tfjob.VERSION
    plural = tfjob.PLURAL

    def parse(self, job: Json, folder_check_image: str, supervisor_image: str = "") -> JobSpec | SpecError:
        # A TFJob's pods keep the shape Kubeflow gives them: no supervisor, every restart re-creates.
        return tfjob.parse_tfjob_spec(job, folder_check_image)

    def recorded_status(self, job: Json) -> JobStatus:
        return tfjob.recorded_status(job)

    def status_writes(
        self, job: Json, status: JobStatus, spec: JobSpec | None, now: datetime
    ) -> StatusWrites:
        metadata = None
        rendered = json.dumps(status.to_json(), separators=(",", ":"), sort_keys=True)
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if annotations.get(tfjob.ANNOTATION_STATUS) != rendered:
            metadata = {"metadata": {"annotations": {tfjob.ANNOTATION_STATUS: rendered}}}
        recorded = job.get("status")
        old: Json = recorded if isinstance(recorded, dict) else {}
        wanted = tfjob.tfjob_status(status, spec, job, old, format_time(now))
        patch = merge_patch(old, wanted)
        return StatusWrites(metadata=metadata, status=patch or None)


TFMW_JOBS: Final = TFMultiWorkerJobKind()
TFJOBS: Final = TFJobKind()
KINDS: Final[dict[str, JobKind]] = {TFMW_JOBS.kind: TFMW_JOBS, TFJOBS.kind: TFJOBS}


def kind_of(job: Json) -> JobKind:
    """The kind of a job object; a TFMultiWorkerJob when it does not say."""
    return KINDS.get(str(job.get("kind") or ""), TFMW_JOBS)
