"""Every kind's status after the same pod outcomes, beside Kubeflow's.

Each scenario's pod outcomes are written by the scripted kubelet (testkit/kubelet.py)
once under Kubeflow's operator v1.9.4 (the real binary, every scheme enabled) and once
under tfjob's, on the same API server: the conditions (type, status, reason, message)
and each replica type's counts must be the same. Allowed, as docs/behaviour.md says:
tfjob's failure message adds which pod failed and how (row 6), tfjob writes a
replica type's `selector` whenever its kind has one (upstream writes it only for the
types its map iteration reaches before the job ends), and an MPIJob's Failed reason
is `MPIJobFailed` or `MPIJobEvicted` where upstream's status says `MPIJobMPIJobFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators
from testkit.training_operator import Kubeflow, stop
from tfjob.api import constants as c
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.registry import FRAMEWORKS

IMAGE = "registry.example/train:1"
SETTLE = 1.0  # reconciles' time for a late condition to show
KINDS = [k for k in FRAMEWORKS.values() if k.kind != "TFJob"]  # TFJob: tests/kubernetes/chaos

Play = Callable[[Jobs, FakeKubelet, str], None]  # (the kind's jobs, kubelet, job name)


@dataclass(frozen=True)
class Scenario:
    specs: dict[str, Any]
    play: Play
    ends: str  # the condition it ends with
    spec: dict[str, Any] | None = None


def _replica(kind: Framework[Any], count: int, restart_policy: str) -> dict[str, Any]:
    return {
        "replicas": count,
        "restartPolicy": restart_policy,
        "template": {"spec": {"containers": [{"name": kind.container_name, "image": IMAGE}]}},
    }


def _pods_of(jobs: Jobs, name: str) -> list[str]:
    """The job's pod names, Workers before the master type (which decides last)."""
    job = jobs.get(name)
    assert job is not None
    specs = job["spec"][jobs.kind.spec_field]
    names = [
        jobs.kind.pod_name(name, rtype, index)
        for rtype, spec in specs.items()
        for index in range(spec.get("replicas", 1))
    ]
    return sorted(names, key=lambda pod: ("-worker-" not in pod, pod))


def _run_all(jobs: Jobs, kubelet: FakeKubelet, name: str) -> list[str]:
    names = _pods_of(jobs, name)
    wait_for(lambda: set(names) <= set(jobs.pods()), 30, message=f"the pods {names}")
    for pod in names:
        kubelet.run(jobs.namespace, pod)
    jobs.wait_condition(name, c.RUNNING, timeout=30)
    return names


def _succeed(*which: str) -> Play:
    """Run every pod, then these (all, Workers first, when none is named) succeed."""

    def play(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
        names = _run_all(jobs, kubelet, name)
        for pod in [f"{name}-{w}" for w in which] or names:
            kubelet.succeed(jobs.namespace, pod, container=jobs.kind.container_name)

    return play


def _killed_then_succeed(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    """Worker 0 is killed (137, retryable): it is replaced, then every pod succeeds."""
    names = _run_all(jobs, kubelet, name)
    container = jobs.kind.container_name
    worker = f"{name}-worker-0"
    first = jobs.pods()[worker]["metadata"]["uid"]
    kubelet.fail(jobs.namespace, worker, 137, container=container)
    # (Restarting lasts until the new pod is counted: too briefly to wait for.)
    wait_for(
        lambda: (
            (pod := jobs.pods().get(worker)) is not None
            and pod["metadata"]["uid"] != first
            and not pod["metadata"].get("deletionTimestamp")
        ),
        30,
        message=f"{worker} created again",
    )
    kubelet.run(jobs.namespace, worker)
    jobs.wait_condition(name, c.RUNNING, timeout=30)
    for pod in names:
        kubelet.succeed(jobs.namespace, pod, container=container)


def _first_fails(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    """The deciding replica (the master type's, else Worker 0) exits 1."""
    names = _run_all(jobs, kubelet, name)
    kubelet.fail(jobs.namespace, names[-1], 1, container=jobs.kind.container_name)


def _evict_first(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    """The deciding replica (MPIJob's Launcher) is evicted."""
    names = _run_all(jobs, kubelet, name)
    kubelet.evict(jobs.namespace, names[-1])


def scenarios(kind: Framework[Any]) -> dict[str, Scenario]:
    def shape(restart_policy: str, workers: int = 2) -> dict[str, Any]:
        specs = {c.WORKER: _replica(kind, workers, restart_policy)}
        if kind.master_types:
            specs = {kind.master_types[0]: _replica(kind, 1, restart_policy), **specs}
        return specs

    found = {
        "succeed": Scenario(shape(kind.default_restart_policy), _succeed(), c.SUCCEEDED),
        "exitcode": Scenario(shape("ExitCode"), _killed_then_succeed, c.SUCCEEDED),
        "never": Scenario(shape("Never", workers=1), _first_fails, c.FAILED),
    }
    if kind.kind == "MPIJob":  # the Launcher decides; upstream recreates no pod
        del found["exitcode"]
        found["evicted"] = Scenario(shape("Never"), _evict_first, c.FAILED)
    if kind.kind == "PyTorchJob":  # its Worker-only rules: all succeed, or (elastic) any
        found["workers"] = Scenario(
            {c.WORKER: _replica(kind, 2, "OnFailure")}, _succeed(), c.SUCCEEDED
        )
        found["elastic"] = Scenario(
            {c.WORKER: _replica(kind, 3, "OnFailure")},
            _succeed("worker-1"),
            c.SUCCEEDED,
            spec={"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}},
        )
    return found


Outcome = tuple[list[tuple[str, ...]], dict[str, Any]]


def _outcome(jobs: Jobs, name: str) -> Outcome:
    status = jobs.status(name)
    conditions = [
        (c["type"], c["status"], c["reason"], c["message"].replace(name, "<job>"))
        for c in status.get("conditions", [])
    ]
    return conditions, status.get("replicaStatuses", {})


def _play_all(namespace: Jobs, kubelet: FakeKubelet, prefix: str) -> dict[str, Outcome]:
    """Every kind's scenarios, jobs named `<prefix>-<kind>-<scenario>`."""
    played = []
    for kind in KINDS:
        jobs = namespace.of(kind)
        for label, scenario in scenarios(kind).items():
            name = f"{prefix}-{kind.kind.lower().removesuffix('job')}-{label}"
            jobs.create(name, scenario.specs, **(scenario.spec or {}))
            played.append((f"{kind.kind} {label}", jobs, name, scenario))
    for _what, jobs, name, scenario in played:
        scenario.play(jobs, kubelet, name)
        jobs.wait_condition(name, scenario.ends, timeout=30)
    time.sleep(SETTLE)
    return {what: _outcome(jobs, name) for what, jobs, name, _scenario in played}


@pytest.fixture
def kubeflow(
    kube: Client,
    kubeconfig: Path,
    namespace: str,
    pytorchjob_crd_installed: None,
    kind_crds_installed: None,
    tmp_path: Path,
) -> Iterator[Kubeflow]:
    yield Kubeflow(kube, kubeconfig, namespace, tmp_path, schemes=tuple(k.scheme for k in KINDS))


def test_statuses_after_the_same_pod_outcomes_equal_kubeflows(
    kubeflow: Kubeflow, operators: Operators, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    upstream = kubeflow.start()
    try:
        theirs = _play_all(jobs, kubelet, "kf")
    finally:
        stop(upstream)
    operators.start(*(f"--enable-scheme={k.scheme}" for k in KINDS))
    ours = _play_all(jobs, kubelet, "tf")
    different = {
        what: (ours[what], theirs[what])
        for what in theirs
        if not _same(FRAMEWORKS[what.split()[0]], ours[what], theirs[what])
    }
    assert not different, "\n".join(
        f"{what}:\n  ours   {o}\n  theirs {t}" for what, (o, t) in different.items()
    )


def _same(kind: Framework[Any], ours: Outcome, theirs: Outcome) -> bool:
    (our_conditions, our_replicas), (their_conditions, their_replicas) = ours, theirs
    if _upstream_part(our_conditions) != their_conditions:
        return False
    if _counts(our_replicas) != _counts(their_replicas):
        return False
    for rtype, counts in their_replicas.items():
        if "selector" in counts:
            expected = counts["selector"].replace("job-name=kf-", "job-name=tf-")
            if our_replicas[rtype].get("selector") != expected:
                return False
    return all(("selector" in counts) == kind.status_selector for counts in our_replicas.values())


def _upstream_part(conditions: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The conditions with tfjob's addition to a failure message cut off, and an
    MPIJob's failure reason as upstream's status misspells it (its controller prefixes
    the kind twice; docs/behaviour.md)."""
    return [
        (c[0], c[1], _MISSPELT.get(c[2], c[2]), c[3].split(" <job>-", 1)[0])
        if c[0] == "Failed"
        else c
        for c in conditions
    ]


_MISSPELT = {"MPIJobFailed": "MPIJobMPIJobFailed", "MPIJobEvicted": "MPIJobMPIJobFailed"}


def _counts(replicas: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {
        rtype: {k: v for k, v in counts.items() if k != "selector"}
        for rtype, counts in replicas.items()
    }
