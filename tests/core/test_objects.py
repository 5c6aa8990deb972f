"""The pods and services the operator creates: names, labels, owners, restart policy."""

from __future__ import annotations

import msgspec
import pytest

from testkit.builders import UID, actions_of, job, replica, run
from tfjob.core.objects import (
    PodRenderer,
    desired_objects,
    desired_pod,
    desired_service,
    pod_manifest,
)
from tfjob.core.plan import CreatePod
from tfjob.core.settings import Settings
from tfjob.frameworks.registry import with_defaults

OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "name": "test-tfjob",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def test_pod_labels_owner_and_tf_config() -> None:
    tfjob = with_defaults(job(Worker=replica(2), PS=replica(1)))
    manifest = desired_pod(tfjob, "Worker", 1, Settings())
    assert manifest["metadata"]["name"] == "test-tfjob-worker-1"
    assert manifest["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/job-name": "test-tfjob",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    assert manifest["metadata"]["ownerReferences"] == [OWNER]
    env = manifest["spec"]["containers"][0]["env"]
    assert env[-1]["name"] == "TF_CONFIG"
    assert '"task":{"type":"worker","index":1}' in env[-1]["value"]


@pytest.mark.parametrize(
    ("specs", "master_pods"),
    [
        ({"Worker": replica(2)}, {"test-tfjob-worker-0"}),
        ({"Chief": replica(1), "Worker": replica(2)}, {"test-tfjob-chief-0"}),
        ({"Master": replica(1), "Worker": replica(1), "PS": replica(1)}, {"test-tfjob-master-0"}),
        ({"PS": replica(1), "Evaluator": replica(1)}, set()),
    ],
)
def test_job_role_master(specs: dict[str, dict[str, object]], master_pods: set[str]) -> None:
    tfjob = job(**specs)
    renderer = PodRenderer(tfjob, Settings())
    marked = {
        a.name
        for a in actions_of(run(tfjob), CreatePod)
        if renderer.manifest(a)["metadata"]["labels"].get("training.kubeflow.org/job-role")
        == "master"
    }
    assert marked == master_pods


@pytest.mark.parametrize(
    ("policy", "pod_policy"),
    [("ExitCode", "Never"), ("Never", "Never"), ("Always", "Always"), ("OnFailure", "OnFailure")],
)
def test_restart_policy_mapping(policy: str, pod_policy: str) -> None:
    tfjob = with_defaults(job(Worker=replica(1, restart=policy)))
    assert desired_pod(tfjob, "Worker", 0, Settings())["spec"]["restartPolicy"] == pod_policy


def test_template_restart_policy_is_overwritten_with_a_warning() -> None:
    tfjob = job(Worker=replica(1, restart="OnFailure", restartPolicy="Always"))
    plan = run(tfjob)
    (create,) = actions_of(plan, CreatePod)
    assert pod_manifest(tfjob, create, Settings())["spec"]["restartPolicy"] == "OnFailure"
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "SetPodTemplateRestartPolicy")]


def test_template_labels_annotations_kept_and_controller_labels_win() -> None:
    spec = replica(1)
    spec["template"]["metadata"] = {
        "labels": {"team": "ml", "training.kubeflow.org/replica-type": "bogus"},
        "annotations": {"a": "b"},
    }
    manifest = desired_pod(with_defaults(job(Worker=spec)), "Worker", 0, Settings())
    assert manifest["metadata"]["labels"]["team"] == "ml"
    assert manifest["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"
    assert manifest["metadata"]["annotations"] == {"a": "b"}


def test_unknown_template_fields_survive() -> None:
    spec = replica(1, volumes=[{"name": "d", "emptyDir": {}}], futureField={"x": 1})
    manifest = desired_pod(with_defaults(job(Worker=spec)), "Worker", 0, Settings())
    assert manifest["spec"]["volumes"] == [{"name": "d", "emptyDir": {}}]
    assert manifest["spec"]["futureField"] == {"x": 1}


def test_tf_config_only_in_tensorflow_container_and_appended_after_user_env() -> None:
    spec = {
        "replicas": 2,
        "template": {
            "spec": {
                "containers": [
                    {"name": "sidecar", "image": "s"},
                    {
                        "name": "tensorflow",
                        "image": "t",
                        "env": [{"name": "TF_CONFIG", "value": "u"}],
                    },
                ]
            }
        },
    }
    manifest = desired_pod(with_defaults(job(Worker=spec)), "Worker", 0, Settings())
    sidecar, tensorflow = manifest["spec"]["containers"]
    assert "env" not in sidecar
    assert [e["name"] for e in tensorflow["env"]] == ["TF_CONFIG", "TF_CONFIG"]
    assert tensorflow["env"][0]["value"] == "u"


def test_service_is_headless_per_pod_and_publishes_not_ready_addresses() -> None:
    service = desired_service(with_defaults(job(Worker=replica(2))), "Worker", 1)
    labels = {
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/job-name": "test-tfjob",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "test-tfjob-worker-1",
            "namespace": "default",
            "labels": labels,
            "ownerReferences": [OWNER],
        },
        "spec": {
            "clusterIP": "None",
            "selector": labels,
            "publishNotReadyAddresses": True,
            "ports": [{"name": "tfjob-port", "port": 2222}],
        },
    }


def test_job_name_with_slash_is_dashed_in_labels() -> None:
    from tfjob.core.objects import base_labels
    from tfjob.frameworks.tensorflow import TENSORFLOW

    assert base_labels("test/key", TENSORFLOW.controller_name) == {
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/job-name": "test-key",
    }


def test_dist_mnist_renders_six_pods_and_six_services() -> None:
    from pathlib import Path

    from tfjob.frameworks.load import load_jobs

    text = (Path(__file__).parents[1] / "fixtures" / "dist-mnist.yaml").read_text()
    (tfjob,) = load_jobs(text, "dist-mnist.yaml")
    objects = desired_objects(with_defaults(tfjob), Settings())
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    expected = [
        f"dist-mnist-for-e2e-test-{t}-{i}" for t, n in (("ps", 2), ("worker", 4)) for i in range(n)
    ]
    assert names == [("Pod", n) for n in expected] + [("Service", n) for n in expected]


def test_a_plan_is_plain_data_and_its_pods_render_from_the_job() -> None:
    """Two reconciles of one job give equal plans that survive a JSON round trip, and
    a CreatePod renders to the same manifest as the job's desired pod."""
    tfjob = job(Worker=replica(2), PS=replica(1))
    first, second = run(tfjob), run(tfjob)
    assert first.actions == second.actions
    creates = actions_of(first, CreatePod)
    assert msgspec.json.decode(msgspec.json.encode(creates), type=list[CreatePod]) == creates
    worker = next(a for a in creates if a.name == "test-tfjob-worker-1")
    assert pod_manifest(tfjob, worker, Settings()) == desired_pod(
        with_defaults(tfjob), "Worker", 1, Settings()
    )
