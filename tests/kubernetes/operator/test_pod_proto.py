"""Pod list pages as protobuf (what the operator lists pods with) make the same
projections and continue tokens as JSON.

Offline, from pages the API server wrote at one resourceVersion in both formats
(tests/fixtures/pods/, re-captured by `python3 -m testkit.pod_pages`); and live, the operator's pod
informer listing protobuf from the real API server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest

from testkit.controlplane import ControlPlane
from testkit.pod_pages import PAGE, PODS, Api, make_pods, release
from tfjob.api.observed import Meta, Observed, PodStatus, pb
from tfjob.api.timestamps import parse_rfc3339
from tfjob.runtimes.kubernetes.cache.informer import Informer
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import POD_CODEC, POD_PROTO_CODEC, continue_token
from tfjob.runtimes.kubernetes.transport.pod_proto import PageDecoder
from tfjob.runtimes.kubernetes.transport.resources import PODS as PODS_RESOURCE

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pods"


def _read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.mark.parametrize("page", ["pods", "page"])
def test_a_protobuf_page_makes_the_pods_and_token_of_the_json_page(page: str) -> None:
    pods, version, token = POD_PROTO_CODEC.decode_list(_read(f"{page}.pb"))
    assert (pods, version, token) == POD_CODEC.decode_list(_read(f"{page}.json"))
    if page == "page":
        assert len(pods) == PAGE and token
    else:
        assert sorted(p.metadata.name for p in pods) == sorted(PODS) and token == ""


def test_the_pages_hold_each_field_the_core_reads() -> None:
    """What the comparison above covers, read from protobuf."""
    pods = {p.metadata.name: p for p in POD_PROTO_CODEC.decode_list(_read("pods.pb"))[0]}
    evicted = pods["evicted"].status
    assert (evicted.phase, evicted.reason) == ("Failed", "Evicted")
    assert evicted.message == "The node was low on resource: memory."
    killed = evicted.container_statuses[0].state.terminated
    assert killed is not None and (killed.exit_code, killed.reason) == (137, "OOMKilled")
    assert killed.message == "out of memory"
    running = pods["running"]
    assert running.status.container_statuses[0].restart_count == 2
    init = running.status.init_container_statuses[0].state.terminated
    assert init is not None and (init.exit_code, init.reason) == (0, "Completed")
    assert running.metadata.controller_uid() == running.metadata.owner_references[0].uid
    assert running.metadata.owner_references[0].block_owner_deletion is True
    assert pods["terminating-pending"].metadata.owner_references[0].controller is None
    assert pods["terminating-pending"].metadata.controller_uid() is None
    waiting = pods["image-pull"].status.container_statuses[0].state
    assert waiting.terminated is None and waiting.waiting is not None
    assert (waiting.waiting.reason, waiting.waiting.message) == (
        "ImagePullBackOff",
        "no such image",
    )
    sidecar = pods["sidecar-failed"].status.container_statuses[1]
    assert sidecar.name == "sidecar" and sidecar.state.terminated is not None
    assert sidecar.state.terminated.exit_code == 2
    assert (pods["unknown-no-labels"].status.phase, pods["unknown-no-labels"].metadata.labels) == (
        "Unknown",
        {},
    )
    assert pods["pending"].metadata.labels == {"app": "fixture", "index": "0"}
    deleted = [name for name, pod in pods.items() if pod.metadata.deletion_timestamp]
    assert sorted(deleted) == ["terminating", "terminating-pending"]
    stamp = pods["terminating"].metadata.deletion_timestamp
    assert stamp is not None and stamp.endswith("Z") and parse_rfc3339(stamp).microsecond == 0
    assert all(p.metadata.uid and p.metadata.resource_version for p in pods.values())


@pytest.mark.parametrize("page", ["page.pb", "page.json"])
def test_the_next_page_is_known_from_a_pages_first_bytes(page: str) -> None:
    """The client asks for the next page as soon as the token is read, while this
    page is still arriving: the token is in its first bytes, in both formats."""
    body = _read(page)
    token = POD_PROTO_CODEC.decode_list(body)[2]
    known = next(n for n in range(len(body) + 1) if continue_token(body[:n]) is not None)
    assert continue_token(body[:known]) == token != ""
    assert known < len(body) // 4
    assert continue_token(body, complete=True) == token
    last = _read(page.replace("page", "pods"))
    assert continue_token(last[: len(last) // 4]) == ""  # the last page: no next one


class _CreatedMeta(Meta):
    creation_timestamp: Annotated[str, pb(8, time=True)] | None = None


class _Spec(Observed):
    restart_policy: Annotated[str, pb(3)] = ""
    termination_grace_period_seconds: Annotated[int, pb(4)] | None = None


class _SpecPod(Observed):
    metadata: Annotated[_CreatedMeta, pb(1)] = msgspec.field(default_factory=_CreatedMeta)
    spec: Annotated[_Spec, pb(2)] = msgspec.field(default_factory=_Spec)
    status: Annotated[PodStatus, pb(3)] = msgspec.field(default_factory=PodStatus)


class _SpecPods(msgspec.Struct):
    items: list[_SpecPod]


def test_a_field_numbered_in_the_projection_is_read_from_protobuf_as_from_json() -> None:
    """Adding a field to the projection is one line: its type and protobuf number."""
    decoder = PageDecoder(_SpecPod)
    as_proto = decoder.decode(_read("pods.pb"))[0]
    as_json = msgspec.json.decode(_read("pods.json"), type=_SpecPods).items
    assert as_proto == as_json
    assert all(pod.spec.restart_policy == "Always" for pod in as_proto)
    assert all(pod.spec.termination_grace_period_seconds == 30 for pod in as_proto)
    assert all(pod.metadata.creation_timestamp for pod in as_proto)
    assert "termination_grace_period_seconds=" in decoder.source


def test_a_projection_field_without_a_protobuf_number_is_refused() -> None:
    class Unnumbered(Observed):
        name: str = ""

    with pytest.raises(TypeError, match="name: no protobuf number"):
        PageDecoder(Unnumbered)


async def test_the_operators_pod_informer_lists_protobuf(
    control_plane: ControlPlane, client: KubeClient, namespace: str
) -> None:
    api = Api(control_plane)
    make_pods(api, namespace)
    try:
        informer = Informer(
            client, PODS_RESOURCE, POD_PROTO_CODEC, namespace=namespace, page_size=PAGE
        )
        await informer._list()
        listed = {p.metadata.name: p for p in informer.items()}
        assert sorted(listed) == sorted(PODS)
        # The same pods as JSON at that very resourceVersion (a controller may change a
        # terminating pod in between).
        query = {"resourceVersion": informer.resource_version, "resourceVersionMatch": "Exact"}
        body = await client.get_path(PODS_RESOURCE.path(namespace), query)
        as_json: list[Any] = POD_CODEC.decode_list(body)[0]
        assert listed == {p.metadata.name: p for p in as_json}
    finally:
        release(api, namespace)


def test_both_formats_hold_the_strings_many_pods_repeat_once() -> None:
    """The namespace, labels, owner and phase (`shared` in the table) are interned by
    either decoder, so a pod read from protobuf holds the very strings of one read
    from JSON."""
    as_proto = POD_PROTO_CODEC.decode_list(_read("pods.pb"))[0]
    as_json = POD_CODEC.decode_list(_read("pods.json"))[0]
    for one, other in zip(as_proto, as_json, strict=True):
        assert one.metadata.namespace is other.metadata.namespace
        assert one.status.phase is other.status.phase
        labels = one.metadata.labels.items()
        assert {(id(k), id(v)) for k, v in labels} == {
            (id(k), id(v)) for k, v in other.metadata.labels.items()
        }
        for ref, other_ref in zip(
            one.metadata.owner_references, other.metadata.owner_references, strict=True
        ):
            assert ref.kind is other_ref.kind and ref.api_version is other_ref.api_version
            assert ref.name is other_ref.name and ref.uid is other_ref.uid
