"""Gang scheduling decided in the core: group objects, pod decoration, events, holds.

The expected objects are written out here field by field, from each scheduler's
published API (Volcano scheduling.volcano.sh/v1beta1, kube-batch
scheduling.incubator.k8s.io/v1alpha1, scheduler-plugins scheduling.x-k8s.io/v1alpha1,
Kubernetes scheduling.k8s.io/v1alpha2), not taken from the code under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.builders import NOW, actions_of, advance, job, pods, replica, run, services
from tfjob.core import gang
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import CreateGroup, CreatePod, DeleteGroup, UpdateGroup
from tfjob.core.settings import Settings
from tfjob.frameworks.tensorflow import TFJob

OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "name": "test-tfjob",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _with_resources(count: int, cpu: str, memory: str) -> dict[str, Any]:
    spec = replica(count)
    spec["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": cpu, "memory": memory}
    }
    return spec


def _settings(name: str) -> Settings:
    return Settings(gang_scheduler_name=name)


def _groups(plan: Any) -> list[dict[str, Any]]:
    return [a.manifest for a in actions_of(plan, CreateGroup)]


def _pod_manifests(plan: Any, tfjob: TFJob, scheduler: str = "") -> list[dict[str, Any]]:
    """The pods the plan creates, rendered as a runtime does."""
    renderer = PodRenderer(tfjob, _settings(scheduler))
    return [renderer.manifest(a) for a in actions_of(plan, CreatePod)]


class TestBackendChoice:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("", None),
            ("default-scheduler", gang.Backend.NATIVE),
            ("volcano", gang.Backend.VOLCANO),
            ("Volcano", gang.Backend.VOLCANO),
            ("kube-batch", gang.Backend.KUBE_BATCH),
            ("scheduler-plugins-scheduler", gang.Backend.PLUGINS),
        ],
    )
    def test_the_name_selects_the_backend(self, name: str, expected: gang.Backend | None) -> None:
        assert gang.backend(name) is expected

    def test_off_means_no_groups_and_untouched_pods(self) -> None:
        tfjob = job(Worker=replica(2))
        plan = run(tfjob)
        assert _groups(plan) == []
        assert all("schedulerName" not in m["spec"] for m in _pod_manifests(plan, tfjob))


class TestNative:
    def test_workload_then_podgroup_with_all_replicas_as_min_count(self) -> None:
        plan = run(job(Worker=replica(4), PS=replica(1)), settings=_settings("default-scheduler"))
        workload, group = _groups(plan)
        assert workload == {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": "test-tfjob", "namespace": "default", "ownerReferences": [OWNER]},
            "spec": {
                "controllerRef": {
                    "apiGroup": "kubeflow.org",
                    "kind": "TFJob",
                    "name": "test-tfjob",
                },
                "podGroupTemplates": [
                    {"name": "replicas", "schedulingPolicy": {"gang": {"minCount": 5}}}
                ],
            },
        }
        assert group == {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "test-tfjob", "namespace": "default", "ownerReferences": [OWNER]},
            "spec": {
                "podGroupTemplateRef": {
                    "workload": {"workloadName": "test-tfjob", "podGroupTemplateName": "replicas"}
                },
                "schedulingPolicy": {"gang": {"minCount": 5}},
            },
        }
        # Groups come before pods in the plan, the Workload before its PodGroup.
        kinds = [type(a).__name__ for a in plan.actions]
        assert kinds[:2] == ["CreateGroup", "CreateGroup"]

    def test_min_available_and_priority_class(self) -> None:
        policy = {"schedulingPolicy": {"minAvailable": 3, "priorityClass": "high"}}
        plan = run(
            job(run_policy=policy, Worker=replica(4)), settings=_settings("default-scheduler")
        )
        workload, group = _groups(plan)
        template = workload["spec"]["podGroupTemplates"][0]
        assert template["schedulingPolicy"] == {"gang": {"minCount": 3}}
        assert template["priorityClassName"] == "high"
        assert group["spec"]["priorityClassName"] == "high"

    def test_pods_join_the_group_and_get_the_scheduler(self) -> None:
        tfjob = job(Worker=replica(2))
        plan = run(tfjob, settings=_settings("default-scheduler"))
        for manifest in _pod_manifests(plan, tfjob, "default-scheduler"):
            assert manifest["spec"]["schedulerName"] == "default-scheduler"
            assert manifest["spec"]["schedulingGroup"] == {"podGroupName": "test-tfjob"}

    def test_existing_groups_are_not_created_again(self) -> None:
        observed = [
            {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload"},
            {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup"},
        ]
        plan = gang_run(job(Worker=replica(2)), "default-scheduler", observed)
        assert _groups(plan) == []
        assert len(actions_of(plan, CreatePod)) == 2


def gang_run(tfjob: Any, name: str, groups: list[dict[str, Any]], **kw: Any) -> Any:
    from tfjob.core.reconcile import reconcile

    return reconcile(
        tfjob, kw.get("pods", []), kw.get("services", []), NOW, _settings(name), groups
    )


class TestVolcano:
    def test_pod_group_as_upstream(self) -> None:
        tfjob = job(
            run_policy={"schedulingPolicy": {"queue": "research", "priorityClass": "high"}},
            Worker=_with_resources(2, "1", "1Gi"),
            PS=_with_resources(1, "500m", "512Mi"),
        )
        tfjob.metadata.annotations["team"] = "vision"
        plan = run(tfjob, settings=_settings("volcano"))
        (group,) = _groups(plan)
        assert group == {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "test-tfjob",
                "namespace": "default",
                "annotations": {"team": "vision"},
                "ownerReferences": [OWNER],
            },
            "spec": {
                "minMember": 3,
                "queue": "research",
                "priorityClassName": "high",
                "minResources": {"cpu": "2500m", "memory": "2560Mi"},
            },
        }

    def test_default_queue_and_explicit_min_resources(self) -> None:
        policy = {"schedulingPolicy": {"minResources": {"cpu": "8"}}}
        plan = run(job(run_policy=policy, Worker=replica(2)), settings=_settings("volcano"))
        (group,) = _groups(plan)
        assert group["spec"]["queue"] == "default"
        assert group["spec"]["minResources"] == {"cpu": "8"}

    def test_no_pod_until_volcano_admits_the_group(self) -> None:
        tfjob = job(Worker=replica(2))
        plan = gang_run(tfjob, "volcano", [])
        assert len(_groups(plan)) == 1
        assert actions_of(plan, CreatePod) == []
        assert plan.requeue_after == 1.0
        pending = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "status": {"phase": "Pending"}}]  # fmt: skip
        plan = gang_run(advance(tfjob, plan), "volcano", pending)
        assert _groups(plan) == [] and actions_of(plan, CreatePod) == []
        admitted = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                     "status": {"phase": "Inqueue"}}]  # fmt: skip
        plan = gang_run(advance(tfjob, plan), "volcano", admitted)
        manifests = _pod_manifests(plan, tfjob, "volcano")
        assert len(manifests) == 2
        for manifest in manifests:
            assert manifest["spec"]["schedulerName"] == "volcano"
            assert manifest["metadata"]["annotations"] == {
                "scheduling.k8s.io/group-name": "test-tfjob",
                "volcano.sh/task-spec": "worker",
            }


class TestKubeBatch:
    def test_pod_group_min_member_is_every_replica(self) -> None:
        tfjob = job(Worker=replica(3), PS=replica(1))
        plan = run(tfjob, settings=_settings("kube-batch"))
        (group,) = _groups(plan)
        assert group == {
            "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "test-tfjob", "namespace": "default", "ownerReferences": [OWNER]},
            "spec": {"minMember": 4},
        }
        for manifest in _pod_manifests(plan, tfjob, "kube-batch"):
            assert manifest["spec"]["schedulerName"] == "kube-batch"
            assert manifest["metadata"]["annotations"] == {
                "scheduling.k8s.io/group-name": "test-tfjob"
            }
        assert [e for e in plan.events if e.type == "Warning"] == []

    def test_another_scheduler_is_kept_with_the_seed_warning(self) -> None:
        tfjob = job(Worker=replica(2), PS=replica(1, schedulerName="my-scheduler"))
        plan = run(tfjob, settings=_settings("kube-batch"))
        names = {
            m["metadata"]["name"]: m["spec"]["schedulerName"]
            for m in _pod_manifests(plan, tfjob, "kube-batch")
        }
        assert names == {
            "test-tfjob-ps-0": "my-scheduler",
            "test-tfjob-worker-0": "kube-batch",
            "test-tfjob-worker-1": "kube-batch",
        }
        warnings = [(e.reason, e.message) for e in plan.events if e.type == "Warning"]
        assert (
            warnings
            == [
                (
                    "SettedPodTemplateSchedulerName",
                    "Another scheduler is specified when gang-scheduling is enabled and it will "
                    "not be overwritten",
                )
            ]
            * 3
        )


class TestSchedulerPlugins:
    def test_pod_group_label_and_scheduler_name(self) -> None:
        policy = {"schedulingPolicy": {"scheduleTimeoutSeconds": 60, "queue": "ignored"}}
        tfjob = job(run_policy=policy, Worker=_with_resources(2, "1", "2Gi"))
        plan = run(tfjob, settings=_settings("scheduler-plugins-scheduler"))
        (group,) = _groups(plan)
        assert group == {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "test-tfjob", "namespace": "default", "ownerReferences": [OWNER]},
            "spec": {
                "minMember": 2,
                "minResources": {"cpu": "2", "memory": "4Gi"},
                "scheduleTimeoutSeconds": 60,
            },
        }
        for manifest in _pod_manifests(plan, tfjob, "scheduler-plugins-scheduler"):
            assert manifest["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
            assert manifest["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "test-tfjob"

    def test_warning_uses_kubeflows_reason(self) -> None:
        tfjob = job(Worker=replica(1, schedulerName="other"))
        plan = run(tfjob, settings=_settings("scheduler-plugins-scheduler"))
        assert [e.reason for e in plan.events if e.type == "Warning"] == [
            "SetPodTemplateSchedulerName"
        ]


class TestLifecycle:
    def test_finished_job_deletes_its_groups(self) -> None:
        status = {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Succeeded", "status": "True"},
            ],
            "completionTime": "2026-11-30T11:00:00Z",
        }
        observed = [
            {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload"},
            {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup"},
        ]
        plan = gang_run(job(status=status, Worker=replica(2)), "default-scheduler", observed)
        assert [(a.kind.kind, a.name) for a in actions_of(plan, DeleteGroup)] == [
            ("PodGroup", "test-tfjob"),
            ("Workload", "test-tfjob"),
        ]

    def test_a_group_already_going_is_not_deleted_again(self) -> None:
        status = {"conditions": [{"type": "Succeeded", "status": "True"}]}
        going = [
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"deletionTimestamp": "2026-11-30T11:59:00Z"},
            }
        ]
        plan = gang_run(job(status=status, Worker=replica(1)), "plugins", going)
        assert actions_of(plan, DeleteGroup) == []

    def test_suspended_job_deletes_its_group_and_running_job_keeps_it(self) -> None:
        observed = [
            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "spec": {"minMember": 1}}
        ]  # fmt: skip
        suspended = job(run_policy={"suspend": True}, Worker=replica(1))
        plan = gang_run(suspended, "plugins", observed)
        assert len(actions_of(plan, DeleteGroup)) == 1
        running = job(Worker=replica(1))
        plan = gang_run(
            running, "plugins", observed, pods=pods("worker", 1), services=services("worker", 1)
        )
        assert plan.actions == []


VOLCANO = "scheduling.volcano.sh/v1beta1"
KUBE_BATCH = "scheduling.incubator.k8s.io/v1alpha1"
PLUGINS = "scheduling.x-k8s.io/v1alpha1"
NATIVE = "scheduling.k8s.io/v1alpha2"


def _stored(api: str, spec: dict[str, Any], kind: str = "PodGroup", **extra: Any) -> dict[str, Any]:
    """A group object as the API server returns it: server-set metadata, the job's
    annotations as they were at creation, a label someone else added."""
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {
            "name": "test-tfjob",
            "namespace": "default",
            "uid": "group-uid",
            "resourceVersion": "41",
            "creationTimestamp": "2026-11-30T11:00:00Z",
            "annotations": {"team": "vision"},
            "labels": {"added-by": "admin"},
            "ownerReferences": [OWNER],
        },
        "spec": spec,
        **extra,
    }


def _updates(plan: Any) -> list[dict[str, Any]]:
    return [a.manifest for a in actions_of(plan, UpdateGroup)]


class TestUpdate:
    """An existing PodGroup follows the job: scaled up or down, a new minAvailable or
    minResources, its spec is replaced (one PUT of the object as read)."""

    def test_scaling_up_updates_min_member_and_min_resources_keeping_the_metadata(self) -> None:
        tfjob = job(Worker=_with_resources(4, "1", "1Gi"))
        tfjob.metadata.annotations["team"] = "speech"  # changed since the group was made
        observed = _stored(
            PLUGINS, {"minMember": 2, "minResources": {"cpu": "2", "memory": "2Gi"}},
            status={"phase": "Running"},
        )  # fmt: skip
        plan = gang_run(
            tfjob, "scheduler-plugins-scheduler", [observed],
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert _updates(plan) == [
            {**observed, "spec": {"minMember": 4, "minResources": {"cpu": "4", "memory": "4Gi"}}}
        ]
        (update,) = actions_of(plan, UpdateGroup)
        assert (update.kind.api_version, update.kind.kind, update.name) == (
            PLUGINS, "PodGroup", "test-tfjob",
        )  # fmt: skip
        # Metadata as read: resourceVersion (a stale write is refused), annotations
        # from creation, labels; status as read. Before the new pods, as a create is.
        assert update.manifest["metadata"]["annotations"] == {"team": "vision"}
        assert update.manifest["metadata"]["resourceVersion"] == "41"
        assert _groups(plan) == []
        assert [type(a).__name__ for a in plan.actions] == ["UpdateGroup"] + ["CreatePod"] * 2 + [
            "CreateService"
        ] * 2

    def test_scaling_down_updates_too(self) -> None:
        observed = _stored(KUBE_BATCH, {"minMember": 4})
        plan = gang_run(
            job(Worker=replica(2)), "kube-batch", [observed],
            pods=pods("worker", 4), services=services("worker", 4),
        )  # fmt: skip
        assert [u["spec"] for u in _updates(plan)] == [{"minMember": 2}]

    @pytest.mark.parametrize(
        ("scheduler", "observed"),
        [
            (
                "scheduler-plugins-scheduler",
                _stored(PLUGINS, {"minMember": 2, "minResources": {"cpu": "2", "memory": "2Gi"}}),
            ),
            ("kube-batch", _stored(KUBE_BATCH, {"minMember": 2})),
            (
                "volcano",
                _stored(
                    VOLCANO,
                    {"minMember": 2, "queue": "default",
                     "minResources": {"cpu": "2", "memory": "2Gi"}},
                    status={"phase": "Running"},
                ),
            ),
        ],
    )  # fmt: skip
    def test_unchanged_spec_sends_nothing(self, scheduler: str, observed: dict[str, Any]) -> None:
        plan = gang_run(
            job(Worker=_with_resources(2, "1", "1Gi")), scheduler, [observed],
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert plan.actions == []

    def test_quantities_are_compared_by_value_not_spelling(self) -> None:
        observed = _stored(
            PLUGINS, {"minMember": 2, "minResources": {"cpu": "2000m", "memory": "2048Mi"}}
        )
        plan = gang_run(
            job(Worker=_with_resources(2, "1", "1Gi")), "scheduler-plugins-scheduler",
            [observed], pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert plan.actions == []

    def test_min_available_and_min_resources_changes_are_followed(self) -> None:
        policy = {"schedulingPolicy": {"minAvailable": 3, "minResources": {"cpu": "10"}}}
        observed = _stored(PLUGINS, {"minMember": 2, "minResources": {"cpu": "8"}})
        plan = gang_run(
            job(run_policy=policy, Worker=replica(4)), "scheduler-plugins-scheduler",
            [observed], pods=pods("worker", 4), services=services("worker", 4),
        )  # fmt: skip
        assert [u["spec"] for u in _updates(plan)] == [
            {"minMember": 3, "minResources": {"cpu": "10"}}
        ]

    def test_fields_the_job_no_longer_sets_are_removed(self) -> None:
        """The spec is replaced, not merged: a dropped scheduleTimeoutSeconds goes."""
        observed = _stored(PLUGINS, {"minMember": 1, "scheduleTimeoutSeconds": 60})
        plan = gang_run(
            job(Worker=replica(1)), "scheduler-plugins-scheduler", [observed],
            pods=pods("worker", 1), services=services("worker", 1),
        )  # fmt: skip
        assert [u["spec"] for u in _updates(plan)] == [{"minMember": 1}]

    def test_volcano_keeps_the_queue_the_group_has(self) -> None:
        policy = {"schedulingPolicy": {"queue": "research"}}
        observed = _stored(
            VOLCANO, {"minMember": 2, "queue": "night", "minTaskMember": {"worker": 2}},
            status={"phase": "Running"},
        )  # fmt: skip
        plan = gang_run(
            job(run_policy=policy, Worker=replica(4)), "volcano", [observed],
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert _updates(plan) == [{**observed, "spec": {"minMember": 4, "queue": "night"}}]
        # A group without a queue gets the job's.
        observed = _stored(VOLCANO, {"minMember": 2}, status={"phase": "Running"})
        plan = gang_run(
            job(run_policy=policy, Worker=replica(2)), "volcano", [observed],
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert [u["spec"] for u in _updates(plan)] == [{"minMember": 2, "queue": "research"}]

    def test_volcano_queue_alone_never_differs(self) -> None:
        policy = {"schedulingPolicy": {"queue": "research"}}
        observed = _stored(VOLCANO, {"minMember": 2, "queue": "night"}, status={"phase": "Running"})
        plan = gang_run(
            job(run_policy=policy, Worker=replica(2)), "volcano", [observed],
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert plan.actions == []

    def test_volcano_hold_is_unchanged_by_an_update(self) -> None:
        observed = _stored(
            VOLCANO, {"minMember": 2, "queue": "default"}, status={"phase": "Pending"}
        )
        plan = gang_run(job(Worker=replica(3)), "volcano", [observed])
        assert [u["spec"] for u in _updates(plan)] == [{"minMember": 3, "queue": "default"}]
        assert actions_of(plan, CreatePod) == []
        assert plan.requeue_after == 1.0

    def test_native_objects_are_never_updated(self) -> None:
        observed = [
            _stored(
                NATIVE,
                {"controllerRef": {"apiGroup": "kubeflow.org", "kind": "TFJob",
                                   "name": "test-tfjob"},
                 "podGroupTemplates": [{"name": "replicas",
                                        "schedulingPolicy": {"gang": {"minCount": 2}}}]},
                kind="Workload",
            ),
            _stored(
                NATIVE,
                {"podGroupTemplateRef": {"workload": {"workloadName": "test-tfjob",
                                                      "podGroupTemplateName": "replicas"}},
                 "schedulingPolicy": {"gang": {"minCount": 2}}},
            ),
        ]  # fmt: skip
        plan = gang_run(
            job(Worker=replica(4)), "default-scheduler", observed,
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert _updates(plan) == [] and _groups(plan) == []
        assert len(actions_of(plan, CreatePod)) == 2

    def test_a_group_being_deleted_is_not_updated(self) -> None:
        observed = _stored(KUBE_BATCH, {"minMember": 2})
        observed["metadata"]["deletionTimestamp"] = "2026-11-30T11:59:00Z"
        plan = gang_run(job(Worker=replica(4)), "kube-batch", [observed])
        assert _updates(plan) == []

    def test_a_job_finishing_in_this_pass_deletes_its_group_instead(self) -> None:
        observed = _stored(KUBE_BATCH, {"minMember": 2})
        running = {"conditions": [{"type": "Running", "status": "True"}]}
        plan = gang_run(
            job(status=running, Worker=replica(3)), "kube-batch", [observed],
            pods=pods("worker", 3, "Succeeded"), services=services("worker", 3),
        )  # fmt: skip
        assert ("Succeeded", "True") in [(c.type, c.status) for c in plan.status.conditions]
        assert _updates(plan) == []
        assert len(actions_of(plan, DeleteGroup)) == 1

    def test_gang_off_never_touches_groups(self) -> None:
        """As the local runtime runs: no scheduler name, so no group action of any kind."""
        observed = _stored(KUBE_BATCH, {"minMember": 2})
        plan = gang_run(
            job(Worker=replica(4)), "", [observed],
            pods=pods("worker", 2), services=services("worker", 2),
        )  # fmt: skip
        assert _updates(plan) == [] and _groups(plan) == []


@pytest.mark.parametrize(
    ("values", "total"),
    [
        (["1", "500m"], "1500m"),
        (["1Gi", "512Mi"], "1536Mi"),
        (["1Gi", "1Gi"], "2Gi"),
        (["2", "3"], "5"),
        (["100M", "1G"], "1100M"),
        (["1", "1"], "2"),
    ],
)
def test_quantities_add_up_in_kubernetes_notation(values: list[str], total: str) -> None:
    assert gang.add_quantities(values) == total
