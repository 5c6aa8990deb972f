"""Which kinds one operator serves: every kind whose CRD is installed, or those
`--enable-scheme` names; a kind left out is left alone.

The first tests run the operator in-process on the in-memory API (testkit/fake_api.py),
which serves only the resources it is told to: a stand-in for an API server without
a kind's CRD, which the shared test API server (every CRD installed for the session)
cannot be. The last runs the real operator on the real API server.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from testkit.fake_api import FakeApi
from testkit.operators import Jobs, Operators, replica
from tfjob.frameworks.pytorch import PYTORCH
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, LEASES, PODS, SERVICES, jobs_of

TFJOBS = jobs_of(TENSORFLOW)

OPTIONS = OperatorOptions(namespace="default", metrics_port=-1, health_port=-1)


async def _serve_until_synced(api: FakeApi, options: OperatorOptions) -> tuple[Operator, int]:
    operator = Operator(options, api.client())  # type: ignore[arg-type]
    stop = asyncio.Event()
    running = asyncio.create_task(operator.run(stop))
    deadline = time.monotonic() + 10
    while not operator.synced() and not running.done() and time.monotonic() < deadline:  # noqa: ASYNC110 (no event to wait on: synced() is a flag)
        await asyncio.sleep(0.01)
    stop.set()
    return operator, await asyncio.wait_for(running, 10)


async def test_a_kind_whose_crd_is_not_installed_is_left_out() -> None:
    api = FakeApi(served=[PODS, SERVICES, EVENTS, LEASES, TFJOBS])  # no pytorchjobs
    operator, code = await _serve_until_synced(api, OPTIONS)
    assert code == 0
    assert {k.kind for k in operator.enabled} == set(FRAMEWORKS)  # every kind enabled
    assert [k.kind.kind for k in operator.serving] == ["TFJob"]  # one served
    listed = {r.resource for r in api.requests if r.verb in ("list", "watch")}
    assert "tfjobs.kubeflow.org" in listed
    assert "pytorchjobs.kubeflow.org" not in listed


async def test_a_throttled_or_failing_discovery_is_asked_again_at_start_up() -> None:
    """A 429 or a 503 while finding which CRDs are installed is the API server's
    passing state, not an answer: the operator asks again and serves the kind."""
    api = FakeApi(served=[PODS, SERVICES, EVENTS, LEASES, TFJOBS])
    api.fail(429, verb="get", when=lambda r: r.resource == "/apis/kubeflow.org/v1", times=2)
    api.fail(503, verb="get", when=lambda r: r.resource == "/apis/kubeflow.org/v1")
    operator, code = await _serve_until_synced(api, OPTIONS)
    assert code == 0
    assert [k.kind.kind for k in operator.serving] == ["TFJob"]
    discovery = [r for r in api.of("get") if r.resource == "/apis/kubeflow.org/v1"]
    assert len(discovery) == 4  # three refused, then the answer


async def test_no_enabled_kind_installed_is_an_error() -> None:
    api = FakeApi(served=[PODS, SERVICES, EVENTS, LEASES, TFJOBS])
    options = OperatorOptions(
        namespace="default", metrics_port=-1, health_port=-1, kinds=("PyTorchJob",)
    )
    operator, code = await _serve_until_synced(api, options)
    assert code == 1
    assert operator.serving == []


async def test_every_kind_shares_one_stream_per_resource() -> None:
    """With every CRD installed, one operator lists and watches each resource once,
    whatever the number of kinds that read it (controller-runtime's one informer per
    resource): each kind's jobs, then pods, services and each kind of object jobs own
    (13 for the six kinds), each selected by the operator-name labels of the kinds that
    make it; and for TrainJob four more: TrainJobs, JobSets, TrainingRuntimes and
    ClusterTrainingRuntimes (17). A TrainJob's ConfigMaps are read by name, never
    watched (a cluster's ConfigMaps are mostly not ours and Trainer labels none), so
    the ConfigMaps' one stream stays the MPIJobs' labelled one."""
    api = FakeApi()  # every resource served
    operator, code = await _serve_until_synced(api, OPTIONS)
    assert code == 0
    assert {k.kind.kind for k in operator.serving} == set(FRAMEWORKS)
    assert operator.trainjob_serving
    watched = [r.resource for r in api.requests if r.verb == "watch"]
    assert sorted(watched) == sorted(set(watched))  # one watch per resource
    jobs = {f"{k.plural}.{k.group}" for k in FRAMEWORKS.values()}
    owned = {"configmaps", "serviceaccounts", "roles.rbac.authorization.k8s.io"}
    owned |= {"rolebindings.rbac.authorization.k8s.io", "horizontalpodautoscalers.autoscaling"}
    trainer = {"trainjobs.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io"}
    trainer |= {"trainingruntimes.trainer.kubeflow.org"}
    trainer |= {"clustertrainingruntimes.trainer.kubeflow.org"}
    assert set(watched) == jobs | owned | {"pods", "services"} | trainer
    assert len(watched) == 17
    selectors = {
        r.resource: (r.body or {}).get("labelSelector") for r in api.requests if r.verb == "watch"
    }
    names = sorted(k.controller_name for k in FRAMEWORKS.values())
    assert selectors["pods"] == f"training.kubeflow.org/operator-name in ({','.join(names)})"
    assert selectors["configmaps"] == "training.kubeflow.org/operator-name=mpijob-controller"


@pytest.mark.usefixtures("pytorchjob_crd_installed")
def test_enable_scheme_leaves_the_other_kinds_alone(operators: Operators, jobs: Jobs) -> None:
    """With --enable-scheme=tfjob a PyTorchJob is another operator's: no pod, no status."""
    operator = operators.start("--enable-scheme=tfjob")
    pytorch = jobs.of(PYTORCH)
    pytorch.create("theirs", {"Worker": _pytorch_replica(1)})
    jobs.create("ours", {"Worker": replica(1)})
    jobs.wait_pods({"ours-worker-0"})
    jobs.wait_condition("ours", "Created")
    time.sleep(1.0)  # several reconciles' time for a wrong one to show
    assert set(jobs.pods()) == {"ours-worker-0"}
    assert pytorch.status("theirs") == {}
    assert '{"kinds": ["TFJob"], "event": "serving"' in operator.log_tail(200)
    created = "training_operator_jobs_created_total"
    assert operator.metric(created, framework="tensorflow", job_namespace=jobs.namespace) == 1
    assert operator.metric(created, framework="pytorch", job_namespace=jobs.namespace) == 0


def _pytorch_replica(count: int, **extra: Any) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "registry.example/torch:2"}
    return {**replica(count, containers=[container]), **extra}
