"""Run policies: backoffLimit, activeDeadlineSeconds, TTL, cleanPodPolicy, suspend,
managedBy, and invalid jobs."""

from __future__ import annotations

import msgspec
import pytest

from testkit.builders import (
    actions_of,
    advance,
    condition_types,
    job,
    later,
    pod,
    pods,
    replica,
    run,
    services,
)
from tfjob.api.observed import ContainerState, ContainerStatus, Terminated, Waiting
from tfjob.core.cleanup import FINISHING_GRACE_SECONDS
from tfjob.core.plan import CreatePod, CreateService, DeleteJob, DeletePod, DeleteService

BACKOFF = "Job test-tfjob has failed because it has reached the specified backoff limit"
DEADLINE = "Job test-tfjob has failed because it was active longer than specified deadline"


def finished_status(
    kind: str = "Succeeded", completed: str = "2026-11-30T12:00:00Z"
) -> dict[str, object]:
    return {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TFJobCreated"},
            {"type": kind, "status": "True", "reason": f"TFJob{kind}"},
        ],
        "startTime": "2026-11-30T11:00:00Z",
        "completionTime": completed,
    }


class TestBackoffLimit:
    def test_in_place_restarts_reaching_the_limit_fail_the_job(self) -> None:
        tfjob = job(
            Worker=replica(4, restart="OnFailure"),
            run_policy={"backoffLimit": 4, "cleanPodPolicy": "All"},
        )
        plan = run(tfjob, pods("worker", 4, restarts=1), services("worker", 4))
        failed = plan.status.conditions[-1]
        assert (failed.type, failed.reason, failed.message) == ("Failed", "TFJobFailed", BACKOFF)
        assert len(actions_of(plan, DeletePod)) == 4  # cleanPodPolicy All
        assert len(actions_of(plan, DeleteService)) == 4

    def test_cleanup_policy_none_is_honoured_on_backoff(self) -> None:
        """(better) #3419: upstream deleted every pod regardless of cleanPodPolicy."""
        tfjob = job(Worker=replica(4, restart="OnFailure"), run_policy={"backoffLimit": 4})
        plan = run(tfjob, pods("worker", 4, restarts=1))
        assert plan.status.conditions[-1].message == BACKOFF
        assert plan.actions == []

    @pytest.mark.parametrize(
        ("limit", "restarts", "fails"), [(0, 0, False), (0, 1, True), (3, 2, False), (3, 3, True)]
    )
    def test_past_backoff_limit(self, limit: int, restarts: int, fails: bool) -> None:
        tfjob = job(Worker=replica(1, restart="OnFailure"), run_policy={"backoffLimit": limit})
        plan = run(tfjob, [pod("worker", 0, restarts=restarts)])
        assert (("Failed", "True") in condition_types(plan)) is fails

    def test_never_replicas_restart_counts_are_ignored(self) -> None:
        tfjob = job(Worker=replica(1, restart="Never"), run_policy={"backoffLimit": 1})
        assert ("Failed", "True") not in condition_types(run(tfjob, [pod("worker", 0, restarts=5)]))

    def test_recreated_pods_count_and_the_count_survives_in_status(self) -> None:
        """(better) #2342/#1589: ExitCode recreate loops are bounded by backoffLimit."""
        tfjob = job(Worker=replica(1, restart="ExitCode"), run_policy={"backoffLimit": 2})
        first = run(tfjob, [pod("worker", 0, "Failed", exit_code=137)])
        assert [a.name for a in actions_of(first, DeletePod)] == ["test-tfjob-worker-0"]
        assert first.status.restart_count == 1
        # A fresh operator sees only the stored job and the next failed pod.
        again = pod("worker", 0, "Failed", exit_code=137, uid="recreated")
        second = run(advance(tfjob, first), [again])
        assert second.status.conditions[-1].message == BACKOFF
        assert actions_of(second, DeletePod) == []


class TestCountOnce:
    """A failure counts once whatever the API answers: the status write that counts it
    also records the pod's UID, so the same failed pod seen again (its DELETE failed
    with 429, or the operator crashed before sending it) is only deleted again."""

    def tfjob(self) -> object:
        return job(Worker=replica(2, restart="ExitCode"), run_policy={"backoffLimit": 2})

    def test_a_failed_pod_seen_again_is_deleted_but_not_counted_again(self) -> None:
        tfjob = self.tfjob()
        failed = pod("worker", 1, "Failed", exit_code=130)
        observed = [pod("worker", 0), failed]
        first = run(tfjob, observed, services("worker", 2))  # type: ignore[arg-type]
        assert first.status_first and first.status.restart_count == 1
        assert first.status.counted_pods == [failed.metadata.uid]
        # The DELETE was refused: the same pod is observed again, with the stored status.
        second = run(advance(tfjob, first), observed, services("worker", 2))  # type: ignore[arg-type]
        assert [a.name for a in actions_of(second, DeletePod)] == ["test-tfjob-worker-1"]
        assert second.status.restart_count == 1
        assert ("Failed", "True") not in condition_types(second)
        assert not second.status_changed
        assert "TFJobRestarting" not in [e.reason for e in second.events]

    def test_an_evicted_pod_is_one_restart_though_the_kubelet_counts_its_lost_container(
        self,
    ) -> None:
        """The kubelet marks an evicted pod's container lost: waiting, lastState
        ContainerStatusUnknown, restartCount 1 (as kubelet v1.36 writes it)."""
        lost = ContainerStatus(
            name="tensorflow",
            restart_count=1,
            state=ContainerState(waiting=Waiting(reason="ContainerCreating")),
            last_state=ContainerState(
                terminated=Terminated(exit_code=137, reason="ContainerStatusUnknown")
            ),
        )
        evicted = pod("worker", 1, "Failed", reason="Evicted")
        evicted = msgspec.structs.replace(
            evicted,
            status=msgspec.structs.replace(
                evicted.status, reason="Evicted", container_statuses=(lost,)
            ),
        )
        plan = run(self.tfjob(), [pod("worker", 0), evicted], services("worker", 2))  # type: ignore[arg-type]
        assert [a.name for a in actions_of(plan, DeletePod)] == ["test-tfjob-worker-1"]
        assert plan.status.restart_count == 1

    def test_the_counted_uid_is_forgotten_once_the_pod_is_gone(self) -> None:
        tfjob = self.tfjob()
        failed = pod("worker", 1, "Failed", exit_code=130)
        first = run(tfjob, [pod("worker", 0), failed], services("worker", 2))  # type: ignore[arg-type]
        replaced = [pod("worker", 0), pod("worker", 1, uid="recreated")]
        second = run(advance(tfjob, first), replaced, services("worker", 2))  # type: ignore[arg-type]
        assert second.status.counted_pods == [] and second.status.restart_count == 1

    def test_a_second_real_failure_still_reaches_the_limit(self) -> None:
        tfjob = self.tfjob()
        first = run(tfjob, [pod("worker", 0), pod("worker", 1, "Failed", exit_code=130)])  # type: ignore[arg-type]
        again = pod("worker", 1, "Failed", exit_code=130, uid="recreated")
        second = run(advance(tfjob, first), [pod("worker", 0), again])  # type: ignore[arg-type]
        assert second.status.conditions[-1].message == BACKOFF


class TestActiveDeadline:
    def tfjob(self, **policy: object) -> object:
        return job(Worker=replica(2), run_policy={"activeDeadlineSeconds": 10, **policy})

    def test_deadline_arms_a_requeue_from_the_start(self) -> None:
        plan = run(self.tfjob())  # type: ignore[arg-type]
        assert plan.requeue_after == 10

    def test_before_the_deadline_requeues_for_the_rest(self) -> None:
        started = advance(self.tfjob(), run(self.tfjob()))  # type: ignore[arg-type]
        plan = run(started, pods("worker", 2), services("worker", 2), now=later(4))
        assert plan.requeue_after == 6
        assert ("Failed", "True") not in condition_types(plan)

    def test_at_the_deadline_the_job_fails_and_policy_running_cleans_up(self) -> None:
        started = advance(self.tfjob(cleanPodPolicy="Running"), run(self.tfjob()))  # type: ignore[arg-type]
        observed = [pod("worker", 0), pod("worker", 1, "Succeeded", exit_code=0)]
        plan = run(started, observed, services("worker", 2), now=later(10))
        assert plan.status.conditions[-1].message == DEADLINE
        assert [a.name for a in actions_of(plan, DeletePod)] == ["test-tfjob-worker-0"]
        assert plan.requeue_after is None

    def test_no_deadline_keeps_pods(self) -> None:
        tfjob = job(Worker=replica(2), status={"startTime": "2026-11-30T00:00:00Z"})
        plan = run(tfjob, pods("worker", 2), services("worker", 2), now=later(10**6))
        assert plan.actions == [] and plan.requeue_after is None


class TestTTL:
    @pytest.mark.parametrize(
        ("ttl", "completed", "deleted", "requeue"),
        [
            (3, "2026-11-30T11:59:59Z", False, 2.0),
            (3, "2026-11-30T11:59:57Z", True, None),
            (0, "2026-11-30T12:00:00Z", True, None),
            (180, "2026-11-29T12:00:00Z", True, None),
        ],
    )
    def test_ttl_after_finished(
        self, ttl: int, completed: str, deleted: bool, requeue: float | None
    ) -> None:
        for kind in ("Succeeded", "Failed"):
            tfjob = job(
                Worker=replica(1),
                run_policy={"ttlSecondsAfterFinished": ttl},
                status=finished_status(kind, completed),
            )
            plan = run(tfjob)
            assert bool(actions_of(plan, DeleteJob)) is deleted
            assert plan.requeue_after == requeue

    def test_no_ttl_keeps_the_job(self) -> None:
        plan = run(job(Worker=replica(1), status=finished_status()))
        assert plan.actions == [] and plan.requeue_after is None

    def test_suspended_finished_job_without_completion_time_is_kept(self) -> None:
        status = finished_status()
        status.pop("completionTime")
        plan = run(
            job(
                Worker=replica(1),
                run_policy={"ttlSecondsAfterFinished": 0, "suspend": True},
                status=status,
            )
        )
        assert actions_of(plan, DeleteJob) == []

    def test_ttl_requeue_is_armed_when_the_job_finishes(self) -> None:
        tfjob = job(Worker=replica(1), run_policy={"ttlSecondsAfterFinished": 30})
        plan = run(tfjob, [pod("worker", 0, "Succeeded", exit_code=0)])
        assert ("Succeeded", "True") in condition_types(plan)
        assert plan.requeue_after == 30


class TestCleanPodPolicy:
    observed = [
        pod("worker", 0, "Succeeded", exit_code=0),
        pod("worker", 1),
        pod("ps", 0),
        pod("ps", 1, "Pending"),
    ]

    @pytest.mark.parametrize(
        ("policy", "deleted"),
        [
            (
                "All",
                [
                    "test-tfjob-ps-0",
                    "test-tfjob-ps-1",
                    "test-tfjob-worker-0",
                    "test-tfjob-worker-1",
                ],
            ),
            ("Running", ["test-tfjob-ps-0", "test-tfjob-ps-1", "test-tfjob-worker-1"]),
            ("None", []),
            (None, []),  # the default is None
        ],
    )
    def test_finished_job_cleanup(self, policy: str | None, deleted: list[str]) -> None:
        run_policy = {"cleanPodPolicy": policy} if policy else {}
        tfjob = job(
            Worker=replica(2), PS=replica(2), run_policy=run_policy, status=finished_status()
        )
        # Past the grace Running gives a succeeded job's running pods.
        finished_a_while_ago = later(FINISHING_GRACE_SECONDS)
        plan = run(
            tfjob, self.observed, services("worker", 2) + services("ps", 2), finished_a_while_ago
        )
        assert sorted(a.name for a in actions_of(plan, DeletePod)) == deleted
        assert sorted(a.name for a in actions_of(plan, DeleteService)) == deleted

    def test_services_without_pods_are_left_alone(self) -> None:
        tfjob = job(
            Worker=replica(2), run_policy={"cleanPodPolicy": "All"}, status=finished_status()
        )
        plan = run(tfjob, [pod("worker", 0, "Succeeded", exit_code=0)], services("worker", 2))
        assert [a.name for a in actions_of(plan, DeleteService)] == ["test-tfjob-worker-0"]

    def test_finished_job_never_gets_new_pods(self) -> None:
        plan = run(job(Worker=replica(2), status=finished_status()))
        assert actions_of(plan, CreatePod) == [] and actions_of(plan, CreateService) == []

    def test_succeeded_job_folds_active_into_succeeded(self) -> None:
        status = finished_status()
        status["replicaStatuses"] = {"PS": {"active": 2}, "Worker": {"succeeded": 1, "active": 1}}
        plan = run(job(Worker=replica(2), PS=replica(2), status=status))
        assert (
            plan.status.replica_statuses["PS"].active,
            plan.status.replica_statuses["PS"].succeeded,
        ) == (0, 2)
        assert plan.status.replica_statuses["Worker"].succeeded == 2

    def test_chief_success_lets_running_replicas_end_by_themselves_first(self) -> None:
        """(better) cleanPodPolicy Running waits FINISHING_GRACE_SECONDS after success: a
        worker finishing its last step keeps its pod (and log); a PS still serving then
        goes. Upstream deletes both in the pass after the success."""
        tfjob = job(
            Chief=replica(1), PS=replica(1), Worker=replica(1),
            run_policy={"cleanPodPolicy": "Running"},
        )  # fmt: skip
        chief = pod("chief", 0, "Succeeded", exit_code=0)
        succeeded = run(tfjob, [chief, pod("ps", 0), pod("worker", 0)])
        assert ("Succeeded", "True") in condition_types(succeeded)
        assert actions_of(succeeded, DeletePod) == []
        assert actions_of(succeeded, CreateService) == []
        assert succeeded.requeue_after == FINISHING_GRACE_SECONDS

        stored = advance(tfjob, succeeded)
        finished_worker = pod("worker", 0, "Succeeded", exit_code=0)
        meanwhile = run(stored, [chief, pod("ps", 0), finished_worker], now=later(2))
        assert actions_of(meanwhile, DeletePod) == []
        assert meanwhile.requeue_after == FINISHING_GRACE_SECONDS - 2

        after = run(stored, [chief, pod("ps", 0), finished_worker], now=later(5))
        assert [a.name for a in actions_of(after, DeletePod)] == ["test-tfjob-ps-0"]

    def test_pending_pods_of_a_succeeded_job_go_at_once(self) -> None:
        tfjob = job(Chief=replica(1), PS=replica(1), run_policy={"cleanPodPolicy": "Running"})
        chief = pod("chief", 0, "Succeeded", exit_code=0)
        plan = run(tfjob, [chief, pod("ps", 0, "Pending")])
        assert [a.name for a in actions_of(plan, DeletePod)] == ["test-tfjob-ps-0"]
        assert plan.requeue_after is None

    def test_a_failed_job_stops_its_running_pods_at_once(self) -> None:
        tfjob = job(Worker=replica(2), run_policy={"cleanPodPolicy": "Running"})
        failed = run(tfjob, [pod("worker", 0, "Failed", exit_code=1), pod("worker", 1)])
        assert ("Failed", "True") in condition_types(failed)
        assert [a.name for a in actions_of(failed, DeletePod)] == ["test-tfjob-worker-1"]


class TestSuspend:
    def test_created_suspended_makes_nothing(self) -> None:
        plan = run(job(Worker=replica(2), run_policy={"suspend": True}))
        assert plan.actions == []
        assert condition_types(plan) == [("Created", "True"), ("Suspended", "True")]
        assert plan.status.start_time is None

    def test_suspending_a_running_job_deletes_everything_and_keeps_start_time(self) -> None:
        tfjob = job(Worker=replica(2), run_policy={"cleanPodPolicy": "None"})
        running = run(tfjob, pods("worker", 2), services("worker", 2))
        suspended = job(Worker=replica(2), run_policy={"suspend": True, "cleanPodPolicy": "None"})
        suspended = advance(suspended, running)
        plan = run(suspended, pods("worker", 2), services("worker", 2), now=later(60))
        assert len(actions_of(plan, DeletePod)) == 2 and len(actions_of(plan, DeleteService)) == 2
        assert condition_types(plan) == [
            ("Created", "True"),
            ("Running", "False"),
            ("Suspended", "True"),
        ]
        assert plan.status.conditions[1].reason == "TFJobSuspended"
        assert plan.status.replica_statuses["Worker"].active == 0
        assert plan.status.start_time == running.status.start_time

    def test_resume_recreates_and_resets_start_time(self) -> None:
        tfjob = job(Worker=replica(2), run_policy={"suspend": True})
        suspended = run(tfjob)
        resumed_job = advance(job(Worker=replica(2), run_policy={"suspend": False}), suspended)
        plan = run(resumed_job, now=later(100))
        assert len(actions_of(plan, CreatePod)) == 2
        assert condition_types(plan) == [("Created", "True"), ("Suspended", "False")]
        assert plan.status.conditions[-1].reason == "TFJobResumed"
        assert plan.status.start_time == "2026-11-30T12:01:40Z"
        running = run(
            advance(resumed_job, plan), pods("worker", 2), services("worker", 2), now=later(101)
        )
        assert condition_types(running) == [
            ("Created", "True"),
            ("Suspended", "False"),
            ("Running", "True"),
        ]

    def test_finished_job_stays_finished_when_suspended(self) -> None:
        tfjob = job(Worker=replica(1), run_policy={"suspend": True}, status=finished_status())
        plan = run(tfjob, [pod("worker", 0, "Succeeded", exit_code=0)])
        assert "Suspended" not in {t for t, _ in condition_types(plan)}


class TestManagedBy:
    @pytest.mark.parametrize("manager", ["kueue.x-k8s.io/multikueue"])
    def test_other_manager_means_nothing_is_touched(self, manager: str) -> None:
        plan = run(job(Worker=replica(2), run_policy={"managedBy": manager}))
        assert plan.actions == [] and plan.events == [] and not plan.status_changed
        assert plan.status.conditions == []

    def test_our_manager_value_reconciles(self) -> None:
        plan = run(
            job(Worker=replica(1), run_policy={"managedBy": "kubeflow.org/training-operator"})
        )
        assert len(actions_of(plan, CreatePod)) == 1


def test_invalid_job_fails_with_a_message_naming_the_field() -> None:
    bad = job(
        Worker={
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}},
        }
    )
    plan = run(bad)
    assert plan.actions == []
    failed = plan.status.conditions[-1]
    assert (failed.type, failed.reason) == ("Failed", "InvalidTFJobSpec")
    assert "spec.tfReplicaSpecs[Worker].template.spec.containers" in failed.message
    assert "tensorflow" in failed.message
    assert ("Warning", "TFJobFailedValidation") in [(e.type, e.reason) for e in plan.events]
    # Seen again, nothing changes.
    assert not run(advance(bad, plan)).status_changed


def test_deadline_never_fires_early_with_whole_second_timestamps() -> None:
    """startTime is rounded up: a job started at .6 s with a 2 s deadline must run 2 s."""
    tfjob = job(Worker=replica(1), run_policy={"activeDeadlineSeconds": 2})
    first = run(tfjob, now=later(0.6))
    assert first.status.start_time == "2026-11-30T12:00:01Z"
    assert first.requeue_after == 2.4
    started = advance(tfjob, first)
    assert ("Failed", "True") not in condition_types(
        run(started, [pod("worker", 0)], now=later(2.5))
    )
    assert ("Failed", "True") in condition_types(run(started, [pod("worker", 0)], now=later(3.0)))
