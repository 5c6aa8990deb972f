"""A real Prometheus scraping real operators on the test cluster.

- ``prometheus`` (session): a started ``testkit.prometheus.Prometheus`` (built by
  tools/envtest/build.sh); skipped without the binary, failed without it under CI.
- ``scenario`` (session): one operator (with leader election) on a namespace of its
  own where jobs of five kinds run on kwok: a TFJob that succeeds and is then deleted
  by its user, a PyTorchJob that fails, a JAXJob whose worker is OOM-killed once and
  then succeeds, an XGBoostJob queued (suspended) for 3 s then resumed, a PaddleJob
  whose worker is killed by a signal twice (one restart, then backoffLimit) and that
  its TTL deletes. Prometheus scrapes the operator all along; the jobs' statuses are
  kept as they were before any deletion, for the tests to compute what each series
  must say.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION, Cluster, KwokPods, Nodes
from testkit.controlplane import ControlPlane, ControlPlaneUnavailable
from testkit.helpers import container, replica, wait_for
from testkit.operators import Jobs, Operators
from testkit.prometheus import Prometheus, Scenario
from tfjob.api import constants as c
from tfjob.api.timestamps import parse_rfc3339
from tfjob.frameworks.jax import JAX
from tfjob.frameworks.paddle import PADDLE
from tfjob.frameworks.pytorch import PYTORCH
from tfjob.frameworks.xgboost import XGBOOST

QUEUED_SECONDS = 3.0


@pytest.fixture(scope="session")
def prometheus(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:  # fmt: skip
    try:
        binary = control_plane.assets.tool("prometheus")
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no prometheus: {exc}", pytrace=False)
        pytest.skip(f"no prometheus: {exc}")
    server = Prometheus(binary, tmp_path_factory.mktemp("prometheus")).start()
    yield server
    server.stop()


def _ending(exit_code: int, after: str) -> dict[str, str]:
    """Pod template annotations: kwok ends each pod `after` Running, with `exit_code`."""
    return {RUN_FOR_ANNOTATION: after, EXIT_CODE_ANNOTATION: str(exit_code)}


def _replica(
    name: str, restart_policy: str | None = None, ending: dict[str, str] | None = None
) -> dict[str, Any]:
    """One replica whose training container is `name` (the kind's)."""
    return replica(1, restart_policy, [container(name=name)], annotations=ending)


def _last_seen(jobs: Jobs, name: str) -> dict[str, Any]:
    found = jobs.get(name)
    assert found is not None, f"{jobs.kind.kind} {name} is gone"
    return found


def _run(kube: Client, namespace: str) -> dict[str, dict[str, Any]]:
    tf = Jobs(kube, namespace)
    pt, jax, xgb, pd = (tf.of(kind) for kind in (PYTORCH, JAX, XGBOOST, PADDLE))
    pods = KwokPods(kube)
    tf.create("tf-ok", {"Worker": _replica("tensorflow", ending=_ending(0, "3s"))})
    pt.create("pt-fail", {"Master": _replica("pytorch", "Never", _ending(1, "2s"))})
    jax.create("jax-restart", {"Worker": _replica("jax", "ExitCode")})
    queued = {"suspend": True}
    xgb.create(
        "xgb-queued", {"Master": _replica("xgboost", ending=_ending(0, "2s"))}, runPolicy=queued
    )
    ttl = {"backoffLimit": 2, "ttlSecondsAfterFinished": 2}
    pd.create(
        "pd-ttl", {"Worker": _replica("paddle", "ExitCode", _ending(143, "2s"))}, runPolicy=ttl
    )
    # The JAXJob's worker is OOM-killed once; its replacement ends well.
    # (Not waited for as Restarting: kwok runs the replacement at once, and its Running
    # drops the condition before a poll may see it. The new pod's UID shows it.)
    first = pods.wait_running(namespace, 1, {c.LABEL_JOB_NAME: "jax-restart"})
    # Killed only once the operator has seen it run (the job's Running condition): a
    # busy operator may otherwise read the first pod's Running and its end in one
    # pass, and a job first Running after a restart is timed as a recovery, not a
    # startup (the count below expects one).
    ran = _stamp(jax.wait_condition("jax-restart", "Running"))
    # Killed a second after that Running at the earliest (conditions keep whole
    # seconds), so that the Running after the restart shows a later time.
    time.sleep(max(0.0, (ran - datetime.now(UTC)).total_seconds() + 1))
    uid = tf.pods()[first[0]]["metadata"]["uid"]
    pods.end(namespace, first[0], 137, "OOMKilled")
    wait_for(
        lambda: (
            (p := tf.pods().get(first[0])) is not None
            and p["metadata"]["uid"] != uid
            and (p.get("status") or {}).get("phase") == "Running"
        ),
        30,
        message="the JAXJob's replacement worker Running",
    )
    # Ended only once the operator has seen the job run again: a status that goes
    # Restarting -> Succeeded has no Running to time `tfjob_job_run_seconds` from.
    wait_for(
        lambda: (
            (ran_again := jax.condition("jax-restart", "Running")) is not None
            and _stamp(ran_again) > ran
        ),
        30,
        message="the JAXJob Running after its restart",
    )
    pods.end(namespace, first[0], 0)
    # The XGBoostJob waits in its "queue", then is admitted.
    xgb.wait_condition("xgb-queued", "Suspended")
    wait_for(lambda: _queued_long_enough(xgb), 10, interval=0.2, message="3 s suspended")
    xgb.patch_spec("xgb-queued", {"runPolicy": {"suspend": False}})
    seen = {
        "tensorflow": _finished(tf, "tf-ok", "Succeeded"),
        "pytorch": _finished(pt, "pt-fail", "Failed"),
        "jax": _finished(jax, "jax-restart", "Succeeded"),
        "xgboost": _finished(xgb, "xgb-queued", "Succeeded"),
        "paddle": _finished(pd, "pd-ttl", "Failed"),
    }
    wait_for(lambda: pd.get("pd-ttl") is None, 20, message="the PaddleJob deleted by its TTL")
    tf.kube.delete(tf.resource, "tf-ok", namespace=namespace)  # its user deletes it
    wait_for(lambda: tf.get("tf-ok") is None, 20, message="the TFJob deleted")
    return seen


def _stamp(condition: dict[str, Any]) -> datetime:
    """A condition's lastTransitionTime."""
    return parse_rfc3339(condition["lastTransitionTime"])


def _queued_long_enough(jobs: Jobs) -> bool:
    condition = jobs.condition("xgb-queued", "Suspended")
    assert condition is not None
    return (datetime.now(UTC) - _stamp(condition)).total_seconds() >= QUEUED_SECONDS


def _finished(jobs: Jobs, name: str, end: str) -> dict[str, Any]:
    jobs.wait_condition(name, end, timeout=60)
    return _last_seen(jobs, name)


@pytest.fixture(scope="package")
def scenario(
    prometheus: Prometheus,
    cluster: Cluster,
    kube: Client,
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    pytorchjob_crd_installed: None,
    kind_crds_installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    namespace = f"monitoring-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace, labels={"tfjob-test": "true"})))
    nodes = Nodes(kube, namespace)
    operators = Operators(operator_kubeconfig, namespace, tmp_path_factory.mktemp("operator"))
    try:
        nodes.add(1)
        lease = f"tfjob-monitoring-{secrets.token_hex(3)}"
        operator = operators.start("--leader-elect", f"--leader-election-id={lease}")
        prometheus.scrape(f"127.0.0.1:{operator.metrics_port}")
        try:
            jobs = _run(kube, namespace)
        except BaseException:
            print(f"--- operator log ---\n{operator.log_tail(80)}")
            raise
        yield Scenario(prometheus, operator, namespace, lease, jobs, QUEUED_SECONDS)
    finally:
        for running in operators.started:
            code = running.stop()
            assert code == 0, f"operator exited {code} on SIGTERM:\n{running.log_tail()}"
        nodes.remove_all()
        with contextlib.suppress(ApiError):
            kube.delete(Namespace, namespace)
