"""TF_CONFIG bytes and the IsDistributed rule, against upstream's expected strings."""

from __future__ import annotations

import json

import pytest

from testkit.builders import job, replica, with_spec
from tfjob.core.settings import Settings
from tfjob.frameworks.registry import with_defaults
from tfjob.frameworks.tensorflow import TFJob, is_distributed, tf_config

N = "test-tfjob"


@pytest.mark.parametrize(
    ("workers", "ps", "evaluator", "namespace", "domain", "expected"),
    [
        (1, 0, 0, "ns0", "", None),
        (1, 0, 0, "ns1", "tf.training.com", None),
        (
            1, 1, 0, "ns2", "tf.training.org",
            '{"cluster":{"ps":["test-tfjob-ps-0.ns2.svc.tf.training.org:2222"],'
            '"worker":["test-tfjob-worker-0.ns2.svc.tf.training.org:2222"]},'
            '"task":{"type":"worker","index":0},"environment":"cloud"}',
        ),
        (
            1, 1, 1, "ns3", "tf.training.io",
            '{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc.tf.training.io:2222"],'
            '"ps":["test-tfjob-ps-0.ns3.svc.tf.training.io:2222"],'
            '"worker":["test-tfjob-worker-0.ns3.svc.tf.training.io:2222"]},'
            '"task":{"type":"worker","index":0},"environment":"cloud"}',
        ),
        (
            1, 1, 1, "ns3", "",
            '{"cluster":{"evaluator":["test-tfjob-evaluator-0.ns3.svc:2222"],'
            '"ps":["test-tfjob-ps-0.ns3.svc:2222"],"worker":["test-tfjob-worker-0.ns3.svc:2222"]},'
            '"task":{"type":"worker","index":0},"environment":"cloud"}',
        ),
    ],
)  # fmt: skip
def test_cluster_spec_matches_upstream_bytes(
    workers: int, ps: int, evaluator: int, namespace: str, domain: str, expected: str | None
) -> None:
    specs = {"Worker": replica(workers)}
    if ps:
        specs["PS"] = replica(ps)
    if evaluator:
        specs["Evaluator"] = replica(evaluator)
    tfjob = with_defaults(job(namespace=namespace, **specs))
    assert tf_config(tfjob, "Worker", 0, Settings(cluster_domain=domain)) == expected


@pytest.mark.parametrize(
    ("specs", "distributed"),
    [
        ({"Worker": replica(1)}, False),
        ({"Worker": replica(1), "PS": replica(1)}, True),
        ({"Worker": replica(0), "PS": replica(1)}, False),
        ({"Chief": replica(1), "Worker": replica(1)}, True),
        ({"Worker": replica(None)}, False),  # nil replicas count as 1
        ({"Worker": replica(1), "Foo": replica(3)}, False),  # unknown types do not count
    ],
)
def test_is_distributed(specs: dict[str, dict[str, object]], distributed: bool) -> None:
    assert is_distributed(job(**specs)) is distributed


def test_master_task_type_and_per_type_ports() -> None:
    tfjob = job(
        Master=replica(1),
        Worker={
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "x",
                            "ports": [{"name": "tfjob-port", "containerPort": 3000}],
                        }
                    ]
                }
            },
        },
    )
    config = json.loads(tf_config(with_defaults(tfjob), "Master", 0, Settings()) or "")
    assert config["task"] == {"type": "master", "index": 0}
    assert config["cluster"] == {
        "master": [f"{N}-master-0.default.svc:2222"],
        "worker": [f"{N}-worker-0.default.svc:3000", f"{N}-worker-1.default.svc:3000"],
    }


def test_unknown_type_is_in_the_cluster() -> None:
    tfjob = with_defaults(job(Worker=replica(2), Foo=replica(1)))
    config = json.loads(tf_config(tfjob, "Foo", 0, Settings()) or "")
    assert config["cluster"]["foo"] == [f"{N}-foo-0.default.svc:2222"]
    assert config["task"] == {"type": "foo", "index": 0}


class TestSparse:
    """enableDynamicWorker: upstream's SparseClusterSpec (no environment key)."""

    def tfjob(self, ps: int = 2) -> TFJob:
        specs = {"Worker": replica(2)}
        if ps:
            specs["PS"] = replica(ps)
        return with_defaults(with_spec(job(**specs), enable_dynamic_worker=True))

    def test_worker_sees_itself_and_every_ps(self) -> None:
        assert tf_config(self.tfjob(), "Worker", 1, Settings()) == (
            '{"cluster":{"worker":{"1":"test-tfjob-worker-1.default.svc:2222"},'
            '"ps":["test-tfjob-ps-0.default.svc:2222","test-tfjob-ps-1.default.svc:2222"]},'
            '"task":{"type":"worker","index":1}}'
        )

    def test_ps_sees_only_itself(self) -> None:
        assert tf_config(self.tfjob(), "PS", 0, Settings()) == (
            '{"cluster":{"worker":{},"ps":["test-tfjob-ps-0.default.svc:2222"]},'
            '"task":{"type":"ps","index":0}}'
        )

    def test_worker_without_ps_has_null_ps(self) -> None:
        assert tf_config(self.tfjob(ps=0), "Worker", 0, Settings()) == (
            '{"cluster":{"worker":{"0":"test-tfjob-worker-0.default.svc:2222"},"ps":null},'
            '"task":{"type":"worker","index":0}}'
        )


def test_local_addresses_replace_service_names() -> None:
    tfjob = with_defaults(job(Worker=replica(2), PS=replica(1)))
    settings = Settings(
        local_addresses={"worker": ["127.0.0.1:4001", "127.0.0.1:4002"], "ps": ["127.0.0.1:4003"]}
    )
    assert tf_config(tfjob, "Worker", 1, settings) == (
        '{"cluster":{"ps":["127.0.0.1:4003"],"worker":["127.0.0.1:4001","127.0.0.1:4002"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )
