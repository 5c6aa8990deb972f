"""runtimePatches merged in order, resourcesPerNode merged into the trainer's node,
the initializers' env, and the PodGroup a podGroupPolicy asks for."""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.core.trainjob.plan import Observed

from .conftest import (
    applied,
    env_map,
    jobset_of,
    node_container,
    plan,
    replicated,
    runtime,
    trainjob,
)

NODE_JOB = {
    "name": "node",
    "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "node",
                            "image": "base:1",
                            "resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
                        }
                    ]
                }
            }
        },
    },
}


def _runtime(*jobs: dict[str, Any], **spec: Any) -> Any:
    return runtime(
        {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "template": {"spec": {"replicatedJobs": list(jobs)}},
            **spec,
        }
    )


def _patch(
    manager: str, pod: dict[str, Any], metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]
        }
    }
    if metadata is not None:
        template["metadata"] = metadata
    return {"manager": manager, "trainingRuntimeSpec": {"template": template}}


def test_two_managers_node_selectors_combine_in_order() -> None:
    patches = [
        _patch(
            "kueue.x-k8s.io/manager",
            {"nodeSelector": {"zone": "a", "pool": "gpu"}, "tolerations": [{"key": "a"}]},
        ),
        _patch("example.com/other", {"nodeSelector": {"zone": "b"}, "tolerations": [{"key": "b"}]}),
    ]
    jobset = jobset_of(trainjob("rt", runtimePatches=patches), _runtime(NODE_JOB))
    pod = replicated(jobset, "node")["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"zone": "b", "pool": "gpu"}  # maps merge, the later wins
    assert pod["tolerations"] == [{"key": "b"}]  # a list without a merge key is replaced
    assert node_container(jobset)["image"] == "base:1"  # the rest of the template stays


def test_patched_containers_merge_by_name_and_jobs_keep_their_order() -> None:
    other = {
        "name": "other",
        "template": {
            "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "s"}]}}}
        },
    }
    patch = _patch(
        "example.com/m", {"containers": [{"name": "node", "securityContext": {"runAsUser": 7}}]}
    )
    patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"].insert(
        0, {"name": "other", "template": {"metadata": {"labels": {"x": "y"}}}}
    )
    jobset = jobset_of(trainjob("rt", runtimePatches=[patch]), _runtime(NODE_JOB, other))
    assert [j["name"] for j in jobset["spec"]["replicatedJobs"]] == ["node", "other"]
    node = node_container(jobset)
    assert node["securityContext"] == {"runAsUser": 7}
    assert node["image"] == "base:1"
    assert replicated(jobset, "other")["template"]["metadata"]["labels"] == {"x": "y"}


def test_patch_metadata_labels_the_jobset() -> None:
    rt = runtime(
        {
            "mlPolicy": {"torch": {}},
            "template": {
                "metadata": {"labels": {"from": "runtime", "k": "1"}},
                "spec": {"replicatedJobs": [NODE_JOB]},
            },
        }
    )
    patches = [
        _patch("a.io/m", {}, {"labels": {"k": "2"}, "annotations": {"note": "x"}}),
        _patch("b.io/m", {}, {"labels": {"k": "3"}}),
    ]
    jobset = jobset_of(trainjob("rt", runtimePatches=patches), rt)
    assert jobset["metadata"]["labels"] == {"from": "runtime", "k": "3"}
    assert jobset["metadata"]["annotations"] == {"note": "x"}


def test_resources_per_node_merge_into_the_runtimes() -> None:
    trainer = {
        "resourcesPerNode": {
            "limits": {"cpu": "2", "nvidia.com/gpu": "1"},
            "requests": {"cpu": "1"},
        }
    }
    node = node_container(jobset_of(trainjob("rt", trainer=trainer), _runtime(NODE_JOB)))
    assert node["resources"] == {
        "limits": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "1"},
    }
    assert env_map(node)["PET_NPROC_PER_NODE"] == "auto"  # a GPU per node


def test_runtime_resources_give_the_process_count() -> None:
    node = node_container(jobset_of(trainjob("rt", trainer={"image": "x"}), _runtime(NODE_JOB)))
    assert env_map(node)["PET_NPROC_PER_NODE"] == "4"  # the runtime's CPU limit
    assert env_map(node)["PET_NNODES"] == "2"  # the runtime's numNodes


def test_initializers_get_storage_env_and_secret() -> None:
    dataset = {
        "name": "dataset-initializer",
        "template": {
            "metadata": {
                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}
            },
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "dataset-initializer",
                                "image": "init",
                                "env": [{"name": "KEEP", "value": "1"}],
                            }
                        ]
                    }
                }
            },
        },
    }
    initializer = {
        "dataset": {
            "storageUri": "hf://data",
            "env": [{"name": "TOKEN_FILE", "value": "/t"}],
            "secretRef": {"name": "creds"},
        }
    }
    jobset = jobset_of(trainjob("rt", initializer=initializer), _runtime(dataset, NODE_JOB))
    job = replicated(jobset, "dataset-initializer")
    container = job["template"]["spec"]["template"]["spec"]["containers"][0]
    assert job["replicas"] == 1
    assert container["env"] == [
        {"name": "KEEP", "value": "1"},
        {"name": "STORAGE_URI", "value": "hf://data"},
        {"name": "TOKEN_FILE", "value": "/t"},
    ]
    assert container["envFrom"] == [{"secretRef": {"name": "creds"}}]
    assert job["template"]["spec"]["parallelism"] == 1


def test_coscheduling_pod_group() -> None:
    job = {**NODE_JOB}
    job["template"] = {
        **NODE_JOB["template"],
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "node",
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                        }
                    ]
                }
            }
        },
    }
    rt = _runtime(job, podGroupPolicy={"coscheduling": {}})
    result = plan(trainjob("rt", trainer={"numNodes": 3}), rt)
    group = applied(result, "PodGroup")
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["name"] == "tj"
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "1500m", "memory": "3Gi"},
        "scheduleTimeoutSeconds": 60,
    }
    pod_meta = replicated(applied(result, "JobSet"), "node")["template"]["spec"]["template"][
        "metadata"
    ]
    assert pod_meta == {"labels": {"scheduling.x-k8s.io/pod-group": "tj"}}
    # A running job's PodGroup is not written again.
    again = plan(
        trainjob("rt", trainer={"numNodes": 3}),
        rt,
        Observed(pod_group=group, jobset=applied(result, "JobSet")),
    )
    assert not [a for a in again.actions if getattr(a, "manifest", {}).get("kind") == "PodGroup"]


def test_volcano_pod_group_queue_and_annotation() -> None:
    rt = runtime(
        {
            "mlPolicy": {"torch": {}},
            "podGroupPolicy": {"volcano": {}},
            "template": {
                "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "q1"}},
                "spec": {"replicatedJobs": [NODE_JOB]},
            },
        }
    )
    result = plan(trainjob("rt"), rt)
    group = applied(result, "PodGroup")
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"]["queue"] == "q1"
    assert group["spec"]["minMember"] == 1
    pod_meta = replicated(applied(result, "JobSet"), "node")["template"]["spec"]["template"][
        "metadata"
    ]
    assert pod_meta == {"annotations": {"scheduling.k8s.io/group-name": "tj"}}


def test_quantities_are_written_as_go_writes_them() -> None:
    job = {**NODE_JOB}
    job["template"] = {
        **NODE_JOB["template"],
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "node",
                            "resources": {
                                "limits": {"cpu": "1000m", "memory": "2048Mi"},
                                "requests": {"cpu": 0.5},
                            },
                        }
                    ]
                }
            }
        },
    }
    node = node_container(
        jobset_of(
            trainjob("rt", trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}),
            _runtime(job),
        )
    )
    assert node["resources"] == {
        "limits": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "500m"},
    }


def test_empty_lists_and_maps_are_left_out_as_go_leaves_them() -> None:
    job = {**NODE_JOB}
    job["template"] = {
        **NODE_JOB["template"],
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {},
                    "tolerations": [],
                    "containers": [
                        {"name": "node", "image": "i", "command": ["run"], "args": [], "env": []}
                    ],
                }
            }
        },
    }
    jobset = jobset_of(trainjob("rt", trainer={"command": []}), _runtime(job))
    pod = replicated(jobset, "node")["template"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod and "tolerations" not in pod
    node = node_container(jobset)
    assert "command" not in node  # an empty command given removes the runtime's, as in Trainer
    assert "args" not in node
    assert node["resources"] == {}  # a struct: written empty
    assert replicated(jobset, "node")["template"]["spec"]["template"]["metadata"] == {}


def test_torch_env_injection_targets_get_the_pet_env() -> None:
    sidecar = {
        "name": "monitor",
        "template": {
            "spec": {
                "template": {
                    "spec": {
                        "initContainers": [{"name": "probe", "image": "p"}],
                        "containers": [{"name": "agent", "image": "a"}],
                    }
                }
            }
        },
    }
    rt = _runtime(NODE_JOB, sidecar)
    rt = runtime(
        {
            **_plain(rt),
            "mlPolicy": {
                "numNodes": 2,
                "torch": {
                    "envInjection": {
                        "targets": [{"jobName": "monitor", "containerNames": ["agent", "probe"]}]
                    }
                },
            },
        }
    )
    jobset = jobset_of(trainjob("rt"), rt)
    pod = replicated(jobset, "monitor")["template"]["spec"]["template"]["spec"]
    for container in (pod["containers"][0], pod["initContainers"][0]):
        assert [e["name"] for e in container["env"]] == [
            "PET_NNODES",
            "PET_NPROC_PER_NODE",
            "PET_NODE_RANK",
            "PET_MASTER_ADDR",
            "PET_MASTER_PORT",
        ]
        assert "ports" not in container
    bad = runtime(
        {
            **_plain(rt),
            "mlPolicy": {
                "torch": {
                    "envInjection": {
                        "targets": [{"jobName": "monitor", "containerNames": ["gone"]}]
                    }
                }
            },
        }
    )
    result = plan(trainjob("rt"), bad)
    assert (
        result.status.conditions[0].message
        == 'envInjection target podSet "monitor" container "gone" not found in runtime template'
    )


def _plain(rt: Any) -> dict[str, Any]:
    spec: dict[str, Any] = msgspec.to_builtins(rt.spec)
    return spec


def test_template_fields_the_model_does_not_know_reach_the_jobset() -> None:
    job = {**NODE_JOB, "groupName": "g"}
    rt = runtime(
        {
            "mlPolicy": {"torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [job],
                    "coordinator": {"replicatedJob": "node"},
                    "ttlSecondsAfterFinished": 30,
                }
            },
        }
    )
    jobset = jobset_of(trainjob("rt"), rt)
    assert jobset["spec"]["coordinator"] == {"replicatedJob": "node"}
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 30
    assert replicated(jobset, "node")["groupName"] == "g"


def test_the_runtime_given_is_not_changed() -> None:
    rt = _runtime(NODE_JOB)
    before = msgspec.to_builtins(rt)
    plan(
        trainjob(
            "rt",
            trainer={
                "numNodes": 4,
                "env": [{"name": "A", "value": "1"}],
                "resourcesPerNode": {"limits": {"cpu": "1"}},
            },
        ),
        rt,
    )
    assert msgspec.to_builtins(rt) == before


def test_merged_lists_are_ordered_as_kubernetes_orders_them() -> None:
    from tfjob.core.trainjob.patches import strategic_merge

    original = {"containers": [{"name": "a"}, {"name": "b"}]}
    # Named ones in their places; an item new to the list goes first.
    merged = strategic_merge(original, {"containers": [{"name": "c"}, {"name": "b", "image": "x"}]})
    assert [c["name"] for c in merged["containers"]] == ["c", "a", "b"]
    assert merged["containers"][2] == {"name": "b", "image": "x"}
    assert original == {"containers": [{"name": "a"}, {"name": "b"}]}
    # A replicated job a patch adds (Trainer's webhook would refuse it) goes first too.
    extra = {
        "name": "extra",
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "x"}]}}}},
    }
    jobset = jobset_of(
        trainjob(
            "rt",
            runtimePatches=[
                {
                    "manager": "a.io/m",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [extra]}}},
                }
            ],
        ),
        _runtime(NODE_JOB),
    )
    assert [j["name"] for j in jobset["spec"]["replicatedJobs"]] == ["extra", "node"]
