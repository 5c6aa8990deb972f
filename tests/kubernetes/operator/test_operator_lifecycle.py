"""A TFJob's life as a user watches it: Running, Succeeded, Failed, restarts,
clean-up, deletion, deadlines, TTL, suspend/resume and managedBy.

On the test cluster (testkit/cluster.py): kube-scheduler binds the pods to a
kwok node, kwok runs them and ends each one with the exit code the test asks for
(``_end``), and the garbage collector removes what a deleted job owned. Only the
restart test, which needs a replacement pod held Pending, plays the kubelet itself
(FakeKubelet, with no node to bind to), and the late-kubelet test plays a pod's
failure while kwok is frozen (``Cluster.frozen``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from testkit.cluster import EXIT_CODE_ANNOTATION, REASON_ANNOTATION, Cluster, Nodes
from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators, RunningOperator, replica


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _uids(jobs: Jobs) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in jobs.pods().items()}


def _run_all(kubelet: FakeKubelet, jobs: Jobs, names: set[str]) -> None:
    jobs.wait_pods(names)
    for name in sorted(names):
        kubelet.run(jobs.namespace, name)


@pytest.fixture
def room(nodes: Nodes) -> Nodes:
    """One kwok node with room for every pod of these tests."""
    nodes.add(1)
    return nodes


def _running(jobs: Jobs, names: set[str]) -> None:
    """Until exactly these pods exist, each bound by the scheduler and Running on kwok."""

    def all_running() -> bool:
        pods = jobs.wait_pods(names)
        return all(
            p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"
            for p in pods.values()
        )

    wait_for(all_running, message=f"pods {sorted(names)} bound and Running")


def _end(jobs: Jobs, name: str, exit_code: int, reason: str = "") -> None:
    """Have kwok end the pod's containers with this exit code (and reason)."""
    from lightkube.resources.core_v1 import Pod

    annotations = {EXIT_CODE_ANNOTATION: str(exit_code)}
    if reason:
        annotations[REASON_ANNOTATION] = reason
    jobs.kube.patch(Pod, name, {"metadata": {"annotations": annotations}}, namespace=jobs.namespace)


def test_a_job_whose_pods_run_is_running(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create("run", {"Worker": replica(2), "PS": replica(1)})
    _running(jobs, {"run-worker-0", "run-worker-1", "run-ps-0"})
    running = jobs.wait_condition("run", "Running")
    assert running["reason"] == "TFJobRunning"
    assert running["message"] == f"TFJob {jobs.namespace}/run is running."
    wait_for(
        lambda: (
            jobs.status("run")["replicaStatuses"] == {"PS": {"active": 1}, "Worker": {"active": 2}}
        )
    )


def test_the_chief_decides_success(operator: RunningOperator, jobs: Jobs, room: Nodes) -> None:
    jobs.create("chief", {"Chief": replica(1), "Worker": replica(2)})
    _running(jobs, {"chief-chief-0", "chief-worker-0", "chief-worker-1"})
    jobs.wait_condition("chief", "Running")
    _end(jobs, "chief-worker-0", 0)  # a worker finishing decides nothing
    time.sleep(0.5)
    assert jobs.condition("chief", "Succeeded") is None
    _end(jobs, "chief-chief-0", 0)
    done = jobs.wait_condition("chief", "Succeeded")
    assert done["message"] == f"TFJob {jobs.namespace}/chief successfully completed."
    conditions = jobs.conditions("chief")
    assert ("Running", "False", "TFJobRunning") in conditions
    assert jobs.status("chief")["completionTime"]
    assert not any(kind == "Failed" for kind, _, _ in conditions)


def test_without_a_chief_worker_0_decides_success(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create("w0", {"Worker": replica(3)})
    _running(jobs, {"w0-worker-0", "w0-worker-1", "w0-worker-2"})
    jobs.wait_condition("w0", "Running")
    _end(jobs, "w0-worker-0", 0)
    jobs.wait_condition("w0", "Succeeded")
    # Succeeded folds the still-active workers into succeeded
    wait_for(lambda: jobs.status("w0")["replicaStatuses"] == {"Worker": {"succeeded": 3}})


def test_all_workers_success_policy_waits_for_every_worker(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create("all", {"Worker": replica(2)}, successPolicy="AllWorkers")
    _running(jobs, {"all-worker-0", "all-worker-1"})
    jobs.wait_condition("all", "Running")
    _end(jobs, "all-worker-0", 0)
    time.sleep(0.5)
    assert jobs.condition("all", "Succeeded") is None
    assert jobs.condition("all", "Running") is not None
    _end(jobs, "all-worker-1", 0)
    jobs.wait_condition("all", "Succeeded")


def test_a_failed_replica_under_never_fails_the_job_with_its_exit_code(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create("never", {"Worker": replica(2)})
    _running(jobs, {"never-worker-0", "never-worker-1"})
    jobs.wait_condition("never", "Running")
    _end(jobs, "never-worker-1", 3, "Error")
    failed = jobs.wait_condition("never", "Failed")
    assert failed["reason"] == "TFJobFailed"
    assert failed["message"].startswith(
        f"TFJob {jobs.namespace}/never has failed because 1 Worker replica(s) failed."
    )
    assert "never-worker-1 exited with code 3 (Error)" in failed["message"]
    assert set(jobs.pods()) == {"never-worker-0", "never-worker-1"}  # nothing restarted


def test_exit_code_137_restarts_the_pod_then_the_job_runs_again(
    operator: RunningOperator, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    jobs.create("retry", {"Chief": replica(1, restart_policy="ExitCode"), "Worker": replica(1)})
    _run_all(kubelet, jobs, {"retry-chief-0", "retry-worker-0"})
    jobs.wait_condition("retry", "Running")
    before = _uids(jobs)
    kubelet.fail(jobs.namespace, "retry-chief-0", 137, "OOMKilled")
    # The chief decides Running: while its replacement is Pending the job is Restarting.
    restarting = jobs.wait_condition("retry", "Restarting")
    assert restarting["message"] == "job retry is restarting because Chief replica(s) failed."
    replaced = wait_for(
        lambda: (
            (uids := _uids(jobs)).get("retry-chief-0") not in (None, before["retry-chief-0"])
            and uids
        ),
        message="a new retry-chief-0 pod",
    )
    assert replaced["retry-worker-0"] == before["retry-worker-0"]
    assert jobs.status("retry").get("restartCount") == 1
    assert jobs.condition("retry", "Restarting") is not None
    kubelet.run(jobs.namespace, "retry-chief-0")
    jobs.wait_condition("retry", "Running")
    kinds = [kind for kind, status, _ in jobs.conditions("retry") if status == "True"]
    assert "Restarting" not in kinds and "Failed" not in kinds
    wait_for(lambda: "TFJobRestarting" in jobs.reasons("retry"))
    wait_for(lambda: "SuccessfulDeletePod" in jobs.reasons("retry"))
    assert (
        operator.metric(
            "training_operator_jobs_restarted_total",
            job_namespace=jobs.namespace,
            framework="tensorflow",
        )
        >= 1
    )


def test_exit_code_1_under_exit_code_policy_fails_the_job(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create("perm", {"Worker": replica(1, restart_policy="ExitCode")})
    _running(jobs, {"perm-worker-0"})
    jobs.wait_condition("perm", "Running")
    uid = _uids(jobs)["perm-worker-0"]
    _end(jobs, "perm-worker-0", 1)
    failed = jobs.wait_condition("perm", "Failed")
    assert failed["message"].startswith('job "perm" is failing because "Worker" replica(s) failed.')
    assert "exited with code 1" in failed["message"]
    assert _uids(jobs) == {"perm-worker-0": uid}  # not restarted


def test_a_restart_makes_one_pod_even_when_the_kubelet_hears_of_it_late(
    operator: RunningOperator, jobs: Jobs, room: Nodes, cluster: Cluster, kubelet: FakeKubelet
) -> None:
    """Pods made for a replica = its restarts + 1, and the replacement is the pod that
    runs, even when the kubelet (kwok) hears of the failed pod's deletion only after
    the operator made its replacement under the same name - as a loaded machine once
    had it, and the monitoring scenario counted 8 pods for 7. kwok is frozen from the
    pod's failure (played here) until the replacement exists, then hears it all."""
    jobs.create("late", {"Worker": replica(1, restart_policy="ExitCode")})
    _running(jobs, {"late-worker-0"})
    first = _uids(jobs)["late-worker-0"]
    with cluster.frozen("kwok"):
        kubelet.fail(jobs.namespace, "late-worker-0", 143)
        second = wait_for(
            lambda: (uid := _uids(jobs).get("late-worker-0")) not in (None, first) and uid,
            message="the replacement of late-worker-0",
        )

    def replacement_running() -> bool:
        pod = jobs.pods().get("late-worker-0")
        return (
            pod is not None
            and pod["metadata"]["uid"] == second
            and (pod.get("status") or {}).get("phase") == "Running"
        )

    wait_for(replacement_running, message=f"the replacement ({second}) Running")
    _end(jobs, "late-worker-0", 0)
    jobs.wait_condition("late", "Succeeded")
    assert _uids(jobs) == {"late-worker-0": second}
    assert jobs.status("late").get("restartCount") == 1
    assert operator.metric("created_pods_total") == 2


def test_a_deleted_pod_is_recreated(operator: RunningOperator, jobs: Jobs, room: Nodes) -> None:
    """Under OnFailure (or ExitCode/Always) a deleted running pod is replaced and the job
    does not fail (#1560, #2124). Under Never a pod seen terminating while Running counts
    as failed, as upstream."""
    from lightkube.resources.core_v1 import Pod

    jobs.create("gone", {"Worker": replica(2, restart_policy="OnFailure")})
    _running(jobs, {"gone-worker-0", "gone-worker-1"})
    jobs.wait_condition("gone", "Running")
    before = _uids(jobs)
    jobs.kube.delete(Pod, "gone-worker-1", namespace=jobs.namespace)
    after = wait_for(
        lambda: (
            (uids := _uids(jobs)).get("gone-worker-1") not in (None, before["gone-worker-1"])
            and uids
        ),
        message="gone-worker-1 recreated",
    )
    assert after["gone-worker-0"] == before["gone-worker-0"]
    assert jobs.condition("gone", "Failed") is None


def test_deleting_a_running_job_removes_its_pods_and_services(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    """Everything the operator made is owned by the job: the garbage collector (not the
    operator) deletes it, and kwok lets the running pods go."""
    names = {"del-worker-0", "del-worker-1", "del-ps-0"}
    jobs.create("del", {"Worker": replica(2), "PS": replica(1)})
    _running(jobs, names)
    jobs.wait_services(names)
    jobs.wait_condition("del", "Running")
    jobs.kube.delete(jobs.resource, "del", namespace=jobs.namespace)
    jobs.wait_pods(set())
    jobs.wait_services(set())
    assert jobs.get("del") is None


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        ("All", set()),
        ("Running", {"clean-worker-0"}),  # the Succeeded pod stays, with its service
        ("None", {"clean-worker-0", "clean-worker-1", "clean-ps-0"}),
    ],
)
def test_clean_pod_policy_after_the_job_ends(
    operator: RunningOperator,
    jobs: Jobs,
    room: Nodes,
    policy: str,
    kept: set[str],
) -> None:
    jobs.create(
        "clean", {"Worker": replica(2), "PS": replica(1)}, runPolicy={"cleanPodPolicy": policy}
    )
    everything = {"clean-worker-0", "clean-worker-1", "clean-ps-0"}
    _running(jobs, everything)
    jobs.wait_services(everything)
    jobs.wait_condition("clean", "Running")
    _end(jobs, "clean-worker-0", 0)
    jobs.wait_condition("clean", "Succeeded")
    jobs.wait_pods(kept)
    jobs.wait_services(kept)
    time.sleep(0.3)
    assert set(jobs.pods()) == kept


def test_active_deadline_fails_the_job_on_time_without_any_other_event(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create(
        "deadline",
        {"Worker": replica(1)},
        runPolicy={"activeDeadlineSeconds": 3, "cleanPodPolicy": "None"},
    )
    _running(jobs, {"deadline-worker-0"})
    jobs.wait_condition("deadline", "Running")
    # From here on nothing changes in the cluster: only the operator's own timer can act.
    failed = jobs.wait_condition("deadline", "Failed", timeout=10)
    seen = datetime.now(UTC)
    deadline = _parse(jobs.status("deadline")["startTime"]) + timedelta(seconds=3)
    assert failed["message"] == (
        "Job deadline has failed because it was active longer than specified deadline"
    )
    # startTime has second precision, so the true deadline is up to 1 s after this one
    assert deadline <= _parse(failed["lastTransitionTime"]) <= deadline + timedelta(seconds=2)
    assert seen - deadline < timedelta(seconds=2.5)
    assert set(jobs.pods()) == {"deadline-worker-0"}  # cleanPodPolicy None is honoured


def test_ttl_deletes_the_finished_job_on_time(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    jobs.create("ttl", {"Worker": replica(1)}, runPolicy={"ttlSecondsAfterFinished": 2})
    _running(jobs, {"ttl-worker-0"})
    _end(jobs, "ttl-worker-0", 0)
    jobs.wait_condition("ttl", "Succeeded")
    completed = _parse(jobs.status("ttl")["completionTime"])
    wait_for(lambda: jobs.get("ttl") is None, timeout=10, message="the TFJob deleted")
    gone = datetime.now(UTC)
    assert completed + timedelta(seconds=2) <= gone < completed + timedelta(seconds=4.5)
    wait_for(lambda: "SuccessfulDeleteJob" in jobs.reasons("ttl"))
    # cleanPodPolicy None kept the pod; the garbage collector takes it with the job.
    jobs.wait_pods(set())
    jobs.wait_services(set())
    assert (
        operator.metric(
            "training_operator_jobs_deleted_total",
            job_namespace=jobs.namespace,
            framework="tensorflow",
        )
        == 1
    )


def test_suspend_deletes_the_pods_and_resume_recreates_them(
    operator: RunningOperator, jobs: Jobs, room: Nodes
) -> None:
    names = {"sus-worker-0", "sus-worker-1"}
    jobs.create("sus", {"Worker": replica(2)})
    _running(jobs, names)
    jobs.wait_services(names)
    jobs.wait_condition("sus", "Running")
    started = jobs.status("sus")["startTime"]

    jobs.patch_spec("sus", {"runPolicy": {"suspend": True}})
    jobs.wait_condition("sus", "Suspended")
    jobs.wait_pods(set())
    jobs.wait_services(set())
    assert jobs.conditions("sus") == [
        ("Created", "True", "TFJobCreated"),
        ("Running", "False", "TFJobSuspended"),
        ("Suspended", "True", "TFJobSuspended"),
    ]
    status = jobs.status("sus")
    assert status["startTime"] == started
    assert status["replicaStatuses"] == {"Worker": {}}

    time.sleep(1.1)  # so the new startTime (second precision) differs
    jobs.patch_spec("sus", {"runPolicy": {"suspend": False}})
    jobs.wait_services(names)
    _running(jobs, names)
    jobs.wait_condition("sus", "Running")
    assert jobs.conditions("sus") == [
        ("Created", "True", "TFJobCreated"),
        ("Suspended", "False", "TFJobResumed"),
        ("Running", "True", "TFJobRunning"),
    ]
    assert jobs.status("sus")["startTime"] > started


def test_a_job_managed_by_another_controller_is_left_alone(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(
        "theirs", {"Worker": replica(1)}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}
    )
    jobs.create("ours", {"Worker": replica(1)})
    # Once the operator has handled the job created after it, it has seen "theirs" too.
    jobs.wait_condition("ours", "Created")
    jobs.wait_pods({"ours-worker-0"})
    time.sleep(0.5)
    theirs: dict[str, Any] | None = jobs.get("theirs")
    assert theirs is not None
    assert not theirs.get("status")
    assert set(jobs.pods()) == {"ours-worker-0"}
    assert set(jobs.services()) == {"ours-worker-0"}
    assert jobs.events("theirs") == []


def test_a_crashed_operator_leaves_no_duplicates_behind(operators: Operators, jobs: Jobs) -> None:
    """SIGKILL in the middle of creating a 20-replica job, then start again."""
    from lightkube.resources.core_v1 import Pod, Service

    # Throttled to ~20 pods and ~20 services a second (a bucket per resource), so the
    # kill lands while creation is under way.
    first = operators.start("--kube-api-qps", "20", "--kube-api-burst", "1")
    jobs.create("big", {"Worker": replica(20)})
    wait_for(lambda: len(jobs.pods()) >= 4, message="some pods created")
    first.kill()
    partial = len(jobs.pods()) + len(jobs.services())
    assert partial < 40, "the crash came too late to test anything"

    operators.start()
    names = {f"big-worker-{i}" for i in range(20)}
    jobs.wait_pods(names)
    jobs.wait_services(names)
    time.sleep(1.0)  # anything extra would show up now
    pods = list(jobs.kube.list(Pod, namespace=jobs.namespace))
    services = list(jobs.kube.list(Service, namespace=jobs.namespace))
    assert sorted(p.metadata.name for p in pods) == sorted(names)
    assert sorted(s.metadata.name for s in services) == sorted(names)
    status = jobs.status("big")
    assert status["replicaStatuses"] == {"Worker": {}}
    assert [c[0] for c in jobs.conditions("big")] == ["Created"]
    assert status.get("startTime")
