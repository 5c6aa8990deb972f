"""mlPolicy source -> its handler. None (a runtime without a source) is the plain
runtime; a source tfjob does not handle (flux) has no handler, and the TrainJob
fails naming it."""

from __future__ import annotations

from tfjob.frameworks.mlpolicy.base import Handler
from tfjob.frameworks.mlpolicy.jax import Jax
from tfjob.frameworks.mlpolicy.mpi import MPI
from tfjob.frameworks.mlpolicy.plain import Plain
from tfjob.frameworks.mlpolicy.torch import Torch
from tfjob.frameworks.mlpolicy.xgboost import XGBoost

HANDLERS: dict[str | None, Handler] = {
    None: Plain(),
    "torch": Torch(),
    "mpi": MPI(),
    "jax": Jax(),
    "xgboost": XGBoost(),
}


def handler_for(source: str | None) -> Handler | None:
    """The handler of an mlPolicy source ("torch", ...; None: no source)."""
    return HANDLERS.get(source)
