"""Gate for the TensorFlow suite: it needs a `python3` that can import tensorflow.

The replicas of the example jobs run `python3` from PATH (their YAML `command`), so that
interpreter, not necessarily the one running pytest, is the one checked, once per
session. Without tensorflow every test here is skipped with a one-line reason, except
under CI=true, where they fail: a CI run must never pass by skipping.

Every process a test here starts (and the gate's) runs without jax and IPython, as in a
TensorFlow image (testkit/hidden_modules.py): TensorFlow imports both when they are
installed, and the test environment has every framework in one site-packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.hidden_modules import NOT_IN_A_TENSORFLOW_IMAGE, hiding, with_hidden

_IMPORT_LIMIT = 180.0  # seconds; importing tensorflow takes several on a busy machine


@pytest.fixture(scope="session")
def tensorflow_alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder that hides NOT_IN_A_TENSORFLOW_IMAGE, first on PYTHONPATH."""
    return hiding(tmp_path_factory.mktemp("tensorflow-alone"), NOT_IN_A_TENSORFLOW_IMAGE)


@pytest.fixture(scope="session")
def tensorflow_check(tensorflow_alone: Path) -> str | None:
    """None if `python3` on PATH imports tensorflow, else why not."""
    python = shutil.which("python3")
    if python is None:
        return "no python3 on PATH to run the replicas"
    try:
        done = subprocess.run(
            [python, "-c", "import tensorflow"],
            capture_output=True,
            text=True,
            timeout=_IMPORT_LIMIT,
            env={**with_hidden(os.environ, tensorflow_alone), "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    except subprocess.TimeoutExpired:
        return f"`{python} -c 'import tensorflow'` took over {_IMPORT_LIMIT:.0f}s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"tensorflow is not importable by {python} ({last}); pip install -e '.[tensorflow]'"
    return None


# Module scope, both: they must come before the module-scoped fixtures that run
# tensorflow.
@pytest.fixture(autouse=True, scope="module")
def _tensorflow_alone_in_this_module(tensorflow_alone: Path) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", with_hidden(os.environ, tensorflow_alone)["PYTHONPATH"])
        yield


@pytest.fixture(autouse=True, scope="module")
def _require_tensorflow(tensorflow_check: str | None) -> None:
    if tensorflow_check is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {tensorflow_check}")
    pytest.skip(tensorflow_check)
