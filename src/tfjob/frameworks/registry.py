"""Every kind tfjob knows, by kind name and by model type.

Adding a kind: its framework file in this package, one line in `FRAMEWORKS`, and its
CRD (docs/architecture.md, "Adding a kind").
"""

from __future__ import annotations

from typing import Any, TypeVar

from tfjob.api.errors import FieldError
from tfjob.api.types import Job
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.jax import JAX
from tfjob.frameworks.mpi import MPI
from tfjob.frameworks.paddle import PADDLE
from tfjob.frameworks.pytorch import PYTORCH
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.frameworks.xgboost import XGBOOST

J = TypeVar("J", bound=Job)

FRAMEWORKS: dict[str, Framework[Any]] = {
    fw.kind: fw for fw in (TENSORFLOW, PYTORCH, JAX, XGBOOST, PADDLE, MPI)
}
_BY_TYPE: dict[type[Job], Framework[Any]] = {fw.job_type: fw for fw in FRAMEWORKS.values()}


def framework_of(job: Job) -> Framework[Any]:
    """The framework of a job, by its model type (`TFJob`, `PyTorchJob`, ...)."""
    return _BY_TYPE[type(job)]


def with_defaults(job: J) -> J:
    """A copy of `job` with every upstream default of its kind applied."""
    defaulted: J = framework_of(job).with_defaults(job)
    return defaulted


def validate(job: Job, *, require_image: bool = True) -> list[FieldError]:
    """All problems in `job` (as stored) by its kind's rules; empty: it can run."""
    return framework_of(job).validate(job, require_image=require_image)
