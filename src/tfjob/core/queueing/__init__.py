"""Queueing with Kueue, with tfjob as the kinds' job framework: pure decisions.

With Kueue configured with `integrations.externalFrameworks` for a kind, Kueue's own
Kubeflow integration stands aside and the kind's controller makes and keeps each
queued job's Workload, as Kueue's job framework (jobframework, v0.19.0) would. This
package decides what that takes, from observed objects to wanted ones; the runtime
reads and writes them. One pass, in Kueue's order, for a job that names a queue
(`queue_name`):

1. `sync_workloads`: which owned Workload describes the job; create, rewrite or
   delete Workloads; stop a job that runs without one (`workload_manifest` builds
   the Workload: `workload_name`, one podSet per replica type, the priority of
   `wanted_priority_class` once the runtime has looked it up).
2. `finished_condition`: the job ended, so its Workload finishes (quota released);
   `orphan_condition` when the job is gone; `releases_finalizer` says when the
   Workload's finalizer may go.
3. `stop`: the Workload is being deleted, evicted (`evicted`), or not admitted while
   the job runs: suspend it; `quota_release` once its pods are gone.
4. `pods_ready_condition` (with Kueue's waitForPodsReady) while it runs.
5. `admission`: admitted, so the job may start; `pod_set_info` says what each
   replica's pods get (flavors' node labels and tolerations, admission checks'
   updates, the admitted count) and `inject` puts it in a pod template
   (`failed_to_start` when it cannot).

A job that names a prebuilt Workload (`prebuilt_workload_name`: a MultiKueue worker's
copy of a job, whose Workload the manager's MultiKueue made) uses that one instead
(`sync_prebuilt`): taken as its own, never made nor deleted, finished OutOfSync
(`out_of_sync_condition`) when it no longer describes the job. A job with
`spec.managedBy` `MULTIKUEUE` is dispatched to a worker by Kueue: its Workload is made
and kept as any other (core/queued.py says what else it gets).

Kueue v0.19.0 has no ReclaimablePods for kubeflow kinds (quota held by a finished
replica is kept until the job ends), so neither does this package.
"""

from tfjob.core.queueing.lifecycle import (
    Stop,
    evicted,
    failed_to_start,
    finished_condition,
    orphan_condition,
    out_of_sync_condition,
    pods_ready_condition,
    quota_release,
    releases_finalizer,
    set_condition,
    stop,
)
from tfjob.core.queueing.matching import (
    WorkloadSync,
    priority_outdated,
    sync_prebuilt,
    sync_workloads,
    workload_matches,
)
from tfjob.core.queueing.names import (
    API_VERSION,
    MULTIKUEUE,
    PREBUILT_WORKLOAD_KEY,
    QUEUE_LABEL,
    prebuilt_workload_name,
    queue_name,
    workload_name,
    workload_name_for,
)
from tfjob.core.queueing.placement import (
    Admission,
    FlavorNotFound,
    PodSetAdmission,
    PodSetInfo,
    PodSetUpdate,
    admission,
    inject,
    pod_set_info,
)
from tfjob.core.queueing.workload import (
    POD_PRIORITY_CLASS,
    WORKLOAD_PRIORITY_CLASS,
    Priority,
    PriorityClass,
    WorkloadError,
    pod_sets,
    wanted_priority_class,
    workload_manifest,
)

__all__ = [
    "API_VERSION",
    "MULTIKUEUE",
    "POD_PRIORITY_CLASS",
    "PREBUILT_WORKLOAD_KEY",
    "QUEUE_LABEL",
    "WORKLOAD_PRIORITY_CLASS",
    "Admission",
    "FlavorNotFound",
    "PodSetAdmission",
    "PodSetInfo",
    "PodSetUpdate",
    "Priority",
    "PriorityClass",
    "Stop",
    "WorkloadError",
    "WorkloadSync",
    "admission",
    "evicted",
    "failed_to_start",
    "finished_condition",
    "inject",
    "orphan_condition",
    "out_of_sync_condition",
    "pod_set_info",
    "pod_sets",
    "pods_ready_condition",
    "prebuilt_workload_name",
    "priority_outdated",
    "queue_name",
    "quota_release",
    "releases_finalizer",
    "set_condition",
    "stop",
    "sync_prebuilt",
    "sync_workloads",
    "wanted_priority_class",
    "workload_manifest",
    "workload_matches",
    "workload_name",
    "workload_name_for",
]
