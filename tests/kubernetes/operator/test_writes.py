"""The one write path (runtimes/kubernetes/controller/writes.py) on the in-memory API
(testkit/fake_api.py): every action - pod, service, owned object, gang group, the job -
meets the same policy for AlreadyExists, NotFound, conflicts and a RequestTimeout,
and is reported with the same Events and held for the same way. The schedulers acting
on the groups run on a real cluster in test_gang_scheduling.py."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from testkit import builders
from testkit.fake_api import FakeApi
from tfjob.api.errors import TemporaryError
from tfjob.core import gang
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import (
    Action,
    CreateGroup,
    CreateOwned,
    CreatePod,
    CreateService,
    DeleteGroup,
    DeleteJob,
    DeleteOwned,
    DeletePod,
    DeleteService,
    UpdateGroup,
    UpdateOwned,
)
from tfjob.core.settings import Settings
from tfjob.frameworks.mpi import MPI
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.cache.consistency import JobView
from tfjob.runtimes.kubernetes.cache.shared import group_resource
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.gang_groups import GangGroups, GangUnavailable
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.writes import Writer
from tfjob.runtimes.kubernetes.transport.client import ApiError, RequestTimeout
from tfjob.runtimes.kubernetes.transport.resources import PODS, SERVICES, Resource, jobs_of

NS = "default"
PODGROUPS = group_resource(gang.PLUGINS_POD_GROUP)
CONFIGMAP = next(k for k in MPI.owned_kinds if k.kind == "ConfigMap")
REF = ObjectRef(
    namespace=NS,
    name="pg",
    uid=builders.UID,
    kind=TENSORFLOW.kind,
    api_version=TENSORFLOW.api_version,
    reporter=TENSORFLOW.controller_name,
)


class Parts:
    def __init__(self, api: FakeApi) -> None:
        client: Any = api.client()
        self.api = api
        self.recorder = EventRecorder(client)
        self.metrics = Metrics()
        self.writer = Writer(TENSORFLOW, client, self.recorder, self.metrics, ReconcileWrites())
        job = builders.job("pg", NS, Worker=builders.replica(1))
        self.view = JobView(f"{NS}/pg", job, [], [])
        self.pods = PodRenderer(job, Settings())

    async def apply(self, action: Action) -> Exception | None:
        return await self.writer.apply(self.view, REF, self.writer.write_of(action, REF, self.pods))

    def reasons(self) -> list[str]:
        return [entry.record.reason for entry in self.recorder._known.values()]


def _group(min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": NS},
        "spec": {"minMember": min_member},
    }


def _configmap() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pg-config", "namespace": NS},
    }


def _service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "pg-worker-0", "namespace": NS},
        "spec": {"clusterIP": "None"},
    }


async def test_a_stale_or_missing_update_fails_to_be_retried(api: FakeApi) -> None:
    """The PUT carries the resourceVersion read: a group changed since is not
    overwritten (409), a group gone is not re-created by it (404). Either comes back
    as a temporary error, which the worker loop retries with backoff from the caches;
    no Event is recorded for an update, as upstream records none."""
    parts = Parts(api)
    client = api.client()
    read = msgspec.json.decode(await client.create(PODGROUPS, NS, _group(2)))
    fresh = UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest={**read, "spec": {"minMember": 3}})
    assert await parts.apply(fresh) is None
    assert api.object(PODGROUPS, NS, "pg")["spec"] == {"minMember": 3}  # type: ignore[index]
    assert parts.view.written[PODGROUPS]  # held until the group's cache shows it

    stale = UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest={**read, "spec": {"minMember": 4}})
    conflict = await parts.apply(stale)
    assert isinstance(conflict, ApiError) and conflict.conflict
    assert isinstance(conflict, TemporaryError)
    assert api.object(PODGROUPS, NS, "pg")["spec"] == {"minMember": 3}  # type: ignore[index]

    stored = api.object(PODGROUPS, NS, "pg")
    await client.delete(PODGROUPS, NS, "pg")
    gone = await parts.apply(UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest=dict(stored or {})))
    assert isinstance(gone, ApiError) and gone.not_found and not gone.refused
    assert api.object(PODGROUPS, NS, "pg") is None
    assert parts.reasons() == []


CREATES: list[tuple[str, Any, Resource, str]] = [
    (
        "pod",
        lambda: CreatePod(replica_type="Worker", index=0, name="pg-worker-0"),
        PODS,
        "SuccessfulCreatePod",
    ),
    (
        "service",
        lambda: CreateService(replica_type="Worker", index=0, manifest=_service()),
        SERVICES,
        "SuccessfulCreateService",
    ),
    (
        "gang group",
        lambda: CreateGroup(kind=gang.PLUGINS_POD_GROUP, manifest=_group(2)),
        PODGROUPS,
        "SuccessfulCreatePodGroup",
    ),
    (
        "owned object",
        lambda: CreateOwned(kind=CONFIGMAP, manifest=_configmap()),
        Resource("", "v1", "configmaps"),
        "",
    ),
]


@pytest.mark.parametrize(
    ("what", "action", "resource", "reason"), CREATES, ids=[c[0] for c in CREATES]
)
async def test_a_create_already_there_counts_as_created(
    api: FakeApi, what: str, action: Any, resource: Resource, reason: str
) -> None:
    """A create retried after its answer was lost meets AlreadyExists: done, and
    only the first create is reported (owned objects are never announced, as
    upstream; an owned object that exists and is the job's is simply done)."""
    parts = Parts(api)
    if what == "owned object":  # controlled by the job: taken over, not a conflict
        manifest = _configmap()
        manifest["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "name": "pg",
                "uid": builders.UID,
                "controller": True,
            }
        ]
        action = lambda: CreateOwned(kind=CONFIGMAP, manifest=manifest)  # noqa: E731
    assert await parts.apply(action()) is None
    assert await parts.apply(action()) is None
    assert [r.error is not None for r in api.of("create", resource)] == [False, True]
    assert parts.reasons() == ([reason] if reason else [])
    assert parts.view.written[resource]


DELETES: list[tuple[str, Action, Resource]] = [
    ("pod", DeletePod(replica_type="Worker", name="pg-worker-0"), PODS),
    ("service", DeleteService(replica_type="Worker", name="pg-worker-0"), SERVICES),
    ("gang group", DeleteGroup(kind=gang.PLUGINS_POD_GROUP, name="pg"), PODGROUPS),
    (
        "owned object",
        DeleteOwned(kind=CONFIGMAP, name="pg-config"),
        Resource("", "v1", "configmaps"),
    ),
    ("job", DeleteJob(), jobs_of(TENSORFLOW)),
]


@pytest.mark.parametrize(("what", "action", "resource"), DELETES, ids=[d[0] for d in DELETES])
async def test_a_delete_of_what_is_gone_is_done(
    api: FakeApi, what: str, action: Action, resource: Resource
) -> None:
    """Deleting what is not there (deleted by someone else, or by our own earlier
    delete whose answer was lost) is done, not a failure retried forever."""
    parts = Parts(api)
    assert await parts.apply(action) is None
    assert [r.verb for r in api.of("delete", resource)] == ["delete"]


EVERY_ACTION: list[tuple[str, Any, str]] = [
    *((c[0], c[1], "create") for c in CREATES),
    (
        "group update",
        lambda: UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest=_group(3)),
        "update",
    ),
    ("owned update", lambda: UpdateOwned(kind=CONFIGMAP, manifest=_configmap()), "update"),
    *((d[0], lambda a=d[1]: a, "delete") for d in DELETES),
]


@pytest.mark.parametrize(
    ("what", "action", "verb"), EVERY_ACTION, ids=[e[0] + " " + e[2] for e in EVERY_ACTION]
)
async def test_a_timed_out_write_may_have_gone_through(
    api: FakeApi, what: str, action: Any, verb: str
) -> None:
    """A write whose answer timed out may have been carried out: every kind of write
    counts it done, with no Failed Event (the watch will tell; a repeat meets
    AlreadyExists, a 409 or a 404, all harmless)."""
    parts = Parts(api)
    api.fail(RequestTimeout("timed out"), verb=verb)
    assert await parts.apply(action()) is None
    assert [r for r in parts.reasons() if r.startswith("Failed")] == []


@pytest.mark.parametrize(
    ("what", "action", "verb"), EVERY_ACTION, ids=[e[0] + " " + e[2] for e in EVERY_ACTION]
)
async def test_a_failed_write_is_an_error_and_a_warning(
    api: FakeApi, what: str, action: Any, verb: str
) -> None:
    """Any other error is returned (the job is retried) and, for a create or delete,
    recorded as a Failed<Verb><Noun> Warning; an update records none."""
    parts = Parts(api)
    api.fail(500, verb=verb)
    error = await parts.apply(action())
    assert isinstance(error, ApiError) and error.code == 500
    failed = [r for r in parts.reasons() if r.startswith("Failed")]
    assert len(failed) == (0 if verb == "update" else 1)
    assert not parts.view.written


async def test_the_operator_needs_the_group_api_served() -> None:
    """Without the PodGroup CRD the list is a 404: the operator names the missing
    API and exits (test_gang_scheduling.py: the exit, on a real cluster)."""
    client: Any = FakeApi(served=[]).client()
    with pytest.raises(GangUnavailable, match="PodGroup"):
        await GangGroups(client, "scheduler-plugins-scheduler").check_served(NS)
    served: Any = FakeApi(served=[PODGROUPS]).client()
    await GangGroups(served, "scheduler-plugins-scheduler").check_served(NS)
