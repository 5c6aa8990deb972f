"""The `tfjob` command: a thin click front end over the runtimes and the core.

Each sub-command lives in its own module and is imported only when it runs: the
operator pulls in asyncio, ssl and prometheus_client, which `tfjob run` and
`tfjob render` should not pay for at every start (~0.35 s).
"""

from __future__ import annotations

import importlib

import click

from tfjob.interfaces.kinds_named import naming_kinds

# name -> (module under tfjob.interfaces, one-line help shown by `tfjob --help`)
COMMANDS = {
    "run": ("run_command", "Run a job on this machine, one process group per replica."),
    "render": ("render_command", "Print the pods and services the operator would create."),
    "submit": ("submit_command", "Create jobs on the cluster; --follow shows one as run does."),
    "get": ("get_command", "Show jobs of every kind on the cluster, or one in full."),
    "logs": ("logs_command", "Print or follow the output of a job's replicas."),
    "wait": ("wait_command", "Wait until a job on the cluster finishes."),
    "delete": ("delete_command", "Delete a job from the cluster."),
    "convert": ("convert_command", "Print a v1 job as a Trainer v2 TrainJob, naming what is lost."),
    "operator": ("operator_command", "Run the Kubernetes operator: one controller per kind."),
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"tfjob.interfaces.{COMMANDS[cmd_name][0]}")
        command: click.Command = module.command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


@naming_kinds
@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tfjob", prog_name="tfjob")
def cli() -> None:
    """Run Kubeflow's training jobs ({kinds}; kubeflow.org/v1): locally as
    processes, or on Kubernetes, where Kubeflow Trainer's TrainJob
    (trainer.kubeflow.org/v1alpha1) is served, submitted and followed too."""


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
