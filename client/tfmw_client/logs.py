"""`tfmw logs`: a job's logs from its pods while they exist, and from the shared volume after.

The operator saves each pod's log as `logs/attempt-<a>/<pod stem>.log` in the job's folder
before it deletes the pod. A laptop cannot mount that folder, so a short-lived pod in the
user's own namespace mounts the job's claim read-only and prints the files: it is created
with the user's own rights (never an operator endpoint), and deleted after, also on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tfmw_client import names, render
from tfmw_client.errors import ApiError, TfmwError
from tfmw_client.kube import Kube, core_path
from tfmw_client.manifests import SavedLogs, parse_reader_output, random_suffix, reader_pod

Json = dict[str, Any]
READER_TIMEOUT = 120.0
# A reader pod in one of these will not start without a change: said at once, not at the timeout.
_HOPELESS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


@dataclass(frozen=True)
class LogSelection:
    worker: int | None = None
    role: str | None = None
    attempt: int | None = None
    everyone: bool = False  # --all
    tail: int | None = None

    def describe(self) -> str:
        if self.everyone:
            return "every pod"
        if self.worker is not None:
            return f"worker {self.worker}"
        if self.role and self.role != names.CHIEF:
            return f"the {self.role} pods"
        return "the chief"


def _stem(job_name: str, pod: Json) -> str:
    return names.pod_stem(job_name, render.as_str(render.as_dict(pod.get("metadata")).get("name")))


def select_live(pods: Sequence[Json], selection: LogSelection, attempt: int, job_name: str) -> list[Json]:
    """The pods of `attempt` the selection names, in role order."""
    ours = sorted((p for p in pods if render.pod_attempt(p) == attempt), key=render.pod_sort_key)
    if selection.everyone:
        return ours
    if selection.worker is not None:
        return [p for p in ours if _stem(job_name, p) == f"{names.WORKER}-{selection.worker}"]
    role = selection.role or names.CHIEF
    chosen = [p for p in ours if render.pod_role(p) == role]
    if not chosen and role == names.CHIEF:  # a pod made before the role label: worker 0 is the chief
        chosen = [p for p in ours if _stem(job_name, p) == f"{names.WORKER}-0"]
    return chosen


def saved_patterns(selection: LogSelection) -> list[str]:
    """The files of the attempt's folder the reader pod prints."""
    if selection.everyone:
        return ["*.log"]
    if selection.worker is not None:
        return [f"{names.WORKER}-{selection.worker}.log"]
    role = selection.role or names.CHIEF
    if role == names.CHIEF:
        return [f"{names.CHIEF}-0.log", f"{names.WORKER}-0.log"]
    return [f"{role}-*.log"]


def _file_order(file: str) -> tuple[int, int, str]:
    parsed = names.parse_stem(file.removesuffix(".log"))
    if not parsed:
        return (len(names.ROLES), 0, file)
    return (names.ROLES.index(parsed[0]), parsed[1], file)


def choose_saved(saved: SavedLogs, selection: LogSelection) -> list[tuple[str, str]]:
    """(pod stem, text) of the saved files the selection names, as the role labels would have:
    with no chief pod in the attempt, worker 0 was the chief."""
    had_chief = f"{names.CHIEF}-0.log" in saved.listing
    chief = f"{names.CHIEF}-0" if had_chief else f"{names.WORKER}-0"
    chosen = []
    for file in sorted(saved.files, key=_file_order):
        stem = file.removesuffix(".log")
        parsed = names.parse_stem(stem)
        if selection.worker is not None:
            keep = stem == f"{names.WORKER}-{selection.worker}"
        elif selection.everyone:
            keep = True
        elif (selection.role or names.CHIEF) == names.CHIEF:
            keep = stem == chief
        else:
            keep = parsed is not None and parsed[0] == selection.role and stem != chief
        if keep:
            chosen.append((stem, saved.files[file]))
    return chosen


def main_container(pod: Json) -> str:
    containers = [
        render.as_dict(c) for c in render.as_list(render.as_dict(pod.get("spec")).get("containers"))
    ]
    named = [render.as_str(c.get("name")) for c in containers]
    return names.MAIN_CONTAINER if names.MAIN_CONTAINER in named else (named[0] if named else "")


def job_image(job: Json) -> str:
    """The job's main container's image: its nodes have it already."""
    template = render.as_dict(render.as_dict(render.as_dict(job.get("spec")).get("template")).get("spec"))
    main = main_container({"spec": template})
    for container in (render.as_dict(c) for c in render.as_list(template.get("containers"))):
        if container.get("name") == main:
            return render.as_str(container.get("image"))
    return ""


# ---- live ----


def read_live(
    kube: Kube, namespace: str, job_name: str, pods: Sequence[Json], tail: int | None
) -> list[tuple[str, str]]:
    found = []
    for pod in pods:
        name = render.as_str(render.as_dict(pod.get("metadata")).get("name"))
        try:
            text = kube.log(namespace, name, main_container(pod), tail)
        except ApiError as error:
            if error.status == 400:  # not started yet: the API server says why
                raise TfmwError(
                    f"{name} has no log yet: {error.message}", "wait for it to start (tfmw get)"
                ) from None
            raise
        found.append((_stem(job_name, pod), text))
    return found


def follow_live(
    kube: Kube, namespace: str, job_name: str, pods: Sequence[Json], tail: int | None
) -> Iterator[tuple[str, str]]:
    """(stem, line) from every pod's log as it is written, until all of them end."""
    lines: queue.Queue[tuple[str, str] | None] = queue.Queue(maxsize=10000)
    errors: list[BaseException] = []

    def pump(pod: Json) -> None:
        try:
            name = render.as_str(render.as_dict(pod.get("metadata")).get("name"))
            for line in kube.follow_log(namespace, name, main_container(pod), tail):
                lines.put((_stem(job_name, pod), line))
        except BaseException as error:  # a thread's error is otherwise lost
            errors.append(error)
        finally:
            lines.put(None)

    for pod in pods:
        threading.Thread(target=pump, args=(pod,), daemon=True).start()
    running = len(pods)
    while running:
        item = lines.get()
        if item is None:
            running -= 1
            continue
        yield item
    if errors:
        raise errors[0]


# ---- saved, through a reader pod ----


def _reader_trouble(pod: Json) -> str:
    """Why the reader pod cannot run, when no wait will help; else ""."""
    status = render.as_dict(pod.get("status"))
    for container in render.as_list(status.get("containerStatuses")):
        waiting = render.as_dict(render.as_dict(render.as_dict(container).get("state")).get("waiting"))
        reason = render.as_str(waiting.get("reason"))
        if reason in _HOPELESS:
            return f"{reason}: {render.one_line(render.as_str(waiting.get('message')), 300)}"
    return ""


def _pending_reason(pod: Json) -> str:
    status = render.as_dict(pod.get("status"))
    for condition in (render.as_dict(c) for c in render.as_list(status.get("conditions"))):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled: {render.one_line(render.as_str(condition.get('message')), 300)}"
    for container in render.as_list(status.get("containerStatuses")):
        waiting = render.as_dict(render.as_dict(render.as_dict(container).get("state")).get("waiting"))
        if waiting.get("reason"):
            return render.one_line(render.as_str(waiting.get("reason")), 100)
    return render.one_line(render.as_str(status.get("phase")), 100) or "Pending"


def forbidden_to_read(namespace: str, error: ApiError, command: str) -> TfmwError:
    return TfmwError(
        f"reading the logs of an ended attempt starts a short-lived pod in namespace {namespace} that mounts "
        f"the job's claim read-only, and you may not create it there: {error.message}",
        f"ask for `create` on pods and `get` on pods/log in {namespace} (the `edit` ClusterRole has both), "
        f"or have someone who may run `{command}`",
    )


def read_saved(
    kube: Kube,
    job: Json,
    attempt: int,
    selection: LogSelection,
    image: str = "",
    timeout: float = READER_TIMEOUT,
    command: str = "tfmw logs",
    on_wait: Callable[[str], None] | None = None,
) -> SavedLogs:
    """The saved logs of `attempt` the selection names, printed by a reader pod that is
    deleted afterwards whatever happens (an error, Ctrl-C, a timeout)."""
    meta = render.as_dict(job.get("metadata"))
    namespace = render.as_str(meta.get("namespace"))
    nonce = random_suffix(24)
    manifest = reader_pod(
        job, image or job_image(job), attempt, saved_patterns(selection), nonce, selection.tail
    )
    if not manifest["spec"]["containers"][0]["image"]:
        raise TfmwError(f"job {meta.get('name')} names no image to read its logs with", "pass --image IMAGE")
    name = manifest["metadata"]["name"]
    try:
        try:
            kube.create(core_path(namespace, "pods"), manifest)
        except ApiError as error:
            if error.forbidden:
                raise forbidden_to_read(namespace, error, command) from None
            raise
        deadline = time.monotonic() + timeout
        said = ""
        while True:
            pod = kube.get(core_path(namespace, "pods", name))
            phase = render.as_str(render.as_dict(pod.get("status")).get("phase"))
            if phase in ("Succeeded", "Failed"):
                break
            trouble = _reader_trouble(pod)
            if trouble:
                raise TfmwError(
                    f"the pod that reads the saved logs cannot start: {trouble}",
                    "pass --image with an image the nodes can run that has sh, cat and tail "
                    "(the default is the job's own image)",
                )
            reason = _pending_reason(pod)
            if on_wait and reason != said:
                on_wait(f"reading attempt {attempt}'s saved logs through pod {name}: {reason}")
                said = reason
            if time.monotonic() > deadline:
                raise TfmwError(
                    f"the pod that reads the saved logs did not finish within {timeout:.0f}s ({reason})",
                    f"see `kubectl -n {namespace} describe pod {name}` while it exists, "
                    "or raise --reader-timeout",
                )
            time.sleep(0.5)
        try:
            text = kube.log(namespace, name)
        except ApiError as error:
            if error.forbidden:
                raise forbidden_to_read(namespace, error, command) from None
            raise
        saved = parse_reader_output(text, nonce)
        if phase == "Failed" and not saved.complete:
            raise TfmwError(
                f"the pod that reads the saved logs failed: {render.one_line(text[-500:])}",
                "pass --image with an image that has sh, cat and tail",
            )
        return saved
    finally:
        # Owned by the job: should this fail, the garbage collector removes it with the job.
        with contextlib.suppress(ApiError, TfmwError):
            kube.delete(core_path(namespace, "pods", name), {"gracePeriodSeconds": 0})
