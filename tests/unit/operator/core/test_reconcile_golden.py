"""Whole decisions, pinned: for each scenario, every field of the new status, every action
(pods and Service in full), every event with its message, the requeue and the marker to
watch. The other unit tests state rules one at a time; these catch any change at all in
what a user sees (`kubectl get`, `describe`, Events), so each change is a reviewed one.

After an intended change: `make golden`, then read the diff of golden/decisions.json.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tfmw_operator.api.status import Checkpoint
from tfmw_operator.core.decision import CreatePods, Decision, EnsureService, PatchStatus
from tfmw_operator.core.observed import CreatedObject, CreateError, CreateErrorKind, MarkerState
from tfmw_operator.core.pods import observe_pod
from tfmw_operator.core.progress import ProgressProblem, ProgressReport
from tfmw_operator.core.reconcile import reconcile_failed
from tfmw_operator.core.reports import StacksReading
from tfmw_operator.core.workloads import WorkloadState
from wrappers import JobWrapper, PodWrapper, at, decide, job, observe, pod, report

Json = dict[str, Any]
GOLDEN = Path(__file__).parent / "golden" / "decisions.json"
MARKER = MarkerState(True, "uid-mnist", at(50), attempt=0)


def running(j: Json, n: int = 2, attempt: int = 0) -> list[Json]:
    return [pod(j, i, attempt).running().obj() for i in range(n)]


def _sidecar_job() -> Json:
    template = {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "x"}},
        "spec": {
            "terminationGracePeriodSeconds": 3,
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {"name": "logger", "image": "busybox", "env": [{"name": "KEEP", "value": "1"}]},
                {"name": "tensorflow", "image": "t", "ports": [{"name": "tfmw", "containerPort": 1}]},
            ],
            "volumes": [{"name": "tfmw-shared", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
        },
    }
    return job("side", namespace="team-a").workers(3).port(3456).template(template).obj()


def _evicted(j: Json) -> Json:
    evicted = pod(j, 1).exited(1, message="SIGTERM").obj()
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    return evicted


SCENARIOS: dict[str, Callable[[], Decision]] = {
    "new job": lambda: decide(job().workers(3).obj(), service=None),
    "new job with sidecars and its own template": lambda: decide(_sidecar_job(), service=None),
    "new job created suspended": lambda: decide(job().run_policy(suspend=True).obj()),
    "new job, a namesake's pod still there": lambda: decide(
        job().obj(), [pod(job().obj() | {"metadata": {**job().obj()["metadata"], "uid": "old"}}, 0).obj()]
    ),
    "new job, stale marker of a namesake": lambda: decide(
        job().obj(), marker=MarkerState(True, None, at(-5)), service=None
    ),
    "new job, creation refused as invalid": lambda: decide(
        job().obj(), create_error=CreateError(CreateErrorKind.INVALID, "spec.volumes[0]: Invalid", 1, at(19))
    ),
    "new job, creation forbidden, backing off": lambda: decide(
        job().obj(), create_error=CreateError(CreateErrorKind.FORBIDDEN, "exceeded quota", 2, at(19))
    ),
    "pods created, none started": lambda: decide(
        job().launched().obj(), [pod(job().obj(), i).obj() for i in (0, 1)]
    ),
    "all running": lambda: decide(job().launched().obj(), running(job().obj())),
    "running, service missing": lambda: decide(
        job().launched(phase="Running").obj(), running(job().obj()), service=None
    ),
    "running, storage error": lambda: decide(
        job().launched(phase="Running").obj(), running(job().obj()), storage_error="default/mnist/m: ELOOP"
    ),
    "marker written": lambda: decide(
        job().launched(phase="Running").obj(), running(job().obj()), MARKER, at(51)
    ),
    "marker of another job": lambda: decide(
        job().launched(phase="Running").obj(), running(job().obj()), MarkerState(True, "uid-other", at(5))
    ),
    "worker exits 137": lambda: decide(
        job().launched(phase="Running").obj(),
        [pod(job().obj(), 0).running().obj(), pod(job().obj(), 1).exited(137, reason="OOMKilled").obj()],
    ),
    "worker exits 1": lambda: decide(
        job().launched(phase="Running").obj(),
        [
            pod(job().obj(), 0).running().obj(),
            pod(job().obj(), 1).exited(1, message="a\nb\nc\nd\ne\nf\nValueError").obj(),
        ],
    ),
    "worker evicted": lambda: decide(
        job().launched(phase="Running").obj(), [pod(job().obj(), 0).running().obj(), _evicted(job().obj())]
    ),
    "backoff limit reached": lambda: decide(
        job().run_policy(backoffLimit=1).launched(attempt=1, phase="Running", restarts=1).obj(),
        [pod(job().obj(), 0, 1).running().obj(), pod(job().obj(), 1, 1).exited(143).obj()],
    ),
    "old pods terminating": lambda: decide(
        job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj(),
        [pod(job().obj(), 0, 0).running().deleting().obj(), pod(job().obj(), 1, 0).exited(137).obj()],
    ),
    "next attempt": lambda: decide(
        job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    ),
    "old pods terminating, a peer's lost node found behind its exit": lambda: decide(
        _after_a_peers_exit(),
        [
            _peer(_after_a_peers_exit()).deleting(10).obj(),
            pod(_after_a_peers_exit(), 1).node_not_ready(at_seconds=50).deleting(10).obj(),
        ],
        now=at(52),
    ),
    "next attempt after a recorded restart": lambda: decide(_after_a_peers_exit(), now=at(60)),
    "restarted gang running": lambda: decide(
        job().launched(attempt=1, phase="Restarting", restarts=1).condition("Restarting").obj(),
        running(job().obj(), attempt=1),
    ),
    "chief exited 0, grace running": lambda: decide(
        job().launched(phase="Running").obj(),
        [pod(job().obj(), 0).exited(0).obj(), pod(job().obj(), 1).running().obj()],
    ),
    "chief exited 0, no marker after grace": lambda: decide(
        job().launched(phase="Running").obj(),
        [pod(job().obj(), 0).exited(0).obj(), pod(job().obj(), 1).running().obj()],
        now=at(45),
    ),
    "unschedulable": lambda: decide(
        job().run_policy(pendingTimeoutSeconds=60).launched().obj(),
        [pod(job().obj(), 0).unschedulable().obj(), pod(job().obj(), 1).created(5).obj()],
    ),
    "pending timeout": lambda: decide(
        job().run_policy(pendingTimeoutSeconds=10).launched().obj(),
        [
            pod(job().obj(), 0).running().obj(),
            pod(job().obj(), 1).waiting("ImagePullBackOff", "no such image").obj(),
        ],
    ),
    "image never pulled": lambda: decide(
        job().launched().obj(), [pod(job().obj(), 0).waiting("ErrImageNeverPull", "not present").obj()]
    ),
    "deadline": lambda: decide(
        job().run_policy(activeDeadlineSeconds=10).launched(phase="Running").obj(), running(job().obj())
    ),
    "suspended while running": lambda: decide(
        job().run_policy(suspend=True).launched(phase="Running").obj(), running(job().obj())
    ),
    "resumed": lambda: decide(job().launched(phase="Suspended").condition("Suspended").obj()),
    "finished, ttl running": lambda: decide(
        job()
        .run_policy(ttlSecondsAfterFinished=100, cleanPodPolicy="All")
        .status(phase="Succeeded", completionTime="2026-01-01T12:00:10Z", attempt=0, launchedAttempt=0)
        .obj(),
        [pod(job().obj(), 0).exited(0).obj()],
    ),
    "finished, ttl over": lambda: decide(
        job()
        .run_policy(ttlSecondsAfterFinished=5)
        .status(phase="Failed", completionTime="2026-01-01T12:00:10Z", attempt=1, launchedAttempt=1)
        .obj(),
        [pod(job().obj(), 0, 0).running().obj(), pod(job().obj(), 1, 1).exited(1).obj()],
    ),
    "invalid spec": lambda: decide(job().workers(0).obj()),
    "running, progress reported": lambda: decide(
        job().launched(phase="Running").obj(),
        running(job().obj()),
        progress=_progress(15, 240, metrics=(("loss", 0.25), ("accuracy", 0.9))),
    ),
    "running, newer progress within the interval": lambda: decide(
        job().launched(phase="Running").status(progress=_recorded()).obj(),
        running(job().obj()),
        progress=_progress(18, 400),
    ),
    "running, progress refused": lambda: decide(
        job().launched(phase="Running").status(progress=_recorded()).obj(),
        running(job().obj()),
        progress=ProgressProblem("default/mnist/progress.json: ELOOP: Too many levels of symbolic links"),
        now=at(40),
    ),
    "marker written, final progress": lambda: decide(
        job().launched(phase="Running").status(progress=_recorded()).obj(),
        running(job().obj()),
        marker=MARKER,
        progress=_progress(19, 800, metrics=(("loss", 0.1), ("eval_accuracy", 0.97))),
    ),
    "running, progress from year 9999": lambda: decide(
        job().launched(phase="Running").obj(),
        running(job().obj()),
        progress=ProgressReport(updated_at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), epoch=1),
    ),
    "running, progress stalled past progressDeadlineSeconds (Restart)": lambda: decide(
        _watched().obj(),
        running(job().obj()),
        now=at(100),
    ),
    "running, progress stalled past progressDeadlineSeconds (Report)": lambda: decide(
        _watched().run_policy(progressDeadlinePolicy="Report").obj(),
        running(job().obj()),
        now=at(100),
    ),
    "running, progress advancing within progressDeadlineSeconds": lambda: decide(
        _watched().obj(),
        running(job().obj()),
        progress=_progress(39, 400, checkpointed=True),
        now=at(40),
    ),
    "running, no progress ever reported, progressDeadlineSeconds set": lambda: decide(
        job().run_policy(progressDeadlineSeconds=60).launched(phase="Running").condition("Running").obj(),
        running(job().obj()),
        now=at(1000),
    ),
    "new job, Service refused by a quota": lambda: decide(
        job().obj(),
        service=None,
        create_error=CreateError(
            CreateErrorKind.FORBIDDEN, "exceeded quota: services=0", 1, at(19), CreatedObject.SERVICE, at(19)
        ),
    ),
    "new job, Service invalid": lambda: decide(
        job().obj(),
        service=None,
        create_error=CreateError(
            CreateErrorKind.INVALID, "spec.ports[0]: Invalid", 1, at(19), CreatedObject.SERVICE
        ),
    ),
    "new job, webhook down past the pending timeout": lambda: decide(
        job().run_policy(pendingTimeoutSeconds=15).obj(),
        create_error=CreateError(
            CreateErrorKind.UNAVAILABLE, 'failed calling webhook "x"', 4, at(19), CreatedObject.PODS, at(1)
        ),
    ),
    "reconcile failing": lambda: reconcile_failed(
        observe(
            job().run_policy(activeDeadlineSeconds=100).launched(phase="Running").obj(),
            running(job().obj()),
            MarkerState(),
            at(20),
        ),
        "OverflowError: date value out of range",
    ),
    "reconcile failing past the deadline": lambda: reconcile_failed(
        observe(
            job().run_policy(activeDeadlineSeconds=10).launched(phase="Running").obj(),
            running(job().obj()),
            MarkerState(),
            at(20),
        ),
        "OverflowError: date value out of range",
    ),
    "reconciled again after failing": lambda: decide(
        job().launched(phase="Running").condition("ReconcileError").obj(), running(job().obj())
    ),
    "queued gang waiting": lambda: decide(
        job().queue("team-a").launched().obj(),
        [pod(job().queue("team-a").obj(), i).gated().obj() for i in (0, 1)],
        workload=WorkloadState("w", False, "Pending", "insufficient quota for cpu"),
    ),
    "queued gang evicted": lambda: decide(
        job().queue("team-a").launched(phase="Running").status(evictions=1).obj(),
        [
            pod(job().queue("team-a").obj(), 0).running().obj(),
            pod(job().queue("team-a").obj(), 1).preempted().obj(),
        ],
    ),
    "queued job suspended": lambda: decide(
        job().queue("team-a").run_policy(suspend=True).launched(phase="Running").obj(),
        running(job().queue("team-a").obj()),
    ),
    "restart within the template's shorter grace": lambda: decide(
        job()
        .run_policy(restartGracePeriodSeconds=20)
        .pod_spec(terminationGracePeriodSeconds=7)
        .launched(phase="Running")
        .obj(),
        [pod(job().obj(), 0).running().obj(), pod(job().obj(), 1).running().deleting(at_seconds=15).obj()],
    ),
    # A gang whose template gives its command runs under the in-pod supervisor and restarts in place.
    "supervised: new job": lambda: decide(job().commanded("--epochs=3").obj(), service=None, reports=()),
    "supervised: a command exited 137, restarted in place": lambda: decide(
        _supervised(), _supervised_pods(), reports=_reports(("running", 0), ("exited", 0, 137))
    ),
    "supervised: restarted in place, a deleted pod still going": lambda: decide(
        _raised(),
        [_supervised_pods()[0], pod(_supervised(), 1).running().deleting(15).obj()],
        reports=_reports(("waiting", 1), ("exited", 0, 143)),
    ),
    "supervised: restarted in place, the gone pod made again": lambda: decide(
        _raised(), _supervised_pods()[:1], reports=_reports(("waiting", 1)), now=at(30)
    ),
    "supervised: every pod waiting, the barrier opens": lambda: decide(
        _raised(launched=True),
        [_supervised_pods()[0], pod(_supervised(), 1, 1).running().obj()],
        reports=(
            report(_supervised_pods()[0], "waiting", 1),
            report(pod(_supervised(), 1, 1).running().obj(), "waiting", 1),
        ),
        now=at(31),
    ),
    "supervised: a survivor late at the barrier": lambda: decide(
        _raised(launched=True),
        [_supervised_pods()[0], pod(_supervised(), 1, 1).running().obj()],
        reports=(report(pod(_supervised(), 1, 1).running().obj(), "waiting", 1),),
        now=at(60),
    ),
    "supervised: commands of the restarted gang running": lambda: decide(
        _raised(launched=True),
        [_supervised_pods()[0], pod(_supervised(), 1, 1).running().obj()],
        reports=(
            report(_supervised_pods()[0], "running", 1),
            report(pod(_supervised(), 1, 1).running().obj(), "running", 1),
        ),
        now=at(32),
    ),
    "supervised: stalled, every pod's stacks asked": lambda: decide(
        _watched().commanded().obj(),
        running(job().commanded().obj()),
        reports=_reports(("running", 0), ("running", 0)),
        now=at(100),
    ),
    "supervised: stalled, the stacks taken, restarted in place": lambda: decide(
        _stacks_asked(),
        running(job().commanded().obj()),
        reports=_reports(("running", 0), ("running", 0), stacks=_STACKS_ID),
        stacks=(
            StacksReading("worker-0", len(_DUMP), at(100.2), _DUMP),
            StacksReading("worker-1", 400, at(100.2)),
        ),
        now=at(100.6),
    ),
    "supervised: succeeded, every command ended, the supervisors told to exit": lambda: decide(
        _supervised(),
        _supervised_pods(),
        MARKER,
        reports=_reports(("exited", 0, 0), ("exited", 0, 0)),
        now=at(51),
    ),
}

_STACKS_ID = "stalled-attempt-0-2026-01-01T12:01:40.000Z"
_DUMP = """--- tfmw-trainer stacks: 2026-01-01T12:01:40.100Z pid=42 main_thread=0x00007f3a5c2e1740 ---
Thread 0x00007f3a1bfff640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
Current thread 0x00007f3a5c2e1740 (most recent call first):
  File "/opt/tfmw/lib/python3.11/site-packages/tensorflow/python/ops/collective_ops.py", line 300 in all_reduce_v2
  File "/opt/tfmw-src/tfmw_trainer/train.py", line 402 in _train_loop
  File "/opt/tfmw-src/tfmw_trainer/__main__.py", line 21 in <module>
  File "<frozen runpy>", line 198 in _run_module_as_main
"""


def _supervised() -> Json:
    """A running gang under the in-pod supervisor (its template gives its command)."""
    return job().commanded().launched(phase="Running").condition("Running", True, "AllWorkersRunning").obj()


def _supervised_pods() -> list[Json]:
    return running(_supervised())


def _reports(*states: tuple[Any, ...], stacks: str | None = None) -> tuple[Any, ...]:
    """The reports of pods 0, 1 ... of attempt 0: (state, attempt[, exit code])."""
    pods = _supervised_pods()
    return tuple(
        report(pods[i], s[0], s[1], s[2] if len(s) > 2 else None, stacks=stacks, delivered=stacks is not None)
        for i, s in enumerate(states)
    )


def _raised(launched: bool = False) -> Json:
    """Worker 1's pod was deleted at 15 s; the gang restart in place was decided at 16 s."""
    j = _supervised()
    pods = [_supervised_pods()[0], pod(j, 1).running().deleting(15).obj()]
    decision = decide(j, pods, reports=_reports(("running", 0), ("running", 0)), now=at(16))
    j["status"] = decision.status.to_json()
    if launched:
        j["status"]["launchedAttempt"] = 1
    return j


def _stacks_asked() -> Json:
    j = _watched().commanded().obj()
    decision = decide(
        j, running(job().commanded().obj()), reports=_reports(("running", 0), ("running", 0)), now=at(100)
    )
    j["status"] = decision.status.to_json()
    return j


def _peer(j: Json) -> PodWrapper:
    """Worker 0, on node-a: TensorFlow lost a peer (trainer exit 170) at T0, judged from 5 s
    (PEER_LOST_HOLD_SECONDS)."""
    return (
        pod(j, 0)
        .on_node("node-a")
        .exited(170, at_seconds=0, message="UnavailableError: Connection reset by peer")
    )


def _after_a_peers_exit() -> Json:
    """The gang restart decided at 5 s on worker 0's exit; worker 1 (node-b) seemed to run."""
    j = job().launched(phase="Running").condition("Running", True, "AllWorkersRunning").obj()
    restart = decide(j, [_peer(j).obj(), pod(j, 1).on_node("node-b").running().obj()], now=at(5))
    j["status"] = restart.status.to_json()
    return j


def _watched() -> JobWrapper:
    """Running since T0 with a 60 s progress deadline; progress recorded (advanced) at 12 s,
    the last checkpoint that of epoch 1."""
    recorded = _recorded() | {
        "advancedAt": "2026-01-01T12:00:12.000Z",
        "checkpoint": {"epoch": 1, "path": "checkpoints/ckpt-1"},
    }
    return (
        job()
        .run_policy(progressDeadlineSeconds=60)
        .launched(phase="Running", progress=recorded)
        .condition("Running", True, "AllWorkersRunning")
    )


def _progress(seconds: float, step: int, checkpointed: bool = False, **fields: Any) -> ProgressReport:
    if checkpointed:
        fields["checkpoint"] = Checkpoint(epoch=step // 80 - 1, path=f"checkpoints/ckpt-{step // 80 - 1}")
    return ProgressReport(
        updated_at=at(seconds),
        epoch=step // 80,
        total_epochs=10,
        step=step,
        total_steps=800,
        examples_per_second=640.0,
        job_uid="uid-mnist",
        attempt=0,
        **fields,
    )


def _recorded() -> Json:
    """status.progress as recorded at 12 s from a report written at 10 s."""
    return {
        "attempt": 0,
        "epoch": 1,
        "totalEpochs": 10,
        "step": 80,
        "totalSteps": 800,
        "updatedAt": "2026-01-01T12:00:10.000Z",
        "percent": 10.0,
        "lastUpdate": "2026-01-01T12:00:12.000Z",
        "epochs": "1/10",
        "since": {"percent": 5.0, "time": "2026-01-01T12:00:05.000Z"},
    }


def render(decision: Decision) -> Json:
    def action(item: Any) -> Json:
        if isinstance(item, PatchStatus):
            return {"PatchStatus": "the status above"}
        if isinstance(item, CreatePods):
            return {"CreatePods": {"pods": item.pods}}
        if isinstance(item, EnsureService):
            return {type(item).__name__: dataclasses.asdict(item)}
        return {type(item).__name__: json.loads(json.dumps(dataclasses.asdict(item), default=str))}

    return {
        "status": decision.status.to_json(),
        "actions": [action(a) for a in decision.actions],
        "events": [[e.type, e.reason, e.message] for e in decision.events],
        "requeue_after": decision.requeue_after,
        "watch_marker": decision.watch_marker,
        "watch_progress": stored(dataclasses.asdict(decision.watch_progress))
        if decision.watch_progress
        else None,
        "finished": decision.finished,
        "milestones": sorted(decision.milestones),
        "watch_reports": decision.watch_reports,
    }


OBSERVED_PODS: dict[str, Json] = {
    "running": pod(job().obj(), 0).running().obj(),
    "supervised, running": pod(job().commanded().obj(), 0).running().obj(),
    "exited 137": pod(job().obj(), 1, 2).exited(137, reason="OOMKilled", message="out of memory").obj(),
    "evicted": _evicted(job().obj()),
    "unschedulable": pod(job().obj(), 0).unschedulable().obj(),
    "image pull": pod(job().obj(), 0).waiting("ImagePullBackOff", "no such image").obj(),
    "deleting": pod(job().obj(), 0).running().deleting().obj(),
    "on a node reported not ready": pod(job().obj(), 1).node_not_ready(at_seconds=50).obj(),
    "sidecars": pod(_sidecar_job(), 2)
    .container_statuses(
        "Running",
        {"name": "logger", "state": {"terminated": {"exitCode": 143}}},
        {
            "name": "tensorflow",
            "state": {"terminated": {"exitCode": 3, "finishedAt": "2026-01-01T12:00:09Z"}},
        },
    )
    .obj(),
    "init failed": {
        **pod(_sidecar_job(), 1).obj(),
        "status": {
            "phase": "Failed",
            "initContainerStatuses": [
                {"name": "init", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}
            ],
            "containerStatuses": [
                {"name": "tensorflow", "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        },
    },
}


def observed(raw: Json) -> Json:
    found = observe_pod(raw)
    assert found is not None
    pinned: Json = stored(dataclasses.asdict(found))
    return pinned


def stored(value: Any) -> Any:
    """As the golden file holds it: tuples become lists, times strings."""
    return json.loads(json.dumps(value, default=_time))


def _time(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


PINNED: Json = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {"decisions": {}, "observed pods": {}}


# Computed inside each test, never at import: the decision must be made by the code as it
# is when the test runs (mutation testing swaps functions between collection and the run).
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_decision_is_as_pinned(name: str) -> None:
    assert stored(render(SCENARIOS[name]())) == PINNED["decisions"].get(name)


@pytest.mark.parametrize("name", list(OBSERVED_PODS))
def test_observed_pod_is_as_pinned(name: str) -> None:
    assert observed(OBSERVED_PODS[name]) == PINNED["observed pods"].get(name)


def test_every_pinned_scenario_still_exists() -> None:
    assert set(PINNED["decisions"]) == set(SCENARIOS) and set(PINNED["observed pods"]) == set(OBSERVED_PODS)


def write_golden() -> None:
    """`make golden`: pin what the code decides now."""
    pinned = {
        "decisions": {name: stored(render(scenario())) for name, scenario in SCENARIOS.items()},
        "observed pods": {name: observed(raw) for name, raw in OBSERVED_PODS.items()},
    }
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
