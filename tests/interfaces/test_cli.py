"""The `tfjob` command group: its sub-commands and `python -m tfjob`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from tfjob.interfaces.cli import cli


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("run", "render", "operator"):
        assert f"  {name} " in result.output


def test_unknown_command_is_an_error() -> None:
    result = CliRunner().invoke(cli, ["nope"])
    assert result.exit_code == 2
    assert "No such command 'nope'" in result.output


def test_run_does_not_import_the_operator_stack() -> None:
    code = (
        "import sys; from tfjob.interfaces.cli import cli; cli.get_command(None, 'run');"
        "print(any(m.startswith(('aiohttp', 'kubernetes_asyncio', 'lightkube', 'prometheus_client')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_dash_m() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tfjob", "--version"], capture_output=True, text=True, check=True
    )
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert out.stdout == f"tfjob, version {pyproject['project']['version']}\n"
