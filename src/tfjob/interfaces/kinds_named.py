"""The kinds tfjob serves, as every command's help names them.

Help texts read the names from the framework registry instead of spelling them out,
so a kind added there is named by `tfjob --help`, `tfjob run --help` and the rest
without an edit to each (before, `run --help` named five kinds of six).
"""

from __future__ import annotations

from typing import TypeVar

import click

from tfjob.frameworks.registry import FRAMEWORKS

C = TypeVar("C", bound=click.Command)

#: "TFJob, PyTorchJob, JAXJob, ...", in the registry's order.
KINDS = ", ".join(FRAMEWORKS)


def naming_kinds(command: C) -> C:
    """Fill `{kinds}` in the command's help with the kinds tfjob serves (outermost
    decorator: click has read the docstring by then)."""
    command.help = (command.help or "").replace("{kinds}", KINDS)
    return command
