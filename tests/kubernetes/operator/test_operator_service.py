"""The operator as a service: bad input, events, metrics, health and leader election."""

from __future__ import annotations

import secrets
import time

from testkit.helpers import IMAGE, wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators, RunningOperator, replica


def test_an_invalid_job_fails_with_the_field_named_and_others_still_run(
    operator: RunningOperator, jobs: Jobs
) -> None:
    # Passes the CRD's schema and rules, but the API server refuses its pods (a mount
    # of a volume the pod does not have): the operator's dry run fails the job.
    mount = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    container = {"name": "tensorflow", "image": IMAGE, **mount}
    jobs.create("bad", {"Worker": replica(1, containers=[container])})
    failed = jobs.wait_condition("bad", "Failed")
    assert failed["reason"] == "InvalidTFJobSpec"
    assert "spec.containers[0].volumeMounts[0].name" in failed["message"]
    wait_for(lambda: "TFJobFailedValidation" in jobs.reasons("bad"))
    warning = next(e for e in jobs.events("bad") if e["reason"] == "TFJobFailedValidation")
    assert warning["type"] == "Warning"

    jobs.create("good", {"Worker": replica(1)})
    jobs.wait_pods({"good-worker-0"})
    jobs.wait_condition("good", "Created")
    assert set(jobs.pods()) == {"good-worker-0"}  # nothing for the bad one
    assert operator.process.poll() is None


def test_events_carry_upstream_reasons_and_repeats_are_counted_not_duplicated(
    operator: RunningOperator, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    spec = replica(2)
    spec["template"]["spec"]["restartPolicy"] = "Always"  # overridden: a warning says so
    job = jobs.create("ev", {"Worker": spec}, successPolicy="AllWorkers")
    jobs.wait_pods({"ev-worker-0", "ev-worker-1"})
    kubelet.run(jobs.namespace, "ev-worker-0")
    kubelet.run(jobs.namespace, "ev-worker-1")
    jobs.wait_condition("ev", "Running")
    kubelet.succeed(jobs.namespace, "ev-worker-1")
    # Every reconcile of the running job reports worker 1's exit code again.
    for i in range(3):
        jobs.patch("ev", {"metadata": {"annotations": {"poke": str(i)}}})
        time.sleep(0.3)
    kubelet.succeed(jobs.namespace, "ev-worker-0")
    jobs.wait_condition("ev", "Succeeded")

    expected = {
        ("Normal", "SuccessfulCreatePod", "Created pod: ev-worker-0"),
        ("Normal", "SuccessfulCreatePod", "Created pod: ev-worker-1"),
        ("Normal", "SuccessfulCreateService", "Created service: ev-worker-0"),
        (
            "Warning",
            "SetPodTemplateRestartPolicy",
            "Restart policy in pod template will be overwritten by restart policy in replica spec",
        ),
        ("Normal", "TFJobSucceeded", f"TFJob {jobs.namespace}/ev successfully completed."),
    }

    def seen() -> set[tuple[str, str, str]]:
        return {(e["type"], e["reason"], e["message"]) for e in jobs.events("ev")}

    wait_for(lambda: expected <= seen(), message=f"events {expected}")
    events = jobs.events("ev")
    for event in events:
        assert event["source"]["component"] == "tfjob-controller"
        involved = event["involvedObject"]
        assert (involved["kind"], involved["apiVersion"]) == ("TFJob", "kubeflow.org/v1")
        assert (involved["name"], involved["uid"]) == ("ev", job["metadata"]["uid"])
    keys = [(e["reason"], e["message"]) for e in events]
    assert len(keys) == len(set(keys)), f"duplicate Event objects: {sorted(keys)}"
    exited = {e["message"]: e["count"] for e in events if e["reason"] == "ExitedWithCode"}
    assert exited[f"Pod: {jobs.namespace}.ev-worker-1 exited with code 0"] > 1


def test_metrics_and_health_endpoints(
    operator: RunningOperator, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    assert operator.get(operator.health_port, "/healthz") == (200, "ok")
    assert operator.get(operator.health_port, "/readyz") == (200, "ok")
    jobs.create("m", {"Worker": replica(2)})
    jobs.wait_services({"m-worker-0", "m-worker-1"})
    jobs.wait_pods({"m-worker-0", "m-worker-1"})  # created concurrently with the services
    for name in ("m-worker-0", "m-worker-1"):
        kubelet.run(jobs.namespace, name)
    kubelet.succeed(jobs.namespace, "m-worker-0")
    jobs.wait_condition("m", "Succeeded")
    labels = {"job_namespace": jobs.namespace, "framework": "tensorflow"}
    wait_for(lambda: operator.metric("training_operator_jobs_successful_total", **labels) == 1)
    assert operator.metric("training_operator_jobs_created_total", **labels) == 1
    assert operator.metric("training_operator_jobs_failed_total", **labels) == 0
    assert operator.metric("created_pods_total") == 2
    assert operator.metric("succeeded_service_creation_total") == 2
    assert operator.metric("failed_service_creation_total") == 0
    assert operator.metric("workqueue_adds_total", name="tfjob-controller") >= 1
    assert operator.metric("workqueue_depth", name="tfjob-controller") == 0
    reconciles = operator.metric(
        "controller_runtime_reconcile_time_seconds_count", controller="tfjob-controller"
    )
    assert reconciles >= 2


def test_only_the_leader_reconciles_and_a_successor_takes_over(
    operators: Operators, jobs: Jobs
) -> None:
    lease = f"tfjob-test-{secrets.token_hex(4)}"
    elect = (
        "--leader-elect",
        "--leader-election-namespace",
        "tfjob-system",
        "--leader-election-id",
        lease,
    )
    first = operators.start(*elect)
    second = operators.start(*elect, wait=False)
    jobs.create("one", {"Worker": replica(1)})
    jobs.wait_pods({"one-worker-0"})
    second.wait_ready(timeout=15)  # a standby is Ready (a rolling update can finish)...
    time.sleep(1.0)
    # It says it does not lead (the sample is there, at 0), and has reconciled nothing.
    assert f'leader_election_master_status{{name="{lease}"}} 0.0' in second.metrics()
    reconciles = "controller_runtime_reconcile_time_seconds_count"
    assert second.metric(reconciles, controller="tfjob-controller") == 0  # ...and idle
    assert [e["reason"] for e in jobs.events("one")].count("SuccessfulCreatePod") == 1

    assert first.stop() == 0  # releases the lease on the way out
    second.wait_ready(timeout=15)
    jobs.create("two", {"Worker": replica(1)})
    jobs.wait_pods({"one-worker-0", "two-worker-0"})
    jobs.wait_condition("two", "Created")
