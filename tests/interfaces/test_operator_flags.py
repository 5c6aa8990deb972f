"""`tfjob operator` accepts Kubeflow's training-operator flags, so a Deployment written
for it starts tfjob; every translation is checked here without a cluster (the command
stops before connecting), and the Deployment tests in tests/kubernetes run it for real.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import structlog
from click.testing import CliRunner, Result

from tfjob.interfaces import operator_command
from tfjob.runtimes.kubernetes.controller import logging_setup
from tfjob.runtimes.kubernetes.controller.operator import OperatorOptions

#: The args of Kubeflow's own Deployment (v1.9 manifests plus its common options).
KUBEFLOW_ARGS = [
    "--metrics-bind-address=:8080",
    "--health-probe-bind-address=:8081",
    "--leader-elect",
    "--controller-threads=3",
    "--enable-scheme=tfjob",
    "--kube-api-qps=20",
    "--kube-api-burst=30",
    "--zap-log-level=debug",
    "--webhook-server-port=9443",
    "--webhook-secret-name=training-operator-webhook-cert",
    "--zap-devel",
]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[OperatorOptions, str, str | None]]:
    """What the command would run with: the options and the log setup."""
    seen: list[tuple[OperatorOptions, str, str | None]] = []
    setup: dict[str, Any] = {}

    def configure(level: str, fmt: str | None) -> None:
        setup.update(level=level, fmt=fmt)

    def run(options: OperatorOptions) -> int:
        seen.append((options, setup["level"], setup["fmt"]))
        return 0

    monkeypatch.setattr(operator_command.logging_setup, "configure", configure)
    monkeypatch.setattr(operator_command, "run", run)
    return seen


def invoke(*args: str) -> Result:
    return CliRunner().invoke(operator_command.command, list(args))


def test_kubeflows_deployment_args_start_tfjob(started: list[Any]) -> None:
    result = invoke(*KUBEFLOW_ARGS)
    assert result.exit_code == 0, result.output
    [(options, level, _fmt)] = started
    assert (options.bind_host, options.metrics_port, options.health_port) == ("0.0.0.0", 8080, 8081)
    assert options.leader_elect is True
    assert options.workers == 3
    assert (options.kube_api_qps, options.kube_api_burst) == (20, 30)
    assert level == "debug"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], False),
        (["--leader-elect"], True),
        (["--leader-elect=true"], True),
        (["--leader-elect=false"], False),
        (["--leader-elect", "--no-leader-elect"], False),
    ],
)
def test_leader_elect_takes_gos_boolean_forms(
    started: list[Any], args: list[str], expected: bool
) -> None:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert started[0][0].leader_elect is expected


def test_bind_addresses_set_host_and_ports_and_zero_disables(started: list[Any]) -> None:
    result = invoke("--metrics-bind-address=127.0.0.1:9090", "--health-probe-bind-address=0")
    assert result.exit_code == 0, result.output
    options = started[0][0]
    assert (options.bind_host, options.metrics_port, options.health_port) == ("127.0.0.1", 9090, -1)


def test_tfjobs_own_flags_still_work(started: list[Any]) -> None:
    result = invoke("--metrics-port=1", "--health-port=2", "--bind-address=::1", "--workers=7")
    assert result.exit_code == 0, result.output
    options = started[0][0]
    assert (options.bind_host, options.metrics_port, options.health_port) == ("::1", 1, 2)
    assert options.workers == 7


@pytest.mark.parametrize(
    ("args", "words"),
    [
        # Kubeflow v1.9.4 refuses it too: MXJob is gone from its operator.
        (["--enable-scheme=mxjob"], ["--enable-scheme", "unknown scheme 'mxjob'", "mpijob"]),
        (["--enable-scheme=tfjob", "--enable-scheme=MXJob"], ["--enable-scheme", "MXJob"]),
        (["--enable-scheme=nope"], ["unknown scheme 'nope'", "tfjob"]),
        (["--pytorch-init-container-max-tries=x"], ["--pytorch-init-container-max-tries"]),
        (["--metrics-bind-address=8080"], ["--metrics-bind-address", "HOST:PORT"]),
        (["--health-probe-bind-address=:http"], ["--health-probe-bind-address"]),
        (
            ["--metrics-bind-address=127.0.0.1:1", "--health-probe-bind-address=10.0.0.1:2"],
            ["same host"],
        ),
        (["--zap-log-level=loud"], ["--zap-log-level"]),
        (["--log-format=xml"], ["--log-format"]),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(
    started: list[Any], args: list[str], words: list[str]
) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    for word in words:
        assert word in result.output
    assert not started  # nothing ran


def test_enable_scheme_is_case_insensitive(started: list[Any]) -> None:
    assert invoke("--enable-scheme=TFJob").exit_code == 0
    assert started[0][0].kinds == ("TFJob",)


def test_enable_scheme_selects_kinds_and_none_means_every_kind(started: list[Any]) -> None:
    assert invoke("--enable-scheme=pytorchjob", "--enable-scheme=tfjob").exit_code == 0
    assert invoke().exit_code == 0
    assert [options.kinds for options, _level, _fmt in started] == [("PyTorchJob", "TFJob"), ()]


def test_enable_scheme_trainjob_serves_trainjobs_and_help_names_them(started: list[Any]) -> None:
    assert invoke("--enable-scheme=TrainJob", "--enable-scheme=tfjob").exit_code == 0
    assert started[0][0].kinds == ("TrainJob", "TFJob")
    shown = invoke("--help").output
    assert "TrainJob (trainer.kubeflow.org/v1alpha1)" in " ".join(shown.split())
    assert "'trainjob'" in shown


def test_pytorch_init_container_flags_reach_the_settings(started: list[Any]) -> None:
    args = ("--pytorch-init-container-image=busybox:1", "--pytorch-init-container-max-tries=7")
    assert invoke(*args).exit_code == 0
    settings = started[0][0].settings()
    assert settings.pytorch_init_container_image == "busybox:1"
    assert settings.pytorch_init_container_max_tries == 7


def test_mpi_kubectl_delivery_image_reaches_the_settings(started: list[Any]) -> None:
    assert invoke().exit_code == 0
    assert invoke("--mpi-kubectl-delivery-image=registry.example/kubectl:1").exit_code == 0
    default, given = (options.settings() for options, _level, _fmt in started)
    assert (
        default.mpi_kubectl_delivery_image == "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest"
    )
    assert given.mpi_kubectl_delivery_image == "registry.example/kubectl:1"


def test_kueue_integration_is_builtin_unless_external_is_asked(started: list[Any]) -> None:
    assert invoke().exit_code == 0
    assert invoke("--kueue-integration=external").exit_code == 0
    default, given = (options.settings() for options, _level, _fmt in started)
    assert default.kueue_integration == "builtin"
    assert given.kueue_integration == "external"
    refused = invoke("--kueue-integration=kueue")
    assert refused.exit_code == 2
    assert "--kueue-integration" in refused.output
    assert len(started) == 2  # the refused one ran nothing


def test_kueue_integration_help_says_what_each_mode_does() -> None:
    text = " ".join(invoke("--help").output.split())
    for words in ("--kueue-integration", "builtin", "external", "externalFrameworks"):
        assert words in text


def test_log_format_defaults_to_json_off_a_terminal_and_follows_zap_encoder(
    started: list[Any],
) -> None:
    assert invoke().exit_code == 0
    assert invoke("--zap-encoder=console").exit_code == 0
    assert invoke("--zap-encoder=json", "--log-format=text").exit_code == 0
    assert [fmt for _options, _level, fmt in started] == [None, "text", "text"]
    assert logging_setup.default_format() == "json"  # pytest's stderr is not a terminal


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_lines_in_each_format(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        logging_setup.configure("info", fmt)
        structlog.get_logger("t").info("caches synced", tfjobs=3)
    finally:
        structlog.reset_defaults()
    line = capsys.readouterr().err.strip()
    if fmt == "json":
        assert line.startswith("{") and '"event": "caches synced"' in line and '"tfjobs": 3' in line
    else:
        assert not line.startswith("{") and "caches synced" in line and "tfjobs=3" in line


@pytest.mark.parametrize(("fmt", "rich"), [("json", False), ("text", True)])
def test_json_logs_do_without_rich_and_text_logs_keep_its_tracebacks(fmt: str, rich: bool) -> None:
    """The operator imports structlog for its log format: for JSON without rich (its
    console tracebacks are never used there, and importing it is ~0.1 s of every
    start), for text with it, so a terminal still gets rich's tracebacks."""
    code = (
        "import sys\n"
        "from tfjob.runtimes.kubernetes.controller import logging_setup\n"
        f"logging_setup.configure('info', {fmt!r})\n"
        "import structlog.dev, tfjob.runtimes.kubernetes.controller.operator\n"
        "print('rich' in sys.modules, structlog.dev.rich is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(rich), str(rich)]
