"""`tfjob operator`: run the operator against a Kubernetes cluster.

Kubeflow's training-operator flags are accepted under their own names
(`--metrics-bind-address`, `--health-probe-bind-address`, `--controller-threads`,
`--enable-scheme`, `--leader-elect[=true|false]`, `--zap-log-level`,
`--pytorch-init-container-image`, ...) beside tfjob's shorter ones, so a Deployment
written for Kubeflow's operator starts tfjob unchanged. Flags that only make sense
there (its webhook, the init container's template file) are accepted and ignored with
a warning rather than failing the pod.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.frameworks.settings import Settings
from tfjob.interfaces.kinds_named import naming_kinds
from tfjob.runtimes.kubernetes.controller import logging_setup

if TYPE_CHECKING:
    from tfjob.runtimes.kubernetes.controller.operator import OperatorOptions

COMMAND_LINE = ParameterSource.COMMANDLINE
DEFAULT = ParameterSource.DEFAULT

#: `--enable-scheme` values, by the kind each selects: the v1 kinds and Kubeflow
#: Trainer's TrainJob (`trainjob`, which Kubeflow's v1 operator does not have).
SCHEMES = {kind.scheme: name for name, kind in FRAMEWORKS.items()} | {"trainjob": "TrainJob"}

#: Kubeflow's flags that configure parts tfjob does not have (its admission webhook,
#: PyTorchJob's init-container template file, zap's development mode): accepted,
#: ignored.
IGNORED_KUBEFLOW_FLAGS = (
    "webhook-server-port",
    "webhook-service-name",
    "webhook-secret-name",
    "pytorch-init-container-template-file",
    "zap-devel",
    "zap-stacktrace-level",
    "zap-time-encoding",
)

# zap's level names (and its numeric verbosity, where -1 is debug) to ours.
_ZAP_LEVELS = {
    "debug": "debug",
    "info": "info",
    "warn": "warning",
    "error": "error",
    "dpanic": "error",
    "panic": "error",
    "fatal": "error",
}


@dataclass(frozen=True)
class Endpoint:
    """Where one HTTP endpoint listens: `host` None means "tfjob's --bind-address"."""

    host: str | None
    port: int  # -1: disabled


def parse_bind_address(value: str, flag: str) -> Endpoint:
    """Go's listen-address form: `:8080`, `127.0.0.1:8080`, `[::1]:8080`, or `0` (off)."""
    if value == "0":
        return Endpoint(None, -1)
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(
            f"{value!r} is not HOST:PORT (e.g. ':8080' or '127.0.0.1:8080'; '0' turns it off)",
            param_hint=flag,
        )
    host = host.removeprefix("[").removesuffix("]")
    return Endpoint(host or "0.0.0.0", int(port))


def kinds_of(schemes: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds `--enable-scheme` selects (any case, as Kubeflow's); none: every kind."""
    kinds = []
    served = ", ".join(sorted(SCHEMES))
    for scheme in schemes:
        name = scheme.lower()
        if name in SCHEMES:  # every scheme of Kubeflow v1.9.4 (which has no mxjob), trainjob
            kinds.append(SCHEMES[name])
        else:
            raise click.BadParameter(
                f"unknown scheme {scheme!r}; tfjob runs {served}",
                param_hint="--enable-scheme",
            )
    return tuple(dict.fromkeys(kinds))


def zap_level(value: str) -> str:
    """Kubeflow's `--zap-log-level` (debug, info, error, or a number) as a log level."""
    if value.lower() in _ZAP_LEVELS:
        return _ZAP_LEVELS[value.lower()]
    try:
        number = int(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a level (debug, info, warn, error, panic, or an integer)",
            param_hint="--zap-log-level",
        ) from None
    return "debug" if number > 0 else "info"  # zap: > 0 is a debug verbosity


def resolve_endpoints(ctx: click.Context, params: dict[str, Any]) -> tuple[str, Endpoint, Endpoint]:
    """The one bind host and the two ports, from either flag family."""
    metrics = Endpoint(None, params["metrics_port"])
    health = Endpoint(None, params["health_port"])
    if params["metrics_bind_address"] is not None:
        metrics = parse_bind_address(params["metrics_bind_address"], "--metrics-bind-address")
    if params["health_probe_bind_address"] is not None:
        health = parse_bind_address(
            params["health_probe_bind_address"], "--health-probe-bind-address"
        )
    hosts = {e.host for e in (metrics, health) if e.host is not None and e.port >= 0}
    explicit = ctx.get_parameter_source("bind_address") is not DEFAULT
    if explicit:
        hosts.add(params["bind_address"])
    if len(hosts) > 1:
        raise click.UsageError(
            "the metrics and health endpoints listen on one host in tfjob, but the flags "
            f"name {sorted(hosts)}: give both bind addresses the same host"
        )
    host = hosts.pop() if hosts else params["bind_address"]
    return host, metrics, health


@naming_kinds
@click.command("operator")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Kubeconfig file; default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config.",
)
@click.option(
    "--namespace",
    envvar="KUBEFLOW_NAMESPACE",
    help="Only manage jobs in this namespace (default: all namespaces).",
)
@click.option(
    "--workers",
    "--controller-threads",
    "workers",
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
    "--metrics-bind-address",
    metavar="HOST:PORT",
    help="Kubeflow's form of --bind-address/--metrics-port, e.g. ':8080' ('0' disables).",
)
@click.option(
    "--health-port",
    type=int,
    default=8081,
    show_default=True,
    help="Port of /healthz and /readyz (-1 disables them).",
)
@click.option(
    "--health-probe-bind-address",
    metavar="HOST:PORT",
    help="Kubeflow's form of --bind-address/--health-port, e.g. ':8081' ('0' disables).",
)
@click.option(
    "--bind-address",
    default="0.0.0.0",
    show_default=True,
    help="Address the metrics and health endpoints listen on.",
)
@click.option(
    "--enable-scheme",
    "enable_scheme",
    multiple=True,
    metavar="KIND",
    help="Serve only this kind, e.g. 'pytorchjob' or 'trainjob' (repeatable; default: "
    "every kind whose CRD is installed).",
)
@click.option(
    "--pytorch-init-container-image",
    default=Settings().pytorch_init_container_image,
    show_default=True,
    help="Image of the init container that holds a PyTorchJob's Workers until its "
    "Master's name resolves.",
)
@click.option(
    "--pytorch-init-container-max-tries",
    type=int,
    default=Settings().pytorch_init_container_max_tries,
    show_default=True,
    help="How many times that init container looks the Master's name up.",
)
@click.option(
    "--mpi-kubectl-delivery-image",
    default=Settings().mpi_kubectl_delivery_image,
    show_default=True,
    help="Image of the init container that gives an MPIJob's launcher kubectl.",
)
@click.option(
    "--leader-elect",
    type=click.BOOL,
    metavar="[=BOOL]",
    is_flag=False,
    flag_value=True,
    default=False,
    show_default=True,
    help="Hold a Lease so that only one replica reconciles (also --leader-elect=false).",
)
@click.option("--no-leader-elect", "no_leader_elect", is_flag=True, hidden=True)
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
    help="Client-side limit on API requests per second, per resource (0: none; upstream used 20).",
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
    "--kueue-integration",
    type=click.Choice(["builtin", "external"]),
    default=Settings().kueue_integration,
    show_default=True,
    help="Who makes the Kueue Workload of a job labelled kueue.x-k8s.io/queue-name: "
    "'builtin', Kueue's own Kubeflow integration (tfjob runs the job as any other); "
    "'external', tfjob, as Kueue's job framework would (the job runs only while its "
    "Workload is admitted; Kueue must list the kinds in integrations.externalFrameworks).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="Log lines as text or one JSON object each [default: text on a terminal, else json].",
)
@click.option("--zap-log-level", hidden=True, help="Kubeflow's --log-level.")
@click.option(
    "--zap-encoder", type=click.Choice(["json", "console"]), hidden=True, help="Kubeflow's format."
)
@click.pass_context
def command(ctx: click.Context, /, **params: Any) -> None:
    """Run the operator until SIGTERM or SIGINT: a controller for each kind whose CRD
    the cluster serves ({kinds}), as Kubeflow's training-operator does, and one for
    Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1) when the TrainJob,
    runtime and JobSet CRDs are installed, as Trainer's controller does."""
    # Before the operator's modules are imported: they log through structlog.
    logging_setup.configure(*log_settings(params))
    options = translate(ctx, params)
    _warn_ignored(ctx)
    sys.exit(run(options))


def run(options: OperatorOptions) -> int:
    from tfjob.runtimes.kubernetes.controller import operator

    return operator.run(options)


def log_settings(params: dict[str, Any]) -> tuple[str, str | None]:
    """The log level and format (None: by the terminal), from either flag family."""
    level: str = params["log_level"]
    if params["zap_log_level"] is not None:
        level = zap_level(params["zap_log_level"])
    fmt: str | None = params["log_format"]
    if fmt is None and params["zap_encoder"] is not None:
        fmt = "json" if params["zap_encoder"] == "json" else "text"
    return level, fmt


def translate(ctx: click.Context, params: dict[str, Any]) -> OperatorOptions:
    """The command line (either flag family) as operator options."""
    from tfjob.runtimes.kubernetes.controller.operator import OperatorOptions

    kinds = kinds_of(params["enable_scheme"])
    host, metrics, health = resolve_endpoints(ctx, params)
    return OperatorOptions(
        kubeconfig=params["kubeconfig"],
        namespace=params["namespace"] or None,
        workers=params["workers"],
        cluster_domain=params["cluster_domain"],
        metrics_port=metrics.port,
        health_port=health.port,
        bind_host=host,
        leader_elect=bool(params["leader_elect"]) and not params["no_leader_elect"],
        lease_namespace=params["leader_election_namespace"],
        lease_name=params["leader_election_id"],
        kube_api_qps=params["kube_api_qps"],
        kube_api_burst=params["kube_api_burst"],
        gang_scheduler_name=params["gang_scheduler_name"],
        kinds=kinds,
        pytorch_init_container_image=params["pytorch_init_container_image"],
        pytorch_init_container_max_tries=params["pytorch_init_container_max_tries"],
        mpi_kubectl_delivery_image=params["mpi_kubectl_delivery_image"],
        kueue_integration=params["kueue_integration"],
    )


def _warn_ignored(ctx: click.Context) -> None:
    given = [
        f"--{flag}"
        for flag in IGNORED_KUBEFLOW_FLAGS
        if ctx.get_parameter_source(flag.replace("-", "_")) is COMMAND_LINE
    ]
    if given:
        import structlog

        structlog.get_logger("tfjob.operator").warning(
            "ignoring Kubeflow flags tfjob has no use for", flags=given
        )


for _flag in IGNORED_KUBEFLOW_FLAGS:
    # Go's bool flags (--zap-devel) take an optional =value; the others take one.
    _extra: dict[str, Any] = {"flag_value": "true"} if _flag == "zap-devel" else {}
    command.params.append(click.Option([f"--{_flag}"], hidden=True, **_extra))
