"""A JobSet's pods as local processes: what the JobSet and Job controllers would make.

On a cluster, JobSet v0.12.0 makes each replicated job's `replicas` Jobs,
`<js>-<job>-<jobIndex>`, each an Indexed Job of `completions` pods whose hostname is
`<js>-<job>-<jobIndex>-<podIndex>` under the JobSet's headless service (the subdomain,
`network.subdomain` or the JobSet's name), with the pod's completion index in the
annotation `batch.kubernetes.io/job-completion-index` (which the trainer's env reads
as its rank). Here each such pod is one local pod named by its hostname, with one free
127.0.0.1 port (`TFJOB_PORT`), and every address the env names changes to this
machine: a pod's host name (alone, with the subdomain or a longer domain) becomes
`127.0.0.1`, `host:port` becomes `127.0.0.1:<that pod's port>`, and a `*_PORT`
variable beside an address (torch's `PET_MASTER_PORT`, XGBoost's
`DMLC_TRACKER_PORT`; the address of the same stem first) holding a port that pod
declares becomes that pod's port, as a v1 job's env names each replica's local port
(ports.py). Addresses are mapped after the `$(VAR)` references to earlier variables
are substituted, as the kubelet expands them when the container starts: a host name
that a reference completes (`<tj>-node-0-$(TFJOB_POD_INDEX).<tj>`) is one too.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from tfjob.runtimes.local.launch import LaunchError, expand, field_value, references, substitute
from tfjob.runtimes.local.ports import HOST, free_ports

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_NAME = "batch.kubernetes.io/job-name"
#: JobSet's webhook default for a pod template without a restartPolicy.
DEFAULT_RESTART_POLICY = "OnFailure"
#: The Job API's default backoffLimit.
DEFAULT_BACKOFF_LIMIT = 6


@dataclass(frozen=True)
class JobSlot:
    """One Job of the JobSet: its replicated job, index, size and failure budget."""

    name: str
    replicated_job: str
    index: int
    completions: int
    backoff_limit: int
    restart_policy: str


@dataclass(frozen=True)
class PodSlot:
    """One pod of one Job: its stable host name, its local port, its manifest."""

    job: JobSlot
    index: int
    hostname: str
    port: int
    manifest: dict[str, Any]


def jobs_of(jobset: dict[str, Any]) -> list[JobSlot]:
    """Every Job the JobSet makes, in the order of its replicated jobs."""
    name = jobset["metadata"]["name"]
    slots = []
    for rjob in jobset["spec"].get("replicatedJobs") or []:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        pod_spec = (job_spec.get("template") or {}).get("spec") or {}
        completions = int(job_spec.get("completions") or job_spec.get("parallelism") or 1)
        backoff = job_spec.get("backoffLimit")
        for index in range(int(rjob.get("replicas") or 1)):
            slots.append(
                JobSlot(
                    name=f"{name}-{rjob['name']}-{index}",
                    replicated_job=str(rjob["name"]),
                    index=index,
                    completions=completions,
                    backoff_limit=DEFAULT_BACKOFF_LIMIT if backoff is None else int(backoff),
                    restart_policy=str(pod_spec.get("restartPolicy") or DEFAULT_RESTART_POLICY),
                )
            )
    return slots


def pods_of(jobset: dict[str, Any], namespace: str) -> list[PodSlot]:
    """Every pod of every Job, each with a port of its own and the env mapped here."""
    jobs = jobs_of(jobset)
    templates = {str(r["name"]): r.get("template") or {} for r in jobset["spec"]["replicatedJobs"]}
    places = [(job, i) for job in jobs for i in range(job.completions)]
    ports = free_ports(len(places))
    hosts = {f"{job.name}-{i}": port for (job, i), port in zip(places, ports, strict=True)}
    declared = {
        f"{job.name}-{i}": _declared_ports(templates[job.replicated_job]) for job, i in places
    }
    mapper = _AddressMap(hosts, declared)
    return [
        PodSlot(
            job=job,
            index=i,
            hostname=f"{job.name}-{i}",
            port=hosts[f"{job.name}-{i}"],
            manifest=_manifest(jobset, namespace, job, i, templates[job.replicated_job], mapper),
        )
        for job, i in places
    ]


def _declared_ports(job_template: dict[str, Any]) -> set[str]:
    pod_spec = ((job_template.get("spec") or {}).get("template") or {}).get("spec") or {}
    return {
        str(port.get("containerPort"))
        for container in pod_spec.get("containers") or []
        for port in container.get("ports") or []
    }


def _manifest(
    jobset: dict[str, Any],
    namespace: str,
    job: JobSlot,
    index: int,
    job_template: dict[str, Any],
    mapper: _AddressMap,
) -> dict[str, Any]:
    """The pod the Job controller would create, named by its host name."""
    template = copy.deepcopy((job_template.get("spec") or {}).get("template") or {})
    metadata = template.get("metadata") or {}
    hostname = f"{job.name}-{index}"
    labels = {
        **(metadata.get("labels") or {}),
        JOBSET_NAME: jobset["metadata"]["name"],
        REPLICATED_JOB: job.replicated_job,
        JOB_INDEX: str(job.index),
        JOB_NAME: job.name,
        COMPLETION_INDEX: str(index),
    }
    annotations = {
        **(metadata.get("annotations") or {}),
        JOBSET_NAME: jobset["metadata"]["name"],
        REPLICATED_JOB: job.replicated_job,
        JOB_INDEX: str(job.index),
        COMPLETION_INDEX: str(index),
    }
    spec = template.get("spec") or {}
    spec["restartPolicy"] = job.restart_policy
    pod_metadata = {
        "name": hostname,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
    }
    port = mapper.port_of(hostname)
    for container in spec.get("containers") or []:
        own = {"name": "TFJOB_PORT", "value": str(port)}
        container["env"] = [
            own,
            *_mapped_env(container.get("env") or [], own, pod_metadata, mapper),
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": spec}


def _mapped_env(
    env: list[dict[str, Any]],
    own: dict[str, str],
    pod_metadata: dict[str, Any],
    mapper: _AddressMap,
) -> list[dict[str, Any]]:
    """A container's env with addresses mapped here, each value's `$(VAR)` references
    to earlier variables first substituted as the kubelet will expand them: an address
    that only a reference completes (Paddle's POD_IP, `<tj>-node-0-$(TFJOB_POD_INDEX)`
    with the completion index from the downward API) is mapped too. A value with no
    address is left as written."""
    known = {own["name"]: own["value"]}
    mapped = []
    for entry in env:
        entry = mapper.mapped(entry, env, known)
        mapped.append(entry)
        name = str(entry.get("name", ""))
        value = _value_here(entry, pod_metadata, known)
        if value is None:
            known.pop(name, None)
        else:
            known[name] = value
    return mapped


def _value_here(
    entry: dict[str, Any], pod_metadata: dict[str, Any], known: dict[str, str]
) -> str | None:
    """The value the variable will have when the pod starts, if known already: not the
    pod's uid (given when it starts), nor what cannot be resolved locally, nor a value
    referring to a variable not known here (left for the process's start, when the
    kubelet's own variables, TFJOB_POD_NAME..., are there too)."""
    source = entry.get("valueFrom")
    if source is None:
        value = str(entry.get("value", ""))
        return None if references(value) - known.keys() else expand(value, known)
    if (source.get("fieldRef") or {}).get("fieldPath") == "metadata.uid":
        return None
    try:
        return field_value(source, pod_metadata)
    except LaunchError:
        return None


class _AddressMap:
    """Pod host names (and their ports) to this machine's address and their ports."""

    def __init__(self, hosts: dict[str, int], declared: dict[str, set[str]]) -> None:
        self._hosts = hosts
        self._declared = declared
        names = "|".join(re.escape(h) for h in sorted(hosts, key=len, reverse=True))
        # A host name, not part of a longer one, with any domain, and a port maybe.
        self._pattern = re.compile(
            rf"(?<![\w-])({names})(?:\.[A-Za-z0-9.-]*[A-Za-z0-9])?(?::(\d+))?(?![\w-])"
        )

    def port_of(self, hostname: str) -> int:
        return self._hosts[hostname]

    def mapped(
        self, env: dict[str, Any], siblings: list[dict[str, Any]], known: dict[str, str]
    ) -> dict[str, Any]:
        """`env` with the addresses of its value, once the references to `known`
        variables are substituted, mapped here; unchanged when it names none."""
        value = env.get("value")
        if not isinstance(value, str):
            return env
        substituted = substitute(value, known)
        replaced = self._pattern.sub(self._local, substituted)
        name = str(env.get("name", ""))
        if replaced == substituted and name.endswith("_PORT"):
            # Its own address first (PET_MASTER_ADDR for PET_MASTER_PORT), then any.
            stem = name.removesuffix("_PORT")
            ranked = sorted(siblings, key=lambda e: not str(e.get("name", "")).startswith(stem))
            replaced = self._port_beside(substituted, ranked)
        return env if replaced == substituted else {**env, "value": replaced}

    def _local(self, match: re.Match[str]) -> str:
        host, port = match.group(1), match.group(2)
        return HOST if port is None else f"{HOST}:{self._hosts[host]}"

    def _port_beside(self, value: str, siblings: list[dict[str, Any]]) -> str:
        """The local port of the pod a sibling variable names, if it declares `value`."""
        for sibling in siblings:
            found = self._pattern.search(str(sibling.get("value") or ""))
            if found is not None and value in self._declared[found.group(1)]:
                return str(self._hosts[found.group(1)])
        return value
