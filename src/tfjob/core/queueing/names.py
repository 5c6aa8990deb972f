"""The names Kueue and a job share: labels read from the job, the Workload's name.

With `integrations.externalFrameworks`, Kueue leaves a kind's Workloads to the kind's
own controller, but its scheduler, webhooks and `kubectl get workloads` read them as
if its job framework had made them. So every name here is the one Kueue v0.19.0's
job framework uses (pkg/controller/constants, pkg/controller/jobframework), and the
Workload's name is computed exactly as Kueue computes it: switching a job between
Kueue's built-in Kubeflow integration and tfjob's finds the same Workload.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from tfjob.api.types import Job
from tfjob.frameworks.registry import framework_of

#: The LocalQueue a job is queued in. Kueue v0.19 reads only this label (the old
#: annotation of the same name is no longer read).
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
#: A WorkloadPriorityClass the job names; it wins over any pod PriorityClass.
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"
#: A limit on how long the Workload may stay admitted, in seconds.
MAX_EXEC_TIME_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
#: On the Workload: the UID of the job that owns it.
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
#: Annotations with this prefix go from the job to its Workload (ProvisioningRequest
#: parameters, read by that admission check).
PROV_REQ_PREFIX: Final = "provreq.kueue.x-k8s.io/"

#: On pods of an admitted job: the podSet, LocalQueue and ClusterQueue they count in.
POD_SET_LABEL: Final = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL: Final = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL: Final = "kueue.x-k8s.io/cluster-queue-name"
#: On pods of an admitted job: the Workload's name (what Topology-Aware Scheduling
#: finds the pods' placement by).
WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/workload"

#: On a MultiKueue worker's copy of a job: the name of the Workload made for it
#: beforehand (by the manager's MultiKueue), which the job must use rather than make
#: one. Kueue reads the annotation first, then a label of the same key
#: (jobframework PrebuiltWorkloadNameFor, with WorkloadIdentifierAnnotations on,
#: the default since v0.18).
PREBUILT_WORKLOAD_KEY: Final = "kueue.x-k8s.io/prebuilt-workload-name"
#: The spec.managedBy that hands a job to Kueue's MultiKueue, which then dispatches
#: it to a worker cluster (kueue.MultiKueueControllerName).
MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"

#: The Workload API: v1beta2 is what v0.19 stores (its storage version) and serves.
GROUP: Final = "kueue.x-k8s.io"
API_VERSION: Final = f"{GROUP}/v1beta2"
#: Kueue removes it once the Workload no longer holds quota.
FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"

#: The hash's length, and the name's limit without and with ShortWorkloadNames
#: (an alpha gate, off by default: its limit keeps the name usable as a label value).
_HASH_LENGTH = 5
_MAX_NAME = 253
_MAX_SHORT_NAME = 63

_INT32 = re.compile(r"[+-]?[0-9]+")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def queue_name(job: Job) -> str | None:
    """The LocalQueue the job names, None when it names none (Kueue then leaves the
    job alone, unless Kueue's manageJobsWithoutQueueName says otherwise)."""
    return job.metadata.labels.get(QUEUE_LABEL) or None


def prebuilt_workload_name(job: Job) -> str | None:
    """The Workload made for the job beforehand (a MultiKueue worker's copy names
    the one the manager's MultiKueue made), None when it names none: the job's
    Workload is then its own to make."""
    meta = job.metadata
    return (
        meta.annotations.get(PREBUILT_WORKLOAD_KEY)
        or meta.labels.get(PREBUILT_WORKLOAD_KEY)
        or None
    )


def workload_name(job: Job, *, short: bool = False) -> str:
    """The name Kueue gives the job's Workload (`short`: Kueue runs with the
    ShortWorkloadNames gate on)."""
    framework = framework_of(job)
    return workload_name_for(
        job.metadata.name, job.metadata.uid, framework.kind, framework.group, short=short
    )


def workload_name_for(name: str, uid: str, kind: str, group: str, *, short: bool = False) -> str:
    """`<kind>-<name>` in lower case, cut to fit, then `-` and five hex digits of the
    SHA-1 of kind, group, name and UID, one per line (jobframework
    GetWorkloadNameForOwnerWithGVK). The hash keeps two jobs with a long common name
    prefix, or two kinds with one name, apart; the version is not in it, so a job
    keeps its Workload's name across API versions."""
    limit = (_MAX_SHORT_NAME if short else _MAX_NAME) - 1 - _HASH_LENGTH
    prefix = f"{kind.lower()}-{name}".encode()[:limit].decode(errors="ignore")
    digest = hashlib.sha1(
        "\n".join((kind, group, name, uid)).encode(), usedforsecurity=False
    ).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def max_execution_seconds(job: Job) -> int | None:
    """The label's limit when it is a positive 32-bit number, else none (Kueue
    ignores a value it cannot read rather than refusing the job)."""
    text = job.metadata.labels.get(MAX_EXEC_TIME_LABEL)
    if text is None or not _INT32.fullmatch(text):
        return None
    value = int(text)
    return value if 0 < value < 2**31 else None


def is_label_value(text: str) -> bool:
    """Whether `text` may be a label's value (at most 63 characters, alphanumeric at
    both ends): Kueue leaves out a label it cannot write rather than fail."""
    return len(text) <= 63 and _LABEL_VALUE.fullmatch(text) is not None
