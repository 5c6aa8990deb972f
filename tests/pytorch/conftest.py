"""Gate for the PyTorch suite: it needs a `python3` that can import torch.

The replicas of the example jobs run `python3` from PATH (their YAML `command`), so that
interpreter, not necessarily the one running pytest, is the one checked, once per
session. Without torch every test here is skipped with a one-line reason, except under
CI=true, where they fail: a CI run must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

_IMPORT_LIMIT = 120.0  # seconds; importing torch takes 2-5 on a busy machine


@pytest.fixture(scope="session")
def pytorch_check() -> str | None:
    """None if `python3` on PATH imports torch with gloo, else why not."""
    python = shutil.which("python3")
    if python is None:
        return "no python3 on PATH to run the replicas"
    probe = "import torch.distributed as d; assert d.is_gloo_available(), 'no gloo'"
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=_IMPORT_LIMIT
        )
    except subprocess.TimeoutExpired:
        return f"`{python} -c 'import torch'` took over {_IMPORT_LIMIT:.0f}s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"torch is not importable by {python} ({last}); pip install -e '.[pytorch]'"
    return None


# Module scope: it must come before the module-scoped fixtures that run torch.
@pytest.fixture(autouse=True, scope="module")
def _require_pytorch(pytorch_check: str | None) -> None:
    if pytorch_check is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {pytorch_check}")
    pytest.skip(pytorch_check)
