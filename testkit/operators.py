"""Helpers for the operator's tests: operator subprocesses and the test's namespace.

Plain classes and functions (the fixtures that hand them out are in
tests/kubernetes/conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event, Pod, Service
from lightkube.types import PatchType

from testkit import helpers
from testkit.helpers import free_port, job_manifest, wait_for
from tfjob.api.kinds import KindDeclaration
from tfjob.frameworks.tensorflow import TENSORFLOW

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0

T = TypeVar("T")


def _command() -> list[str]:
    beside = Path(sys.executable).with_name("tfjob")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-c", "from tfjob.interfaces.cli import main; main()"]


@dataclass
class RunningOperator:
    """One ``tfjob operator`` subprocess."""

    process: subprocess.Popen[bytes]
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
            *_command(),
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
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        running = RunningOperator(process, log_path, health, metrics, args)
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

        def exact() -> dict[str, dict[str, Any]] | None:
            pods = self.pods()
            live = {n for n, p in pods.items() if not p["metadata"].get("deletionTimestamp")}
            return pods if live == names else None

        return wait_for(exact, timeout, message=f"exactly the pods {sorted(names)}")

    def wait_services(self, names: set[str], timeout: float = 20.0) -> dict[str, dict[str, Any]]:
        def exact() -> dict[str, dict[str, Any]] | None:
            services = self.services()
            return services if set(services) == names else None

        return wait_for(exact, timeout, message=f"exactly the services {sorted(names)}")

    def events(self, job: str | None = None) -> list[dict[str, Any]]:
        found = [e.to_dict() for e in self.kube.list(Event, namespace=self.namespace)]
        if job is not None:
            found = [e for e in found if e["involvedObject"].get("name") == job]
        return found

    def reasons(self, job: str) -> list[str]:
        return [e["reason"] for e in self.events(job)]
