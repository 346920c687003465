"""The Python client: submit, watch, read the logs of and delete TFMultiWorkerJobs.

    from tfmw_client import Client

    def train(epochs: int) -> None:
        import tensorflow as tf
        ...

    client = Client()                       # the kubeconfig's current context and namespace
    name = client.train(train, parameters={"epochs": 5}, workers=2, image="tfmw-trainer:dev")
    client.wait(name)                       # a progress bar; raises JobFailed with the reason
    print(client.logs(name)["worker-0"])

The `tfmw` command is built on it (docs/cli.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tfmw_client import names, render
from tfmw_client.errors import ApiError, TfmwError
from tfmw_client.kube import Kube, core_path, job_path

if TYPE_CHECKING:
    from tfmw_client import logs as logs_module
    from tfmw_client import package
    from tfmw_client import version as version_module
    from tfmw_client import wait as wait_module

Json = dict[str, Any]
DEFAULT_WAIT_TIMEOUT = 600.0
LAUNCHER = Path(__file__).with_name("launcher.py")


def checked_job_name(name: str) -> str:
    """`name`, refused before any request when no job can have it: it goes into a URL's path."""
    if not names.is_job_name(name):
        raise TfmwError(f"the job name {name!r} is not valid", names.JOB_NAME_RULE)
    return name


def checked_namespace(namespace: str) -> str:
    """`namespace`, refused before any request when it cannot name one (a flag, a kubeconfig)."""
    if not names.is_namespace(namespace):
        raise TfmwError(f"the namespace {namespace!r} is not valid", names.NAMESPACE_RULE)
    return namespace


class NoLivePods(TfmwError):
    """The attempt's pods are gone: its logs are on the shared volume."""


@dataclass
class Submission:
    name: str
    namespace: str
    objects: list[Json]  # the ConfigMap and the job, as created (or as they would be)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Logs:
    """A selection's logs: from the pods (`live`) or the shared volume."""

    job: str
    attempt: int
    live: bool
    entries: list[tuple[str, str]]  # (pod stem, text), in role order

    def __getitem__(self, stem: str) -> str:
        return dict(self.entries)[stem]

    def text(self) -> str:
        """One entry as it is; several with each line prefixed `[<stem>] ` (a saved file's
        name, which the job's own pods could write, escaped: render.escape_controls)."""
        if len(self.entries) == 1:
            return self.entries[0][1]
        return "\n".join(
            f"[{render.escape_controls(stem)}] {line}"
            for stem, text in self.entries
            for line in text.splitlines()
        )


def _warn_on_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class Client:
    """A tfmw client for one cluster: the kubeconfig's current context (or `context`), its
    namespace (or `namespace`); inside a pod, the pod's service account."""

    # What the client leaves out and says so (a pod that only looks like the job's); replace
    # it to show the warnings elsewhere.
    on_warning: Callable[[str], None] = staticmethod(_warn_on_stderr)

    def __init__(
        self,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        operator_namespace: str | None = None,
    ) -> None:
        self.kube = Kube(kubeconfig, context, namespace)
        self.namespace = self.kube.namespace
        self._operator_namespace = (
            operator_namespace or os.environ.get("TFMW_OPERATOR_NAMESPACE") or names.OPERATOR_NAMESPACE
        )

    @property
    def operator_namespace(self) -> str:
        """Checked where it is used (the version, the default image): a bad setting breaks
        only what reads it, not every command."""
        return checked_namespace(self._operator_namespace)

    def _ns(self, namespace: str | None) -> str:
        return checked_namespace(namespace or self.namespace)

    # ---- submitting ----

    def default_image(self) -> str:
        """$TFMW_IMAGE, else the trainer image the install published (tfmw-version's
        `trainerImage`); else the caller must name one."""
        image = os.environ.get("TFMW_IMAGE", "")
        if image:
            return image
        with contextlib.suppress(ApiError, TfmwError):
            published = self.kube.get(
                core_path(self.operator_namespace, "configmaps", names.VERSION_CONFIGMAP)
            )
            image = render.as_str(render.as_dict(published.get("data")).get("trainerImage"))
        if not image:
            raise TfmwError(
                "no image named, and the cluster publishes no default trainer image",
                "pass --image (image= in Python): an image with Python and TensorFlow, such as this "
                "repository's trainer image (tfmw-trainer:dev on the local cluster), or set TFMW_IMAGE",
            )
        return image

    def submit(
        self,
        path: str | os.PathLike[str],
        args: Sequence[str] = (),
        *,
        entrypoint: str | None = None,
        name: str | None = None,
        dry_run: bool = False,
        **options: Any,
    ) -> Submission:
        """A script or a folder (`-`: a script read from standard input), in a ConfigMap owned
        by the job, run by a new job."""
        from tfmw_client import manifests, package

        source = Path(path)
        if str(path) == "-":
            program = package.Program((package.ProgramFile("train.py", sys.stdin.buffer.read()),), "train.py")
            stem = "train"
        else:
            program = package.collect(source, entrypoint)
            stem = Path(program.entrypoint).stem if source.is_file() else source.resolve().name
        job_name = manifests.check_job_name(name) if name else manifests.job_name_from(stem)
        submission = self._submit(program, job_name, list(args), dry_run, options)
        submission.warnings += [f"left out {s}" for s in program.skipped]
        return submission

    def train(
        self,
        fn: Callable[..., Any],
        parameters: Mapping[str, Any] | None = None,
        *,
        workers: int = 1,
        image: str | None = None,
        packages: Sequence[str] = (),
        name: str | None = None,
        dry_run: bool = False,
        **options: Any,
    ) -> str:
        """Runs `fn(**parameters)` on every worker of a new job (TF_CONFIG set for
        MultiWorkerMirroredStrategy); returns the job's name. The function's source and imports
        are checked first: a lambda, a closure, or a name it uses without importing it, is
        refused with that name."""
        from tfmw_client import functions, manifests, package

        made = functions.function_program(fn, parameters, packages)
        for warning in made.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        program = package.program_from_source(made.filename, made.source)
        job_name = manifests.check_job_name(name) if name else manifests.job_name_from(fn.__name__)
        options.update(workers=workers, image=image, packages=packages)
        submission = self._submit(program, job_name, [], dry_run, options)
        if dry_run:
            import yaml

            print(yaml.safe_dump_all(submission.objects, sort_keys=False), end="")
        return submission.name

    def _submit(
        self,
        program: package.Program,
        job_name: str,
        args: list[str],
        dry_run: bool,
        options: Mapping[str, Any],
    ) -> Submission:
        from tfmw_client import manifests, package

        launcher = LAUNCHER.read_bytes()
        package.check_size(program, launcher)  # before anything is created
        namespace = self._ns(options.get("namespace"))
        image = options.get("image") or self.default_image()
        workers = int(options.get("workers") or 1)
        if workers < 1:
            raise TfmwError(f"--workers {workers}: a job needs at least one worker")
        job_options = manifests.JobOptions(
            name=job_name,
            namespace=namespace,
            image=image,
            workers=workers,
            claim=options.get("claim") or names.DEFAULT_CLAIM,
            args=list(args),
            packages=manifests.check_packages(list(options.get("packages") or [])),
            env=manifests.parse_env(list(options.get("env") or [])),
            cpu=options.get("cpu"),
            memory=options.get("memory"),
            marker=options.get("marker") or "auto",
        )
        packed = package.pack(program, launcher)
        configmap = manifests.program_configmap(job_options, packed)
        job = manifests.program_job(job_options, program.entrypoint, packed.items)
        if dry_run:
            return Submission(job_name, namespace, [configmap, job])
        return self._create(configmap, job)

    def _create(self, configmap: Json, job: Json) -> Submission:
        """The ConfigMap first (the pods mount it as they start), then the job, then the
        ConfigMap's owner: the job. Anything made is removed again if a step fails."""
        from tfmw_client import manifests

        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        configmap_name = configmap["metadata"]["name"]
        configmaps = core_path(namespace, "configmaps")
        try:
            made = self.kube.create(configmaps, configmap)
        except ApiError as error:
            if error.conflict:
                raise TfmwError(
                    f"ConfigMap {configmap_name} already exists in {namespace}: "
                    f"a job named {name} was submitted before",
                    f"delete it (tfmw delete {name}; its ConfigMap goes with it) or choose another --name",
                ) from None
            raise
        # The job names the ConfigMap made for it by UID: if the answer to its creation is
        # lost, the job found under its name is this one only when it says so.
        uid = str((made.get("metadata") or {}).get("uid") or "")
        job = {**job, "metadata": {**job["metadata"]}}
        annotations = {**(job["metadata"].get("annotations") or {}), names.PROGRAM_UID: uid}
        job["metadata"]["annotations"] = annotations
        created: Json | None = None
        try:
            try:
                created = self.kube.create(job_path(namespace), job)
            except ApiError as error:
                if error.conflict:
                    raise TfmwError(
                        f"job {name} already exists in {namespace}",
                        f"tfmw delete {name}, or choose another --name",
                    ) from None
                raise
            except TfmwError as lost:
                # No answer: it may have been created all the same. The error told is the
                # creation's, whatever the look finds or fails at.
                try:
                    found = self.kube.get_or_none(job_path(namespace, name))
                except TfmwError:
                    raise lost from None
                said = ((found or {}).get("metadata") or {}).get("annotations") or {}
                if found is None or not uid or said.get(names.PROGRAM_UID) != uid:
                    raise
                created = found
            owned = {"metadata": {"ownerReferences": [manifests.owner_reference(created)]}}
            configmap = self.kube.patch(core_path(namespace, "configmaps", configmap_name), owned)
        except BaseException:
            with contextlib.suppress(ApiError, TfmwError):
                self.kube.delete(core_path(namespace, "configmaps", configmap_name))
            if created is not None:
                with contextlib.suppress(ApiError, TfmwError):
                    self.kube.delete(job_path(namespace, name))
            raise
        return Submission(name, namespace, [configmap, created])

    # ---- reading ----

    def get(self, name: str, namespace: str | None = None) -> Json:
        job = self.kube.get_or_none(job_path(self._ns(namespace), checked_job_name(name)))
        if job is None:
            raise ApiError(
                404,
                "NotFound",
                f'tfmwjobs.tfmw.dev "{name}" not found in namespace {self._ns(namespace)}',
                "check the name and the namespace: tfmw get -A lists every job you may see",
            )
        return job

    def list_jobs(self, namespace: str | None = None, all_namespaces: bool = False) -> list[Json]:
        return self.kube.items(job_path(None if all_namespaces else self._ns(namespace)))

    def pods(self, name: str, namespace: str | None = None) -> list[Json]:
        return self.kube.items(
            core_path(self._ns(namespace), "pods"),
            selector=f"{names.LABEL_JOB_NAME}={checked_job_name(name)}",
        )

    def job_pods(self, job: Json) -> list[Json]:
        """The pods the job's operator made for it: labelled as the job's, and controlled by
        it by UID. A pod with the labels alone (anyone who may create pods in the namespace can
        copy them) is left out, with a warning naming it."""
        meta = render.as_dict(job.get("metadata"))
        name, uid = render.as_str(meta.get("name")), render.as_str(meta.get("uid"))
        labelled = self.pods(name, render.as_str(meta.get("namespace")) or None)
        owned = []
        for pod in labelled:
            if render.made_by(pod, uid):
                owned.append(pod)
                continue
            shown = render.escape_controls(render.as_str(render.as_dict(pod.get("metadata")).get("name")))
            self.on_warning(f"left out pod {shown}: it has job {name}'s labels, but the job does not own it")
        return owned

    def events(self, name: str, namespace: str | None = None, uid: str = "") -> list[Json] | None:
        """The job's Events (with `uid`, only this job's, not an earlier namesake's); None when
        they may not be read."""
        selector = f"involvedObject.name={checked_job_name(name)},involvedObject.kind={names.KIND}"
        if uid:
            selector += f",involvedObject.uid={uid}"
        try:
            return self.kube.items(core_path(self._ns(namespace), "events"), field_selector=selector)
        except ApiError:
            return None

    def describe(self, name: str, namespace: str | None = None, ascii_only: bool = False) -> str:
        job = self.get(name, namespace)
        uid = render.as_str(render.as_dict(job.get("metadata")).get("uid"))
        return render.describe(
            job, self.job_pods(job), self.events(name, namespace, uid), datetime.now(UTC), ascii_only
        )

    # ---- logs ----

    def _log_plan(
        self, name: str, selection: logs_module.LogSelection, namespace: str | None
    ) -> tuple[Json, int, list[Json]]:
        from tfmw_client import logs as logs_module

        job = self.get(name, namespace)
        spec, status = render.as_dict(job.get("spec")), render.as_dict(job.get("status"))
        current = render.as_int(status.get("attempt")) or 0
        attempt = current if selection.attempt is None else selection.attempt
        if attempt < 0 or attempt > current:
            raise TfmwError(f"job {name} has no attempt {attempt}", f"its attempts are 0 to {current}")
        workers = render.as_int(spec.get("workers"))
        if selection.worker is not None and workers is not None and not 0 <= selection.worker < workers:
            raise TfmwError(
                f"job {name} has no worker {selection.worker}", f"its workers are 0 to {workers - 1}"
            )
        live = logs_module.select_live(self.job_pods(job), selection, attempt, name)
        return job, attempt, live

    def logs(
        self,
        name: str,
        worker: int | None = None,
        role: str | None = None,
        attempt: int | None = None,
        all: bool = False,
        tail: int | None = None,
        namespace: str | None = None,
        image: str = "",
        reader_timeout: float = 120.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> Logs:
        """The logs of the chief (or `worker`, or every pod of `role`, or `all`), of the current
        attempt (or `attempt`): from the pods while they exist, else from the shared volume."""
        from tfmw_client import logs as logs_module

        if worker is not None and role is not None:
            raise TfmwError("name a worker or a role, not both")
        if role is not None and role not in names.ROLES:
            raise TfmwError(f"--role {role}: not one of {', '.join(names.ROLES)}")
        selection = logs_module.LogSelection(worker, role, attempt, all, tail)
        job, chosen, live = self._log_plan(name, selection, namespace)
        ns = render.as_str(render.as_dict(job.get("metadata")).get("namespace"))
        if live:
            return Logs(name, chosen, True, logs_module.read_live(self.kube, ns, name, live, tail))
        status = render.as_dict(job.get("status"))
        phase = render.as_str(status.get("phase")) or "Pending"
        if chosen == (render.as_int(status.get("attempt")) or 0) and phase in ("Pending", "Restarting"):
            earlier = f"; an earlier attempt's: tfmw logs {name} --attempt {chosen - 1}" if chosen else ""
            raise TfmwError(
                f"attempt {chosen} of {name} has no pod of {selection.describe()} yet ({phase})",
                f"wait for it to start (tfmw describe {name} says what holds it){earlier}",
            )
        saved = logs_module.read_saved(
            self.kube,
            job,
            chosen,
            selection,
            image,
            reader_timeout,
            f"tfmw logs {name} --attempt {chosen}",
            on_wait,
        )
        if not saved.folder_exists:
            raise TfmwError(
                f"attempt {chosen} of {name} has no pods and no saved logs "
                f"(no logs/attempt-{chosen}/ in its folder)",
                "the operator saves a pod's log when it deletes the pod; "
                "see whether the pods started (tfmw describe)",
            )
        entries = logs_module.choose_saved(saved, selection)
        if not entries:
            found = render.escape_controls(", ".join(sorted(saved.listing))) or "nothing"
            raise TfmwError(
                f"no saved log of {selection.describe()} in attempt {chosen} of {name}",
                f"logs/attempt-{chosen}/ holds: {found}",
            )
        return Logs(name, chosen, False, entries)

    def follow_logs(
        self,
        name: str,
        worker: int | None = None,
        role: str | None = None,
        all: bool = False,
        tail: int | None = None,
        namespace: str | None = None,
        attempt: int | None = None,
    ) -> Iterator[tuple[str, str]]:
        """(pod stem, line) as the attempt's pods (the current one's by default) write them,
        until they end. Raises NoLivePods when the attempt has no such pod any more."""
        from tfmw_client import logs as logs_module

        selection = logs_module.LogSelection(worker, role, attempt, all, tail)
        job, chosen, live = self._log_plan(name, selection, namespace)
        if not live:
            raise NoLivePods(
                f"no pod of {selection.describe()} in attempt {chosen} of {name} to follow",
                f"read what was saved: tfmw logs {name} --attempt {chosen}",
            )
        ns = render.as_str(render.as_dict(job.get("metadata")).get("namespace"))
        return logs_module.follow_live(self.kube, ns, name, live, tail)

    def last_log_lines(self, job: Json, count: int = 10) -> tuple[str, list[str]]:
        """(whose, lines) of the worker that failed the job, while its pod exists; else from
        its status message (the end of its log, kept by the kubelet's termination message)."""
        meta, status = render.as_dict(job.get("metadata")), render.as_dict(job.get("status"))
        history = [render.as_dict(e) for e in render.as_list(status.get("history"))]
        entry = history[0] if history else {}
        pod, container = render.as_str(entry.get("pod")), render.as_str(entry.get("container"))
        namespace, uid = render.as_str(meta.get("namespace")), render.as_str(meta.get("uid"))
        if pod and namespace:
            with contextlib.suppress(ApiError, TfmwError):
                # The pod of that name now may be someone else's, made after the job's was deleted.
                found = self.kube.get_or_none(core_path(namespace, "pods", pod))
                owned = found is not None and render.made_by(found, uid)
                # Room for the supervisor's lines after the program's (render.program_tail).
                text = self.kube.log(namespace, pod, container, count + 20) if owned else ""
                if text.strip():
                    return f"pod {pod}", render.program_tail(render.printable(text).splitlines(), count)
        message = render.as_str(entry.get("message")) or render.as_str(status.get("message"))
        lines = render.program_tail(render.printable(message).splitlines(), count)
        return ("its status message", lines) if message else ("", [])

    # ---- waiting, deleting, versions ----

    def wait(
        self,
        name: str,
        for_: str = "Succeeded",
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        namespace: str | None = None,
        display: bool = True,
        out: TextIO | None = None,
        interval: float = 1.0,
    ) -> Json:
        """Until the job is `for_` (Succeeded, Running, Failed or Finished); the job. Raises
        JobFailed (with the reason and the last log lines) when it cannot get there, and
        WaitTimeout after `timeout` seconds. Shows a progress bar: in place on a terminal, in a
        notebook's output, a line per change elsewhere."""
        from tfmw_client import wait as wait_module

        ns, name = self._ns(namespace), checked_job_name(name)
        stream = out or sys.stdout
        view: wait_module.View = wait_module.choose_view(stream) if display else wait_module.NullView()
        job, verdict = wait_module.wait_for(
            lambda: self.kube.get_or_none(job_path(ns, name)), for_, timeout, view, interval
        )
        if not verdict.ok:
            whose, lines = self.last_log_lines(job)
            detail = [f"last lines of {whose}:", *(f"  {line}" for line in lines)] if lines else []
            hint = render.read_log_hint(job)
            raise wait_module.JobFailed(
                verdict.summary, "\n".join([*detail, *([f"the whole log: {hint}"] if hint else [])]), job
            )
        return job

    def delete(self, name: str, namespace: str | None = None) -> None:
        """The job; its pods, Service and ConfigMap go with it (owner references)."""
        try:
            self.kube.delete(
                job_path(self._ns(namespace), checked_job_name(name)), {"propagationPolicy": "Background"}
            )
        except ApiError as error:
            if error.not_found:  # still an ApiError: `delete --ignore-not-found` knows it by its status
                raise ApiError(
                    404,
                    "NotFound",
                    f'tfmwjobs.tfmw.dev "{name}" not found in namespace {self._ns(namespace)}',
                ) from None
            raise

    def served_versions(self) -> list[str] | None:
        """The versions of tfmw.dev the API server serves ([] without the CRD; None: unknown)."""
        try:
            group = self.kube.get(f"/apis/{names.GROUP}")
        except ApiError as error:
            return [] if error.status == 404 else None  # the group itself: type_missing too
        return [
            render.as_str(render.as_dict(v).get("version")) for v in render.as_list(group.get("versions"))
        ]

    def operator_version(self) -> version_module.OperatorVersion:
        from tfmw_client import version as version_module

        ns = self.operator_namespace
        tried = []
        try:
            published = self.kube.get(core_path(ns, "configmaps", names.VERSION_CONFIGMAP))
            found = render.as_str(render.as_dict(published.get("data")).get("version"))
            if found:
                return version_module.OperatorVersion(found, f"ConfigMap {ns}/{names.VERSION_CONFIGMAP}")
            tried.append(f"ConfigMap {ns}/{names.VERSION_CONFIGMAP} has no `version`")
        except ApiError as error:
            why = "not published" if error.not_found else error.message
            tried.append(f"ConfigMap {ns}/{names.VERSION_CONFIGMAP}: {why}")
        try:
            deployment = self.kube.get(
                f"/apis/apps/v1/namespaces/{ns}/deployments/{names.OPERATOR_DEPLOYMENT}"
            )
            labels = render.as_dict(render.as_dict(deployment.get("metadata")).get("labels"))
            found = render.as_str(labels.get("app.kubernetes.io/version"))
            if not found:
                pod_spec = render.as_dict(
                    render.as_dict(render.as_dict(deployment.get("spec")).get("template")).get("spec")
                )
                containers = [render.as_dict(c) for c in render.as_list(pod_spec.get("containers"))]
                found = (
                    version_module.image_tag(render.as_str(containers[0].get("image"))) if containers else ""
                )
            if found:
                return version_module.OperatorVersion(
                    found, f"the image of Deployment {ns}/{names.OPERATOR_DEPLOYMENT}"
                )
        except ApiError as error:
            why = "not found" if error.not_found else error.message
            tried.append(f"Deployment {ns}/{names.OPERATOR_DEPLOYMENT}: {why}")
        return version_module.OperatorVersion(version_module.UNKNOWN, "; ".join(tried))

    def version(self) -> Json:
        from tfmw_client import version as version_module

        client = version_module.client_version()
        operator = self.operator_version()
        served = self.served_versions()
        verdict = version_module.compatibility(client, operator.version, served)
        return {
            "client": client,
            "operator": operator.version,
            "operatorSource": operator.source,
            "served": served,
            "compatible": verdict.compatible,
            "reason": verdict.reason,
        }
