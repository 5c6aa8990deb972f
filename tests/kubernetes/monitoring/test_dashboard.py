"""manifests/overlays/monitoring: the ServiceMonitor, the scrape annotations and the
Grafana dashboard, as `kubectl kustomize` renders them; and every panel of the
dashboard queried on the real Prometheus that scraped the scenario (conftest.py),
each answering with data.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from testkit.controlplane import ControlPlane
from testkit.install import OVERLAYS, find, kubectl, kubectl_path, operator_container, render
from testkit.prometheus import JOB, Prometheus, Scenario

FOLDER = OVERLAYS / "monitoring"
DASHBOARD = FOLDER / "tfjob-dashboard.json"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every target of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]


def test_every_panel_queries_and_every_variable_is_defined() -> None:
    board = dashboard()
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert panels and all(p.get("targets") for p in panels)
    defined = {v["name"] for v in board["templating"]["list"]}
    used = {m for _, expr in queries() for m in re.findall(r"\$(\w+)", expr)}
    builtin = {"__rate_interval", "__range"}
    assert used - builtin <= defined
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_every_series_a_panel_reads_is_documented() -> None:
    text = DOCS.read_text()
    read = {name for _, expr in queries() for name in re.findall(r"([a-z_]+)\{", expr)}
    names = {re.sub(r"_(bucket|sum|count)$", "", name) for name in read}
    missing = {n for n in names if f"`{n}`" not in text and not n.startswith("process_")}
    assert not missing


def test_the_overlay_scrapes_the_operators_service(
    control_plane: ControlPlane, kube: Client
) -> None:
    with contextlib.suppress(ApiError):  # the base's namespace, for the dry run below
        kube.create(Namespace(metadata=ObjectMeta(name="tfjob-system")))
    docs = render(FOLDER)
    service = find(docs, "Service", "tfjob-operator")
    [port] = service["spec"]["ports"]
    container = operator_container(docs)
    [metrics] = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    annotations = service["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(metrics["containerPort"]),
        "prometheus.io/path": "/metrics",
    }
    monitor = find(docs, "ServiceMonitor", "tfjob-operator")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"
    board = find(docs, "ConfigMap", "tfjob-dashboard")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["tfjob-dashboard.json"]) == dashboard()
    # Everything but the base and the ServiceMonitor (whose CRD the Prometheus Operator
    # brings) is new or changed: the API server accepts it as rendered.
    base = render(FOLDER.parents[1] / "base")
    others = [d for d in docs if d not in base and d["kind"] != "ServiceMonitor"]
    assert {d["kind"] for d in others} == {"Service", "ConfigMap"}
    admin = str(control_plane.kubeconfig_path)
    applied = subprocess.run(
        [str(kubectl_path()), "--kubeconfig", admin, "apply", "--dry-run=server", "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": others}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert kubectl("kustomize", str(FOLDER)).count("kind: ServiceMonitor") == 1


def test_every_panel_answers_on_the_scraped_operator(scenario: Scenario) -> None:
    prometheus: Prometheus = scenario.prometheus
    values = {
        "$job": JOB,
        "$namespace": scenario.namespace,
        "$framework": ".*",
        "$__rate_interval": "10m",  # the whole scenario
        "$__range": "10m",
    }
    empty = []
    for title, expr in queries():
        for name, value in values.items():
            expr = expr.replace(name, value)
        if not Prometheus.has_data(prometheus.query(expr)):
            empty.append(f"{title}: {expr}")
    assert not empty, "\n".join(empty)
