"""JobSet's real controller manager on the real node (testkit/node.py).

``JobSetManager`` (testkit/jobset.py) runs beside a test ``ControlPlane``; the node's
control plane is the same set of programs started by ``Node``, so ``NodePlane`` gives
the manager what it reads of a ``ControlPlane`` (work folder, logs, kubeconfig, CA and
its key, the envtest binaries, one admin request) from the node. The manager is a
child of the test process, which is inside the node's network namespace: its webhooks
on 127.0.0.1 are the same loopback the node's API server calls, as on the test cluster.
The Job controller that turns JobSet's Jobs into pods is the node's
kube-controller-manager (``--controllers=*``), and the kubelet runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from lightkube import Client

from testkit.controlplane import Assets, ControlPlane
from testkit.jobset import JobSetManager
from testkit.node import Node


@dataclass
class NodePlane:
    """The part of ``ControlPlane`` that ``LoopbackManager`` and ``TrainJobs`` use."""

    node: Node

    @property
    def workdir(self) -> Path:
        folder = self.node.folder
        if folder is None:
            raise RuntimeError("the node is not started")
        return folder

    @property
    def log_dir(self) -> Path:
        return self.node.log_dir

    @property
    def kubeconfig_path(self) -> Path:
        return self.node.kubeconfig_path

    @property
    def ca_path(self) -> Path:
        return self.node.ca_path

    @property
    def ca_key_path(self) -> Path:
        return self.workdir / "pki" / "ca.key"

    @property
    def assets(self) -> Assets:
        return self.node.assets.control_plane

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.node.request(method, path, body)


def as_control_plane(node: Node) -> ControlPlane:
    """The node seen as the ``ControlPlane`` the managers and ``TrainJobs`` take."""
    return cast(ControlPlane, NodePlane(node))


def start_jobset(node: Node, kube: Client) -> JobSetManager:
    """JobSet v0.12's controller manager with its CRDs and webhooks on the node."""
    plane = as_control_plane(node)
    return JobSetManager(plane, kube, plane.assets.tool("jobset-controller-manager")).start()
