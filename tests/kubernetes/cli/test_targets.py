"""Which cluster and namespace the commands act on: kubectl's --context, the context's
namespace, the job file's namespace, and -n."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import yaml

from testkit import fast_yaml
from testkit.cluster_cli import LIMIT, Cli, job_document
from testkit.operators import Jobs
from testkit.tfjob_cli import TFJOB


def _two_contexts(kubeconfig: Path, namespace: str, folder: Path) -> Path:
    """The admin kubeconfig with a broken current context and a good `work` context
    whose namespace is the test's."""
    config: dict[str, Any] = fast_yaml.load(kubeconfig.read_text())
    good = config["contexts"][0]
    broken_cluster = copy.deepcopy(config["clusters"][0])
    broken_cluster["name"] = "nowhere"
    broken_cluster["cluster"]["server"] = "https://127.0.0.1:9"
    config["clusters"].append(broken_cluster)
    config["contexts"] = [
        {"name": "broken", "context": {"cluster": "nowhere", "user": good["context"]["user"]}},
        {"name": "work", "context": {**good["context"], "namespace": namespace}},
    ]
    config["current-context"] = "broken"
    path = folder / "two-contexts.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _tfjob(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TFJOB, *args], capture_output=True, text=True, timeout=LIMIT)


def test_context_picks_the_cluster_and_its_namespace(
    kubeconfig: Path, namespace: str, tmp_path: Path, cli: Cli, jobs: Jobs
) -> None:
    config = str(_two_contexts(kubeconfig, namespace, tmp_path))
    path = cli.write(job_document("ctx"))
    created = _tfjob("submit", str(path), "--kubeconfig", config, "--context", "work")
    assert created.returncode == 0, created.stderr
    assert jobs.get("ctx") is not None  # in the context's namespace, not in default
    listed = _tfjob("get", "--kubeconfig", config, "--context", "work")
    assert listed.stdout.splitlines()[1].split()[0] == "ctx"
    current = _tfjob("get", "--kubeconfig", config)  # the current context: unreachable
    assert current.returncode == 3
    assert "cannot reach the cluster at https://127.0.0.1:9" in current.stderr


def test_the_job_files_namespace_is_used_and_a_different_n_is_refused(
    kubeconfig: Path, namespace: str, tmp_path: Path, jobs: Jobs
) -> None:
    document = job_document("placed")
    document["metadata"]["namespace"] = namespace
    path = tmp_path / "placed.yaml"
    path.write_text(yaml.safe_dump(document))
    refused = _tfjob("submit", str(path), "--kubeconfig", str(kubeconfig), "-n", "default")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"tfjob: the file's namespace ({namespace}) does not match --namespace default: "
        "drop one of them"
    )
    assert jobs.get("placed") is None
    created = _tfjob("submit", str(path), "--kubeconfig", str(kubeconfig))
    assert created.returncode == 0, created.stderr
    assert jobs.get("placed") is not None  # in the file's namespace, not the context's
