"""An MPIJob as a TrainingRuntime with `mlPolicy.mpi`: mpirun reaches the workers over
ssh, as in Trainer's MPI runtimes (deepspeed-distributed, mlx-distributed).

MPIJob's operator lets the launcher's mpirun reach the workers with `kubectl exec`
(kubexec.sh, in the ConfigMap beside the hostfile); a TrainJob has no kubectl, no Role
and no such ConfigMap. An MPI runtime gives the same result another way: the
controller (Trainer's, tfjob's, and `tfjob run`) writes the hostfile ConfigMap
`<tj>-mpi-hostfile`, mounted on the launcher at /etc/mpi/hostfile where
`OMPI_MCA_orte_default_hostfile` names it as in v1, and the ssh key Secret
`<tj>-mpi-ssh-auth`, mounted on every pod at `sshAuthMountPath`, while the workers run
sshd. So the runtime has:

- `mlPolicy.mpi`: numProcPerNode = slotsPerWorker (the hostfile's slots, as in v1),
  OpenMPI, runLauncherAsNode when the launcher has a GPU (v1 then lists it in the
  hostfile too), and the ssh key in /home/mpiuser/.ssh;
- the `node` job (the Workers, first: the launcher depends on it) whose pods, without
  a command of their own (v1: `sleep 365d`), run sshd as Trainer's MPI runtimes do,
  and the `launcher` job (the trainer step, waiting for the nodes to be ready, as v1's
  kubectl-delivery waits for the workers), each pod's container 0 named `node`;
- the pods run as uid 1000 with fsGroup 1000 unless they say otherwise, as in
  Trainer's runtimes and mpi-operator's images (user `mpiuser`): Trainer mounts the
  private key with mode 0640, which OpenSSH refuses to the key's owner, root.

What still cannot carry over is named field by field (`losses`). A job without Workers
(mpirun on the launcher alone) keeps the plain runtime (`mpi_parts`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tfjob.api.names import object_name, replica_key
from tfjob.core.convert.losses import Loss
from tfjob.frameworks.mlpolicy.base import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    NODE,
    gpus_per_node,
    upsert_env,
)
from tfjob.frameworks.mpi import (
    CONFIG_MOUNT,
    DISCOVER_HOSTS,
    KUBECTL_MOUNT,
    KUBEXEC,
    LAUNCHER,
    WORKER,
    MPIJob,
    is_gpu_launcher,
    slots_of,
)

#: The user Trainer's MPI runtimes and mpi-operator's images run as, and its home.
SSH_USER = 1000
SSH_HOME = "/home/mpiuser"
#: What a worker without a command runs: sshd in the foreground with the user's config
#: (mpi-operator's images listen on 2222 and accept the mounted key).
SSHD_COMMAND = ["/usr/sbin/sshd"]
SSHD_ARGS = ["-De", "-f", f"{SSH_HOME}/.sshd_config"]
SSHD_PORT = 2222
#: The v1 launcher's env naming kubexec.sh: the ssh of the runtime stands in for it.
_KUBEXEC_ENV = {
    "OMPI_MCA_plm_rsh_agent": "Open MPI's default agent, ssh",
    "I_MPI_HYDRA_BOOTSTRAP": "Intel MPI's default bootstrap, ssh (the runtime is OpenMPI's)",
    "I_MPI_HYDRA_BOOTSTRAP_EXEC": "Intel MPI's default bootstrap, ssh (the runtime is OpenMPI's)",
}
#: Files only MPIJob's operator gives its pods.
_V1_FILES = (
    f"{CONFIG_MOUNT}/{KUBEXEC}",
    f"{CONFIG_MOUNT}/{DISCOVER_HOSTS}",
    f"{KUBECTL_MOUNT}/",
)
#: What it gives a launcher that asks for no GPU, so none is given to it by mistake.
_NO_GPU_ENV = (
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
)


@dataclass(frozen=True)
class OverSsh:
    ml_policy: dict[str, Any]
    jobset: dict[str, Any]
    losses: list[Loss]


def has_workers(job: MPIJob) -> bool:
    spec = job.spec.mpi_replica_specs.get(WORKER)
    return spec is not None and (spec.replicas or 0) > 0


def over_ssh(job: MPIJob, jobs: list[dict[str, Any]]) -> OverSsh:
    """The runtime's mlPolicy and JobSet spec from the replicated jobs `launcher` and
    `worker` (replicas.py, edited in place), and what they cannot say."""
    launcher = next(j for j in jobs if j["name"] == replica_key(LAUNCHER))
    node = next(j for j in jobs if j["name"] == replica_key(WORKER))
    node["name"] = NODE
    losses: list[Loss] = []
    for t, rjob in ((LAUNCHER, launcher), (WORKER, node)):
        pod = _pod_spec(rjob)
        main = pod["containers"][0]
        path = f"spec.mpiReplicaSpecs.{t}.template.spec"
        losses += _named_node(pod, path)
        losses += _as_ssh_user(pod, main, f"{path}.containers[0]")
        losses += _v1_only(job, main, f"{path}.containers[0]")
    worker = _pod_spec(node)["containers"][0]
    if not worker.get("command"):
        worker["command"], worker["args"] = list(SSHD_COMMAND), list(SSHD_ARGS)
        worker.setdefault(
            "readinessProbe", {"tcpSocket": {"port": SSHD_PORT}, "initialDelaySeconds": 5}
        )
    elif not str(worker["command"][0]).endswith("sshd"):
        losses.append(
            Loss(
                f"spec.mpiReplicaSpecs.{WORKER}.template.spec.containers[0].command",
                "mpirun reaches a worker over ssh: its command must run sshd (v1's "
                "kubectl exec reached it whatever it ran)",
            )
        )
    gpu = is_gpu_launcher(job)
    if not gpu:
        upsert_env(_pod_spec(launcher)["containers"][0], *(dict(e) for e in _NO_GPU_ENV))
    launcher["template"] = {
        "metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}},
        **launcher["template"],
    }
    launcher["dependsOn"] = [{"name": NODE, "status": "Ready"}]
    losses += _launcher_env(job)
    slots = slots_of(job)
    if slots == 1 and (gpus := gpus_per_node(worker.get("resources") or {})) > 1:
        losses.append(
            Loss(
                "spec.slotsPerWorker",
                f"1: the runtime gives a node of {gpus} GPUs {gpus} slots (numProcPerNode 1 "
                "means a slot per GPU)",
            )
        )
    if gpu:
        losses.append(
            Loss(
                f"spec.mpiReplicaSpecs.{LAUNCHER}",
                "a launcher with a GPU is a node (runLauncherAsNode) listed after the "
                "Workers in the hostfile, not first: mpirun's first ranks go to Worker 0",
            )
        )
    policy = {
        "mpi": {
            "numProcPerNode": slots,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": f"{SSH_HOME}/.ssh",
            "runLauncherAsNode": gpu,
        }
    }
    jobset = {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [launcher["name"]]},
        "replicatedJobs": [node, launcher],
    }
    return OverSsh(policy, jobset, losses)


def _pod_spec(rjob: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = rjob["template"]["spec"]["template"].setdefault("spec", {})
    return spec


def _named_node(pod: dict[str, Any], path: str) -> list[Loss]:
    """Container 0 (where MPIJob's work happens) named `node`, as Trainer's MPI plugin
    requires of the container it gives the key, the hostfile and the env."""
    containers = pod["containers"]
    clash = [i for i, c in enumerate(containers) if i and c.get("name") == NODE]
    containers[0]["name"] = NODE
    return [
        Loss(
            f"{path}.containers[{i}].name",
            "'node' is container 0's name in the runtime (MPI's parts go to that one)",
        )
        for i in clash
    ]


def _as_ssh_user(pod: dict[str, Any], main: dict[str, Any], path: str) -> list[Loss]:
    user = (main.get("securityContext") or {}).get(
        "runAsUser", (pod.get("securityContext") or {}).get("runAsUser")
    )
    pod.setdefault("securityContext", {}).setdefault("fsGroup", SSH_USER)
    if user is None:
        main.setdefault("securityContext", {})["runAsUser"] = SSH_USER
        return [
            Loss(
                f"{path}.securityContext.runAsUser",
                f"the image's user becomes uid {SSH_USER} (fsGroup {SSH_USER}: mpiuser of "
                "mpi-operator's and Trainer's MPI images): Trainer mounts the ssh key with "
                "mode 0640, which OpenSSH refuses to the key's owner, root",
            )
        ]
    if user != SSH_USER:
        return [
            Loss(
                f"{path}.securityContext.runAsUser",
                f"{user}: the ssh key is mounted in {SSH_HOME}/.ssh and a worker's sshd "
                f"reads {SSH_HOME}/.sshd_config, uid {SSH_USER}'s in mpi-operator's images",
            )
        ]
    return []


def _v1_only(job: MPIJob, main: dict[str, Any], path: str) -> list[Loss]:
    """The command, args or env that name what only MPIJob's operator gives: its files
    (kubexec.sh, discover_hosts.sh, kubectl) or a worker's v1 pod name."""
    name = job.metadata.name
    workers = job.spec.mpi_replica_specs.get(WORKER)
    count = (workers.replicas or 0) if workers is not None else 0
    pods = [object_name(name, WORKER, i) for i in range(count)]
    pattern = re.compile(
        "|".join(
            [re.escape(f) for f in _V1_FILES]
            + [rf"(?<![0-9A-Za-z-]){re.escape(p)}(?![0-9A-Za-z-])" for p in pods]
        )
    )
    fields = [("command", main.get("command")), ("args", main.get("args"))]
    fields += [
        (f"env[{var.get('name')}]", [var["value"]])
        for var in main.get("env") or []
        if isinstance(var.get("value"), str)
    ]
    losses = []
    for key, values in fields:
        found = sorted({m.group(0) for v in values or [] for m in pattern.finditer(str(v))})
        if found:
            losses.append(
                Loss(
                    f"{path}.{key}",
                    f"names {', '.join(found)}, which only MPIJob's operator gives (a "
                    f"TrainJob's workers are {name}-{NODE}-0-<i>.{name}, in "
                    f"{CONFIG_MOUNT}/hostfile)",
                )
            )
    return losses


def _launcher_env(job: MPIJob) -> list[Loss]:
    """The v1 launcher's kubexec.sh env (unless the template sets it), each replaced."""
    launcher = job.spec.mpi_replica_specs[LAUNCHER]
    containers = (launcher.template.get("spec") or {}).get("containers") or []
    own = {e.get("name") for e in (containers[0].get("env") or [])} if containers else set()
    return [
        Loss(
            f"spec.mpiReplicaSpecs.{LAUNCHER}.env[{name}]",
            f"kubexec.sh (kubectl exec into a worker) becomes {instead}, with the runtime's "
            f"key in {SSH_HOME}/.ssh: the Workers' image must have sshd, the Launcher's an "
            "ssh client",
        )
        for name, instead in _KUBEXEC_ENV.items()
        if name == "OMPI_MCA_plm_rsh_agent" or name not in own
    ]


# -- a job without Workers: the plain runtime -------------------------------------------


def mpi_parts(job: MPIJob, jobs: list[dict[str, Any]], container: str) -> list[Loss]:
    """What MPIJob's operator adds to a job without Workers: the launcher's GPU guard
    kept; how mpirun would reach workers (kubexec.sh, the hostfile) lost."""
    launcher = next((j for j in jobs if j["name"] == replica_key(LAUNCHER)), None)
    if launcher is None:
        return []
    if not is_gpu_launcher(job):
        for c in _pod_spec(launcher).get("containers") or []:
            if c.get("name") == container:
                upsert_env(c, *(dict(e) for e in _NO_GPU_ENV))
    return [
        Loss(
            f"spec.mpiReplicaSpecs.{LAUNCHER}.env[{name}]",
            "a job without Workers has a plain runtime: no kubexec.sh nor hostfile",
        )
        for name in (
            "OMPI_MCA_plm_rsh_agent",
            "OMPI_MCA_orte_default_hostfile",
            "I_MPI_HYDRA_BOOTSTRAP",
            "I_MPI_HYDRA_BOOTSTRAP_EXEC",
        )
    ]
