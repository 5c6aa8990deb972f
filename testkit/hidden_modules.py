"""Hiding optional modules from the processes a test starts, so that a framework's
processes see the environment that framework's own image gives them.

The test environment installs every framework into one site-packages (scripts/test.sh),
and the base Python may bring more (IPython). TensorFlow imports some of them when they
are there, though nothing of a training job uses them: `tensorflow.lite` tries jax
(~0.5 CPU-seconds at each import, 1.3 under load) and Keras tries IPython (~0.4). A
TensorFlow image has neither (examples/tensorflow/cluster/Containerfile), and about
fifty TensorFlow processes start in a run of the suite, on two cores.

`hiding(folder, modules)` writes, for each module, a package of that name whose import
raises ModuleNotFoundError; `with_hidden(env, folder)` puts that folder first on the
environment's PYTHONPATH, ahead of site-packages. The imports the frameworks make
of them sit in `try: ... except ImportError`, which is exactly the path they take
when the module is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

#: What TensorFlow imports when installed, though no training job of ours uses it.
NOT_IN_A_TENSORFLOW_IMAGE = ("jax", "IPython")

_PACKAGE = '''"""Hidden from this test's processes by testkit/hidden_modules.py."""

raise ModuleNotFoundError(
    "{module} is hidden from this test's processes (testkit/hidden_modules.py)", name="{module}"
)
'''


def hiding(folder: Path, modules: Iterable[str]) -> Path:
    """`folder`, holding one package per module whose import fails as if absent."""
    for module in modules:
        package = folder / module
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(_PACKAGE.format(module=module))
    return folder


def with_hidden(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """`env` with `folder` first on PYTHONPATH."""
    rest = env.get("PYTHONPATH", "")
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(folder), rest) if p)}
