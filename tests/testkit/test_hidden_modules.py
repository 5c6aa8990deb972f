"""testkit/hidden_modules.py: a hidden module fails to import in the processes a test
starts, as if it were not installed, and nothing else changes for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testkit.hidden_modules import hiding, with_hidden

# An optional import as the frameworks make them (tensorflow.lite's of jax, Keras's of
# IPython), of a module that is installed here, and one that is not hidden.
PROBE = """
try:
    import yaml
except ImportError as exc:
    print("absent", type(exc).__name__, exc.name)
else:
    print("present")
import json
print("json", json.dumps([1]))
"""


def _probe(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_hidden_module_takes_the_not_installed_path_and_the_rest_imports(
    tmp_path: Path,
) -> None:
    assert _probe(dict(os.environ)) == ["present", "json [1]"]
    folder = hiding(tmp_path / "hidden", ["yaml"])
    env = with_hidden({**os.environ, "PYTHONPATH": "/somewhere/else"}, folder)
    assert env["PYTHONPATH"] == f"{folder}{os.pathsep}/somewhere/else"
    assert _probe(env) == ["absent ModuleNotFoundError yaml", "json [1]"]
