"""One reconcile of one TFJob: observed state in, plan out. Pure.

(Skeleton: the body lands with the decision core.)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tfjob.api.observed import Pod, Service
from tfjob.api.types import TFJob
from tfjob.core.plan import Plan
from tfjob.core.settings import Settings


def reconcile(
    job: TFJob,
    pods: Sequence[Pod],
    services: Sequence[Service],
    now: datetime,
    settings: Settings,
) -> Plan:
    """Decide what to do for `job` given the pods and services that exist now.

    `job` is the stored object (not defaulted: the core defaults its own copy).
    `pods`/`services` are those labelled for this job; the core itself ignores any
    whose controller owner is not this job. `now` is timezone-aware UTC.
    """
    raise NotImplementedError
