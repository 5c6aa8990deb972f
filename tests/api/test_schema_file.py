"""The schema `tfjob run` validates with is the one the CRD installs."""

from __future__ import annotations

from pathlib import Path

import yaml

from tfjob.api import schema_rules

CRD = Path(__file__).resolve().parents[2] / "manifests" / "base" / "crd.yaml"


def test_the_package_ships_the_crds_schema() -> None:
    crd = yaml.safe_load(CRD.read_text())
    [version] = crd["spec"]["versions"]
    assert schema_rules.schema_document() == version["schema"]["openAPIV3Schema"]


def test_replica_templates_carry_the_pod_template_schema() -> None:
    replica = schema_rules.schema_document()["properties"]["spec"]["properties"]["tfReplicaSpecs"]
    template = replica["additionalProperties"]["properties"]["template"]
    containers = template["properties"]["spec"]["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["items"]["required"] == ["name"]
    assert "x-kubernetes-preserve-unknown-fields" not in template
