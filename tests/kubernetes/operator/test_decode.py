"""Decoding the API server's JSON: fast projections, and jobs that cannot be read."""

from __future__ import annotations

import json

import msgspec
import pytest

from tfjob.frameworks.tensorflow import TFJob
from tfjob.runtimes.kubernetes.cache.informer import is_newer
from tfjob.runtimes.kubernetes.controller.handlers import COUNTS, MORE, NOTHING, jobset_change
from tfjob.runtimes.kubernetes.transport import pod_proto
from tfjob.runtimes.kubernetes.transport.decode import (
    JobDecoder,
    UndecodableJob,
    continue_token,
    decode_pod_page,
    decode_pods,
    decode_services,
)
from tfjob.runtimes.kubernetes.transport.trainer_decode import JOBSET_CODEC

TFJOB_DECODER = JobDecoder(TFJob)

POD = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "j-worker-0",
        "namespace": "ns",
        "uid": "p1",
        "resourceVersion": "42",
        "labels": {"training.kubeflow.org/replica-type": "worker"},
        "ownerReferences": [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "name": "j",
                "uid": "u",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [{"manager": "x", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {"containers": [{"name": "tensorflow", "image": "tf", "env": [{"name": "A"}]}]},
    "status": {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "tensorflow",
                "restartCount": 2,
                "image": "tf",
                "ready": False,
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            }
        ],
    },
}


def test_a_pod_list_decodes_into_the_projection_the_core_reads() -> None:
    body = json.dumps(
        {
            "kind": "PodList",
            "metadata": {"resourceVersion": "77", "continue": "abc"},
            "items": [POD],
        }
    ).encode()
    pods, version, token = decode_pods(body)
    assert (version, token) == ("77", "abc")
    pod = pods[0]
    assert pod.metadata.controller_uid() == "u"
    assert pod.status.container_statuses[0].state.terminated is not None
    assert pod.status.container_statuses[0].state.terminated.exit_code == 137
    assert not hasattr(pod, "spec")  # nothing the core does not read is kept


def _job_objects(job: str, count: int) -> list[dict[str, object]]:
    return [
        {
            "metadata": {
                "name": f"{job}-worker-{i}",
                "namespace": "team-a",
                "uid": f"{job}-{i}",
                "labels": {"training.kubeflow.org/job-name": job, "app": "trainer"},
                "ownerReferences": [
                    {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": job, "uid": job}
                ],
            },
            "status": {"phase": "Running"},
        }
        for i in range(count)
    ]


def test_a_jobs_objects_hold_the_strings_they_repeat_once() -> None:
    # 80,000 cached pods and services at 10,000 jobs: the namespace, label keys and
    # values and the owner repeat in every one and are held once (the values unchanged).
    page = {"metadata": {"resourceVersion": "5"}, "items": _job_objects("j", 3)}
    pods, _, _ = decode_pods(json.dumps(page).encode())
    services, _, _ = decode_services(json.dumps(page).encode())
    job = TFJOB_DECODER.one(
        json.dumps(
            {"metadata": {"name": "j", "namespace": "team-a", "uid": "j"}, "spec": {}}
        ).encode()
    )
    assert isinstance(job, TFJob)
    metas = [p.metadata for p in pods] + [s.metadata for s in services]
    assert [m.name for m in metas] == [f"j-worker-{i}" for i in range(3)] * 2
    assert all(m.labels == {"training.kubeflow.org/job-name": "j", "app": "trainer"} for m in metas)
    assert all(m.owner_references[0].name == "j" for m in metas)
    for m in metas:
        assert m.namespace is job.metadata.namespace
        assert m.owner_references[0].uid is job.metadata.uid
        assert m.labels["training.kubeflow.org/job-name"] is job.metadata.name
        assert next(iter(m.labels)) is next(iter(metas[0].labels))
    assert pods[0].status.phase is pods[1].status.phase


def test_an_empty_list_has_no_items() -> None:
    assert decode_pods(b'{"metadata":{"resourceVersion":"5"},"items":null}') == ([], "5", "")


def test_a_tfjob_decodes_into_the_typed_model() -> None:
    raw = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "9"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {}}}}},
    }
    job = TFJOB_DECODER.one(json.dumps(raw).encode())
    assert isinstance(job, TFJob)
    assert job.spec.tf_replica_specs["Worker"].replicas == 2


def test_a_tfjob_the_model_cannot_hold_names_the_field_instead_of_crashing() -> None:
    raw = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "9"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": "two"}}},
        "status": {"conditions": [{"type": "Created", "status": "True"}]},
    }
    job = TFJOB_DECODER.one(json.dumps(raw).encode())
    assert isinstance(job, UndecodableJob)
    assert "spec.tfReplicaSpecs[Worker].replicas" in job.error
    assert (job.metadata.name, job.metadata.resource_version) == ("j", "9")
    assert job.status.conditions[0].type == "Created"  # kept, to be updated


def test_resource_versions_compare_as_etcd_revisions() -> None:
    assert is_newer("100", "99")
    assert not is_newer("99", "100")
    assert not is_newer("7", "7")


def test_a_pod_page_asked_as_protobuf_is_read_as_json_if_json_came() -> None:
    """A server or proxy that answers JSON anyway is understood; a page that is
    neither raises the decode error the informer retries on."""
    page = {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [POD]}
    pods, version, token = decode_pod_page(json.dumps(page).encode())
    assert [p.metadata.name for p in pods] == ["j-worker-0"] and version == "7" and token == ""
    with pytest.raises(msgspec.DecodeError):
        decode_pod_page(pod_proto.MAGIC + b"\x12\x05\x0a\xff\xff")


def test_a_custom_resource_lists_continue_token_is_known_once_the_page_is_read() -> None:
    """A custom resource's list has its keys sorted, metadata after the items: its
    token is not in the first bytes, but in the whole page; a built-in one's is."""
    page = {"apiVersion": "v1", "items": [POD], "kind": "TFJobList", "metadata": {"continue": "c2"}}
    body = json.dumps(page).encode()
    assert continue_token(body[:200]) is None
    assert continue_token(body) is None
    assert continue_token(body, complete=True) == "c2"
    builtin = json.dumps({"kind": "PodList", "metadata": {"continue": "c3"}, "items": [POD]})
    assert continue_token(builtin.encode()[:80]) == "c3"


JOBSET = {
    "metadata": {
        "name": "t1",
        "namespace": "ns",
        "uid": "js1",
        "resourceVersion": "12",
        "labels": {"a": "b"},
        "ownerReferences": [
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
             "name": "t1", "uid": "tj1", "controller": True}
        ],
        "managedFields": [{"manager": "trainer", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "suspend": True,
        "replicatedJobs": [{"name": "node", "template": {"spec": {"parallelism": 2}}}],
    },
    "status": {"replicatedJobsStatus": [{"name": "node", "active": 2}], "restarts": 0},
}  # fmt: skip


def test_a_cached_jobset_keeps_what_a_trainjob_pass_reads_and_no_more() -> None:
    """Its metadata typed (name, uid, owners, as the cache indexes it), and of the
    rest what a pass reads: creationTimestamp, spec.suspend and the status'
    conditions and counts; apiVersion and kind set when a list's item lacks them; the
    pod templates, labels and restarts are not kept."""
    created = {**JOBSET, "metadata": {**JOBSET["metadata"], "creationTimestamp": "T"}}
    cached = JOBSET_CODEC.decode_object(json.dumps(created).encode())
    assert cached.document == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"creationTimestamp": "T"},
        "spec": {"suspend": True},
        "status": {"replicatedJobsStatus": [{"name": "node", "active": 2}]},
    }
    assert cached.metadata.controller_uid() == "tj1"
    assert (cached.metadata.name, cached.metadata.uid) == ("t1", "js1")
    running = {**JOBSET, "apiVersion": "jobset.x-k8s.io/v1", "spec": {"replicatedJobs": []}}
    cached = JOBSET_CODEC.decode_object(json.dumps(running).encode())
    assert cached.document["spec"] == {}
    assert cached.document["apiVersion"] == "jobset.x-k8s.io/v1"


def test_a_jobsets_change_is_told_by_what_a_trainjob_pass_reads_of_it() -> None:
    def changed(**status: object) -> dict[str, object]:
        return {**JOBSET, "status": {**JOBSET["status"], **status}}  # type: ignore[dict-item]

    done = [{"type": "Completed", "status": "True"}]
    assert jobset_change(JOBSET, changed(restarts=1, terminalState="Completed")) == NOTHING
    assert jobset_change(JOBSET, changed(replicatedJobsStatus=[{"name": "node"}])) == COUNTS
    assert jobset_change(JOBSET, changed(conditions=done)) == MORE
    assert jobset_change(JOBSET, {**JOBSET, "spec": {"suspend": False}}) == MORE
    # A first status: no conditions and [] read the same.
    first = {**JOBSET, "status": {"conditions": [], "replicatedJobsStatus": [{"name": "node"}]}}
    assert jobset_change({**JOBSET, "status": {}}, first) == COUNTS
