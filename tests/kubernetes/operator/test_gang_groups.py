"""The API side of gang scheduling (runtimes/kubernetes/controller/gang_groups.py) on the in-memory API
(testkit/fake_api.py): what it does with the answers to its group requests. The
schedulers acting on the groups run on a real cluster in test_gang_scheduling.py."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from testkit.fake_api import FakeApi
from tfjob.api.errors import TemporaryError
from tfjob.core import gang
from tfjob.core.plan import CreateGroup, UpdateGroup
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.gang_groups import GangGroups, GangUnavailable
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.transport.client import ApiError
from tfjob.runtimes.kubernetes.transport.resources import Resource

NS = "default"
PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
REF = ObjectRef(namespace=NS, name="pg", uid="uid-pg")


def _groups(api: FakeApi) -> tuple[GangGroups, EventRecorder]:
    client: Any = api.client()
    recorder = EventRecorder(client)
    return GangGroups(client, recorder, Metrics(), "scheduler-plugins-scheduler"), recorder


def _manifest(min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": NS},
        "spec": {"minMember": min_member},
    }


async def test_a_stale_or_missing_group_update_fails_to_be_retried(api: FakeApi) -> None:
    """The PUT carries the resourceVersion read: a group changed since is not
    overwritten (409), a group gone is not re-created by it (404). Either comes back
    as a temporary error, which the worker loop retries with backoff from a new GET;
    no Event is recorded for an update, as upstream records none."""
    groups, recorder = _groups(api)
    client = api.client()
    read = msgspec.json.decode(await client.create(PODGROUPS, NS, _manifest(2)))
    fresh = UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest={**read, "spec": {"minMember": 3}})
    assert await groups.act(REF, fresh) is None
    (stored,) = await groups.observe(NS, "pg")
    assert stored["spec"] == {"minMember": 3}

    stale = UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest={**read, "spec": {"minMember": 4}})
    conflict = await groups.act(REF, stale)
    assert isinstance(conflict, ApiError) and conflict.conflict
    assert isinstance(conflict, TemporaryError)
    (stored,) = await groups.observe(NS, "pg")
    assert stored["spec"] == {"minMember": 3}

    await client.delete(PODGROUPS, NS, "pg")
    gone = await groups.act(REF, UpdateGroup(kind=gang.PLUGINS_POD_GROUP, manifest=stored))
    assert isinstance(gone, ApiError) and gone.not_found and not gone.refused
    assert await groups.observe(NS, "pg") == []
    assert recorder.metrics.recorded._value.get() == 0


async def test_a_group_already_there_counts_as_created(api: FakeApi) -> None:
    """A create retried after its answer was lost meets AlreadyExists: done, and only
    the first create is reported."""
    groups, recorder = _groups(api)
    create = CreateGroup(kind=gang.PLUGINS_POD_GROUP, manifest=_manifest(2))
    assert await groups.act(REF, create) is None
    assert await groups.act(REF, create) is None
    assert [r.error is not None for r in api.of("create")] == [False, True]
    assert recorder.metrics.recorded._value.get() == 1


async def test_the_operator_needs_the_group_api_served() -> None:
    """Without the PodGroup CRD the list is a 404: the operator names the missing
    API and exits (test_gang_scheduling.py: the exit, on a real cluster)."""
    groups, _recorder = _groups(FakeApi(served=[]))
    with pytest.raises(GangUnavailable, match="PodGroup"):
        await groups.check_served(NS)
    served, _recorder = _groups(FakeApi(served=[PODGROUPS]))
    await served.check_served(NS)
