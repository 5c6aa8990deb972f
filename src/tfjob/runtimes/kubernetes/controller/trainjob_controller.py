"""The TrainJob controller: Kubeflow Trainer's TrainJobs served beside the v1 kinds.

One controller like a v1 kind's (kind_controller.py): its own queue, reconciler
(trainjob_reconciler.py) and workers, its metrics labelled `trainjob_controller` (the
name Trainer's controller-runtime controller has), its Events from
`trainer-trainjob-controller`. It shares the client, the Event recorder, the metrics
and the caches (its four informers are in the shared ones: trainer_informers.py).
"""

from __future__ import annotations

from tfjob.api import trainjob as tj
from tfjob.runtimes.kubernetes.cache.trainer_informers import TrainJobInformers
from tfjob.runtimes.kubernetes.cache.trainjobs import TrainJobCaches
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder
from tfjob.runtimes.kubernetes.controller.kind_controller import Controller
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.trainjob_reconciler import TrainJobReconciler
from tfjob.runtimes.kubernetes.transport.client import KubeClient

#: The `controller` label of its metrics: Trainer's controller's name.
CONTROLLER_NAME = "trainjob_controller"


class TrainJobController(Controller):
    """Everything that serves TrainJobs."""

    def __init__(
        self,
        client: KubeClient,
        *,
        informers: TrainJobInformers,
        recorder: EventRecorder,
        metrics: Metrics,
        writes: ReconcileWrites,
    ) -> None:
        super().__init__(CONTROLLER_NAME, tj.KIND, "trainjobs", metrics)
        self.caches = TrainJobCaches(informers)
        self.reconciler = TrainJobReconciler(
            client=client, caches=self.caches, recorder=recorder, metrics=metrics, writes=writes
        )
