"""Reconcile scenarios: creation, restarts, status conditions."""

from __future__ import annotations

import pytest

from testkit.builders import (
    NOW,
    actions_of,
    advance,
    condition_types,
    job,
    pod,
    pods,
    replica,
    run,
    service,
    services,
    with_spec,
)
from tfjob.core.plan import CreatePod, CreateService, DeletePod, Plan

FAILED_NEVER = (
    "TFJob default/test-tfjob has failed because 1 Worker replica(s) failed. "
    "test-tfjob-worker-1 exited with code 1 (Error)."
)


class TestNormalPath:
    def test_one_worker_creates_one_pod_and_one_service(self) -> None:
        plan = run(job(Worker=replica(1)))
        assert [a.name for a in actions_of(plan, CreatePod)] == ["test-tfjob-worker-0"]
        assert [a.name for a in actions_of(plan, CreateService)] == ["test-tfjob-worker-0"]
        assert condition_types(plan) == [("Created", "True")]
        assert plan.status.start_time == "2026-11-30T12:00:00Z"

    def test_four_workers_two_ps_create_six_and_six(self) -> None:
        plan = run(job(Worker=replica(4), PS=replica(2)))
        assert len(actions_of(plan, CreatePod)) == 6
        assert len(actions_of(plan, CreateService)) == 6

    def test_pending_pods_create_nothing_new(self) -> None:
        observed = pods("worker", 4, "Pending") + pods("ps", 2, "Pending")
        plan = run(
            job(Worker=replica(4), PS=replica(2)),
            observed,
            services("worker", 4) + services("ps", 2),
        )
        assert plan.actions == []
        assert ("Running", "True") not in condition_types(plan)
        assert plan.status.replica_statuses["Worker"].active == 0

    def test_partially_created_job_gets_only_what_is_missing(self) -> None:
        observed = [pod("worker", 0), pod("worker", 2), pod("ps", 1)]
        plan = run(job(Worker=replica(4), PS=replica(2)), observed, [service("worker", 1)])
        assert sorted(a.name for a in actions_of(plan, CreatePod)) == [
            "test-tfjob-ps-0",
            "test-tfjob-worker-1",
            "test-tfjob-worker-3",
        ]
        assert len(actions_of(plan, CreateService)) == 5

    def test_all_running_is_running_with_active_counts(self) -> None:
        plan = run(job(Worker=replica(4), PS=replica(2)), pods("worker", 4) + pods("ps", 2))
        assert condition_types(plan) == [("Created", "True"), ("Running", "True")]
        assert plan.status.replica_statuses["Worker"].active == 4
        assert plan.status.replica_statuses["PS"].active == 2
        assert plan.status.conditions[-1].message == "TFJob default/test-tfjob is running."

    def test_orphan_pods_are_not_adopted(self) -> None:
        plan = run(job(Worker=replica(1)), [pod("worker", 0, owner="someone-else")])
        assert [a.name for a in actions_of(plan, CreatePod)] == ["test-tfjob-worker-0"]

    def test_same_inputs_same_outputs(self) -> None:
        tfjob = job(Worker=replica(3), PS=replica(1))
        observed = [pod("worker", 0, "Failed", exit_code=137)]
        assert run(tfjob, observed) == run(tfjob, observed)


@pytest.mark.parametrize(
    ("name", "specs", "observed", "expected"),
    [
        ("chief running", {"Chief": 1, "Worker": 2}, {"chief": ["Running"], "worker": ["Running"] * 2}, "Running"),
        ("chief succeeded", {"Chief": 1, "Worker": 2}, {"chief": ["Succeeded"], "worker": ["Running"] * 2}, "Succeeded"),
        ("chief failed", {"Chief": 1, "Worker": 2}, {"chief": ["Failed"], "worker": ["Running"] * 2}, "Failed"),
        ("chief running, workers failed", {"Chief": 1, "Worker": 2}, {"chief": ["Running"], "worker": ["Failed"] * 2}, "Failed"),
        ("chief running, workers succeeded", {"Chief": 1, "Worker": 2}, {"chief": ["Running"], "worker": ["Succeeded"] * 2}, "Running"),
        ("chief running, ps failed", {"Chief": 1, "PS": 1, "Worker": 1}, {"chief": ["Running"], "ps": ["Failed"], "worker": ["Running"]}, "Failed"),
        ("chief failed, workers succeeded", {"Chief": 1, "Worker": 2}, {"chief": ["Failed"], "worker": ["Succeeded"] * 2}, "Failed"),
        ("chief pending", {"Chief": 1, "Worker": 1}, {"chief": ["Pending"], "worker": ["Running"]}, None),
        ("master succeeded", {"Master": 1, "Worker": 1}, {"master": ["Succeeded"], "worker": ["Running"]}, "Succeeded"),
        ("workers running", {"Worker": 4}, {"worker": ["Running"] * 4}, "Running"),
        ("worker failed", {"Worker": 4}, {"worker": ["Running", "Failed", "Running", "Running"]}, "Failed"),
        ("worker 0 succeeded", {"Worker": 4}, {"worker": ["Succeeded", "Succeeded", "Running", "Running"]}, "Succeeded"),
        ("worker 0 running, others succeeded", {"Worker": 4}, {"worker": ["Running", "Succeeded", "Succeeded", "Succeeded"]}, "Running"),
        ("all workers succeeded", {"Worker": 4}, {"worker": ["Succeeded"] * 4}, "Succeeded"),
        ("2 succeeded, 2 failed", {"Worker": 4}, {"worker": ["Failed", "Failed", "Succeeded", "Succeeded"]}, "Failed"),
        ("evaluator failed", {"Chief": 1, "Evaluator": 1}, {"chief": ["Running"], "evaluator": ["Failed"]}, "Failed"),
        ("ps only never runs", {"PS": 2}, {"ps": ["Running"] * 2}, None),
        ("workers pending", {"Worker": 2}, {"worker": ["Pending"] * 2}, None),
        ("zero workers succeed at once", {"Worker": 0}, {}, "Succeeded"),
    ],
)  # fmt: skip
def test_status_table(
    name: str, specs: dict[str, int], observed: dict[str, list[str]], expected: str | None
) -> None:
    tfjob = job(**{t: replica(n) for t, n in specs.items()})
    observed_pods = [
        pod(rtype, i, phase, exit_code={"Succeeded": 0, "Failed": 1}.get(phase))
        for rtype, phases in observed.items()
        for i, phase in enumerate(phases)
    ]
    plan = run(tfjob, observed_pods)
    true_types = {t for t, s in condition_types(plan) if s == "True"}
    if expected is None:
        assert true_types == {"Created"}, name
    else:
        assert expected in true_types, name
    if expected in ("Succeeded", "Failed"):
        assert "Running" not in true_types, name
        assert not {"Succeeded", "Failed"} <= true_types, name  # never both


def test_all_workers_policy_waits_for_every_worker() -> None:
    tfjob = with_spec(job(Worker=replica(4)), success_policy="AllWorkers")
    half = [pod("worker", i, "Succeeded", exit_code=0) for i in (0, 1)] + [
        pod("worker", i) for i in (2, 3)
    ]
    assert ("Succeeded", "True") not in condition_types(run(tfjob, half))
    assert ("Running", "True") in condition_types(run(tfjob, half))
    done = pods("worker", 4, "Succeeded", exit_code=0)
    assert ("Succeeded", "True") in condition_types(run(tfjob, done))


@pytest.mark.parametrize(
    ("phase", "exit_code", "completed"),
    [
        ("Succeeded", 0, True),
        ("Succeeded", 1, False),
        ("Succeeded", None, False),  # no container status: does not count
        ("Running", None, False),
        ("Failed", 0, False),
    ],
)
def test_worker0_completed(phase: str, exit_code: int | None, completed: bool) -> None:
    observed = [pod("worker", 0, phase, exit_code=exit_code), pod("worker", 1)]
    plan = run(job(Worker=replica(2)), observed)
    assert (("Succeeded", "True") in condition_types(plan)) is completed


def test_chief_success_with_failed_worker_is_only_succeeded() -> None:
    """(better) upstream would record both Succeeded and Failed here."""
    observed = [pod("chief", 0, "Succeeded", exit_code=0), pod("worker", 0, "Failed", exit_code=1)]
    plan = run(job(Chief=replica(1), Worker=replica(1)), observed)
    true_types = {t for t, s in condition_types(plan) if s == "True"}
    assert "Succeeded" in true_types
    assert "Failed" not in true_types


def test_succeeded_message_event_and_running_flipped() -> None:
    tfjob = job(Worker=replica(1))
    running = run(tfjob, [pod("worker", 0)])
    plan = run(advance(tfjob, running), [pod("worker", 0, "Succeeded", exit_code=0)])
    assert condition_types(plan) == [
        ("Created", "True"),
        ("Running", "False"),
        ("Succeeded", "True"),
    ]
    assert plan.status.conditions[-1].message == "TFJob default/test-tfjob successfully completed."
    assert ("Normal", "TFJobSucceeded") in [(e.type, e.reason) for e in plan.events]
    assert plan.status.completion_time == "2026-11-30T12:00:00Z"


def test_failed_under_never_names_the_replica_and_exit_code() -> None:
    tfjob = job(Worker=replica(2, restart="Never"))
    plan = run(tfjob, [pod("worker", 0), pod("worker", 1, "Failed", exit_code=1, reason="Error")])
    failed = plan.status.conditions[-1]
    assert (failed.type, failed.status, failed.reason) == ("Failed", "True", "TFJobFailed")
    assert failed.message == FAILED_NEVER
    assert actions_of(plan, DeletePod) == []


def test_failed_message_carries_oom_killed() -> None:
    observed = [pod("worker", 0, "Failed", exit_code=137, reason="OOMKilled")]
    plan = run(job(Worker=replica(1, restart="Never")), observed)
    assert plan.status.conditions[-1].message.endswith(
        "test-tfjob-worker-0 exited with code 137 (OOMKilled)."
    )


def test_dynamic_worker_failure_does_not_fail_the_job() -> None:
    tfjob = with_spec(job(Worker=replica(2), PS=replica(1)), enable_dynamic_worker=True)
    plan = run(tfjob, [pod("worker", 0), pod("worker", 1, "Failed", exit_code=1), pod("ps", 0)])
    assert "Failed" not in {t for t, _ in condition_types(plan)}


class TestRestarts:
    @pytest.mark.parametrize(
        ("policy", "exit_code"),
        [("ExitCode", 130), ("ExitCode", 137), ("ExitCode", 143), ("ExitCode", None), ("OnFailure", 1), ("Always", 1)],
    )  # fmt: skip
    def test_failed_pod_is_deleted_and_job_restarting(
        self, policy: str, exit_code: int | None
    ) -> None:
        observed = [pod("worker", 0), pod("worker", 1, "Failed", exit_code=exit_code)]
        plan = run(job(Worker=replica(2, restart=policy)), observed)
        assert [a.name for a in actions_of(plan, DeletePod)] == ["test-tfjob-worker-1"]
        assert condition_types(plan)[-1] == ("Restarting", "True")
        assert (
            plan.status.conditions[-1].message
            == "job test-tfjob is restarting because Worker replica(s) failed."
        )
        assert ("Warning", "TFJobRestarting") in [(e.type, e.reason) for e in plan.events]
        assert plan.status.restart_count == 1
        assert plan.status_first  # the count must be stored before the pod is gone

    def test_exit_code_1_under_exit_code_fails_with_exit_code_in_message(self) -> None:
        plan = run(
            job(Worker=replica(1, restart="ExitCode")),
            [pod("worker", 0, "Failed", exit_code=1, reason="Error")],
        )
        failed = plan.status.conditions[-1]
        assert (failed.type, failed.reason) == ("Failed", "TFJobFailed")
        assert failed.message == (
            'job "test-tfjob" is failing because "Worker" replica(s) failed. '
            "test-tfjob-worker-0 exited with code 1 (Error)."
        )
        assert ("Warning", "TFJobFailed") in [(e.type, e.reason) for e in plan.events]
        assert actions_of(plan, DeletePod) == []

    def test_restart_then_recreate_then_running_replaces_restarting(self) -> None:
        tfjob = job(Worker=replica(1, restart="ExitCode"))
        first = run(tfjob, [pod("worker", 0, "Failed", exit_code=137)])
        tfjob = advance(tfjob, first)
        recreate = run(tfjob, [])  # the old pod is gone
        assert [a.name for a in actions_of(recreate, CreatePod)] == ["test-tfjob-worker-0"]
        assert condition_types(recreate)[-1] == ("Restarting", "True")
        tfjob = advance(tfjob, recreate)
        running = run(tfjob, [pod("worker", 0)])
        assert condition_types(running) == [("Created", "True"), ("Running", "True")]

    def test_terminating_pod_fills_its_slot(self) -> None:
        plan = run(
            job(Worker=replica(1, restart="ExitCode")),
            [pod("worker", 0, "Failed", exit_code=137, terminating=True)],
        )
        assert actions_of(plan, CreatePod) == []
        assert actions_of(plan, DeletePod) == []

    def test_evicted_running_pod_is_not_a_failure_under_exit_code(self) -> None:
        """(better) #1560/#2124: an evicted or deleted running pod is replaced, not fatal."""
        plan = run(
            job(Worker=replica(2, restart="ExitCode")),
            [pod("worker", 0), pod("worker", 1, terminating=True)],
        )
        assert "Failed" not in {t for t, _ in condition_types(plan)}
        gone = run(job(Worker=replica(2, restart="ExitCode")), [pod("worker", 0)])
        assert [a.name for a in actions_of(gone, CreatePod)] == ["test-tfjob-worker-1"]

    def test_terminating_running_pod_fails_the_job_under_never(self) -> None:
        plan = run(job(Worker=replica(2)), [pod("worker", 0), pod("worker", 1, terminating=True)])
        assert ("Failed", "True") in condition_types(plan)

    def test_deleted_pod_is_recreated_even_under_never(self) -> None:
        plan = run(job(Worker=replica(2)), [pod("worker", 0)], services("worker", 2))
        assert [a.name for a in actions_of(plan, CreatePod)] == ["test-tfjob-worker-1"]

    def test_never_failure_while_another_type_restarts_fails_the_job(self) -> None:
        """(better) upstream would stay Restarting forever (#2044 family)."""
        tfjob = job(Worker=replica(1, restart="ExitCode"), PS=replica(1, restart="Never"))
        restarting = run(tfjob, [pod("worker", 0, "Failed", exit_code=137), pod("ps", 0)])
        tfjob = advance(tfjob, restarting)
        plan = run(tfjob, [pod("worker", 0, "Pending"), pod("ps", 0, "Failed", exit_code=1)])
        assert ("Failed", "True") in condition_types(plan)


def test_exited_with_code_event() -> None:
    plan = run(
        job(Worker=replica(1, restart="ExitCode")), [pod("worker", 0, "Failed", exit_code=137)]
    )
    assert (
        "Normal",
        "ExitedWithCode",
        "Pod: default.test-tfjob-worker-0 exited with code 137",
    ) in [(e.type, e.reason, e.message) for e in plan.events]


class TestScaling:
    def test_scale_down_deletes_surplus_pods_and_services(self) -> None:
        tfjob = with_spec(job(Worker=replica(2), PS=replica(1)), enable_dynamic_worker=True)
        plan = run(
            tfjob, pods("worker", 4) + pods("ps", 1), services("worker", 4) + services("ps", 1)
        )
        assert sorted(a.name for a in plan.actions) == [
            "test-tfjob-worker-2",
            "test-tfjob-worker-2",
            "test-tfjob-worker-3",
            "test-tfjob-worker-3",
        ]

    def test_scale_up_creates_missing_indices(self) -> None:
        plan: Plan = run(job(Worker=replica(4)), pods("worker", 2), services("worker", 2))
        assert [a.name for a in actions_of(plan, CreatePod)] == [
            "test-tfjob-worker-2",
            "test-tfjob-worker-3",
        ]


def test_now_is_an_input() -> None:
    assert run(job(Worker=replica(1)), now=NOW).status.start_time == "2026-11-30T12:00:00Z"
