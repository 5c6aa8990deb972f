"""Running an example job end to end with `tfjob run`, as a user would, and reading
the one `<PREFIX> {json}` report line each replica prints (tests/<framework>)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from testkit.tfjob_cli import TFJOB

RUN_LIMIT = 300.0  # seconds for one job; the examples take 5-15 s on 2 cores


def run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        env={**(env if env is not None else os.environ), "PYTHONUNBUFFERED": "1"},
    )


def reports(text: str, prefix: str) -> list[dict[str, Any]]:
    """Each `<prefix> {json}` in `text`. Processes sharing one output (torchrun's ranks
    in one pod) may write between another's report and its newline, or before its
    prefix (`print` writes text and newline apart when unbuffered), so a report is
    found anywhere in its line and read up to its closing brace."""
    found = []
    for line in text.splitlines():
        at = line.find(prefix + " ")
        while at >= 0:  # two processes' reports may share a line
            report, end = _DECODER.raw_decode(line, at + len(prefix) + 1)
            found.append(report)
            at = line.find(prefix + " ", end)
    return found


_DECODER = json.JSONDecoder()


def run_job(
    job: Path, tmp_path: Path, pods: list[str], prefix: str, env: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """`tfjob run` the job to Succeeded (in `env`, default ours); each pod's report,
    from its log."""
    run_dir = tmp_path / "run"
    done = run([*TFJOB, "run", str(job), "--run-dir", str(run_dir), "--no-view"], tmp_path, env)
    assert done.returncode == 0, (
        f"{job} did not succeed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    )
    found = {}
    for pod in pods:
        (report,) = reports((run_dir / f"{pod}.log").read_text(), prefix)
        found[pod] = report
    return found


def single_process(
    script: Path, tmp_path: Path, prefix: str, drop: tuple[str, ...]
) -> dict[str, Any]:
    """The reference: the script alone, one process, without the kind's env (`drop`).

    Run once per pytest process for each (script, prefix, drop): the examples' tests and
    the TrainJobs' (tests/<framework>/test_trainjob.py) compare with the same one, and
    the script trains from a fixed seed, so a second run could only print the same."""
    key = (script, prefix, drop)
    if key not in _REFERENCES:
        env = {k: v for k, v in os.environ.items() if k not in drop}
        done = run(["python3", str(script)], tmp_path, env)
        assert done.returncode == 0, done.stderr
        (report,) = reports(done.stdout, prefix)
        _REFERENCES[key] = report
    return copy.deepcopy(_REFERENCES[key])


_REFERENCES: dict[tuple[Path, str, tuple[str, ...]], dict[str, Any]] = {}
