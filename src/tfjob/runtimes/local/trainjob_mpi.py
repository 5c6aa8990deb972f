"""An MPI runtime's TrainJob locally (deepspeed-distributed, mlx-distributed).

On a cluster the launcher's `mpirun` reaches every node pod over ssh, with the key of
Secret `<tj>-mpi-ssh-auth`, through the hostfile of ConfigMap `<tj>-mpi-hostfile`
mounted at /etc/mpi, while the node pods run `sshd`. Locally every host is this
machine, as for a v1 MPIJob (frameworks/mpi.py `local_config`): in a temporary folder
of the run, a hostfile `localhost slots=N` (N: the slots the cluster's hostfile lists)
and an rsh agent that runs the command here; the launcher's
`OMPI_MCA_orte_default_hostfile` names that hostfile and `OMPI_MCA_plm_rsh_agent` the
agent, so mpirun starts every rank here. The node pods of a runtime with a launcher
wait (`sleep 365d`) in place of sshd: their ranks run under the launcher. Run as
root, the launcher gets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 unless its env sets them.
The ssh key pair the core asks for is made (the Secret is kept in memory, never
mounted).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tfjob.api.training_runtime import TrainingRuntime
from tfjob.frameworks.mlpolicy.base import LAUNCHER, NODE
from tfjob.frameworks.mpi import LOCAL_AGENT, ROOT_ENV
from tfjob.runtimes.local.jobset_pods import PodSlot

HOSTFILE_ENV = "OMPI_MCA_orte_default_hostfile"
AGENT_ENV = "OMPI_MCA_plm_rsh_agent"
WAIT_COMMAND = ["sleep", "365d"]
_SLOTS = re.compile(r"slots=(\d+)")


class LocalMPI:
    """The local stand-ins of an MPI runtime's hostfile and ssh, for one run."""

    def __init__(self, name: str, runtime: TrainingRuntime | None) -> None:
        policy = None if runtime is None else runtime.spec.ml_policy
        self.enabled = policy is not None and policy.mpi is not None
        jobs = ((runtime.spec.template.get("spec") or {}) if runtime is not None else {}).get(
            "replicatedJobs"
        ) or []
        self._has_launcher = any(j.get("name") == LAUNCHER for j in jobs)
        self._name = name
        self.folder: Path | None = None

    def localized(self, slot: PodSlot, hostfile: str | None) -> PodSlot:
        """The pod as it runs here: the launcher with local files, a node waiting."""
        if not self.enabled:
            return slot
        spec = slot.manifest["spec"]
        if slot.job.replicated_job == LAUNCHER:
            for container in spec.get("containers") or []:
                if container.get("name") == NODE:
                    self._launcher_env(container, hostfile or "")
        elif slot.job.replicated_job == NODE and self._has_launcher:
            for container in spec.get("containers") or []:
                container["command"], container["args"] = list(WAIT_COMMAND), []
        return slot

    def _launcher_env(self, container: dict[str, Any], hostfile: str) -> None:
        folder = self._files(sum(int(n) for n in _SLOTS.findall(hostfile)))
        env = [e for e in container.get("env") or [] if e.get("name") != HOSTFILE_ENV]
        env.append({"name": HOSTFILE_ENV, "value": str(folder / "hostfile")})
        if not any(e.get("name") == AGENT_ENV for e in env):
            env.append({"name": AGENT_ENV, "value": str(folder / "kubexec.sh")})
        if os.geteuid() == 0:
            named = {e.get("name") for e in env}
            env += [{"name": n, "value": "1"} for n in ROOT_ENV if n not in named]
        container["env"] = env

    def _files(self, slots: int) -> Path:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix=f"tfjob-{self._name}-"))
            (self.folder / "hostfile").write_text(f"localhost slots={max(slots, 1)}\n")
            agent = self.folder / "kubexec.sh"
            agent.write_text(LOCAL_AGENT)
            agent.chmod(0o755)
        return self.folder

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
