"""A real Prometheus server for the monitoring tests: scrapes operators on loopback and
answers PromQL over its HTTP API.

The binary is built by tools/envtest/build.sh beside the cluster's (`Assets.tool`).
Targets are a file_sd file the server re-reads within a second, so a test adds the
operator it started (`scrape`) while the server runs; each target's series carry its
address as `instance`. Storage is a folder of the test's; the web UI's assets are not
built in, and nothing here needs them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from testkit.controlplane import _die_with_parent, _tail, terminate
from testkit.helpers import WaitTimeout, free_port, wait_for

if TYPE_CHECKING:
    from testkit.operators import RunningOperator

SCRAPE_INTERVAL = "1s"
JOB = "tfjob-operator"


class PrometheusError(RuntimeError):
    """The server did not start, or answered a query with an error."""


@dataclass(frozen=True)
class Series:
    """One element of an instant vector: its labels and value."""

    labels: dict[str, str]
    value: float


@dataclass
class Prometheus:
    binary: Path
    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    targets: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "prometheus.log"

    def start(self, timeout: float = 60.0) -> Prometheus:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._write_targets()
        config = {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "file_sd_configs": [
                        {"files": [str(self.folder / "targets.json")], "refresh_interval": "1s"}
                    ],
                }
            ],
        }
        (self.folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        parent = os.getpid()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(self.binary),
                    f"--config.file={self.folder / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: _die_with_parent(parent),
            )
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise PrometheusError(f"prometheus did not start:\n{_tail(self.log, 30)}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        terminate(self.process)

    def scrape(self, address: str, timeout: float = 20.0) -> None:
        """Scrape `address` (host:port, /metrics) from now on; returns once it is up."""
        self.targets.append(address)
        self._write_targets()
        wait_for(
            lambda: self._health(address) == "up",
            timeout,
            interval=0.25,
            message=f"prometheus scraping {address}",
        )

    def query(self, promql: str) -> list[Series]:
        """An instant query now: its vector (a scalar answer as one unlabelled series)."""
        data = self._get("/api/v1/query", query=promql)
        if data["resultType"] == "scalar":
            return [Series({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise PrometheusError(f"{promql}: a {data['resultType']}, not an instant vector")
        return [Series(item["metric"], float(item["value"][1])) for item in data["result"]]

    def value(self, promql: str) -> float | None:
        """The one value of `promql` (None when it has no series)."""
        found = self.query(promql)
        if len(found) > 1:
            raise PrometheusError(f"{promql}: {len(found)} series, wanted one: {found}")
        return found[0].value if found else None

    def wait_value(self, promql: str, expected: float | None, timeout: float = 20.0) -> None:
        """Until `promql` is `expected` (None: no series); scrapes come each second."""
        seen: list[float | None] = []

        def matches() -> bool:
            seen.append(self.value(promql))
            return seen[-1] == expected

        try:
            wait_for(matches, timeout, interval=0.25)
        except WaitTimeout:
            raise AssertionError(f"{promql} is {seen[-1]}, expected {expected}") from None

    @staticmethod
    def has_data(found: list[Series]) -> bool:
        """At least one series with a number (not NaN: a quantile of nothing)."""
        return any(not math.isnan(s.value) for s in found)

    # -- internals -------------------------------------------------------------------

    def _write_targets(self) -> None:
        path = self.folder / "targets.json"
        fresh = path.with_suffix(".tmp")
        fresh.write_text(json.dumps([{"targets": self.targets}]))
        fresh.replace(path)  # a reader never sees half a file

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _health(self, address: str) -> str:
        for target in self._get("/api/v1/targets", state="active")["activeTargets"]:
            if target["labels"].get("instance") == address:
                return str(target["health"])
        return "absent"

    def _get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:
            raise PrometheusError(f"{path} {params}: {error.code} {error.read()!r}") from error
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]


@dataclass
class Scenario:
    """What a monitoring test scraped: the operator Prometheus watched, its namespace
    and Lease, the jobs (by `framework` label) as last seen before any was deleted, and
    how long the queued one was held at least."""

    prometheus: Prometheus
    operator: RunningOperator
    namespace: str
    lease: str
    jobs: dict[str, dict[str, Any]]
    queued_seconds: float

    @property
    def instance(self) -> str:
        return f"127.0.0.1:{self.operator.metrics_port}"
