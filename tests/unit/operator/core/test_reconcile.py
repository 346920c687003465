"""The reconcile core, rule by rule as the README's "The job" and "Reliability" state them: observed state -> decision."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tfmw_operator.api.spec import parse_job
from tfmw_operator.api.status import Condition, ConditionType, WorkerCounts
from tfmw_operator.core.builders import build_service
from tfmw_operator.core.claim_checks import FolderReached
from tfmw_operator.core.decision import (
    CreatePods,
    Decision,
    DeleteJob,
    DeletePods,
    EnsureJobDirectory,
    EnsureService,
    Milestone,
    PatchStatus,
    ProgressWatch,
    RemoveMarker,
    WriteControl,
)
from tfmw_operator.core.observed import CreateError, CreateErrorKind, MarkerState
from tfmw_operator.core.policies.cleanup import WORKER_EXIT_SECONDS
from tfmw_operator.core.progress import ProgressProblem
from tfmw_operator.core.reconcile import reconcile
from wrappers import at, decide, env_of, job, observe, pod, progress_report, report

Json = dict[str, Any]
MARKER = MarkerState(True, "uid-mnist", at(50))
NO_MARKER = MarkerState()
NOW = at(20)


def created(decision: Decision) -> list[tuple[int, int]]:
    return sorted(
        (
            int(p["metadata"]["labels"]["tfmw.dev/replica-index"]),
            int(p["metadata"]["labels"]["tfmw.dev/attempt"]),
        )
        for p in decision.pods_to_create
    )


def condition(decision: Decision, kind: str) -> Condition:
    found = decision.status.condition(ConditionType(kind))
    assert found is not None, f"no {kind} condition in {decision.status.conditions}"
    return found


def kinds(decision: Decision) -> list[type]:
    return [type(a) for a in decision.actions]


def running_pods(j: Json, n: int = 2, attempt: int = 0) -> list[Json]:
    return [pod(j, i, attempt).running().obj() for i in range(n)]


# ---- creation ----


def test_new_job_creates_service_and_every_worker_then_records_the_launch() -> None:
    decision = decide(job().workers(3).obj(), service=None)
    assert created(decision) == [(0, 0), (1, 0), (2, 0)]
    assert kinds(decision) == [EnsureJobDirectory, EnsureService, CreatePods, PatchStatus]
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert not create.proven  # a template never sent before starts with one pod
    assert decision.actions[0] == EnsureJobDirectory("default/mnist", "uid-mnist")
    status = decision.status
    assert status is not None
    assert status.phase == "Pending"
    assert status.launched_attempt == 0 and status.attempt == 0 and status.restarts == 0
    assert status.ready_workers == "0/3"
    assert condition(decision, "Created").true
    assert any(e.reason == "PodsCreated" for e in decision.events)


def test_a_restart_launch_asks_for_no_service_it_has_and_sends_its_proven_pods_at_once() -> None:
    j = job().workers(3).launched(phase="Restarting").status(attempt=1).obj()
    decision = decide(j)
    assert created(decision) == [(0, 1), (1, 1), (2, 1)]
    assert kinds(decision) == [EnsureJobDirectory, CreatePods, PatchStatus]
    (create,) = [a for a in decision.actions if isinstance(a, CreatePods)]
    assert create.proven
    assert EnsureService in kinds(decide(j, service=None))  # deleted meanwhile: made again


def test_stale_marker_of_an_earlier_namesake_is_removed_before_the_first_pods() -> None:
    decision = decide(job().obj(), marker=MarkerState(True, None, at(-100)))
    assert kinds(decision)[0] is RemoveMarker
    assert decision.actions[0] == RemoveMarker("default/mnist/multiworker-complete.txt")
    assert created(decision) == [(0, 0), (1, 0)]


def test_marker_naming_another_job_is_removed_and_never_counts() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, running_pods(j), marker=MarkerState(True, "uid-other", at(5)))
    assert RemoveMarker("default/mnist/multiworker-complete.txt") in decision.actions
    assert decision.status.phase == "Running"


def test_operator_restart_mid_creation_creates_only_the_missing_pods() -> None:
    j = job().workers(3).obj()
    decision = decide(j, [pod(j, 1).obj()])
    assert created(decision) == [(0, 0), (2, 0)]


def test_pods_all_exist_but_launch_unrecorded_records_it_without_creating() -> None:
    j = job().obj()
    decision = decide(j, [pod(j, 0).obj(), pod(j, 1).obj()])
    assert created(decision) == []
    assert decision.status is not None and decision.status.launched_attempt == 0


def test_same_observation_gives_same_decision() -> None:
    j = job().launched(phase="Running").obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).exited(137).obj()]
    assert decide(j, pods) == decide(j, pods)


# ---- running ----


def test_running_when_all_workers_run() -> None:
    j = job().launched().obj()
    decision = decide(j, running_pods(j))
    assert decision.status is not None
    assert decision.status.phase == "Running"
    assert decision.status.ready_workers == "2/2"
    assert decision.status.workers == WorkerCounts(running=2)
    assert condition(decision, "Running").true
    assert any(e.reason == "Running" for e in decision.events)


def test_pending_while_some_worker_has_not_started() -> None:
    j = job().launched().obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).obj()])
    assert decision.status.phase == "Pending"
    assert decision.pods_to_create == () and decision.pods_to_delete == ()


def test_steady_running_state_changes_nothing() -> None:
    j = job().launched(phase="Running").obj()
    first = decide(j, running_pods(j))
    j["status"] = first.status.to_json()
    second = decide(j, running_pods(j), now=at(30))
    assert second.actions == () and second.events == ()


# ---- success ----


def test_marker_makes_the_job_succeed_whatever_the_pods_do() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, running_pods(j), marker=MARKER, now=at(51))
    status = decision.status
    assert status is not None and status.phase == "Succeeded"
    assert status.marker is not None and status.marker.path == "default/mnist/multiworker-complete.txt"
    assert status.completion_time == at(51)
    assert condition(decision, "Succeeded").true
    assert any(e.reason == "Succeeded" for e in decision.events)


def test_marker_without_job_uid_counts_once_pods_were_launched() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, running_pods(j), marker=MarkerState(True, None, at(40)))
    assert decision.status is not None and decision.status.phase == "Succeeded"


def test_succeeded_running_pods_get_a_few_seconds_then_clean_pod_policy_running_deletes_them() -> None:
    j = job().completion(chiefExitGraceSeconds=30).launched(phase="Running").obj()
    pods = [pod(j, 0).exited(0).obj(), pod(j, 1).running().obj()]
    first = decide(j, pods, marker=MARKER, now=at(51))
    assert first.pods_to_delete == ()
    assert first.requeue_after == pytest.approx(WORKER_EXIT_SECONDS)
    j["status"] = first.status.to_json()
    assert decide(j, pods, marker=MARKER, now=at(51 + WORKER_EXIT_SECONDS - 1)).pods_to_delete == ()
    later = decide(j, pods, marker=MARKER, now=at(51 + WORKER_EXIT_SECONDS))
    assert later.pods_to_delete == ("mnist-worker-1",)


def test_a_shorter_chief_exit_grace_deletes_succeeded_running_pods_sooner() -> None:
    j = job().completion(chiefExitGraceSeconds=0).launched(phase="Running").obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).running().obj()]
    decision = decide(j, pods, marker=MARKER, now=at(51))
    assert sorted(decision.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]


def test_clean_pod_policy_all_deletes_finished_pods_too() -> None:
    j = job().run_policy(cleanPodPolicy="All").launched(phase="Running").obj()
    pods = [pod(j, 0).exited(0).obj(), pod(j, 1).exited(0).obj()]
    decision = decide(j, pods, marker=MARKER, now=at(51))
    assert sorted(decision.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]


def test_clean_pod_policy_none_keeps_every_pod() -> None:
    j = job().run_policy(cleanPodPolicy="None").launched(phase="Running").obj()
    decision = decide(j, running_pods(j), marker=MARKER, now=at(500))
    assert decision.pods_to_delete == ()


def test_status_patch_comes_before_deletions_on_finish() -> None:
    j = job().run_policy(cleanPodPolicy="All").launched(phase="Running").obj()
    decision = decide(j, running_pods(j), marker=MARKER, now=at(51))
    assert kinds(decision) == [PatchStatus, DeletePods]


# ---- chief exit without marker ----


def test_chief_exit_zero_without_marker_waits_for_the_grace_period() -> None:
    j = job().completion(chiefExitGraceSeconds=30).launched(phase="Running").obj()
    pods = [pod(j, 0).exited(0, at_seconds=10).obj(), pod(j, 1).exited(0, at_seconds=10).obj()]
    decision = decide(j, pods, now=at(20))
    assert decision.status.phase != "Failed"
    assert decision.requeue_after == pytest.approx(20)


def test_chief_exit_zero_without_marker_fails_with_marker_missing() -> None:
    j = job().completion(chiefExitGraceSeconds=30).launched(phase="Running").obj()
    pods = [pod(j, 0).exited(0, at_seconds=10).obj(), pod(j, 1).running().obj()]
    decision = decide(j, pods, now=at(41))
    status = decision.status
    assert status is not None and status.phase == "Failed" and status.reason == "MarkerMissing"
    assert "worker 0" in str(status.message) and "multiworker-complete.txt" in str(status.message)
    assert decision.pods_to_delete == ("mnist-worker-1",)


# ---- failures and gang restart ----


@pytest.mark.parametrize(
    ("policy", "code", "restarts"),
    [
        ("ExitCode", 137, True),
        ("ExitCode", 143, True),
        ("ExitCode", 128, True),
        ("ExitCode", 1, False),
        ("ExitCode", 127, False),
        ("OnFailure", 1, True),
        ("OnFailure", 137, True),
        ("Never", 137, False),
        ("Never", 1, False),
    ],
)
def test_restart_policy_decides_which_exit_codes_restart(policy: str, code: int, restarts: bool) -> None:
    j = job().run_policy(restartPolicy=policy).launched(phase="Running").obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).exited(code, message="boom\nOOM at step 7").obj()]
    decision = decide(j, pods)
    status = decision.status
    assert status is not None
    if restarts:
        assert status.phase == "Restarting"
        assert status.attempt == 1 and status.restarts == 1
        assert sorted(decision.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]
        assert kinds(decision) == [PatchStatus, DeletePods]
        assert any(e.reason == "GangRestart" for e in decision.events)
        assert decision.pods_to_create == ()
    else:
        assert status.phase == "Failed" and status.reason == "WorkerFailed"
        assert f"worker 1 (pod mnist-worker-1) exited with code {code}" in str(status.message)
        assert "OOM at step 7" in str(status.message)


@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure"])
def test_a_claim_that_misses_the_job_folder_fails_before_training_naming_the_claim(policy: str) -> None:
    j = job(namespace="team-a").run_policy(restartPolicy=policy).launched(phase="Pending").obj()
    mismatched = pod(j, 1).container_statuses("Failed").obj()
    mismatched["status"]["initContainerStatuses"] = [
        {
            "name": "tfmw-folder-check",
            "state": {"terminated": {"exitCode": 3, "message": "/shared/.tfmw-job-uid does not exist"}},
        }
    ]
    decision = decide(j, [pod(j, 0).waiting("PodInitializing").obj(), mismatched])
    status = decision.status
    assert status is not None and status.phase == "Failed" and status.reason == "SharedVolumeMismatch"
    message = str(status.message)
    assert "spec.sharedVolume.claimName tfmw-shared (namespace team-a)" in message
    assert "team-a/mnist" in message and "/shared/.tfmw-job-uid does not exist" in message
    assert status.restarts == 0  # every attempt would mount the same folder: no restart


def test_eviction_is_retryable_under_exit_code() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).evicted().obj()])
    assert decision.status is not None and decision.status.phase == "Restarting"
    assert "Evicted" in str(decision.status.message)


@pytest.mark.parametrize("policy", ["ExitCode", "OnFailure"])
def test_evicted_worker_whose_trainer_exited_1_on_sigterm_is_retryable(policy: str) -> None:
    j = job().run_policy(restartPolicy=policy).launched(phase="Running").obj()
    evicted = pod(j, 1).exited(1).obj()
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    decision = decide(j, [pod(j, 0).running().obj(), evicted])
    assert decision.status.phase == "Restarting"


def test_evicted_worker_under_never_fails_the_job() -> None:
    j = job().run_policy(restartPolicy="Never").launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).evicted().obj()])
    assert decision.status.phase == "Failed" and "Evicted" in str(decision.status.message)


def test_vanished_pod_counts_as_failure_and_restarts_the_gang() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj()])
    assert decision.status is not None and decision.status.phase == "Restarting"
    assert "worker 1" in str(decision.status.message) and "disappeared" in str(decision.status.message)
    assert decision.pods_to_delete == ("mnist-worker-0",)


def test_pod_deleted_by_someone_else_while_running_counts_as_failure() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).running().deleting().obj()])
    assert decision.status is not None and decision.status.phase == "Restarting"
    assert decision.pods_to_delete == ("mnist-worker-0",)


def test_the_worker_that_died_first_is_reported() -> None:
    j = job().run_policy(restartPolicy="Never").launched(phase="Running").obj()
    pods = [pod(j, 0).exited(1, at_seconds=15).obj(), pod(j, 1).exited(137, at_seconds=12).obj()]
    decision = decide(j, pods)
    assert decision.status is not None and "worker 1" in str(decision.status.message)


def test_backoff_limit_exhausted_fails() -> None:
    j = job().run_policy(backoffLimit=2).launched(attempt=2, phase="Running", restarts=2).obj()
    pods = [pod(j, 0, attempt=2).running().obj(), pod(j, 1, attempt=2).exited(137).obj()]
    decision = decide(j, pods)
    status = decision.status
    assert status is not None and status.phase == "Failed" and status.reason == "BackoffLimitExceeded"
    assert "exited with code 137" in str(status.message) and "backoffLimit 2" in str(status.message)
    assert decision.pods_to_delete == ("mnist-worker-0",)


def test_backoff_limit_zero_fails_on_first_retryable_failure() -> None:
    j = job().run_policy(backoffLimit=0).launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).exited(137).obj()])
    assert decision.status is not None and decision.status.reason == "BackoffLimitExceeded"


def test_no_new_attempt_while_any_old_pod_exists() -> None:
    j = job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    pods = [pod(j, 0, attempt=0).running().deleting().obj()]
    decision = decide(j, pods)
    assert decision.pods_to_create == ()
    assert decision.pods_to_delete == ()  # already terminating: wait, do not delete again


def test_old_attempt_pods_not_yet_deleted_are_deleted() -> None:
    j = job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    decision = decide(j, [pod(j, 0, 0).running().obj(), pod(j, 1, 0).exited(137).obj()])
    assert sorted(decision.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]
    assert decision.pods_to_create == ()


def test_next_attempt_created_once_old_pods_are_gone_with_its_own_host_names() -> None:
    j = job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    decision = decide(j, [])
    assert created(decision) == [(0, 1), (1, 1)]
    first = decide(job().obj()).pods_to_create
    for old, new in zip(first, decision.pods_to_create, strict=True):
        renamed = env_of(old)["TF_CONFIG"].replace("mnist-worker-0.", "worker-0-a1.")
        assert env_of(new)["TF_CONFIG"] == renamed.replace("mnist-worker-1.", "worker-1-a1.")
        assert env_of(new)["TFMW_ATTEMPT"] == "1"
    assert decision.status is not None and decision.status.launched_attempt == 1
    assert decision.status.phase == "Restarting"


def test_restarting_becomes_running_when_the_new_gang_runs() -> None:
    j = job().launched(attempt=1, phase="Restarting", restarts=1).condition("Restarting").obj()
    decision = decide(j, running_pods(j, attempt=1))
    assert decision.status.phase == "Running"
    assert not condition(decision, "Restarting").true
    assert condition(decision, "Running").true


# ---- time limits ----


def test_active_deadline_fails_and_deletes_every_pod() -> None:
    j = job().run_policy(activeDeadlineSeconds=60).launched(phase="Running", started=0).obj()
    early = decide(j, running_pods(j), now=at(30))
    assert early.requeue_after == pytest.approx(30)
    late = decide(j, running_pods(j), now=at(61))
    assert late.status is not None and late.status.reason == "DeadlineExceeded"
    assert sorted(late.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]


def test_stalled_condition_carries_the_schedulers_reason() -> None:
    j = job().launched().obj()
    pods = [pod(j, 0).unschedulable("0/1 nodes are available: 1 Insufficient cpu.").obj(), pod(j, 1).obj()]
    decision = decide(j, pods)
    stalled = condition(decision, "Stalled")
    assert stalled.true and stalled.reason == "Unschedulable"
    assert "Insufficient cpu" in stalled.message
    assert any(e.reason == "Stalled" for e in decision.events)
    assert decision.status.phase == "Pending"


def test_pending_timeout_fails_with_the_kubelets_reason() -> None:
    j = job().run_policy(pendingTimeoutSeconds=60).launched().obj()
    pods = [
        pod(j, 0).running().obj(),
        pod(j, 1).created(0).waiting("ImagePullBackOff", "no such image").obj(),
    ]
    early = decide(j, pods, now=at(30))
    assert early.status.phase == "Pending" and early.requeue_after == pytest.approx(30)
    late = decide(j, pods, now=at(61))
    status = late.status
    assert status is not None and status.phase == "Failed" and status.reason == "PendingTimeout"
    assert "ImagePullBackOff" in str(status.message) and "worker 1" in str(status.message)


def test_image_that_can_never_be_pulled_fails_at_once() -> None:
    j = job().launched().obj()
    pods = [pod(j, 0).waiting("ErrImageNeverPull", "image not present").obj(), pod(j, 1).obj()]
    decision = decide(j, pods)
    assert decision.status is not None and decision.status.reason == "ErrImageNeverPull"


def test_ttl_deletes_the_job_after_it_finished() -> None:
    j = (
        job()
        .run_policy(ttlSecondsAfterFinished=100)
        .status(phase="Succeeded", completionTime="2026-01-01T12:00:50Z", attempt=0, launchedAttempt=0)
        .obj()
    )
    assert decide(j, now=at(100)).requeue_after == pytest.approx(50)
    assert DeleteJob() in decide(j, now=at(151)).actions


# ---- suspend ----


def test_suspend_deletes_pods_and_resume_starts_a_fresh_attempt() -> None:
    j = job().run_policy(suspend=True).launched(phase="Running").obj()
    suspended = decide(j, running_pods(j))
    assert suspended.status is not None and suspended.status.phase == "Suspended"
    assert sorted(suspended.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]
    j["status"] = suspended.status.to_json()
    j["spec"]["runPolicy"]["suspend"] = False
    resumed = decide(j, [])
    assert resumed.status is not None and resumed.status.attempt == 1
    assert resumed.status.restarts == 0
    assert created(resumed) == [(0, 1), (1, 1)]


def test_a_suspended_jobs_counts_follow_its_pods_down_to_none() -> None:
    """Kueue frees a suspended TFJob's quota only once its status counts no active replica
    (jobframework's IsActive over replicaStatuses): the counts are the pods still there, not
    the last running ones, or a preempted job would hold its quota for ever."""
    j = job().launched(phase="Running").obj()
    running = decide(j, running_pods(j))
    assert running.status is not None and running.status.workers == WorkerCounts(running=2)
    j["status"] = running.status.to_json()
    j["spec"]["runPolicy"] = {"suspend": True}
    stopping = decide(j, running_pods(j))
    assert stopping.status is not None and stopping.status.workers == WorkerCounts(running=2)
    j["status"] = stopping.status.to_json()
    gone = decide(j, [])
    assert gone.status is not None and gone.status.phase == "Suspended"
    assert gone.status.workers == WorkerCounts()


def test_job_created_suspended_creates_nothing() -> None:
    decision = decide(job().run_policy(suspend=True).obj())
    assert decision.pods_to_create == ()
    assert decision.status is not None and decision.status.phase == "Suspended"


# ---- finished jobs and bad specs ----


def test_finished_job_deletes_leftover_pods_of_old_attempts() -> None:
    j = (
        job()
        .status(phase="Failed", attempt=1, launchedAttempt=1, completionTime="2026-01-01T12:00:10Z")
        .obj()
    )
    decision = decide(j, [pod(j, 0, attempt=0).running().obj()])
    assert decision.pods_to_delete == ("mnist-worker-0",)


def test_spec_the_operator_cannot_use_fails_with_the_field_named() -> None:
    j = job().obj()
    j["spec"]["template"]["spec"]["containers"] = []
    decision = decide(j)
    assert decision.status is not None and decision.status.reason == "InvalidSpec"
    assert "spec.template.spec.containers" in str(decision.status.message)


# ---- faults: storage, names, refused creations, node trouble ----


def test_storage_error_is_a_condition_and_a_warning_and_the_job_goes_on() -> None:
    j = job().run_policy(activeDeadlineSeconds=10).launched(phase="Running").obj()
    decision = decide(j, running_pods(j), storage_error="ns/job/done: ELOOP", now=at(5))
    stalled = condition(decision, "StorageError")
    assert stalled.true and "ELOOP" in stalled.message
    assert [e.reason for e in decision.events] == ["StorageError"]
    late = decide(j, running_pods(j), storage_error="ns/job/done: ELOOP", now=at(11))
    assert late.status.phase == "Failed" and late.status.reason == "DeadlineExceeded"


def test_storage_error_clears_once_the_storage_reads_again() -> None:
    j = job().launched(phase="Running").condition("StorageError").obj()
    decision = decide(j, running_pods(j))
    assert not condition(decision, "StorageError").true


def test_no_launch_while_a_namesakes_objects_remain() -> None:
    j = job().obj()
    earlier = job().obj()
    earlier["metadata"]["uid"] = "uid-earlier"
    decision = decide(j, [pod(earlier, 0).running().deleting().obj()])
    assert decision.pods_to_create == () and decision.status.launched_attempt is None
    stalled = condition(decision, "Stalled")
    assert stalled.true and stalled.reason == "NameInUse" and "mnist-worker-0" in stalled.message
    assert decision.requeue_after is not None and decision.requeue_after <= 2


def test_a_namesakes_pods_and_service_do_not_count_as_the_jobs_own() -> None:
    j = job().obj()
    earlier = job().obj()
    earlier["metadata"]["uid"] = "uid-earlier"
    service = build_service(parse_job(earlier))
    observed = observe(j, [pod(earlier, 0).running().obj()], NO_MARKER, NOW, service=service)
    assert observed.pods == () and observed.namesakes == ("pod mnist-worker-0", "Service mnist")


def test_a_missing_service_of_a_running_job_is_created_again() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, running_pods(j), service=None)
    # Not part of a launch: the shell reports a refusal and carries out the rest of the decision.
    assert [a.launch for a in decision.actions if isinstance(a, EnsureService)] == [False]


def test_a_template_the_api_server_refuses_fails_the_job_with_its_message() -> None:
    error = CreateError(
        CreateErrorKind.INVALID, 'unknown field "spec.containers[0].imagePullPolicyy"', 1, at(19)
    )
    decision = decide(job().obj(), create_error=error)
    assert decision.status.phase == "Failed" and decision.status.reason == "InvalidTemplate"
    assert "imagePullPolicyy" in str(decision.status.message) and decision.pods_to_create == ()


def test_forbidden_pod_creation_is_stalled_and_retried_with_growing_backoff() -> None:
    error = CreateError(CreateErrorKind.FORBIDDEN, "exceeded quota: pods=2", 3, at(10))
    waiting = decide(job().obj(), create_error=error, now=at(12))
    assert waiting.pods_to_create == () and waiting.status.phase == "Pending"
    assert condition(waiting, "Stalled").reason == "PodCreationRefused"
    assert waiting.requeue_after == pytest.approx(6)  # 2**3 s after the last refusal
    retry = decide(job().obj(), create_error=error, now=at(18))
    assert created(retry) == [(0, 0), (1, 0)]


def test_a_pod_stuck_terminating_past_its_grace_is_forced() -> None:
    j = job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    stuck = pod(j, 0, 0).running().deleting().obj()  # deleting since T0, grace 30
    early = decide(j, [stuck], now=at(60))
    assert early.pods_to_delete == () and early.requeue_after == pytest.approx(30)
    late = decide(j, [stuck], now=at(91))
    forced = [a for a in late.actions if isinstance(a, DeletePods)]
    assert forced == [DeletePods(("mnist-worker-0",), 0, force=True)]
    assert any(e.reason == "ForcedDeletion" for e in late.events)


def test_a_pod_going_whose_node_was_reported_lost_is_forced_at_once() -> None:
    j = job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    lost = pod(j, 1, 0).node_not_ready(at_seconds=50).deleting(10).obj()  # grace 30: stuck at 100 s
    waiting = pod(j, 0, 0).on_node("node-a").running().deleting(10).obj()
    decision = decide(j, [waiting, lost], now=at(51))
    forced = [a for a in decision.actions if isinstance(a, DeletePods)]
    assert forced == [DeletePods(("mnist-worker-1",), 0, force=True)]
    assert [e.message for e in decision.events if e.reason == "ForcedDeletion"] == [
        "pods whose node was reported lost, forced: mnist-worker-1"
    ]
    assert decision.requeue_after == pytest.approx(49)  # worker 0's own deadline: 10 + 30 + 60 s
    # Not yet being deleted: asked to go gracefully first, like any other.
    first = decide(j, [pod(j, 1, 0).node_not_ready().obj()], now=at(51))
    assert [a for a in first.actions if isinstance(a, DeletePods)] == [DeletePods(("mnist-worker-1",), 5)]


def test_a_running_attempts_pod_on_a_lost_node_is_never_deleted_for_it() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).node_not_ready().obj()], now=at(52))
    assert decision.pods_to_delete == () and decision.status.phase == "Running"


def test_a_worker_in_phase_unknown_keeps_a_running_job_running() -> None:
    j = job().launched(phase="Running").obj()
    unknown = pod(j, 1).running().obj()
    unknown["status"]["phase"] = "Unknown"
    decision = decide(j, [pod(j, 0).running().obj(), unknown])
    assert decision.status.phase == "Running"


def test_a_worker_unknown_for_a_minute_is_lost_and_restarts_the_gang() -> None:
    j = job().launched(phase="Running").obj()
    unknown = pod(j, 1).running().obj()
    unknown["status"].update(phase="Unknown")
    unknown["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T12:00:00Z"
    still = decide(j, [pod(j, 0).running().obj(), unknown], now=at(59))
    # A silent node sends nothing more: the job is looked at again when the minute is up.
    assert still.status.phase == "Running" and still.requeue_after == 1.0
    lost = decide(j, [pod(j, 0).running().obj(), unknown], now=at(61))
    assert lost.status.phase == "Restarting" and "has not reported" in str(lost.status.message)


def test_ready_counts_ready_workers_not_running_ones() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, [pod(j, 0).running().obj(), pod(j, 1).running(ready=False).obj()])
    assert decision.status.ready_workers == "1/2" and decision.status.phase == "Running"


def grace_of_the_survivors(j: Json, failed: Json, seconds: float = 20) -> int | None:
    decision = decide(j, [pod(j, 0).running().obj(), failed], now=at(seconds))
    assert decision.status.phase == "Restarting"
    (deletion,) = [a for a in decision.actions if isinstance(a, DeletePods) and "mnist-worker-0" in a.names]
    return deletion.grace_seconds


def test_survivors_that_can_still_save_together_get_the_restart_grace() -> None:
    j = job().run_policy(restartGracePeriodSeconds=7).launched(phase="Running").obj()
    # Taken away while it ran, it was told by SIGTERM as they are: all save at one step.
    assert grace_of_the_survivors(j, pod(j, 1).running().deleting(at_seconds=15).obj()) == 7
    assert grace_of_the_survivors(j, pod(j, 1).evicted().obj()) == 7
    assert grace_of_the_survivors(j, pod(j, 1).exited(143).obj()) == 7
    # It lost a peer (the trainer's 170): the cause is elsewhere, maybe a node not yet reported
    # lost; the peer's pod, left terminating there, keeps the next gang off that node.
    assert grace_of_the_survivors(j, pod(j, 1).exited(170).obj()) == 7


def test_survivors_of_a_worker_that_ended_on_its_own_are_stopped_at_once() -> None:
    j = job().run_policy(restartGracePeriodSeconds=7).launched(phase="Running").obj()
    # A collective save waits for every worker: with one gone for good, none can finish.
    assert grace_of_the_survivors(j, pod(j, 1).exited(137, reason="OOMKilled").obj()) == 0
    assert grace_of_the_survivors(j, pod(j, 1).exited(139).obj()) == 0
    lost = pod(j, 1).running().node_not_ready().obj()
    lost["status"]["phase"] = "Unknown"
    assert grace_of_the_survivors(j, lost, seconds=200) == 0  # its kubelet silent for a minute


def ended_at_t0(attempt: int, step: int | None = None) -> dict[str, object]:
    """A status.history entry: attempt `attempt` restarted at T0, its checkpoint at `step`."""
    record: dict[str, object] = {"attempt": attempt, "outcome": "Restarted", "cause": "Error"}
    record.update(startTime="2026-01-01T11:59:00Z", endTime="2026-01-01T12:00:00Z")  # a minute
    return {**record, "checkpoint": {"step": step}} if step is not None else record


def test_later_gang_restarts_back_off() -> None:
    crashes = [ended_at_t0(a) for a in (2, 1, 0)]  # none trained to a checkpoint
    base = job().launched(attempt=2, phase="Restarting", restarts=3).status(attempt=3, history=crashes)
    j = base.condition("Restarting").obj()  # the restart happened at T0
    waiting = decide(j, now=at(5))
    assert waiting.pods_to_create == () and waiting.requeue_after == pytest.approx(15)  # 10 * 2**(3-2)
    assert created(decide(j, now=at(21))) == [(0, 3), (1, 3)]
    # The attempt that ended had trained on from its checkpoint: no crash loop, no wait.
    trained = [ended_at_t0(2, step=900), ended_at_t0(1, step=400), ended_at_t0(0)]
    goes_on = job().launched(attempt=2, phase="Restarting", restarts=3).status(attempt=3, history=trained)
    assert created(decide(goes_on.condition("Restarting").obj(), now=at(1))) == [(0, 3), (1, 3)]
    first = (
        job().launched(attempt=0, phase="Restarting", restarts=1).status(attempt=1).condition("Restarting")
    )
    assert created(decide(first.obj(), now=at(1))) == [(0, 1), (1, 1)]


def test_ttl_deletes_the_pods_before_the_job_so_their_logs_are_kept() -> None:
    j = (
        job()
        .run_policy(ttlSecondsAfterFinished=0, cleanPodPolicy="None")
        .status(phase="Succeeded", completionTime="2026-01-01T12:00:10Z", attempt=0, launchedAttempt=0)
        .obj()
    )
    decision = decide(j, [pod(j, 0).exited(0).obj(), pod(j, 1).exited(0).obj()])
    assert kinds(decision)[-2:] == [DeletePods, DeleteJob]
    assert sorted(decision.pods_to_delete) == ["mnist-worker-0", "mnist-worker-1"]


def test_a_marker_from_an_abandoned_attempt_succeeds_without_counting_the_restart() -> None:
    j = job().launched(attempt=0, phase="Restarting").status(attempt=1, restarts=1).obj()
    marker = MarkerState(True, "uid-mnist", at(15), attempt=0)
    decision = decide(j, [pod(j, 0, 0).running().deleting().obj()], marker=marker)
    status = decision.status
    assert status.phase == "Succeeded" and status.restarts == 0 and status.attempt == 0
    assert any("restart did not run" in e.message for e in decision.events)


def restarted() -> Json:
    """Attempt 0 ended in a gang restart (worker 1 OOMKilled); its pods are gone."""
    j = job().launched(phase="Running").obj()
    restart = decide(j, [pod(j, 0).running().obj(), pod(j, 1).exited(137, reason="OOMKilled").obj()])
    assert restart.status.attempt == 1 and Milestone.RESTARTED not in restart.milestones
    j["status"] = restart.status.to_json()
    return j


def test_a_restart_is_counted_once_the_next_attempt_is_launched_when_its_record_is_final() -> None:
    j = restarted()
    going = decide(j, [pod(j, 0).running().deleting().obj()], now=at(21))
    assert Milestone.RESTARTED not in going.milestones
    relaunch = decide(j, now=at(22))
    assert created(relaunch) == [(0, 1), (1, 1)] and Milestone.RESTARTED in relaunch.milestones
    assert relaunch.status.history[0].cause == "OOMKilled"  # the label it is counted under
    j["status"] = relaunch.status.to_json()
    assert Milestone.RESTARTED not in decide(j, now=at(23)).milestones


def test_a_restart_is_counted_when_the_job_fails_before_the_next_attempt_launches() -> None:
    j = restarted()
    j["spec"]["runPolicy"]["activeDeadlineSeconds"] = 10
    failed = decide(j, [pod(j, 0).running().deleting().obj()], now=at(21))
    assert failed.status.phase == "Failed"
    assert {Milestone.FAILED, Milestone.RESTARTED} <= failed.milestones


def test_a_restart_that_did_not_run_and_a_resume_are_not_counted() -> None:
    j = restarted()
    marker = MarkerState(True, "uid-mnist", at(15), attempt=0)
    assert Milestone.RESTARTED not in decide(j, marker=marker, now=at(21)).milestones
    resumed = job().launched(phase="Suspended").condition("Suspended").obj()
    resumed["status"]["history"] = [
        {"attempt": 0, "outcome": "Suspended", "cause": "Suspended", "endTime": "2026-01-01T12:00:10Z"}
    ]
    resume = decide(resumed)
    assert created(resume) == [(0, 1), (1, 1)] and Milestone.RESTARTED not in resume.milestones


def test_a_restart_suspended_before_its_launch_is_counted_once_resumed() -> None:
    j = restarted()
    j["spec"]["runPolicy"]["suspend"] = True
    suspend = decide(j, now=at(21))
    assert suspend.status.phase == "Suspended" and Milestone.RESTARTED not in suspend.milestones
    j["status"] = suspend.status.to_json()
    j["spec"]["runPolicy"]["suspend"] = False
    resume = decide(j, now=at(22))
    assert created(resume) == [(0, 1), (1, 1)] and Milestone.RESTARTED in resume.milestones


def test_a_chief_without_finished_at_still_ends_its_grace_period() -> None:
    j = job().completion(chiefExitGraceSeconds=30).launched(phase="Running").obj()
    chief = pod(j, 0).exited(0).obj()
    del chief["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    decision = decide(j, [chief, pod(j, 1).running().obj()], now=at(31))
    assert decision.status.reason == "MarkerMissing"


def test_an_invalid_spec_fails_once_and_stays_failed() -> None:
    j = job().obj()
    j["spec"]["template"]["spec"]["containers"] = []
    first = decide(j)
    j["status"] = first.status.to_json()
    again = decide(j, now=at(99))
    assert again.actions == () and again.events == ()


# ---- progress ----


def test_a_running_jobs_progress_goes_into_its_status_and_is_watched() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, running_pods(j), progress=progress_report(15, 3, metrics=(("loss", 0.5),)))
    progress = decision.status.progress
    assert progress is not None and progress.epochs == "3/10" and progress.summary == "loss=0.5"
    assert progress.last_update == NOW and PatchStatus in kinds(decision)
    assert decision.watch_progress == ProgressWatch("default/mnist/progress.json", at(30))


def test_progress_newer_than_the_interval_allows_waits_for_a_requeue() -> None:
    j = job().launched(phase="Running").obj()
    first = decide(j, running_pods(j), progress=progress_report(15, 3))
    j["status"] = first.status.to_json()
    decision = decide(j, running_pods(j), progress=progress_report(18, 4), now=at(22))
    assert decision.status.progress == first.status.progress and PatchStatus not in kinds(decision)
    assert decision.requeue_after == pytest.approx(8.0)


def test_the_decision_that_finishes_a_job_records_its_final_figures() -> None:
    j = job().launched(phase="Running").obj()
    first = decide(j, running_pods(j), progress=progress_report(15, 3))
    j["status"] = first.status.to_json()
    final = progress_report(21, 10, metrics=(("eval_accuracy", 0.97),))
    decision = decide(j, running_pods(j), marker=MARKER, progress=final, now=at(22))
    progress = decision.status.progress
    assert decision.status.phase == "Succeeded" and progress is not None
    assert progress.epochs == "10/10" and progress.eta == "0s"
    assert progress.metrics == (("eval_accuracy", 0.97),)
    assert decision.watch_progress is None


def test_a_finished_jobs_progress_never_changes_again() -> None:
    j = job().launched(phase="Succeeded").obj()
    decision = decide(j, running_pods(j), progress=progress_report(100, 10), now=at(200))
    assert decision.status.progress is None and decision.watch_progress is None


def test_a_refused_progress_document_warns_and_the_job_runs_on() -> None:
    j = job().launched(phase="Running").obj()
    decision = decide(j, running_pods(j), progress=ProgressProblem("default/mnist/progress.json: not JSON"))
    assert decision.status.phase == "Running" and not decision.finished
    assert decision.status.progress is not None
    assert decision.status.progress.error == "default/mnist/progress.json: not JSON"
    assert [e.reason for e in decision.events if e.type == "Warning"] == ["ProgressRefused"]


def test_progress_of_the_attempt_before_a_restart_is_not_this_attempts() -> None:
    j = job().launched(attempt=1, phase="Running").obj()
    decision = decide(j, running_pods(j, attempt=1), progress=progress_report(15, 3))
    assert decision.status.progress is None


def test_every_worker_is_told_where_progress_goes() -> None:
    decision = decide(job().spec(sharedVolume={"claimName": "c", "mountPath": "/data/"}).obj())
    for created_pod in decision.pods_to_create:
        assert env_of(created_pod)["TFMW_PROGRESS_PATH"] == "/data/progress.json"


# ---- status writes ----


def test_a_change_of_the_worker_counts_alone_waits_a_moment_after_a_write() -> None:
    j = job().workers(3).launched(phase="Pending").obj()
    j["status"] = decide(j, [pod(j, i).obj() for i in range(3)], now=at(19.5)).status.to_json()
    pods = [pod(j, 0).running().obj(), pod(j, 1).obj(), pod(j, 2).obj()]
    held = decide(j, pods, now=at(20), status_written_at=at(19.5))
    assert PatchStatus not in kinds(held) and held.status.ready_workers == "0/3"
    assert held.requeue_after == pytest.approx(0.5)
    due = decide(j, pods, now=at(20.5), status_written_at=at(19.5))
    assert PatchStatus in kinds(due) and due.status.ready_workers == "1/3"


def test_counts_are_written_at_once_when_nothing_was_written_lately_or_the_phase_moves() -> None:
    j = job().workers(2).launched(phase="Pending").obj()
    one_up = [pod(j, 0).running().obj(), pod(j, 1).obj()]
    assert PatchStatus in kinds(decide(j, one_up, now=at(20)))  # no write since the operator started
    assert PatchStatus in kinds(decide(j, one_up, now=at(20), status_written_at=at(18)))
    all_up = decide(j, running_pods(j), now=at(20), status_written_at=at(19.9))
    assert all_up.status.phase == "Running" and all_up.status.ready_workers == "2/2"


# ---- the folder check ----


def checked_pod(j: Json, index: int, image: str, ran: str | None = None) -> Json:
    """A running worker whose folder check ran `ran` (the spec's `image` unless said) and passed."""
    passed = pod(j, index).running().obj()
    passed["spec"]["initContainers"] = [{"name": "tfmw-folder-check", "image": image}]
    passed["status"]["initContainerStatuses"] = [
        {"name": "tfmw-folder-check", "image": ran or image, "state": {"terminated": {"exitCode": 0}}}
    ]
    return passed


def test_once_a_folder_check_passed_later_attempts_start_without_it() -> None:
    j = job().launched(phase="Pending").obj()
    check = "tfmw-operator:dev"
    passed = [pod(j, 0).running().obj(), checked_pod(j, 1, check)]
    # The controller counted worker 1's pass (its own pod, its own image: claim_checks).
    own = FolderReached("mnist", 1)
    decision = reconcile(
        observe(
            j,
            passed,
            NO_MARKER,
            NOW,
            service=build_service(parse_job(j)),
            spec=parse_job(j, check),
            claim_reached=own,
        )
    )
    checked = condition(decision, "SharedVolumeChecked")
    assert checked.true and "worker 1" in checked.message and "tfmw-shared" in checked.message
    restarting = job().launched(phase="Restarting").status(attempt=1).obj()
    restarting["status"]["conditions"] = [c.to_json() for c in decision.status.conditions]
    again = reconcile(
        observe(
            restarting,
            [],
            NO_MARKER,
            NOW,
            service=build_service(parse_job(j)),
            spec=parse_job(restarting, check),
            claim_reached=own,
        )
    )
    init = again.pods_to_create[0]["spec"].get("initContainers") or []
    assert [c["name"] for c in init] == []
    first = reconcile(observe(job().obj(), [], NO_MARKER, NOW, spec=parse_job(job().obj(), check)))
    assert [c["name"] for c in first.pods_to_create[0]["spec"]["initContainers"]] == ["tfmw-folder-check"]


def test_a_shared_volume_checked_condition_in_the_status_alone_skips_no_check() -> None:
    """Whoever may write the job's status could set it: only a pass the operator counted does."""
    check = "tfmw-operator:dev"
    restarting = job().launched(phase="Restarting").status(attempt=1).obj()
    restarting["status"]["conditions"] = [
        {"type": "SharedVolumeChecked", "status": "True", "reason": "FolderReached", "message": "forged"}
    ]
    again = reconcile(
        observe(
            restarting,
            [],
            NO_MARKER,
            NOW,
            service=build_service(parse_job(restarting)),
            spec=parse_job(restarting, check),
        )
    )
    assert [c["name"] for c in again.pods_to_create[0]["spec"]["initContainers"]] == ["tfmw-folder-check"]


def test_a_pass_by_another_image_or_not_counted_is_not_said_to_be_a_check() -> None:
    check = "tfmw-operator:dev"
    j = job().launched(phase="Pending").obj()
    service = build_service(parse_job(j))
    swapped = [pod(j, 0).running().obj(), checked_pod(j, 1, check, ran="tenant/exit-zero:1")]
    reached = FolderReached("mnist", 1)
    for pods, counted in ((swapped, reached), ([pod(j, 0).running().obj(), checked_pod(j, 1, check)], None)):
        decision = reconcile(
            observe(j, pods, NO_MARKER, NOW, service=service, spec=parse_job(j, check), claim_reached=counted)
        )
        assert decision.status.condition(ConditionType("SharedVolumeChecked")) is None


def test_a_job_on_a_claim_another_job_found_reaching_its_folder_starts_without_the_check() -> None:
    check = "tfmw-operator:dev"
    j = job().obj()
    reached = FolderReached("earlier", 1)
    decision = reconcile(observe(j, [], NO_MARKER, NOW, spec=parse_job(j, check), claim_reached=reached))
    assert all(not p["spec"].get("initContainers") for p in decision.pods_to_create)
    checked = condition(decision, "SharedVolumeChecked")
    assert checked.true and checked.reason == "ClaimReached"
    assert (
        "job earlier" in checked.message
        and "worker 1" in checked.message
        and "tfmw-shared" in checked.message
    )
    # With the check off, nothing is claimed about the folder.
    unchecked = reconcile(observe(j, [], NO_MARKER, NOW, spec=parse_job(j), claim_reached=reached))
    assert not any(c.type == "SharedVolumeChecked" for c in unchecked.status.conditions)


# A gang restarted in place (the in-pod supervisor) beside node exclusion and spec.minWorkers.


def _deleted(decision: Any) -> set[str]:
    return {n for a in decision.actions if isinstance(a, DeletePods) for n in a.names}


def test_a_survivor_on_a_node_kept_out_is_made_again_at_an_in_place_restart() -> None:
    """Worker 1's pod ends with a rule's nodeFault: its node is kept out, and worker 0 (a
    survivor) on that same node is deleted to be made again off it; the restart is in place."""
    j = (
        job()
        .commanded()
        .run_policy(nodeExclusion={})
        .rules({"action": "Restart", "onExitCodes": [42], "nodeFault": True})
        .launched(phase="Running")
        .obj()
    )
    pods = [
        pod(j, 0).running().on_node("node-a").obj(),
        pod(j, 1).running().on_node("node-a").obj(),
        pod(j, 2).running().on_node("node-b").obj(),
    ]
    decision = decide(
        j,
        pods,
        reports=(
            report(pods[0], "running", 0),
            report(pods[1], "exited", 0, 42),
            report(pods[2], "running", 0),
        ),
    )
    assert decision.status.history[0].restart == "InPlace"
    assert [e.node for e in decision.status.excluded_nodes] == ["node-a"]
    # Both pods on node-a are made again off it (worker 1 failed there); worker 2 runs on.
    assert _deleted(decision) == {"mnist-worker-0", "mnist-worker-1"}


def test_a_gang_running_smaller_restarts_by_re_creating_every_pod() -> None:
    """Its pods' TF_CONFIG names the smaller gang: none may restart in place into the whole one."""
    wrapper = job().workers(4).spec(minWorkers=2).commanded()
    j = wrapper.launched(attempt=1, phase="Restarting", restarts=1).condition("Restarting").obj()
    half = [
        pod(j, i, 1).on_node("node-a").running().obj() if i < 2 else pod(j, i, 1).unschedulable().obj()
        for i in range(4)
    ]
    resized = decide(j, half, now=at(600))
    assert resized.status.attempt_workers == 2
    j["status"] = resized.status.to_json()
    j["status"] = decide(j, now=at(605), reports=()).status.to_json()  # the smaller gang launched
    j["status"]["phase"] = "Running"
    pods = [pod(j, 0, 2).running().obj(), pod(j, 1, 2).running().obj()]
    restart = decide(
        j, pods, reports=(report(pods[0], "running", 2), report(pods[1], "exited", 2, 137)), now=at(700)
    )
    assert restart.status.attempt == 3 and restart.status.attempt_workers is None
    assert restart.status.history[0].workers == 2 and restart.status.history[0].restart is None
    assert _deleted(restart) == {"mnist-worker-0", "mnist-worker-1"}


def test_supervised_pods_wait_for_the_supervisor_to_be_placed() -> None:
    # The control file is written, and supervised pods made, only while the reports can be
    # read: storage that cannot be read holds the launch, and it is tried again.
    j = job().commanded("--epochs=3").obj()
    held = decide(j, reports=None, now=at(0))
    assert held.pods_to_create == () and not any(isinstance(a, WriteControl) for a in held.actions)
    assert held.requeue_after == pytest.approx(5)
    launched = decide(j, reports=(), now=at(0))
    assert len(launched.pods_to_create) == 2
    writes = [type(a) for a in launched.actions if isinstance(a, WriteControl | CreatePods)]
    assert writes == [WriteControl, CreatePods]  # the file first
    # A gang that re-creates its pods has no supervisor to wait for.
    assert len(decide(job().obj(), reports=None, now=at(0)).pods_to_create) == 2


def test_a_supervised_pod_made_again_alone_waits_for_readable_reports_as_a_launch_does() -> None:
    # Worker 1's pod was deleted in place (status.replacing) and is gone: it is made again only
    # while the reports, and the supervisor it will run, can be read.
    obj = job().commanded().launched(phase="Running").status(replacing=["worker-1"]).obj()
    survivor = pod(obj, 0).running().obj()
    held = decide(obj, [survivor], reports=None, now=at(30))
    assert held.pods_to_create == ()
    assert held.status.replacing == ("worker-1",)
    assert held.requeue_after == pytest.approx(5)
    made = decide(obj, [survivor], reports=(report(survivor, "running", 0),), now=at(30))
    assert [p["metadata"]["name"] for p in made.pods_to_create] == ["mnist-worker-1"]


def test_a_job_turning_running_is_decided_again_at_once_to_read_its_documents() -> None:
    # Progress written while the job was still Pending is read by the next reconcile, which the
    # shell runs at once, not at the document's next change (integration test_progress).
    pending = job().launched(phase="Pending").obj()
    running_pods = [pod(pending, i).running().obj() for i in range(2)]
    turned = decide(pending, running_pods, now=at(10))
    assert turned.status.phase == "Running" and turned.requeue_after == 0
    already = job().launched(phase="Running").obj()
    assert decide(already, [pod(already, i).running().obj() for i in range(2)], now=at(10)).requeue_after != 0
    unshared = job().without_shared_volume().launched(phase="Pending").obj()
    unshared_pods = [pod(unshared, i).running().obj() for i in range(2)]
    assert decide(unshared, unshared_pods, now=at(10)).requeue_after != 0
    # Only when a look found a document no reconcile read: else nothing waits to be read, and
    # the look that finds one triggers the job (storage/job_files.py).
    assert decide(pending, running_pods, now=at(10), unread_progress=False).requeue_after != 0


def test_a_pod_gone_before_its_exit_was_seen_is_judged_by_its_supervisors_report() -> None:
    """Evicted, worker 1's program saved and exited 42 (PreemptionCheckpointHandler), and its
    pod was gone before the operator saw the container's end: its supervisor's report keeps
    the code, so the rule on 42 decides (not counted), not the bare deletion (counted)."""
    j = (
        job()
        .commanded()
        .rules({"action": "RestartNotCounted", "onExitCodes": [42]})
        .launched(phase="Running")
    )
    obj = j.obj()
    survivor, gone = pod(obj, 0).running().obj(), pod(obj, 1).running().obj()
    reports = (report(survivor, "running", 0), report(gone, "exited", 0, 42))
    decision = decide(obj, [survivor], reports=reports)
    assert (decision.status.restarts, decision.status.restarts_not_counted) == (0, 1)
    record = decision.status.history[0]
    assert (record.cause, record.exit_code, record.restart) == ("PodDeleted", 42, "InPlace"), record
    # Without the report (or with an earlier attempt's), the deletion alone is judged: counted.
    for kept in (
        (report(survivor, "running", 0),),
        (report(survivor, "running", 0), report(gone, "exited", 1, 42)),
    ):
        counted = decide(obj, [survivor], reports=kept)
        assert (counted.status.restarts, counted.status.history[0].exit_code) == (1, None)


def test_a_pod_made_again_within_the_attempt_names_its_peers_by_their_own_hostnames() -> None:
    """Worker 0, late at the barrier of attempt 2, is made again (status.replacing): its
    TF_CONFIG names worker 1 as its pod made in attempt 1 is named, and worker 2 by its own
    name; the control file tells the survivors worker 0's new one."""
    j = job().commanded().workers(3).launched(attempt=2, phase="Restarting", replacing=["worker-0"]).obj()
    one, two = pod(j, 1, 1).running().obj(), pod(j, 2, 0).running().obj()
    one["spec"]["hostname"] = "worker-1-a1"
    decision = decide(j, [one, two], reports=(report(one, "waiting", 2), report(two, "waiting", 2)))
    (made,) = decision.pods_to_create
    assert made["spec"]["hostname"] == "worker-0-a2"
    assert json.loads(env_of(made)["TF_CONFIG"])["cluster"]["worker"] == [
        "worker-0-a2.mnist.default.svc:2222",
        "worker-1-a1.mnist.default.svc:2222",
        "mnist-worker-2.mnist.default.svc:2222",
    ]
    (control,) = [a for a in decision.actions if isinstance(a, WriteControl)]
    assert control.hosts == {"worker-0": "worker-0-a2", "worker-1": "worker-1-a1"}


def test_a_restart_in_place_that_keeps_every_pod_is_launched_in_the_decision_that_raises_it() -> None:
    """Worker 1's command was SIGKILLed, every pod runs on: the raise launches the new attempt
    too, so the restart costs two status writes (the raise, then Running), not three."""
    j = job().commanded().launched(phase="Running").obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).running().obj()]
    raised = decide(j, pods, reports=(report(pods[0], "running", 0), report(pods[1], "exited", 0, 137)))
    assert (raised.status.attempt, raised.status.launched_attempt) == (1, 1)
    assert (
        condition(raised, "Created").message == "attempt 1 restarted in place: 2 pods run on, 0 created again"
    )
    j["status"] = raised.status.to_json()
    waiting = (report(pods[0], "waiting", 1), report(pods[1], "waiting", 1))
    # The raise counted the pods as the new attempt has them: a barrier that takes longer than
    # COUNTS_WRITE_SECONDS costs no write either.
    for now in (20.5, 23):
        held = decide(j, pods, reports=waiting, now=at(now), status_written_at=at(20))
        assert held.status == raised.status and not held.events
    # A pod still going is made again for the new attempt: the launch waits for it to be gone.
    k = job().commanded().launched(phase="Running").obj()
    going = [pod(k, 0).running().obj(), pod(k, 1).running().deleting(15).obj()]
    deleted = decide(k, going, reports=(report(going[0], "running", 0), report(going[1], "running", 0)))
    assert (deleted.status.attempt, deleted.status.launched_attempt) == (1, 0)


def test_a_crash_looping_gang_restarted_in_place_still_backs_off_before_its_launch() -> None:
    """The second restart in a row of attempts that did not train waits out its backoff, as a
    re-created gang's launch does: the raise does not launch it, the decision after it waits."""
    j = job().commanded().launched(phase="Running").obj()
    pods = [pod(j, 0).running().obj(), pod(j, 1).running().obj()]
    first = decide(j, pods, reports=(report(pods[0], "running", 0), report(pods[1], "exited", 0, 137)))
    assert Milestone.RESTARTED in first.milestones and first.status.launched_attempt == 1
    j["status"] = first.status.to_json()
    again = (report(pods[0], "running", 1), report(pods[1], "exited", 1, 137))
    second = decide(j, pods, reports=again, now=at(22))
    assert (second.status.attempt, second.status.launched_attempt) == (2, 1)
    assert Milestone.RESTARTED not in second.milestones
    j["status"] = second.status.to_json()
    waiting = (report(pods[0], "waiting", 2), report(pods[1], "waiting", 2))
    held = decide(j, pods, reports=waiting, now=at(23))
    # 10 s from when the gang began restarting (20 s: the condition stayed true since).
    assert held.status.launched_attempt == 1 and held.requeue_after == pytest.approx(7)
    launched = decide(j, pods, reports=waiting, now=at(30))
    assert launched.status.launched_attempt == 2 and Milestone.RESTARTED in launched.milestones
