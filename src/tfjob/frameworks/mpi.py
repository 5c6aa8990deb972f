"""MPIJob (kubeflow.org/v1), as Kubeflow's training-operator v1.9.4 serves it.

Not kubeflow/mpi-operator's MPIJob (`kubeflow.org/v2beta1`): the same group and kind,
another version and another design (docs/behaviour.md).

- Replica types Launcher (required, one replica) and Worker (0 replicas unless set);
  restartPolicy Never by default; operator-name label `mpijob-controller`; no
  Services; no default port; replica-type keys exactly `Launcher` and `Worker` (upstream
  does not rewrite their case). The work happens in container 0 of each pod, whatever
  its name (`mpi` is only what the exit code is read from, upstream's default name).
- Pods: the Launcher is one pod named `<job>-launcher` (no replica-index label,
  job-role=master); Workers are `<job>-worker-<i>`. Only annotations come from a
  template's metadata besides the labels.
- Workers: container 0 runs `sleep 365d` when it has no command (the launcher's
  `mpirun` starts the ranks in it through `kubectl exec`), and mounts `kubexec.sh`
  from the job's ConfigMap at /etc/mpi.
- Launcher: the ServiceAccount `<job>-launcher` unless the template names one; the
  init container `kubectl-delivery` (image: `Settings.mpi_kubectl_delivery_image`,
  Kubeflow's --mpi-kubectl-delivery-image) copies kubectl to /opt/kube; container 0
  gets `OMPI_MCA_plm_rsh_agent=/etc/mpi/kubexec.sh`,
  `OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile`, without a GPU
  `NVIDIA_VISIBLE_DEVICES` and `NVIDIA_DRIVER_CAPABILITIES` emptied, and Intel MPI's
  `I_MPI_HYDRA_BOOTSTRAP=rsh`, `I_MPI_HYDRA_BOOTSTRAP_EXEC=/etc/mpi/kubexec.sh`
  unless set; it mounts kubectl and the whole ConfigMap at /etc/mpi.
- Owned objects (core/owned.py), while the job runs: the ServiceAccount, a Role
  (get/list/watch pods, create pods/exec on the worker pods) and its RoleBinding,
  all `<job>-launcher`, and the ConfigMap `<job>-config`: `hostfile`
  (`<job>-worker-<i> slots=N`, N = slotsPerWorker or 1; a GPU launcher first),
  `kubexec.sh` (kubectl exec into a worker, into `mainContainer` when set) and
  `discover_hosts.sh` (the Running workers, kept current as they start). The
  ConfigMap's data and the Role's rules are updated when they differ.
- Status: the Launcher decides, with the conditions' words upstream's status shows:
  Running while it runs; Succeeded when it succeeded; Failed when it (or a Worker)
  failed, `MPIJobFailed`, or `MPIJobEvicted` for an evicted pod. Once the Launcher
  has finished the Workers are no longer read (their counts are zero).
- Locally (`Settings.local_files_dir`, `local_config`): the launcher's
  OMPI_MCA_*/I_MPI_* paths name the local runtime's folder, which holds a hostfile of
  this machine's slots (`localhost slots=N`, N the cluster hostfile's slots in all),
  an rsh agent that runs the command here in place of kubexec.sh, and
  discover_hosts.sh; run as root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 unless set.
  The Workers run their `sleep` as on a cluster; the Launcher still decides.
- Validation: a Launcher of one replica, only Launcher and Worker (exact case), every
  container named and with an image; admission: the MPIJob CRD's schema and CEL
  rules (`mpijob-v1.json`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.errors import FieldError
from tfjob.api.kinds import OwnedKind
from tfjob.api.names import object_name
from tfjob.api.observed import Pod
from tfjob.api.owners import owner_reference
from tfjob.api.types import Job, JobSpec, ReplicaSpec
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.settings import Settings

LAUNCHER = "Launcher"
WORKER = c.WORKER
CONFIG_VOLUME = "mpi-job-config"
CONFIG_MOUNT = "/etc/mpi"
KUBECTL_VOLUME = "mpi-job-kubectl"
KUBECTL_MOUNT = "/opt/kube"
KUBECTL_DELIVERY = "kubectl-delivery"
KUBEXEC = "kubexec.sh"
HOSTFILE = "hostfile"
DISCOVER_HOSTS = "discover_hosts.sh"
SCRIPT_MODE = 0o555
ROOT_ENV = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
HOSTFILE_MODE = 0o444

SERVICE_ACCOUNTS = OwnedKind(
    group="", version="v1", kind="ServiceAccount", plural="serviceaccounts", foreign_accepted=True
)
CONFIG_MAPS = OwnedKind(
    group="", version="v1", kind="ConfigMap", plural="configmaps", owned_fields=("data",)
)
ROLES = OwnedKind(
    group="rbac.authorization.k8s.io",
    version="v1",
    kind="Role",
    plural="roles",
    owned_fields=("rules",),
)
ROLE_BINDINGS = OwnedKind(
    group="rbac.authorization.k8s.io", version="v1", kind="RoleBinding", plural="rolebindings"
)


class MPIJobSpec(JobSpec):
    slots_per_worker: int | None = None
    # Deprecated: runPolicy.cleanPodPolicy wins when both are set.
    clean_pod_policy: str | None = None
    mpi_replica_specs: dict[str, ReplicaSpec] = {}
    main_container: str | None = None

    REPLICA_SPECS = "mpi_replica_specs"


class MPIJob(Job):
    api_version: str = "kubeflow.org/v1"
    kind: str = "MPIJob"
    spec: MPIJobSpec = msgspec.field(default_factory=MPIJobSpec)


class Mpi(Framework[MPIJob]):
    kind = "MPIJob"
    plural = "mpijobs"
    job_type = MPIJob
    spec_field = "mpiReplicaSpecs"
    replica_types = (LAUNCHER, WORKER)
    queue_order = (LAUNCHER, WORKER)  # Kueue's jobs/mpijob order
    master_types = (LAUNCHER,)
    example_types = (LAUNCHER, WORKER)
    container_name = "mpi"
    port_name = "mpi-port"
    port = 9999
    default_restart_policy = "Never"
    controller_name = "mpijob-controller"
    schema_file = schema_rules.MPIJOB_SCHEMA
    services = False
    default_port = False
    requires_named_container = False
    template_metadata = ("annotations",)
    owned_kinds = (SERVICE_ACCOUNTS, CONFIG_MAPS, ROLES, ROLE_BINDINGS)
    owned_env = ("OMPI_MCA_*", "I_MPI_HYDRA_BOOTSTRAP*")
    local_init_reason = "kubectl is not needed: the launcher's rsh agent runs commands here"
    local_programs = (
        (
            "mpirun",
            "install Open MPI (Debian/Ubuntu: apt-get install openmpi-bin; "
            "Fedora: dnf install openmpi), or run the MPIJob on Kubernetes",
        ),
    )

    # --- names and defaults ---------------------------------------------------------

    def pod_name(self, job_name: str, replica_type: str, index: int) -> str:
        if replica_type == LAUNCHER:
            return f"{job_name}-launcher".replace("/", "-")
        return object_name(job_name, replica_type, index)

    def indexed(self, replica_type: str) -> bool:
        return replica_type != LAUNCHER

    def default_replicas(self, replica_type: str) -> int:
        return 0 if replica_type == WORKER else 1

    def with_defaults(self, job: MPIJob) -> MPIJob:
        """The deprecated spec.cleanPodPolicy stands in for runPolicy's when that is unset."""
        policy = job.spec.run_policy
        if policy.clean_pod_policy is None and job.spec.clean_pod_policy is not None:
            policy = msgspec.structs.replace(policy, clean_pod_policy=job.spec.clean_pod_policy)
            spec = msgspec.structs.replace(job.spec, run_policy=policy)
            job = msgspec.structs.replace(job, spec=spec)
        return super().with_defaults(job)

    # --- validation -----------------------------------------------------------------

    def check_types(self, by_type: dict[str, list[str]]) -> Iterator[FieldError]:
        for keys in by_type.values():
            for key in keys:
                if key not in self.replica_types:
                    yield FieldError(
                        f"spec.{self.spec_field}[{key}]",
                        f"unsupported replica type {key!r}",
                        "use Launcher or Worker, spelled exactly so",
                    )
        if LAUNCHER not in by_type.get(LAUNCHER, []):
            yield FieldError(
                f"spec.{self.spec_field}",
                "must have a Launcher",
                "add mpiReplicaSpecs.Launcher with one replica (it runs mpirun)",
            )

    def check_spec(self, job: MPIJob) -> Iterator[FieldError]:
        launcher = job.spec.mpi_replica_specs.get(LAUNCHER)
        if launcher is not None and launcher.replicas not in (None, 1):
            yield FieldError(
                f"spec.{self.spec_field}[{LAUNCHER}].replicas",
                f"must be 1, got {launcher.replicas}",
                "an MPIJob has one Launcher: set replicas to 1",
            )
        slots = job.spec.slots_per_worker
        if slots is not None and slots < 1:
            yield FieldError(
                "spec.slotsPerWorker",
                f"must be >= 1, got {slots}",
                "set slotsPerWorker to 1 or more",
            )
        policy = job.spec.clean_pod_policy
        if policy is not None and policy not in c.CLEAN_POD_POLICIES:
            yield FieldError(
                "spec.cleanPodPolicy",
                f"unknown value {policy!r}",
                f"use one of {', '.join(c.CLEAN_POD_POLICIES)}",
            )
        for key, spec in job.spec.mpi_replica_specs.items():
            containers = (spec.template.get("spec") or {}).get("containers") or []
            for index, container in enumerate(containers):
                if isinstance(container, dict) and not container.get("name"):
                    yield FieldError(
                        f"spec.{self.spec_field}[{key}].template.spec.containers[{index}].name",
                        "must be set",
                        "name the container, e.g. 'mpi'",
                    )

    # --- pods -----------------------------------------------------------------------

    def decorate_pod_spec(
        self,
        job: MPIJob,
        replica_type: str,
        index: int,
        settings: Settings,
        pod_spec: dict[str, Any],
    ) -> None:
        containers = pod_spec.get("containers") or []
        if not containers or not isinstance(containers[0], dict):
            return
        if replica_type == LAUNCHER:
            _launcher(job, settings, pod_spec, containers[0])
        else:
            _worker(job, pod_spec, containers[0])

    def local_files(self, job: MPIJob) -> dict[str, tuple[str, int]]:
        return local_config(job)

    # --- owned objects --------------------------------------------------------------

    def owned_objects(
        self, job: MPIJob, pods: Sequence[Pod], settings: Settings
    ) -> list[dict[str, Any]]:
        name = job.metadata.name
        launcher_name = f"{name}-launcher"
        account = _service_account_name(job)
        workers = job.spec.mpi_replica_specs.get(WORKER)
        count = (workers.replicas or 0) if workers is not None else 0
        meta = _meta_of(job, self)
        return [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": meta(account),
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(f"{name}-config"),
                "data": config_data(job, count, pods),
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta(launcher_name),
                "rules": _rules(name, count),
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta(launcher_name),
                "subjects": [
                    {"kind": "ServiceAccount", "name": account, "namespace": job.metadata.namespace}
                ],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": launcher_name,
                },
            },
        ]

    # --- status ---------------------------------------------------------------------

    def reconciles_replicas(self, job: MPIJob, replica_type: str, pods: Sequence[Pod]) -> bool:
        """Upstream reads no Worker once the Launcher has finished."""
        return replica_type != WORKER or not _launcher_finished(job, pods)

    def failed_reason(self, job: MPIJob, replica_type: str, pods: Sequence[Pod]) -> str:
        """`MPIJobEvicted` when a failed pod of the type was evicted (what upstream's
        code means; its status says `MPIJobMPIJobFailed` for every failure:
        docs/behaviour.md)."""
        if any(p.status.phase == "Failed" and p.status.reason == "Evicted" for p in pods):
            return "MPIJobEvicted"
        return self.reason("Failed")


MPI = Mpi()


def _type_of(pod: Pod) -> str:
    return pod.metadata.labels.get(c.LABEL_REPLICA_TYPE, "")


def _launcher_finished(job: MPIJob, pods: Sequence[Pod]) -> bool:
    return any(
        _type_of(p) == "launcher" and p.status.phase in ("Succeeded", "Failed") for p in pods
    )


def _service_account_name(job: MPIJob) -> str:
    launcher = job.spec.mpi_replica_specs.get(LAUNCHER)
    template_spec = (launcher.template.get("spec") or {}) if launcher is not None else {}
    return str(template_spec.get("serviceAccountName") or f"{job.metadata.name}-launcher")


def is_gpu_launcher(job: MPIJob) -> bool:
    """Whether a launcher container has a GPU limit (a resource name ending in
    `.com/gpu` or holding `gpu`): it is then also in the hostfile."""
    launcher = job.spec.mpi_replica_specs.get(LAUNCHER)
    if launcher is None:
        return False
    for container in (launcher.template.get("spec") or {}).get("containers") or []:
        limits = ((container or {}).get("resources") or {}).get("limits") or {}
        if any(key.endswith(".com/gpu") or "gpu" in key for key in limits):
            return True
    return False


def slots_of(job: MPIJob) -> int:
    slots = job.spec.slots_per_worker
    return 1 if slots is None else slots


def config_data(job: MPIJob, workers: int, pods: Sequence[Pod]) -> dict[str, str]:
    """The ConfigMap's `hostfile`, `kubexec.sh` and `discover_hosts.sh`."""
    name = job.metadata.name
    slots = slots_of(job)
    gpu = is_gpu_launcher(job)
    kubexec = f"#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{KUBECTL_MOUNT}/kubectl exec ${{POD_NAME}}"
    if job.spec.main_container:
        kubexec += f" --container {job.spec.main_container}"
    kubexec += ' -- /bin/sh -c "$*"'
    hosts = [f"{name}-launcher slots={slots}\n"] if gpu else []
    hosts += [f"{name}-worker-{i} slots={slots}\n" for i in range(workers)]
    running = sorted(
        p.metadata.name
        for p in pods
        if _type_of(p) == "worker"
        and p.status.phase == "Running"
        and p.metadata.controller_uid() == job.metadata.uid
    )
    discover = "#!/bin/sh"
    if gpu:
        discover += f"\necho {name}-launcher:{slots}\n"
    discover += "".join(f"\necho {pod}:{slots}" for pod in running)
    return {HOSTFILE: "".join(hosts), KUBEXEC: kubexec, DISCOVER_HOSTS: discover}


LOCAL_AGENT = """#!/bin/sh
# tfjob run's stand-in for kubexec.sh: every host of the hostfile is this machine, so
# the command runs here rather than through `kubectl exec` into a worker pod.
POD_NAME=$1
shift
exec /bin/sh -c "$*"
"""


def local_config(job: MPIJob) -> dict[str, tuple[str, int]]:
    """What a local run puts in place of the ConfigMap: a hostfile of this machine's
    slots (as many as the cluster's hostfile lists: slotsPerWorker for each Worker,
    and for a GPU launcher), the rsh agent that runs the command here, and
    discover_hosts.sh naming this machine's slots."""
    workers = job.spec.mpi_replica_specs.get(WORKER)
    count = (workers.replicas or 0) if workers is not None else 0
    slots = slots_of(job) * (count + (1 if is_gpu_launcher(job) else 0))
    hostfile = f"localhost slots={slots}\n" if slots else ""
    discover = "#!/bin/sh\n" + (f"echo localhost:{slots}\n" if slots else "")
    return {
        HOSTFILE: (hostfile, HOSTFILE_MODE),
        KUBEXEC: (LOCAL_AGENT, SCRIPT_MODE),
        DISCOVER_HOSTS: (discover, SCRIPT_MODE),
    }


def _rules(name: str, workers: int) -> list[dict[str, Any]]:
    exec_rule: dict[str, Any] = {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"]}
    if workers:
        exec_rule["resourceNames"] = [f"{name}-worker-{i}" for i in range(workers)]
    return [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        exec_rule,
    ]


def _meta_of(job: MPIJob, kind: Mpi) -> Any:
    def meta(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": {"app": job.metadata.name},
            "ownerReferences": [owner_reference(job, kind)],
        }

    return meta


def _worker(job: MPIJob, pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    if not container.get("command"):
        container["command"] = ["sleep"]
        container["args"] = ["365d"]
    container["volumeMounts"] = [
        *(container.get("volumeMounts") or []),
        {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT},
    ]
    pod_spec["volumes"] = [
        *(pod_spec.get("volumes") or []),
        _config_volume(job, [(KUBEXEC, SCRIPT_MODE)]),
    ]


def _launcher(
    job: MPIJob, settings: Settings, pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    if not pod_spec.get("serviceAccountName"):
        pod_spec["serviceAccountName"] = f"{job.metadata.name}-launcher"
    pod_spec["initContainers"] = [
        *(pod_spec.get("initContainers") or []),
        kubectl_delivery(job.metadata.namespace, settings.mpi_kubectl_delivery_image),
    ]
    # Locally the ConfigMap's files are `local_config`'s, in the runtime's folder.
    mount = settings.local_files_dir or CONFIG_MOUNT
    env = list(container.get("env") or [])
    env += [
        {"name": "OMPI_MCA_plm_rsh_agent", "value": f"{mount}/{KUBEXEC}"},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": f"{mount}/{HOSTFILE}"},
    ]
    if not is_gpu_launcher(job):
        # So a launcher is never given GPUs by mistake.
        env += [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
        ]
    names = {e.get("name") for e in env if isinstance(e, dict)}
    if "I_MPI_HYDRA_BOOTSTRAP" not in names:
        env.append({"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "rsh"})
    if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in names:
        env.append({"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": f"{mount}/{KUBEXEC}"})
    if settings.local_files_dir and settings.local_as_root:
        # Open MPI's mpirun refuses root without both; a container's root user on a
        # cluster is root in its own namespace, where upstream's images set them.
        for name in ROOT_ENV:
            if name not in names:
                env.append({"name": name, "value": "1"})
    container["env"] = env
    container["volumeMounts"] = [
        *(container.get("volumeMounts") or []),
        {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT},
        {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT},
    ]
    pod_spec["volumes"] = [
        *(pod_spec.get("volumes") or []),
        {"name": KUBECTL_VOLUME, "emptyDir": {}},
        _config_volume(
            job, [(KUBEXEC, SCRIPT_MODE), (HOSTFILE, HOSTFILE_MODE), (DISCOVER_HOSTS, SCRIPT_MODE)]
        ),
    ]


def _config_volume(job: MPIJob, items: list[tuple[str, int]]) -> dict[str, Any]:
    return {
        "name": CONFIG_VOLUME,
        "configMap": {
            "name": f"{job.metadata.name}-config",
            "items": [{"key": key, "path": key, "mode": mode} for key, mode in items],
        },
    }


def kubectl_delivery(namespace: str, image: str) -> dict[str, Any]:
    """Upstream's init container that copies kubectl into the launcher's /opt/kube."""
    limits = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
    return {
        "name": KUBECTL_DELIVERY,
        "image": image,
        "env": [
            {"name": "TARGET_DIR", "value": KUBECTL_MOUNT},
            {"name": "NAMESPACE", "value": namespace},
        ],
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [
            {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT},
        ],
        "imagePullPolicy": "IfNotPresent",
    }
