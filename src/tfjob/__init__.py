"""tfjob: run distributed TensorFlow jobs (kubeflow.org/v1 TFJob) locally or on Kubernetes.

The version is written once, in pyproject.toml; `tfjob.__version__` reads it from the
installed package's metadata when first asked for (reading it costs a search of the
installed distributions, which `tfjob run` need not pay).
"""

from __future__ import annotations

from functools import cache


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~20 ms: only if asked

    try:
        return version("tfjob")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
