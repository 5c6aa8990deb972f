"""Kubeflow's Python SDK for Trainer v2 (``kubeflow`` 0.5, ``kubeflow.trainer``) drives
TrainJobs on tfjob, with no Trainer controller running.

A user's notebook builds a ``TrainerClient`` and lists the runtimes, trains a function
on ``torch-distributed``, waits for the TrainJob, reads its logs and deletes it;
nothing in the SDK may need to change. The API server, tfjob's CRDs and the runtimes
Trainer ships (testkit/trainjob_api.py, what ``manifests/overlays/trainer-runtimes``
applies), JobSet's controller manager (testkit/trainjob_fixtures.py) and this
folder's ``tfjob operator`` (watching every namespace, as its ServiceAccount) are
real; kwok runs the pods and ends them as the SDK's own ``RuntimePatch`` option asks
(the annotations of testkit/cluster.py on the trainer's pod template).

The SDK reads ConfigMap ``kubeflow-system/kubeflow-trainer-public`` for Trainer's
version and only logs a warning without it; tfjob's manifests do not ship it, so
these tests run without it, as a tfjob install does.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from lightkube import Client

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION, Cluster, Nodes
from testkit.trainjob_fixtures import jobset, trainer_api

__all__ = ["jobset", "trainer_api"]  # shared fixtures (testkit/trainjob_fixtures.py)

TORCH = "torch-distributed"
POLL = 1  # seconds between the SDK's GETs (its polling_interval is typed int)
WAIT = 60


@pytest.fixture(scope="module")
def trainer_sdk() -> ModuleType:
    """``kubeflow.trainer``, or a skip (a failure under ``CI=true``)."""
    try:
        import kubeflow.trainer as sdk
    except ImportError as exc:
        reason = f"kubeflow (the Trainer v2 SDK) is not importable: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return sdk


@pytest.fixture(scope="module")
def operator(trainer_sdk: ModuleType, trainer_api: list[dict[str, Any]], operator: Any) -> Any:
    """This folder's operator (conftest.py), started once Trainer's API and JobSet's
    are served, so that it serves TrainJobs beside the v1 kinds."""
    return operator


@pytest.fixture
def client(trainer_sdk: ModuleType, kubeconfig: Path, namespace: str) -> Any:
    """A ``TrainerClient`` for the test's namespace, the way a user builds one."""
    config = trainer_sdk.KubernetesBackendConfig(namespace=namespace, config_file=str(kubeconfig))
    return trainer_sdk.TrainerClient(backend_config=config)


def _train() -> None:
    """The function a user hands the SDK (kwok does not run it)."""
    print("training")


def _ending(exit_code: int, run_for: str) -> Any:
    """The SDK's RuntimePatch option: every trainer pod ends with `exit_code` after
    `run_for` (kwok's annotations on the `node` Job's pod template)."""
    from kubeflow.trainer import options

    annotations = {EXIT_CODE_ANNOTATION: str(exit_code), RUN_FOR_ANNOTATION: run_for}
    pod = options.PodTemplatePatch(metadata={"annotations": annotations})
    job = options.ReplicatedJobPatch(
        name="node", template=options.JobTemplatePatch(spec=options.JobSpecPatch(template=pod))
    )
    spec = options.JobSetTemplatePatch(spec=options.JobSetSpecPatch(replicated_jobs=[job]))
    return options.RuntimePatch(
        training_runtime_spec=options.TrainingRuntimeSpecPatch(template=spec)
    )


def test_runtimes_are_listed_with_their_frameworks(client: Any) -> None:
    """The SDK lists only runtimes labelled with their framework: Trainer's are."""
    runtimes = {r.name: r for r in client.list_runtimes()}
    assert TORCH in runtimes, sorted(runtimes)
    torch = runtimes[TORCH]
    assert torch.trainer.framework == "torch"
    assert torch.trainer.num_nodes == 1
    assert client.get_runtime(TORCH).name == TORCH


def test_a_trainjob_is_trained_listed_waited_for_logged_and_deleted(
    client: Any, trainer_sdk: ModuleType, cluster: Cluster, nodes: Nodes, kube: Client
) -> None:
    from kubeflow.trainer import options

    nodes.add(1)
    cluster.write_container_log(["epoch 1 loss 0.4"])
    name = client.train(
        runtime=TORCH,
        trainer=trainer_sdk.CustomTrainer(func=_train, num_nodes=2),
        options=[options.Name("mnist"), options.Labels({"team": "vision"}), _ending(0, "6s")],
    )
    assert name == "mnist"
    assert [job.name for job in client.list_jobs()] == ["mnist"]

    running = client.wait_for_job_status(
        name, status={"Running"}, timeout=WAIT, polling_interval=POLL
    )
    assert running.num_nodes == 2
    assert running.runtime.name == TORCH
    assert sorted(step.name for step in running.steps) == ["node-0", "node-1"]
    assert all(step.pod_name.startswith("mnist-node-0-") for step in running.steps)
    assert list(client.get_job_logs(name)) == ["epoch 1 loss 0.4"]

    done = client.wait_for_job_status(name, timeout=WAIT, polling_interval=POLL)
    assert done.status == "Complete"
    assert {step.status for step in done.steps} == {"Succeeded"}

    client.delete_job(name)
    deadline = time.monotonic() + WAIT
    while client.list_jobs():
        assert time.monotonic() < deadline, "the deleted TrainJob is still listed"
        time.sleep(0.2)
    with pytest.raises(RuntimeError, match="Failed to get TrainJob"):
        client.get_job(name)
