"""The kinds tfjob serves, as every command's help names them.

Help texts read the names from the framework registry instead of spelling them out,
so a kind added there is named by `tfjob --help`, `tfjob run --help` and the rest
without an edit to each (before, `run --help` named five kinds of six). `{kinds}`:
the `kubeflow.org/v1` kinds (what `run` and `render` take); `{cluster_kinds}`: those
and Kubeflow Trainer's TrainJob, which the cluster commands take too.
"""

from __future__ import annotations

from typing import TypeVar

import click

from tfjob.api import trainjob
from tfjob.frameworks.registry import FRAMEWORKS

C = TypeVar("C", bound=click.Command)

#: "TFJob, PyTorchJob, JAXJob, ...", in the registry's order.
KINDS = ", ".join(FRAMEWORKS)
#: The same, and TrainJob.
CLUSTER_KINDS = f"{KINDS}, {trainjob.KIND}"


def naming_kinds(command: C) -> C:
    """Fill `{kinds}` and `{cluster_kinds}` in the command's help with the kinds
    tfjob serves (outermost decorator: click has read the docstring by then)."""
    text = (command.help or "").replace("{cluster_kinds}", CLUSTER_KINDS)
    command.help = text.replace("{kinds}", KINDS)
    return command
