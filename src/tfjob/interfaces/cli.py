"""The `tfjob` command: a thin click front end over the runtimes and the core.

Each sub-command lives in its own module; this one only assembles the group.
"""

from __future__ import annotations

import click

from tfjob import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfjob")
def cli() -> None:
    """Run TFJobs (kubeflow.org/v1): locally as processes, or on Kubernetes."""


def _register() -> None:
    """Attach the sub-commands that exist (each is its own module)."""
    import importlib

    for module_name in ("run_command", "render_command", "operator_command"):
        try:
            module = importlib.import_module(f"tfjob.interfaces.{module_name}")
        except ModuleNotFoundError as error:
            if error.name != f"tfjob.interfaces.{module_name}":
                raise
            continue
        cli.add_command(module.command)


_register()


def main() -> None:
    """Console-script entry point."""
    cli()
