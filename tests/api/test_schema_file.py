"""The schemas `tfjob run` validates with are the ones the CRDs install."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit import fast_yaml
from tfjob.api import schema_rules

BASE = Path(__file__).resolve().parents[2] / "manifests" / "base"


@pytest.mark.parametrize(
    ("crd_file", "schema_file"),
    [
        ("crd.yaml", schema_rules.TFJOB_SCHEMA),
        ("pytorchjob-crd.yaml", schema_rules.PYTORCHJOB_SCHEMA),
        ("jaxjob-crd.yaml", schema_rules.JAXJOB_SCHEMA),
        ("xgboostjob-crd.yaml", schema_rules.XGBOOSTJOB_SCHEMA),
        ("paddlejob-crd.yaml", schema_rules.PADDLEJOB_SCHEMA),
    ],
)
def test_the_package_ships_the_crds_schema(crd_file: str, schema_file: str) -> None:
    crd = fast_yaml.load((BASE / crd_file).read_text())
    [version] = crd["spec"]["versions"]
    assert schema_rules.schema_document(schema_file) == version["schema"]["openAPIV3Schema"]


def test_replica_templates_carry_the_pod_template_schema() -> None:
    replica = schema_rules.schema_document()["properties"]["spec"]["properties"]["tfReplicaSpecs"]
    template = replica["additionalProperties"]["properties"]["template"]
    containers = template["properties"]["spec"]["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["items"]["required"] == ["name"]
    assert "x-kubernetes-preserve-unknown-fields" not in template
