"""A replica's `python3` is the interpreter tfjob runs in: `/venv/bin/tfjob run
job.yaml` from a shell where that venv is not activated must not start the system's
python3 (which lacks the venv's torch or tensorflow). A container's own PATH wins."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
JOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: which-python
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: tensorflow
              image: unused
              command: [python3, -c, "import sys; print('prefix', sys.prefix)"]
{env}
"""


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv that is not on PATH, seeing this interpreter's packages."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    venv.create(folder, system_site_packages=True, with_pip=False, symlinks=True)
    return folder


def _run(venv_dir: Path, job: Path) -> subprocess.CompletedProcess[str]:
    shell_path = os.pathsep.join(p for p in ("/usr/bin", "/bin") if Path(p).is_dir())
    env = {"PATH": shell_path, "PYTHONPATH": str(SRC), "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(
        [str(venv_dir / "bin" / "python"), "-m", "tfjob", "run", str(job)],
        capture_output=True,
        text=True,
        env=env,
        cwd=job.parent,
        timeout=120,
        check=False,
    )


def test_a_replicas_python3_is_the_one_tfjob_runs_in(other_venv: Path, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(env=""))
    done = _run(other_venv, job)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"prefix {other_venv}" in done.stdout, done.stdout


def test_a_containers_own_path_wins(other_venv: Path, tmp_path: Path) -> None:
    system = Path("/usr/bin/python3")
    if not system.exists():
        pytest.skip("no /usr/bin/python3 to choose instead")
    job = tmp_path / "job.yaml"
    env = "              env: [{name: PATH, value: /usr/bin}]"
    job.write_text(JOB.format(env=env))
    done = _run(other_venv, job)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"prefix {other_venv}" not in done.stdout, done.stdout
    assert "prefix " in done.stdout, done.stdout
