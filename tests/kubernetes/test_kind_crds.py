"""The JAXJob, XGBoostJob, PaddleJob and MPIJob CRDs on a real API server: each installs,
stores a valid job, refuses its malformed corpus (tests/fixtures/malformed-<kind>/)
exactly as `tfjob run`'s loader does, and (JAXJob, PaddleJob) scales its Workers.

Each corpus file goes to the API server as written, a YAML body with strict field
validation (`kubectl create --validate=strict` sends JSON it converted itself, which
keeps the last of two equal keys instead of refusing them, so it would hide the
corpus's `yaml` category).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.controlplane import ControlPlane
from testkit.corpus import KIND_CORPORA, cases
from tfjob.api.errors import InvalidJob
from tfjob.frameworks.load import load_jobs
from tfjob.frameworks.registry import FRAMEWORKS

IMAGE = "python:3.11-slim"
# A valid job of each kind: replica type -> count.
VALID = {
    "JAXJob": {"Worker": 2},
    "XGBoostJob": {"Master": 1, "Worker": 2},
    "PaddleJob": {"Master": 1, "Worker": 2},
    "MPIJob": {"Launcher": 1, "Worker": 2},
}


def job(kind: str, name: str, specs: dict[str, int], **spec: Any) -> dict[str, Any]:
    framework = FRAMEWORKS[kind]
    container = {"name": framework.container_name, "image": IMAGE, "command": ["true"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            **spec,
            framework.spec_field: {
                rtype: {"replicas": count, "template": {"spec": {"containers": [container]}}}
                for rtype, count in specs.items()
            },
        },
    }


def create_yaml(plane: ControlPlane, namespace: str, kind: str, text: str) -> tuple[int, str]:
    """POST the YAML text as it is (dry run, strict field validation): the status and
    the API server's message."""
    plural = FRAMEWORKS[kind].plural
    url = (
        f"{plane.server}/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}"
        "?dryRun=All&fieldValidation=Strict"
    )
    request = urllib.request.Request(
        url,
        data=text.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {plane.token}", "Content-Type": "application/yaml"},
    )
    context = ssl.create_default_context(cafile=str(plane.ca_path))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, ""
    except urllib.error.HTTPError as refused:
        return refused.code, str(json.loads(refused.read()).get("message", ""))


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


def local_refusal(text: str, path: str) -> str | None:
    """`tfjob run`'s loader on this file: its report if it refuses it, else None."""
    try:
        load_jobs(text, path)
    except InvalidJob as refused:
        return str(refused)
    return None


@pytest.mark.parametrize("kind", list(KIND_CORPORA))
def test_a_valid_job_is_stored_and_listed(
    control_plane: ControlPlane, kind_crds_installed: None, namespace: str, kind: str
) -> None:
    extra = {"elasticPolicy": {"maxReplicas": 3}} if kind == "PaddleJob" else {}
    text = yaml.safe_dump(job(kind, "fine", VALID[kind], **extra))
    assert local_refusal(text, "job.yaml") is None
    created = kubectl(control_plane, namespace, "create", "-f", "-", stdin=text)
    assert created.returncode == 0, created.stderr
    plural = FRAMEWORKS[kind].plural
    got = json.loads(
        kubectl(control_plane, namespace, "get", f"{plural}/fine", "-o", "json").stdout
    )
    assert got["spec"]["runPolicy"] == {"suspend": False}
    assert got["spec"][FRAMEWORKS[kind].spec_field].keys() == VALID[kind].keys()
    listed = kubectl(control_plane, namespace, "get", plural)
    assert listed.stdout.split("\n")[0].split() == ["NAME", "STATE", "AGE"]


@pytest.mark.parametrize("kind", list(KIND_CORPORA))
def test_every_malformed_job_is_refused_by_the_api_server_and_by_tfjob_run(
    control_plane: ControlPlane,
    kind_crds_installed: None,
    namespace: str,
    tmp_path: Path,
    kind: str,
) -> None:
    """Same verdict per file on both sides, each naming the field; a valid job beside
    them is accepted by both (so the comparison can fail either way)."""
    valid = tmp_path / "valid.yaml"
    valid.write_text(yaml.safe_dump(job(kind, "fine", VALID[kind])))
    found = [(case.path, case.field, case.id) for case in cases(KIND_CORPORA[kind])]
    problems = []
    for path, field, ident in [*found, (valid, "", "valid")]:
        text = path.read_text()
        status, message = create_yaml(control_plane, namespace, kind, text)
        refused_by_cluster = status >= 400
        report = local_refusal(text, str(path))
        if refused_by_cluster != (report is not None):
            problems.append(
                f"{ident}: API server refused={refused_by_cluster} ({status} {message}),"
                f" tfjob run refused={report is not None} ({report})"
            )
        elif refused_by_cluster and (field not in message or field not in str(report)):
            problems.append(f"{ident}: {field!r} not named: {message} / {report}")
    assert not problems, "\n".join(problems)
    assert len(found) >= 12


@pytest.mark.parametrize("kind", ["JAXJob", "PaddleJob"])
def test_kubectl_scale_changes_the_worker_replicas(
    control_plane: ControlPlane, kind_crds_installed: None, namespace: str, kind: str
) -> None:
    plural, field = FRAMEWORKS[kind].plural, FRAMEWORKS[kind].spec_field
    body = yaml.safe_dump(job(kind, "scaled", {"Worker": 1}))
    created = kubectl(control_plane, namespace, "create", "-f", "-", stdin=body)
    assert created.returncode == 0, created.stderr
    scaled = kubectl(control_plane, namespace, "scale", f"{plural}/scaled", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    got = json.loads(
        kubectl(control_plane, namespace, "get", f"{plural}/scaled", "-o", "json").stdout
    )
    assert got["spec"][field]["Worker"]["replicas"] == 3
    emptied = kubectl(control_plane, namespace, "scale", f"{plural}/scaled", "--replicas=0")
    assert emptied.returncode != 0
    assert "Worker's replicas must be at least 1" in emptied.stderr


def test_an_xgboostjob_has_no_scale_subresource_as_upstreams(
    control_plane: ControlPlane, kind_crds_installed: None, namespace: str
) -> None:
    body = yaml.safe_dump(job("XGBoostJob", "fixed", {"Master": 1, "Worker": 1}))
    assert kubectl(control_plane, namespace, "create", "-f", "-", stdin=body).returncode == 0
    scaled = kubectl(control_plane, namespace, "scale", "xgboostjobs/fixed", "--replicas=3")
    assert scaled.returncode != 0
