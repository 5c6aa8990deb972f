"""The PyTorchJob CRD on a real API server: it installs, stores a valid job, refuses
the malformed corpus (tests/fixtures/malformed-pytorch) exactly as `tfjob run`'s
loader does, and scales the Worker replicas through the scale subresource."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from testkit.controlplane import ControlPlane
from testkit.corpus import PYTORCH_CORPUS, cases
from tfjob.api.errors import InvalidJob
from tfjob.frameworks.load import load_jobs

IMAGE = "python:3.11-slim"


def pytorchjob(name: str, specs: dict[str, int], **spec: Any) -> dict[str, Any]:
    """A valid PyTorchJob with these replica types and counts."""
    container = {"name": "pytorch", "image": IMAGE, "command": ["python3", "-c", "pass"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "pytorchReplicaSpecs": {
                rtype: {"replicas": count, "template": {"spec": {"containers": [container]}}}
                for rtype, count in specs.items()
            },
        },
    }


def kubectl(
    plane: ControlPlane, namespace: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    tool = str(plane.assets.tool("kubectl"))
    return subprocess.run(
        [tool, "--kubeconfig", str(plane.kubeconfig_path), "-n", namespace, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def stored(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    got = kubectl(plane, namespace, "get", f"pytorchjob/{name}", "-o", "json")
    assert got.returncode == 0, got.stderr
    return dict(json.loads(got.stdout))


def local_refusal(text: str, path: str) -> str | None:
    """`tfjob run`'s loader on this file: its report if it refuses it, else None."""
    try:
        load_jobs(text, path)
    except InvalidJob as refused:
        return str(refused)
    return None


def test_a_valid_pytorchjob_is_stored_and_listed(
    control_plane: ControlPlane, pytorchjob_crd_installed: None, namespace: str
) -> None:
    job = pytorchjob("ddp", {"Master": 1, "Worker": 2}, nprocPerNode="2")
    elastic = pytorchjob(
        "elastic",
        {"Worker": 2},
        elasticPolicy={
            "minReplicas": 1,
            "maxReplicas": 4,
            "rdzvBackend": "c10d",
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        },
    )
    for body in (job, elastic):
        text = yaml.safe_dump(body)
        assert local_refusal(text, "job.yaml") is None
        created = kubectl(control_plane, namespace, "create", "-f", "-", stdin=text)
        assert created.returncode == 0, created.stderr
    got = stored(control_plane, namespace, "ddp")
    assert got["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert got["spec"]["runPolicy"] == {"suspend": False}
    assert got["spec"]["nprocPerNode"] == "2"
    metric = stored(control_plane, namespace, "elastic")["spec"]["elasticPolicy"]["metrics"][0]
    assert metric["resource"]["target"]["averageUtilization"] == 80
    listed = kubectl(control_plane, namespace, "get", "pytorchjobs")
    assert listed.stdout.split("\n")[0].split() == ["NAME", "STATE", "AGE"]
    assert {line.split()[0] for line in listed.stdout.strip().split("\n")[1:]} == {
        "ddp",
        "elastic",
    }


def test_every_malformed_pytorchjob_is_refused_by_the_api_server_and_by_tfjob_run(
    control_plane: ControlPlane, pytorchjob_crd_installed: None, namespace: str, tmp_path: Path
) -> None:
    """Same verdict per file on both sides, each naming the field; a valid job beside
    them is accepted by both (so the comparison can fail either way)."""
    valid = tmp_path / "valid.yaml"
    valid.write_text(yaml.safe_dump(pytorchjob("fine", {"Master": 1, "Worker": 3})))
    files = [(case.path, case.field, case.id) for case in cases(PYTORCH_CORPUS)]
    problems = []
    for path, field, ident in [*files, (valid, "", "valid")]:
        cluster = kubectl(control_plane, namespace, "create", "--dry-run=server", "-f", str(path))
        refused_by_cluster = cluster.returncode != 0
        report = local_refusal(path.read_text(), str(path))
        if refused_by_cluster != (report is not None):
            problems.append(
                f"{ident}: API server refused={refused_by_cluster} ({cluster.stderr.strip()}),"
                f" tfjob run refused={report is not None} ({report})"
            )
        elif refused_by_cluster and (field not in cluster.stderr or field not in str(report)):
            problems.append(f"{ident}: {field!r} not named: {cluster.stderr} / {report}")
    assert not problems, "\n".join(problems)
    assert len(files) >= 12


def test_kubectl_scale_changes_the_worker_replicas(
    control_plane: ControlPlane, pytorchjob_crd_installed: None, namespace: str
) -> None:
    body = yaml.safe_dump(pytorchjob("scaled", {"Master": 1, "Worker": 1}))
    created = kubectl(control_plane, namespace, "create", "-f", "-", stdin=body)
    assert created.returncode == 0, created.stderr
    scaled = kubectl(control_plane, namespace, "scale", "pytorchjob/scaled", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    specs = stored(control_plane, namespace, "scaled")["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 3
    assert specs["Master"]["replicas"] == 1
    # The CRD's rules hold through the scale subresource too: no job without workers.
    emptied = kubectl(control_plane, namespace, "scale", "pytorchjob/scaled", "--replicas=0")
    assert emptied.returncode != 0
    assert "Worker's replicas must be at least 1" in emptied.stderr
    assert stored(control_plane, namespace, "scaled")["spec"]["pytorchReplicaSpecs"] == specs
