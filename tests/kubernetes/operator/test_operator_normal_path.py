"""Upstream's "Test Normal Path" table, on the test cluster.

What a user sees right after submitting a TFJob: which pods and services appear, with
which names, labels, owner references and TF_CONFIG, that the operator creates
nothing twice, and - with a kwok node to run on - that kube-scheduler binds the pods,
the Services' EndpointSlices list them, and the job runs to its end.
"""

from __future__ import annotations

import json
import time
from typing import Any

from lightkube import codecs

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION, KwokPods
from testkit.helpers import IMAGE, wait_for
from testkit.operators import Jobs, Operators, RunningOperator, replica
from tfjob.api.containers import tensorflow_container


def _env(pod: dict[str, Any]) -> dict[str, str]:
    container = tensorflow_container(pod["spec"]) or {}
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def _owner(job: dict[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    return [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _endpoint_ips(jobs: Jobs, service: str) -> set[str]:
    """Addresses the EndpointSlice controller lists for one Service."""
    from lightkube.resources.discovery_v1 import EndpointSlice

    slices = jobs.kube.list(
        EndpointSlice,
        namespace=jobs.namespace,
        labels={"kubernetes.io/service-name": service},
    )
    return {a for s in slices for e in s.endpoints or [] for a in e.addresses}


def test_one_worker_gets_one_pod_and_one_service(
    operator: RunningOperator, jobs: Jobs, kwok: KwokPods
) -> None:
    job = jobs.create("local", {"Worker": replica(1)})
    pods = jobs.wait_pods({"local-worker-0"})
    services = jobs.wait_services({"local-worker-0"})
    pod = pods["local-worker-0"]
    assert pod["metadata"]["ownerReferences"] == _owner(job)
    assert "TF_CONFIG" not in _env(pod)  # one replica in total is not distributed
    assert pod["metadata"]["labels"] == {
        "team": "ml",
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/job-name": "local",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert pod["spec"]["restartPolicy"] == "Never"
    assert services["local-worker-0"]["metadata"]["ownerReferences"] == _owner(job)
    jobs.wait_condition("local", "Created")
    status = wait_for(lambda: jobs.status("local").get("startTime") and jobs.status("local"))
    assert status["replicaStatuses"] in ({"Worker": {}}, {"Worker": {"active": 1}})
    # The scheduler binds it, kwok runs it, the job is Running.
    kwok.wait_running(jobs.namespace, 1)
    jobs.wait_condition("local", "Running")
    wait_for(lambda: jobs.status("local")["replicaStatuses"] == {"Worker": {"active": 1}})


def test_four_workers_and_two_ps_get_six_pods_and_six_services(
    operator: RunningOperator, jobs: Jobs, kwok: KwokPods
) -> None:
    job = jobs.create("dist", {"Worker": replica(4), "PS": replica(2)})
    names = {f"dist-worker-{i}" for i in range(4)} | {"dist-ps-0", "dist-ps-1"}
    pods = jobs.wait_pods(names)
    services = jobs.wait_services(names)
    ns = jobs.namespace
    cluster = {
        "ps": [f"dist-ps-{i}.{ns}.svc:2222" for i in range(2)],
        "worker": [f"dist-worker-{i}.{ns}.svc:2222" for i in range(4)],
    }
    for name in sorted(names):
        pod, service = pods[name], services[name]
        rtype, index = name.split("-")[1], int(name.split("-")[2])
        labels = {
            "training.kubeflow.org/operator-name": "tfjob-controller",
            "training.kubeflow.org/job-name": "dist",
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        }
        role = {"training.kubeflow.org/job-role": "master"} if name == "dist-worker-0" else {}
        assert pod["metadata"]["labels"] == {"team": "ml", **labels, **role}
        assert pod["metadata"]["ownerReferences"] == _owner(job)
        expected = {
            "cluster": cluster,
            "task": {"type": rtype, "index": index},
            "environment": "cloud",
        }
        assert _env(pod)["TF_CONFIG"] == json.dumps(expected, separators=(",", ":"))
        ports = (tensorflow_container(pod["spec"]) or {})["ports"]
        assert {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"} in ports
        assert service["metadata"]["labels"] == labels
        assert service["metadata"]["ownerReferences"] == _owner(job)
        spec = service["spec"]
        assert spec["clusterIP"] == "None"
        assert spec["selector"] == labels
        assert spec["publishNotReadyAddresses"] is True
        assert [(p["name"], p["port"]) for p in spec["ports"]] == [("tfjob-port", 2222)]
    # On the cluster: every pod bound and Running, every Service resolving to its pod.
    kwok.wait_running(jobs.namespace, 6)
    running = jobs.pods()
    for name in names:
        ip = running[name]["status"]["podIP"]
        wait_for(lambda n=name, a=ip: _endpoint_ips(jobs, n) == {a}, message=f"{name} slice")
    jobs.wait_condition("dist", "Running")
    wait_for(
        lambda: (
            jobs.status("dist").get("replicaStatuses")
            == {"PS": {"active": 2}, "Worker": {"active": 4}}
        )
    )


def test_a_distributed_job_runs_to_success(
    operator: RunningOperator, jobs: Jobs, kwok: KwokPods
) -> None:
    """Workers train for a second and exit 0; parameter servers serve until cleaned up.

    AllWorkers: the job waits for both workers (by default worker 0 alone decides, and
    cleanPodPolicy Running would then delete a worker still finishing)."""
    workers = replica(2)
    workers["template"]["metadata"]["annotations"] = {
        EXIT_CODE_ANNOTATION: "0",
        RUN_FOR_ANNOTATION: "1s",
    }
    jobs.create(
        "train",
        {"Worker": workers, "PS": replica(1)},
        runPolicy={"cleanPodPolicy": "Running"},
        successPolicy="AllWorkers",
    )
    jobs.wait_condition("train", "Running")
    done = jobs.wait_condition("train", "Succeeded", timeout=30)
    assert done["message"] == f"TFJob {jobs.namespace}/train successfully completed."
    # cleanPodPolicy Running: the parameter server is deleted, the workers stay.
    live = jobs.wait_pods({"train-worker-0", "train-worker-1"})
    phases = {
        n: p["status"]["phase"]
        for n, p in live.items()
        if not p["metadata"].get("deletionTimestamp")  # the PS may still be terminating
    }
    assert phases == {"train-worker-0": "Succeeded", "train-worker-1": "Succeeded"}
    wait_for(
        lambda: (
            jobs.status("train")["replicaStatuses"]
            == {"PS": {"succeeded": 1}, "Worker": {"succeeded": 2}}
        )
    )


def test_pending_pods_make_nothing_new(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create("pending", {"Worker": replica(2), "PS": replica(1)})
    names = {"pending-worker-0", "pending-worker-1", "pending-ps-0"}
    before = {n: p["metadata"]["uid"] for n, p in jobs.wait_pods(names).items()}
    jobs.wait_services(names)
    # Poke the job several times (each spec change is a new reconcile).
    for i in range(3):
        jobs.patch("pending", {"metadata": {"annotations": {"poke": str(i)}}})
        time.sleep(0.3)
    after = {n: p["metadata"]["uid"] for n, p in jobs.pods().items()}
    assert after == before
    assert set(jobs.services()) == names
    wait_for(
        lambda: len([r for r in jobs.reasons("pending") if r.startswith("SuccessfulCreate")]) == 6
    )
    assert not any(r.startswith("FailedCreate") for r in jobs.reasons("pending"))


def test_a_partially_created_job_gets_only_what_is_missing(
    operators: Operators, jobs: Jobs
) -> None:
    """Pods and services made before the operator starts (e.g. by a previous operator
    instance) are kept; only the missing ones are created."""
    job = jobs.create("partial", {"Worker": replica(3), "PS": replica(1)})
    owner = _owner(job)

    def labels(rtype: str, index: int) -> dict[str, str]:
        return {
            "training.kubeflow.org/operator-name": "tfjob-controller",
            "training.kubeflow.org/job-name": "partial",
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        }

    for rtype, index in (("worker", 0), ("ps", 0)):
        name = f"partial-{rtype}-{index}"
        meta = {"name": name, "labels": labels(rtype, index), "ownerReferences": owner}
        jobs.kube.create(
            codecs.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": meta,
                    "spec": {"containers": [{"name": "tensorflow", "image": IMAGE}]},
                }
            ),
            namespace=jobs.namespace,
        )
    jobs.kube.create(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "partial-worker-0",
                    "labels": labels("worker", 0),
                    "ownerReferences": owner,
                },
                "spec": {
                    "clusterIP": "None",
                    "selector": labels("worker", 0),
                    "ports": [{"name": "tfjob-port", "port": 2222}],
                },
            }
        ),
        namespace=jobs.namespace,
    )
    seeded = {n: p["metadata"]["uid"] for n, p in jobs.pods().items()}

    operators.start()
    names = {"partial-worker-0", "partial-worker-1", "partial-worker-2", "partial-ps-0"}
    pods = jobs.wait_pods(names)
    jobs.wait_services(names)
    assert {n: pods[n]["metadata"]["uid"] for n in seeded} == seeded  # kept, not replaced
    expected = [
        "Created pod: partial-worker-1",
        "Created pod: partial-worker-2",
        "Created service: partial-ps-0",
        "Created service: partial-worker-1",
        "Created service: partial-worker-2",
    ]

    def creations() -> list[str]:
        events = jobs.events("partial")
        return sorted(e["message"] for e in events if e["reason"].startswith("SuccessfulCreate"))

    wait_for(lambda: creations() == expected, message=f"exactly the events {expected}")
    time.sleep(0.5)
    assert creations() == expected


def test_the_cluster_domain_flag_goes_into_tf_config(operators: Operators, jobs: Jobs) -> None:
    operators.start("--cluster-domain", "cluster.local")
    jobs.create("dom", {"Worker": replica(2)})
    pods = jobs.wait_pods({"dom-worker-0", "dom-worker-1"})
    config = json.loads(_env(pods["dom-worker-1"])["TF_CONFIG"])
    ns = jobs.namespace
    assert config["cluster"]["worker"] == [
        f"dom-worker-0.{ns}.svc.cluster.local:2222",
        f"dom-worker-1.{ns}.svc.cluster.local:2222",
    ]
