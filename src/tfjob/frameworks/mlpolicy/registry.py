"""mlPolicy source -> its handler. None (a runtime without a source) is the plain
runtime, unless the runtime's `trainer.kubeflow.org/framework` label names a framework
tfjob adds without a source of its own (tensorflow, paddle: Trainer's schema has no
field for them, so the label says it; decision 0034). A source tfjob does not handle
(flux) has no handler, and the TrainJob fails naming it."""

from __future__ import annotations

from tfjob.frameworks.mlpolicy.base import Handler
from tfjob.frameworks.mlpolicy.jax import Jax
from tfjob.frameworks.mlpolicy.mpi import MPI
from tfjob.frameworks.mlpolicy.paddle import Paddle
from tfjob.frameworks.mlpolicy.plain import Plain
from tfjob.frameworks.mlpolicy.tensorflow import TensorFlow
from tfjob.frameworks.mlpolicy.torch import Torch
from tfjob.frameworks.mlpolicy.xgboost import XGBoost

HANDLERS: dict[str | None, Handler] = {
    None: Plain(),
    "torch": Torch(),
    "mpi": MPI(),
    "jax": Jax(),
    "xgboost": XGBoost(),
}
#: Runtimes without a source, by their framework label.
LABELLED: dict[str, Handler] = {
    "tensorflow": TensorFlow(),
    "paddle": Paddle(),
}


def handler_for(source: str | None, framework: str | None = None) -> Handler | None:
    """The handler of an mlPolicy source ("torch", ...); with no source, the one the
    runtime's framework label names, else the plain runtime's."""
    if source is None and framework in LABELLED:
        return LABELLED[framework]
    return HANDLERS.get(source)
