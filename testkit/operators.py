"""Helpers for the operator's tests: operator subprocesses and the test's namespace.

Plain classes and functions (the fixtures that hand them out are in
tests/kubernetes/conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event, Pod, Service
from lightkube.types import PatchType

from testkit import helpers
from testkit.forked_cli import ForkedProcess, shared
from testkit.helpers import WaitTimeout, free_port, job_manifest, wait_for
from tfjob.api.kinds import KindDeclaration
from tfjob.frameworks.tensorflow import TENSORFLOW

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0

T = TypeVar("T")


#: What `tfjob operator` imports before it serves, done once in the forking server.
_WARM_UP = (
    "import structlog, yaml\n"
    "import tfjob.interfaces.operator_command\n"
    "import tfjob.runtimes.kubernetes.controller.operator\n"
    "import tfjob.frameworks.load\n"
    "import tfjob.runtimes.kubernetes.transport.pod_proto\n"
)


def start_tfjob(
    args: list[str], log_path: Path, env: dict[str, str] | None = None
) -> ForkedProcess:
    """`tfjob ARGS` (an operator) as a process of its own, its output appended to
    `log_path`, forked from a process that imported the operator once
    (testkit/forked_cli.py): the ~0.4 CPU-seconds of interpreter start and imports
    each of the suite's ~200 operators paid, on two cores, are paid once per worker."""
    return shared(_WARM_UP).spawn(*args, log=log_path, env={**os.environ, **(env or {})})


@dataclass
class RunningOperator:
    """One operator process: ours (forked, start_tfjob) or Kubeflow's (a subprocess)."""

    process: subprocess.Popen[bytes] | ForkedProcess
    log_path: Path
    health_port: int
    metrics_port: int
    args: list[str]

    def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, OSError):
            return 0, ""

    def ready(self) -> bool:
        return self.get(self.health_port, "/readyz")[0] == 200

    def metrics(self) -> str:
        status, text = self.get(self.metrics_port, "/metrics")
        assert status == 200, f"/metrics answered {status}"
        return text

    def metric(self, sample: str, **labels: str) -> float:
        """The value of one sample of /metrics: 0 if its family is exported but not
        this series (a labelled counter no one has counted yet); a failed test if
        the family is not exported at all (a misspelt or removed metric must not
        read as 0)."""
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        families: set[str] = set()
        for line in self.metrics().splitlines():
            if line.startswith("# TYPE "):
                families.add(line.split()[2])
            if line.startswith("#") or " " not in line:
                continue
            series, value = line.rsplit(" ", 1)
            base, _, rest = series.partition("{")
            found = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
            if base == sample and found == wanted:
                return float(value)
        suffixes = ("", "_total", "_count", "_sum", "_bucket", "_created", "_info")
        exported = any(sample == family + suffix for family in families for suffix in suffixes)
        assert exported, f"/metrics exports no {sample}"
        return 0.0

    def log_tail(self, lines: int = 60) -> str:
        try:
            with self.log_path.open(errors="replace") as handle:
                return "".join(deque(handle, maxlen=lines))
        except OSError:
            return ""

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.process.poll() is not None:
                pytest.fail(f"operator exited {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"operator not ready within {timeout} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then the exit code (SIGKILL and fail if it does not exit)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                pytest.fail(f"operator ignored SIGTERM for {timeout} s:\n{self.log_tail()}")
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, no clean-up of any kind."""
        self.process.kill()
        self.process.wait()


@dataclass
class Operators:
    kubeconfig: Path
    namespace: str
    folder: Path
    started: list[RunningOperator] = field(default_factory=list)

    def start(self, *extra: str, wait: bool = True) -> RunningOperator:
        health, metrics = free_port(), free_port()
        log_path = self.folder / f"operator-{len(self.started)}.log"
        args = [
            "operator",
            "--kubeconfig",
            str(self.kubeconfig),
            "--namespace",
            self.namespace,
            "--metrics-port",
            str(metrics),
            "--health-port",
            str(health),
            "--bind-address",
            "127.0.0.1",
            *extra,
        ]
        running = RunningOperator(start_tfjob(args, log_path), log_path, health, metrics, args)
        self.started.append(running)
        if wait:
            running.wait_ready()
        return running


# -- the test's view of the cluster --------------------------------------------------


def replica(
    replicas: int = 1,
    restart_policy: str | None = None,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The shared replica spec with a user's label on its pod template (team=ml),
    which the operator must carry over to the pods it makes."""
    return helpers.replica(replicas, restart_policy, containers, labels={"team": "ml"})


@dataclass
class Jobs:
    """The test's namespace, seen through an admin client: its jobs of `kind`
    (TFJobs unless told), their pods, services and events."""

    kube: Client
    namespace: str
    kind: KindDeclaration = TENSORFLOW

    @property
    def resource(self) -> Any:
        k = self.kind
        return create_namespaced_resource(k.group, k.version, k.kind, k.plural)

    def of(self, kind: KindDeclaration) -> Jobs:
        """The same namespace's jobs of another kind."""
        return Jobs(self.kube, self.namespace, kind)

    def manifest(self, name: str, specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
        return job_manifest(
            self.kind.kind, self.kind.spec_field, name, self.namespace, specs, **spec
        )

    def create(self, name: str, specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
        _ = self.resource  # lightkube decodes a custom kind once its class exists
        obj = self.kube.create(codecs.from_dict(self.manifest(name, specs, **spec)))
        data: dict[str, Any] = obj.to_dict()
        return data

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = self.kube.get(
                self.resource, name, namespace=self.namespace
            ).to_dict()
        except ApiError as error:
            if error.status.code == 404:
                return None
            raise
        return data

    def patch_spec(self, name: str, patch: dict[str, Any]) -> None:
        self.patch(name, {"spec": patch})

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of the job (what `kubectl patch --type merge` sends)."""
        self.kube.patch(
            self.resource,
            name,
            patch,
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
        )

    def status(self, name: str) -> dict[str, Any]:
        job = self.get(name)
        assert job is not None, f"{self.kind.kind} {name} is gone"
        status: dict[str, Any] = job.get("status") or {}
        return status

    def conditions(self, name: str) -> list[tuple[str, str, str]]:
        return [
            (c["type"], c["status"], c["reason"]) for c in self.status(name).get("conditions", [])
        ]

    def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        for entry in self.status(name).get("conditions", []):
            if entry["type"] == kind and entry["status"] == "True":
                found: dict[str, Any] = entry
                return found
        return None

    def wait_condition(self, name: str, kind: str, timeout: float = 20.0) -> dict[str, Any]:
        return wait_for(
            lambda: self.condition(name, kind),
            timeout,
            message=f"{kind}=True on {self.kind.kind} {name} "
            f"(conditions: {self._safe_conditions(name)})",
        )

    def _safe_conditions(self, name: str) -> Any:
        job = self.get(name)
        return None if job is None else (job.get("status") or {}).get("conditions")

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p.metadata.name: p.to_dict() for p in self.kube.list(Pod, namespace=self.namespace)}

    def services(self) -> dict[str, dict[str, Any]]:
        return {
            s.metadata.name: s.to_dict() for s in self.kube.list(Service, namespace=self.namespace)
        }

    def wait_pods(self, names: set[str], timeout: float = 20.0) -> dict[str, dict[str, Any]]:
        """Until exactly these pods exist (none terminating)."""
        return _exactly(self.pods, names, timeout, "pods", _not_terminating)

    def wait_services(self, names: set[str], timeout: float = 20.0) -> dict[str, dict[str, Any]]:
        return _exactly(self.services, names, timeout, "services")

    def events(self, job: str | None = None) -> list[dict[str, Any]]:
        found = [e.to_dict() for e in self.kube.list(Event, namespace=self.namespace)]
        if job is not None:
            found = [e for e in found if e["involvedObject"].get("name") == job]
        return found

    def reasons(self, job: str) -> list[str]:
        return [e["reason"] for e in self.events(job)]


def _not_terminating(found: dict[str, Any]) -> bool:
    return not found["metadata"].get("deletionTimestamp")


def _exactly(
    read: Callable[[], dict[str, dict[str, Any]]],
    names: set[str],
    timeout: float,
    what: str,
    counts: Callable[[dict[str, Any]], bool] = lambda _: True,
) -> dict[str, dict[str, Any]]:
    """`read()` once the names of the objects that `counts` are exactly `names`; a
    timeout says which were missing and which extra."""
    seen: set[str] = set()

    def exact() -> dict[str, dict[str, Any]] | None:
        nonlocal seen
        found = read()
        seen = {name for name, each in found.items() if counts(each)}
        return found if seen == names else None

    try:
        return wait_for(exact, timeout, message=f"exactly the {what} {sorted(names)}")
    except WaitTimeout as timed_out:
        missing, extra = sorted(names - seen), sorted(seen - names)
        raise AssertionError(f"{timed_out}; missing {missing}, extra {extra}") from None
