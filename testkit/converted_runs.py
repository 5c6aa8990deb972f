"""A v1 example and its `tfjob convert` TrainJob, both run with `tfjob run` at once,
as a user moving a job to Trainer v2 would check it: same outcome, same reports.

The example's folder is copied (its scripts with it), the conversion written there
(a converted template keeps the job's relative `workingDir`, taken from the YAML's
folder), and both runs start together, each with its own run folder, TMPDIR and
MODEL_DIR, so they share nothing but the machine.

The pair's original run is the example's own run too: the tests of an example
(tests/<framework>/test_examples.py) read its pods' reports from `Pair.original`, so
each example runs once, beside its conversion.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.examples import RUN_LIMIT, TFJOB
from testkit.examples import reports as printed_reports

#: Report fields that differ from run to run whatever the job (process ids, pod
#: names, folders), dropped before comparing.
VOLATILE = frozenset({"pid", "pod_name", "model_dir", "tfjob_port"})
#: A port on this machine, taken free at run time (tfjob's, or torchrun's: its
#: MASTER_ADDR is `localhost`): the port is replaced, the host kept, so a job that
#: reaches another host than the original still differs.
_LOCAL_ADDRESS = re.compile(r"\b(127\.0\.0\.1|localhost):\d+\b")


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    run_dir: Path

    @property
    def model_dir(self) -> Path:
        """The run's MODEL_DIR (the replicas inherit it)."""
        return self.run_dir.parent / "models"

    @property
    def tmp_dir(self) -> Path:
        """The run's TMPDIR (the replicas inherit it)."""
        return self.run_dir.parent / "tmp"

    def succeeded(self) -> None:
        assert self.returncode == 0, f"the job did not succeed:\n{self.output[-4000:]}"

    def pod_reports(self, pods: list[str], prefix: str) -> dict[str, dict[str, Any]]:
        """The job succeeded and each pod printed one `<prefix> {json}` line: those,
        as printed, by pod."""
        self.succeeded()
        found = {}
        for pod in pods:
            (report,) = printed_reports((self.run_dir / f"{pod}.log").read_text(), prefix)
            found[pod] = report
        return found

    def lines(self) -> list[str]:
        """Every line of every pod's log, in pod order."""
        return [
            line
            for log in sorted(self.run_dir.glob("*.log"))
            for line in log.read_text().splitlines()
        ]

    def raw_reports(self, prefix: str) -> list[dict[str, Any]]:
        """The `<prefix> {json}` lines the pods printed, as printed, in pod order."""
        return printed_reports("\n".join(self.lines()), prefix)

    def reports(self, prefix: str) -> list[dict[str, Any]]:
        """The `<prefix> {json}` lines the pods printed, normalised, sorted."""
        found = [_normalised(r) for r in self.raw_reports(prefix)]
        return sorted(found, key=lambda r: json.dumps(r, sort_keys=True))


@dataclass(frozen=True)
class Pair:
    original: Run
    converted: Run
    conversion: str  # the YAML `tfjob convert` printed
    losses: list[str]  # what it named lost, one line each
    folder: Path  # the copy of the example's folder, both jobs' working directory

    def same_reports(self, prefix: str) -> list[dict[str, Any]]:
        """Both runs succeeded and printed the same `<prefix> {json}` reports
        (normalised): those reports."""
        self.original.succeeded()
        self.converted.succeeded()
        reports = self.original.reports(prefix)
        assert reports, f"the original printed no {prefix}"
        assert self.converted.reports(prefix) == reports
        return reports


def run_both(example: Path, tmp_path: Path) -> Pair:
    """Convert `example` (a v1 job's YAML) and run it and its conversion at once."""
    original, converted, done = _convert(example, tmp_path)
    finished = _run({"original": original, "converted": converted}, tmp_path)
    losses = [line for line in done.stderr.splitlines() if " lost " in line]
    return Pair(finished["original"], finished["converted"], done.stdout, losses, original.parent)


def _convert(example: Path, tmp_path: Path) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """The example's folder copied, and `tfjob convert`'s output written beside it."""
    folder = tmp_path / "example"
    shutil.copytree(example.parent, folder)
    original = folder / example.name
    converted = folder / f"converted-{example.name}"
    done = subprocess.run(
        [*TFJOB, "convert", str(original)],
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        env=_env(tmp_path / "convert"),
    )
    assert done.returncode == 0, done.stderr
    converted.write_text(done.stdout)
    return original, converted, done


def _run(jobs: dict[str, Path], tmp_path: Path) -> dict[str, Run]:
    """`tfjob run` of each job at once, each in a folder of its own."""
    runs = {name: tmp_path / name for name in jobs}
    started = {
        name: subprocess.Popen(
            [*TFJOB, "run", str(job), "--run-dir", str(runs[name] / "run"), "--no-view"],
            cwd=runs[name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(runs[name]),
        )
        for name, job in jobs.items()
    }
    finished = {}
    for name, process in started.items():
        try:
            output, _ = process.communicate(timeout=RUN_LIMIT)
        finally:
            if process.poll() is None:
                process.kill()  # tfjob's own replicas die with it
                process.communicate()
        finished[name] = Run(process.returncode, output, runs[name] / "run")
    return finished


def _env(folder: Path) -> dict[str, str]:
    """Ours, with a TMPDIR and MODEL_DIR of the run's own (and the folder made)."""
    scratch = folder / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TMPDIR=str(scratch), MODEL_DIR=str(folder / "models"), PYTHONUNBUFFERED="1")
    return env


def _normalised(value: Any) -> Any:
    """Ports and volatile fields out; a path becomes whether there was one; floats to
    6 significant digits (an all-reduce may add in another order)."""
    if isinstance(value, dict):
        return {
            k: (v is not None if k == "checkpoint" else _normalised(v))
            for k, v in value.items()
            if k not in VOLATILE
        }
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, str):
        return _LOCAL_ADDRESS.sub(r"\1:PORT", value)
    return value
