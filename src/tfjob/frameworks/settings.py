"""Inputs to the core and the frameworks that come from the runtime, not from the job."""

from __future__ import annotations

from typing import Literal

import msgspec


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """How the runtime wants pods addressed and decorated.

    The core reads no environment: what upstream takes from the operator's environment
    (CUSTOM_CLUSTER_DOMAIN) or from where it runs arrives here.
    """

    # Appended after ".svc" in TF_CONFIG addresses when set (e.g. "cluster.local").
    cluster_domain: str = ""
    # Local runtime: replica addresses chosen by the runtime, by lower-case replica
    # type, in index order (e.g. {"worker": ["127.0.0.1:40123", ...]}). When set,
    # TF_CONFIG uses these instead of service DNS names.
    local_addresses: dict[str, list[str]] | None = None
    # Local runtime: the folder where it wrote the kind's `Framework.local_files` (the
    # files a cluster mounts from the job's own objects, such as MPIJob's hostfile),
    # which the pods' env then names; None on a cluster.
    local_files_dir: str | None = None
    # Local runtime: whether it runs as root (MPIJob's launcher is then allowed to
    # run `mpirun` as root, as a container's root user is on a cluster).
    local_as_root: bool = False
    # Whether every container must name an image. The local runtime runs commands,
    # not images, so it turns this off; on Kubernetes an image is required.
    require_image: bool = True
    # Gang scheduling (tfjob.core.gang): the gang scheduler's name, "" for off.
    # "default-scheduler" is native Kubernetes, "volcano" Volcano, "kube-batch"
    # kube-batch, any other name a scheduler-plugins scheduler of that name.
    gang_scheduler_name: str = ""
    # PyTorchJob: the `init-pytorch` container that holds a Worker until its Master's
    # name resolves (upstream's --pytorch-init-container-image and
    # --pytorch-init-container-max-tries, with their defaults).
    pytorch_init_container_image: str = "alpine:3.10"
    pytorch_init_container_max_tries: int = 100
    # MPIJob: the launcher's `kubectl-delivery` init container image (upstream's
    # --mpi-kubectl-delivery-image, with its default).
    mpi_kubectl_delivery_image: str = "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest"
    # Kueue (tfjob.core.queued): who makes the Workload of a job that names a queue
    # (label kueue.x-k8s.io/queue-name). "builtin": Kueue's own Kubeflow integration
    # does, and suspends and starts the job; tfjob treats the job as any other. It is
    # the default because it changes nothing for an existing install. "external":
    # tfjob makes, owns and keeps the Workload as Kueue's job framework would, and
    # runs the job only while it is admitted; Kueue must then be configured with the
    # kinds in `integrations.externalFrameworks` (and without them in
    # `integrations.frameworks`), or two controllers would make a Workload each.
    kueue_integration: Literal["builtin", "external"] = "builtin"
