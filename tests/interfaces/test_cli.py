"""The `tfjob` command group: its sub-commands and `python -m tfjob`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.interfaces.cli import COMMANDS, cli


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("run", "render", "operator"):
        assert f"  {name} " in result.output


@pytest.mark.parametrize("words", [[], *([name] for name in COMMANDS)], ids=str)
def test_every_help_names_every_kind(words: list[str]) -> None:
    """`tfjob --help` and each command's: the kinds come from the registry, so one
    added there is named everywhere (`run --help` once named five of six)."""
    result = CliRunner().invoke(cli, [*words, "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    missing = [kind for kind in FRAMEWORKS if kind not in text]
    assert not missing, f"tfjob {' '.join(words)} --help does not name {missing}"
    assert "{kinds}" not in text


def test_unknown_command_is_an_error() -> None:
    result = CliRunner().invoke(cli, ["nope"])
    assert result.exit_code == 2
    assert "No such command 'nope'" in result.output


def test_run_does_not_import_the_operator_stack() -> None:
    code = (
        "import sys; from tfjob.interfaces.cli import cli; cli.get_command(None, 'run');"
        "print(any(m.startswith(('tfjob.runtimes.kubernetes.transport.http1', 'tfjob.runtimes.kubernetes.controller', 'kubernetes_asyncio', 'lightkube', 'prometheus_client')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_operator_imports_no_http_library() -> None:
    """Its HTTP client is tfjob's own (transport/http1.py): aiohttp and its
    dependencies were some 9 MB of the operator's memory
    (docs/decisions/0037-own-http-client.md)."""
    code = (
        "import sys; from tfjob.interfaces.cli import cli; cli.get_command(None, 'operator');"
        "import tfjob.runtimes.kubernetes.controller.operator;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'multidict', 'yarl', 'httpx', 'urllib3', 'requests')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_python_dash_m() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tfjob", "--version"], capture_output=True, text=True, check=True
    )
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert out.stdout == f"tfjob, version {pyproject['project']['version']}\n"
