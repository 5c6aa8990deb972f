"""`TFJOB_TEST_CPU`: each test's CPU, the processes it started included (README)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BUSY = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"


def test_a_tests_children_are_counted_in_its_cpu(tmp_path: Path) -> None:
    (tmp_path / "test_spend.py").write_text(
        "import subprocess, sys\n"
        f"def test_child_spends():\n    subprocess.run([sys.executable, '-c', {BUSY!r}])\n"
        "def test_idle():\n    pass\n"
    )
    ledger = tmp_path / "cpu.json"
    root = Path(__file__).resolve().parents[2]
    # One pytest process: the file is named "main" (not an xdist worker's name).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "--rootdir", str(tmp_path), "-c", os.devnull,
         "-p", "tests.conftest", str(tmp_path / "test_spend.py")],
        cwd=root, capture_output=True, text=True, timeout=120,
        env={**env, "TFJOB_TEST_CPU": str(ledger), "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    spent = json.loads((tmp_path / "cpu.main.json").read_text())
    (child,) = [cpu for test, (cpu, _wall) in spent.items() if test.endswith("test_child_spends")]
    (idle,) = [cpu for test, (cpu, _wall) in spent.items() if test.endswith("test_idle")]
    assert child >= 0.45 > idle
