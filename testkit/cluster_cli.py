"""Driving the cluster commands of the real `tfjob` in child processes.

A command run to its end (``Cli(...)``) is forked from one process per test worker
(and network namespace) that imported the cluster commands once
(testkit/forked_cli.py): still a process of its own with the test's environment,
without 0.4 CPU-s of interpreter start and imports each. A command the test
follows, signals or reads while it runs (``Cli.start``) is started as a new
interpreter.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION
from testkit.forked_cli import shared
from testkit.helpers import IMAGE, container, pytorchjob, replica, tfjob
from testkit.tfjob_cli import TFJOB
from tfjob.api.kinds import KindDeclaration
from tfjob.frameworks.registry import FRAMEWORKS

LIMIT = 60.0  # seconds any one command may take in these tests


def job_document(name: str, replicas: int = 1, **spec: Any) -> dict[str, Any]:
    """A TFJob as a user writes it: Worker replicas of one tensorflow container."""
    worker = replica(replicas, "Never", [container(command=["python", "train.py"])])
    return tfjob(name, None, {"Worker": worker}, **spec)


def pytorch_document(name: str, workers: int = 1, *, master: bool = True) -> dict[str, Any]:
    """A PyTorchJob as a user writes it: a Master (unless `master` is False) and
    `workers` Workers of one pytorch container."""
    pod = [{"name": "pytorch", "image": IMAGE, "command": ["python", "train.py"]}]
    specs = {"Worker": replica(workers, "Never", pod)}
    if master:
        specs = {"Master": replica(1, "Never", pod), **specs}
    return pytorchjob(name, None, specs)


def any_kind_document(kind: KindDeclaration, name: str) -> dict[str, Any]:
    """A valid job of any kind, from its declaration alone: its first master type (if
    it has one) and a Worker, each one replica of the kind's training container."""
    pod = [{"name": kind.container_name, "image": IMAGE, "command": ["python", "train.py"]}]
    types = (*kind.master_types[:1], "Worker")
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name},
        "spec": {kind.spec_field: {t: replica(1, "Never", pod) for t in types}},
    }


def ending_job(name: str, replicas: int, *, exit_code: int, run_for: str) -> dict[str, Any]:
    """A TFJob whose pods kwok runs for `run_for`, then ends with `exit_code`."""
    return ending(job_document(name, replicas), exit_code=exit_code, run_for=run_for)


def ending(document: dict[str, Any], *, exit_code: int, run_for: str) -> dict[str, Any]:
    """`document` (a job of any kind) with every pod run by kwok for `run_for`, then
    ended with `exit_code`."""
    specs = document["spec"][FRAMEWORKS[document["kind"]].spec_field]
    for spec in specs.values():
        spec["template"]["metadata"] = {
            "annotations": {EXIT_CODE_ANNOTATION: str(exit_code), RUN_FOR_ANNOTATION: run_for}
        }
    return document


def is_no_job(line: str, name: str, namespace: str) -> bool:
    """Whether `line` is what a cluster command says of a name no job has, looked for
    among every kind installed: TFJob and PyTorchJob (the `cli` fixture installs
    both), and any other the session installed ("no TFJob, PyTorchJob or JAXJob")."""
    kinds = r"TFJob(?:, [A-Za-z]+)*(?: or [A-Za-z]+)?"
    pattern = rf'tfjob: no {kinds} "{re.escape(name)}" in namespace {re.escape(namespace)}'
    return re.fullmatch(pattern, line) is not None and "PyTorchJob" in line


@dataclass
class Cli:
    """`tfjob` aimed at the test's cluster and namespace."""

    kubeconfig: Path
    namespace: str
    folder: Path

    def args(self, *args: str) -> list[str]:
        return [*TFJOB, *args, "--kubeconfig", str(self.kubeconfig), "-n", self.namespace]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [*args, "--kubeconfig", str(self.kubeconfig), "-n", self.namespace]
        return shared(_WARM_UP).run(*command, env=_env(), timeout=int(LIMIT))

    def start(self, *args: str) -> Running:
        log = self.folder / f"tfjob-{time.monotonic_ns()}.log"
        handle = log.open("w")
        process = subprocess.Popen(
            self.args(*args),
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=_env(),
            preexec_fn=_ctrl_c_reaches_it,
        )
        handle.close()
        return Running(process, log)

    def write(self, *documents: dict[str, Any]) -> Path:
        path = self.folder / f"job-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return path


def _ctrl_c_reaches_it() -> None:
    """In the child: SIGINT as in a terminal's foreground job. A test run started in
    the background (`cmd &` without job control) ignores SIGINT, every child inherits
    that, and Python then installs no KeyboardInterrupt: Ctrl-C would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Running:
    """A `tfjob` still running; its output goes to a file, read at any time."""

    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_output(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output()
            if predicate(text):
                return text
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"output never matched (exit {self.process.poll()}):\n{self.output()}")

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def wait(self, timeout: float = LIMIT) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"tfjob did not end within {timeout} s:\n{self.output()}"
            ) from None


#: What every cluster command imports first, imported once before the forks.
_WARM_UP = "\n".join(
    f"import tfjob.interfaces.{module}"
    for module in (
        "cluster",
        "get_command",
        "submit_command",
        "wait_command",
        "delete_command",
        "logs_command",
        "cluster_client.follow",
    )
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}
