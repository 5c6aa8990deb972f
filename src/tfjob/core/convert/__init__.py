"""A v1 job (TFJob, PyTorchJob, ...) as a Trainer v2 TrainJob: `convert(job)`.

Pure: the defaulted job in; the TrainJob, the TrainingRuntime written beside it when
no shipped runtime fits, and every field that has no TrainJob form out.
"""

from tfjob.core.convert.convert import Conversion, convert
from tfjob.core.convert.losses import Loss

__all__ = ["Conversion", "Loss", "convert"]
