"""JAXJob (kubeflow.org/v1), the JAX framework, as Kubeflow v1.9.4 has it.

- Replica type Worker only; container `jax`, port `jaxjob-port` 6666, restartPolicy
  Never by default; operator-name label `jaxjob-controller`; Worker 0 carries
  job-role=master (it is process 0, the coordinator).
- Env, appended to every container of a pod after the user's own, in this order:
  `PYTHONUNBUFFERED=1`, `COORDINATOR_PORT` (Worker 0's `jaxjob-port`),
  `COORDINATOR_ADDRESS` (`<job>-worker-0`, a host without port), `NUM_PROCESSES` (every
  replica), `PROCESS_ID` (the index): what `jax.distributed.initialize` needs.
- Locally (`Settings.local_addresses`), COORDINATOR_ADDRESS/PORT are Worker 0's local
  address.
- Succeeded when every Worker succeeded; a failure is handled as for every kind.
- Validation: a container named `jax` in every replica, only Worker replicas.
- Admission: the JAXJob CRD's schema and CEL rules (tfjob.api.schema_rules with
  `jaxjob-v1.json`), which also make the checks above, so a cluster without the
  operator refuses the same jobs.
"""

from __future__ import annotations

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.types import Job, JobSpec, ReplicaSpec
from tfjob.frameworks.framework import EnvVar, Framework, PodEnv
from tfjob.frameworks.settings import Settings

WORKER = c.WORKER


class JAXJobSpec(JobSpec):
    jax_replica_specs: dict[str, ReplicaSpec] = {}

    REPLICA_SPECS = "jax_replica_specs"


class JAXJob(Job):
    api_version: str = "kubeflow.org/v1"
    kind: str = "JAXJob"
    spec: JAXJobSpec = msgspec.field(default_factory=JAXJobSpec)


class Jax(Framework[JAXJob]):
    kind = "JAXJob"
    plural = "jaxjobs"
    job_type = JAXJob
    spec_field = "jaxReplicaSpecs"
    replica_types = (WORKER,)
    queue_order = (WORKER,)  # Kueue's kubeflow/jobs/jaxjob order
    master_types = ()
    example_types = (WORKER,)
    container_name = "jax"
    port_name = "jaxjob-port"
    port = 6666
    default_restart_policy = "Never"
    controller_name = "jaxjob-controller"
    schema_file = schema_rules.JAXJOB_SCHEMA
    unknown_type_hint = "a JAXJob has Workers only (process 0 coordinates): use Worker"
    status_selector = True  # the scale subresource's labelSelectorPath
    env_on_every_container = True
    owned_env = ("COORDINATOR_PORT", "COORDINATOR_ADDRESS", "NUM_PROCESSES", "PROCESS_ID")

    def pod_env(self, job: JAXJob, settings: Settings) -> PodEnv:
        return _JaxEnv(job, self, settings)


JAX = Jax()


class _JaxEnv(PodEnv):
    def __init__(self, job: JAXJob, kind: Jax, settings: Settings) -> None:
        specs = job.spec.jax_replica_specs
        address, port = kind.first_endpoint(job, settings, WORKER)
        self._shared = [
            ("PYTHONUNBUFFERED", "1"),
            ("COORDINATOR_PORT", port),
            ("COORDINATOR_ADDRESS", address),
            ("NUM_PROCESSES", str(sum(s.replicas or 0 for s in specs.values()))),
        ]

    def for_replica(self, replica_type: str, index: int) -> list[EnvVar]:
        env = [*self._shared, ("PROCESS_ID", str(index))]
        return [{"name": name, "value": value} for name, value in env]
