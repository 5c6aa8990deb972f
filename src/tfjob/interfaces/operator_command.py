"""`tfjob operator`: run the TFJob operator against a Kubernetes cluster.

Flags follow upstream's operator where one exists (namespace, metrics and health
ports, leader election, CUSTOM_CLUSTER_DOMAIN, KUBEFLOW_NAMESPACE), so a Deployment
written for training-operator needs few changes.
"""

from __future__ import annotations

import sys

import click

from tfjob.runtimes.kubernetes import logs
from tfjob.runtimes.kubernetes.operator import OperatorOptions, run


@click.command("operator")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Kubeconfig file; default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config.",
)
@click.option(
    "--namespace",
    envvar="KUBEFLOW_NAMESPACE",
    help="Only manage TFJobs in this namespace (default: all namespaces).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Jobs reconciled concurrently (one job is never reconciled twice at once).",
)
@click.option(
    "--cluster-domain",
    envvar="CUSTOM_CLUSTER_DOMAIN",
    default="",
    help="Appended to service names in TF_CONFIG, e.g. cluster.local.",
)
@click.option(
    "--metrics-port",
    type=int,
    default=8080,
    show_default=True,
    help="Port of /metrics (-1 disables it).",
)
@click.option(
    "--health-port",
    type=int,
    default=8081,
    show_default=True,
    help="Port of /healthz and /readyz (-1 disables them).",
)
@click.option(
    "--bind-address",
    default="0.0.0.0",
    show_default=True,
    help="Address the metrics and health endpoints listen on.",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=False,
    show_default=True,
    help="Hold a Lease so that only one replica reconciles.",
)
@click.option(
    "--leader-election-namespace",
    default="",
    help="Namespace of the Lease (default: $POD_NAMESPACE, the service account's, or "
    "tfjob-system).",
)
@click.option(
    "--leader-election-id", default="tfjob-operator", show_default=True, help="Name of the Lease."
)
@click.option(
    "--kube-api-qps",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Client-side limit on API requests per second (0: none; upstream used 20).",
)
@click.option(
    "--kube-api-burst",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Requests allowed at once above --kube-api-qps (0: the QPS).",
)
@click.option(
    "--gang-scheduler-name",
    default="",
    help="Gang-schedule every job with this scheduler: default-scheduler (native "
    "Kubernetes 1.36+ Workload/PodGroup), volcano, kube-batch, or the name of a "
    "scheduler-plugins scheduler. Default: off.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def command(
    kubeconfig: str | None,
    namespace: str | None,
    workers: int,
    cluster_domain: str,
    metrics_port: int,
    health_port: int,
    bind_address: str,
    leader_elect: bool,
    leader_election_namespace: str,
    leader_election_id: str,
    kube_api_qps: float,
    kube_api_burst: int,
    gang_scheduler_name: str,
    log_level: str,
) -> None:
    """Run the TFJob operator (kubeflow.org/v1) until SIGTERM or SIGINT."""
    logs.configure(log_level)
    options = OperatorOptions(
        kubeconfig=kubeconfig,
        namespace=namespace or None,
        workers=workers,
        cluster_domain=cluster_domain,
        metrics_port=metrics_port,
        health_port=health_port,
        bind_host=bind_address,
        leader_elect=leader_elect,
        lease_namespace=leader_election_namespace,
        lease_name=leader_election_id,
        kube_api_qps=kube_api_qps,
        kube_api_burst=kube_api_burst,
        gang_scheduler_name=gang_scheduler_name,
    )
    sys.exit(run(options))
