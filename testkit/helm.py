"""The real helm (tools/envtest/build.sh builds it from helm.sh/helm/v4) on charts/tfjob:
render it as `helm template` does, install and upgrade it on a test cluster."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from testkit import fast_yaml
from testkit.controlplane import REPO_ROOT, find_assets

CHART = REPO_ROOT / "charts" / "tfjob"


@functools.cache
def helm_path() -> Path:
    return find_assets(build=False).tool("helm")


def helm(
    *args: str, kubeconfig: Path | None = None, check: bool = True, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run helm; a failure (when checked) carries its stderr."""
    command = [str(helm_path())]
    if kubeconfig is not None:
        command += ["--kubeconfig", str(kubeconfig)]
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done


def values_args(values: dict[str, str]) -> list[str]:
    """`--set key=value` for each value (helm's own parsing of lists and numbers)."""
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def template(namespace: str, values: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`helm template tfjob charts/tfjob --namespace NS`: the objects it renders."""
    done = helm(
        "template", "tfjob", str(CHART), "--namespace", namespace, *values_args(values or {})
    )
    return [doc for doc in fast_yaml.load_all(done.stdout) if doc]


def template_error(values: dict[str, str]) -> str:
    """The error `helm template` stops with for these values (it must stop)."""
    done = helm("template", "tfjob", str(CHART), *values_args(values), check=False)
    assert done.returncode != 0, f"helm template accepted {values}"
    return done.stderr
