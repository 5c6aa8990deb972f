"""Chaos, CI-sized: API faults, operator crashes and an API server restart.

Each test bounds its loops (a handful of jobs, seeded randomness) and checks what a
user would see: every job reaches the right terminal state, restart counts are exact,
there are exactly the pods and services the jobs need and no pod was ever created
twice. Larger versions of the same runs live in bench/ (bench/chaos_bench.py).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import pytest
from lightkube import Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod

from testkit.auto_kubelet import AutoKubelet
from testkit.cluster import Cluster, KwokPods, Nodes
from testkit.controlplane import ControlPlane
from testkit.fault_proxy import FaultProxy, Rule, deletes_of, writes
from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import STOP_TIMEOUT, Jobs, Operators, RunningOperator, replica
from tfjob.api.constants import CONTROLLER_NAME
from tfjob.runtimes.kubernetes.controller.operator import EVENT_FLUSH_SECONDS

TIMEOUT = 90.0  # generous: CI machines and this one are small and shared
VERBS = ("create", "patch")  # tfjob_event_writes_total
DROPS = ("rejected", "overflow", "shutdown")  # tfjob_events_dropped_total
BACKOFF = "has failed because it has reached the specified backoff limit"


def _names(job: str, workers: int) -> set[str]:
    return {f"{job}-worker-{i}" for i in range(workers)}


def _replaced(jobs: Jobs, name: str, old_uid: str) -> dict[str, Any] | None:
    pod = jobs.pods().get(name)
    if pod is None or pod["metadata"]["uid"] == old_uid:
        return None
    return pod if not pod["metadata"].get("deletionTimestamp") else None


def _run_all(kubelet: FakeKubelet, namespace: str, names: set[str]) -> None:
    for name in sorted(names):
        kubelet.run(namespace, name)


def test_a_failure_counts_once_when_the_pod_delete_is_refused(
    proxied_operators: Operators,
    proxy: FaultProxy,
    jobs: Jobs,
    kubelet: FakeKubelet,
    namespace: str,
) -> None:
    """The first DELETE of the failed pod is answered 429: the retry deletes it, and the
    one retryable exit counts once - the job (backoffLimit 2) keeps running."""
    proxy.set_rules(Rule("429", match=deletes_of("pods"), times=1))
    proxied_operators.start()
    jobs.create("once", {"Worker": replica(2, "ExitCode")}, runPolicy={"backoffLimit": 2})
    pods = jobs.wait_pods(_names("once", 2), TIMEOUT)
    _run_all(kubelet, namespace, _names("once", 2))
    jobs.wait_condition("once", "Running", TIMEOUT)

    kubelet.fail(namespace, "once-worker-1", 130)
    old = pods["once-worker-1"]["metadata"]["uid"]
    wait_for(lambda: _replaced(jobs, "once-worker-1", old), TIMEOUT, message="a new worker-1")
    assert proxy.injected["429"] == 1, "the fault was not injected"
    status = jobs.status("once")
    assert status["restartCount"] == 1
    assert jobs.condition("once", "Failed") is None

    # A second retryable exit is the second failure: backoffLimit 2 is reached.
    kubelet.run(namespace, "once-worker-1")
    kubelet.fail(namespace, "once-worker-1", 130)
    failed = jobs.wait_condition("once", "Failed", TIMEOUT)
    assert BACKOFF in failed["message"]
    assert jobs.status("once")["restartCount"] == 1  # the second failure was not restarted


def test_retryable_failures_through_random_faults_end_with_exact_counts(
    proxied_operators: Operators,
    proxy: FaultProxy,
    jobs: Jobs,
    kubelet: FakeKubelet,
    namespace: str,
) -> None:
    """~25% of requests meet a fault (500, 429, resets before and after forwarding,
    delays) and every watch is cut within 4 s; each job's one retryable failure is
    counted exactly once and every job succeeds with exactly its pods."""
    proxy.set_rules(
        Rule("reset-after", 0.05, writes()),
        Rule("reset-before", 0.05),
        Rule("500", 0.05),
        Rule("429", 0.05),
        Rule("delay", 0.05, delay=0.5),
    )
    proxy.watch_lifetime = 4.0
    proxied_operators.start()
    names = [f"f{i}" for i in range(3)]
    for name in names:
        jobs.create(name, {"Worker": replica(2, "ExitCode")}, runPolicy={"backoffLimit": 3})
    every = set().union(*(_names(n, 2) for n in names))
    pods = jobs.wait_pods(every, TIMEOUT)
    _run_all(kubelet, namespace, every)
    for name in names:
        jobs.wait_condition(name, "Running", TIMEOUT)
        old = pods[f"{name}-worker-1"]["metadata"]["uid"]
        kubelet.fail(namespace, f"{name}-worker-1", 137, "OOMKilled")
        wait_for(lambda n=name, u=old: _replaced(jobs, f"{n}-worker-1", u), TIMEOUT)  # type: ignore[misc]
        _run_all(kubelet, namespace, _names(name, 2))
        for index in (1, 0):
            kubelet.succeed(namespace, f"{name}-worker-{index}")
    for name in names:
        jobs.wait_condition(name, "Succeeded", TIMEOUT)
        assert jobs.status(name)["restartCount"] == 1, name
        assert jobs.condition(name, "Failed") is None
    jobs.wait_pods(every, TIMEOUT)
    jobs.wait_services(every, TIMEOUT)
    injected = dict(proxy.injected)
    assert sum(injected.values()) > 0, "no fault was injected"


def test_operator_killed_at_random_moments_converges_exactly(
    operators: Operators,
    jobs: Jobs,
    auto_kubelet: AutoKubelet,
) -> None:
    """Jobs are created and completed while the operator is SIGKILLed three times at
    random moments and restarted: every job succeeds, with exactly its pods and
    services, each pod created once, and no restart counted."""
    rng = random.Random(11)
    running = operators.start()
    names: list[str] = []
    for round_ in range(3):
        for i in range(4):
            name = f"k{round_}{i}"
            jobs.create(name, {"Worker": replica(2, "OnFailure")})
            names.append(name)
        time.sleep(rng.uniform(0.0, 2.0))
        running.kill()
        running = operators.start()
    for name in names:
        jobs.wait_condition(name, "Succeeded", TIMEOUT)
        assert jobs.status(name).get("restartCount", 0) == 0, name
    every = set().union(*(_names(n, 2) for n in names))
    jobs.wait_pods(every, TIMEOUT)
    jobs.wait_services(every, TIMEOUT)
    twice = {n: uids for n, uids in auto_kubelet.uids.items() if len(uids) > 1}
    assert twice == {}, f"pods created more than once: {twice}"


def test_the_api_server_restarted_under_the_operator(
    operators: Operators,
    jobs: Jobs,
    auto_kubelet: AutoKubelet,
    control_plane: ControlPlane,
    kube: Client,
    cluster: Cluster,
) -> None:
    """The API server goes away for a second and comes back with the same data: the
    operator keeps running, finishes the jobs it had and takes new ones."""
    auto_kubelet.hold = 3.0  # still running when the API server goes
    running = operators.start()
    for i in range(3):
        jobs.create(f"a{i}", {"Worker": replica(2, "OnFailure")})
    jobs.wait_pods(set().union(*(_names(f"a{i}", 2) for i in range(3))), TIMEOUT)
    control_plane.restart_apiserver(down=1.0)
    wait_for(lambda: _answers(kube), TIMEOUT, message="the API server back")
    jobs.create("after", {"Worker": replica(2, "OnFailure")})
    for name in ["a0", "a1", "a2", "after"]:
        jobs.wait_condition(name, "Succeeded", TIMEOUT)
    assert running.process.poll() is None, f"operator exited:\n{running.log_tail()}"
    every = set().union(*(_names(n, 2) for n in ["a0", "a1", "a2", "after"]))
    jobs.wait_pods(every, TIMEOUT)
    # A service whose create the restart cut off is made again only while its job
    # runs: one that finished meanwhile no longer needs it. None is made that no job names.
    after = _names("after", 2)
    wait_for(
        lambda: after <= set(jobs.services()) <= every,
        TIMEOUT,
        message=f"the services of 'after' {sorted(after)}, none outside {sorted(every)}",
    )
    assert {n: u for n, u in auto_kubelet.uids.items() if len(u) > 1} == {}
    _the_cluster_runs_pods_again(kube)


def _the_cluster_runs_pods_again(kube: Client) -> None:
    """The worker's next tests share the session's kube-scheduler and kwok, whose
    watches come back after a back-off of their own: wait until a pod is scheduled and
    run again (in a namespace of its own: the test's is played by ``auto_kubelet``)."""
    name = f"canary-{random.randrange(16**6):06x}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    nodes = Nodes(kube, name)
    try:
        nodes.add(1)
        pod = {"metadata": {"name": "canary", "namespace": name, "labels": {"canary": "1"}},
               "spec": {"containers": [{"name": "c", "image": "example.test/canary:1"}]}}  # fmt: skip
        kube.create(Pod.from_dict(pod))
        KwokPods(kube).wait_running(name, 1, labels={"canary": "1"}, timeout=120)
    finally:
        nodes.remove_all()
        kube.delete(Namespace, name)


def _answers(kube: Client) -> bool:
    try:
        kube.get(Namespace, "default")
    except Exception:
        return False
    return True


pytestmark = pytest.mark.chaos


def _by_source(jobs: Jobs) -> tuple[Counter[str], Counter[str]]:
    """Occurrences held in the API server per event: the operator's, and those of other
    components (the kube-scheduler writes FailedScheduling about our pods once any test
    of the session has started it): only the operator's are its to account for."""
    ours: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for event in jobs.events():
        count = event.get("count") or 1
        source = (event.get("source") or {}).get("component") or event.get("reportingComponent")
        about = f"{event['involvedObject'].get('name')} {event['reason']}"
        if source == CONTROLLER_NAME:
            ours[f"{about}: {event['message']}"] += count
        else:
            others[f"{source} {about}"] += count
    return ours, others


def _delivery(running: RunningOperator, jobs: Jobs, proxy: FaultProxy) -> dict[str, Any]:
    """What the operator recorded and still has pending beside what the API server
    holds, and why it might differ: a failure says which side is short, by how much."""
    ours, others = _by_source(jobs)
    return {
        "pending": running.metric("tfjob_events_pending"),
        "recorded": running.metric("tfjob_events_recorded_total"),
        "held": sum(ours.values()),
        "writes": {v: running.metric("tfjob_event_writes_total", verb=v) for v in VERBS},
        "retries": running.metric("tfjob_event_write_retries_total"),
        "dropped": {r: running.metric("tfjob_events_dropped_total", reason=r) for r in DROPS},
        "held per event": dict(ours),
        "not the operator's": dict(others),
        "faults injected": dict(proxy.injected),
        "event writes answered": {k: n for k, n in proxy.requests.items() if "events" in k},
    }


def _every_event_held(running: RunningOperator, jobs: Jobs, proxy: FaultProxy) -> None:
    """Until nothing is pending and the operator's Events count every occurrence."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        seen = _delivery(running, jobs, proxy)
        if seen["pending"] == 0 and seen["held"] == seen["recorded"]:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    shown = "\n".join(f"  {key}: {value}" for key, value in seen.items())
    pytest.fail(
        f"after {TIMEOUT} s not every recorded event is in the API server:\n{shown}\n"
        f"--- operator log ---\n{running.log_tail(40)}"
    )


def _foreign_event(jobs: Jobs, pod: str) -> None:
    """An Event another component wrote in the namespace, as the kube-scheduler does."""
    jobs.kube.create(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{pod}.scheduler", "namespace": jobs.namespace},
                "involvedObject": {"kind": "Pod", "name": pod, "namespace": jobs.namespace},
                "reason": "FailedScheduling",
                "message": "0/0 nodes are available",
                "type": "Warning",
                "source": {"component": "default-scheduler"},
                "count": 3,
            }
        )
    )


def _to_events(method: str, path: str) -> bool:
    return "/events" in path and method in ("POST", "PATCH")


def test_every_event_reaches_the_api_server_through_faults_and_sigterm(
    proxied_operators: Operators,
    proxy: FaultProxy,
    jobs: Jobs,
    kubelet: FakeKubelet,
    namespace: str,
) -> None:
    """Half the Event writes meet 429, 500 or a reset after forwarding: still, every
    occurrence the operator recorded is counted in the API server's Events (beside
    other components' Events, which are not its own); and those still pending at
    SIGTERM are written before the operator exits."""
    proxy.set_rules(
        Rule("429", 0.2, _to_events),
        Rule("500", 0.15, _to_events),
        Rule("reset-after", 0.15, _to_events),
    )
    running = proxied_operators.start()
    first = [f"e{i}" for i in range(3)]
    for name in first:
        jobs.create(name, {"Worker": replica(2)})
    every = set().union(*(_names(n, 2) for n in first))
    jobs.wait_pods(every, TIMEOUT)
    _foreign_event(jobs, "e0-worker-0")
    _run_all(kubelet, namespace, every)
    for name in first:
        jobs.wait_condition(name, "Running", TIMEOUT)

    _every_event_held(running, jobs, proxy)
    assert running.metric("tfjob_events_dropped_total", reason="rejected") == 0
    assert sum(proxy.injected.values()) > 0, "no fault was injected"

    # Now stop while events are still pending: they are written before the exit.
    jobs.create("late", {"Worker": replica(2)})
    jobs.wait_pods(every | _names("late", 2), TIMEOUT)
    # The flush may use all of its bound under these faults: wait past it, so a flush
    # that runs out says so ("events not sent") instead of looking like a hang.
    assert running.stop(timeout=EVENT_FLUSH_SECONDS + STOP_TIMEOUT) == 0
    log = running.log_tail(400)
    assert "events not sent at shutdown" not in log, f"faults: {dict(proxy.injected)}\n{log}"
    created = {e["message"] for e in jobs.events("late") if e["reason"] == "SuccessfulCreatePod"}
    assert created == {f"Created pod: late-worker-{i}" for i in range(2)}
