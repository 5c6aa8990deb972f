"""The TrainJob's status and what each pass writes: from the JobSet's status,
suspend and resume, the active deadline, the runtime snapshot, and the runtimes that
are missing or of an unknown kind."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import msgspec

from testkit import fast_yaml
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob, TrainJobStatus
from tfjob.core.plan import DeleteOwned
from tfjob.core.trainjob.plan import ApplyObject, Observed

from .conftest import CREATED, NOW, applied, node_container, plan, runtime, trainjob

RT = runtime(
    {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {
                                    "spec": {"containers": [{"name": "node", "image": "v1"}]}
                                }
                            },
                        },
                    }
                ]
            }
        },
    }
)


def _with_status(job: TrainJob, status: dict[str, Any]) -> TrainJob:
    return msgspec.structs.replace(job, status=msgspec.convert(status, TrainJobStatus))


def _jobset(status: dict[str, Any] | None = None, suspend: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "tj"},
        "spec": {"suspend": suspend},
        "status": status or {},
    }


def _kinds(actions: list[Any]) -> list[str]:
    return [
        a.manifest["kind"] if hasattr(a, "manifest") else f"delete {a.kind.kind}" for a in actions
    ]


def _conditions(result: Any) -> list[tuple[str, str, str, str]]:
    return [(c.type, c.status, c.reason, c.message) for c in result.status.conditions]


def test_first_pass_writes_snapshot_then_jobset_and_no_status() -> None:
    result = plan(trainjob("rt"), RT)
    assert _kinds(result.actions) == ["ConfigMap", "JobSet"]
    assert all(isinstance(a, ApplyObject) for a in result.actions)
    assert result.status.conditions == []
    assert not result.status_changed
    assert result.events == []


def test_a_running_jobset_is_left_alone() -> None:
    snapshot = applied(plan(trainjob("rt"), RT), "ConfigMap")
    result = plan(trainjob("rt"), RT, Observed(jobset=_jobset(), snapshot=snapshot))
    assert result.actions == []


def test_jobs_status_copied_with_every_count() -> None:
    status = {
        "replicatedJobsStatus": [
            {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
        ]
    }
    result = plan(trainjob("rt"), RT, Observed(jobset=_jobset(status)))
    encoded = msgspec.to_builtins(result.status)
    assert encoded == {
        "jobsStatus": [
            {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
        ]
    }
    assert result.status_changed


def test_a_jobsets_first_counts_all_zero_wait_for_its_next_change() -> None:
    """The JobSet's first counts, every one 0, are not written alone while the JobSet
    is younger than FIRST_COUNTS_WAIT (the pass comes back then); its next counts, or
    the same once it is that old, are."""
    zeros = {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    young = _jobset({"replicatedJobsStatus": [zeros]})
    young["metadata"]["creationTimestamp"] = CREATED  # NOW is 30 s later
    waiting = plan(trainjob("rt"), RT, Observed(jobset=young))
    assert not waiting.status_changed
    assert waiting.requeue_after == 270.0
    later = plan(trainjob("rt"), RT, Observed(jobset=young), NOW + timedelta(seconds=270))
    assert later.status_changed
    assert msgspec.to_builtins(later.status) == {"jobsStatus": [zeros]}
    active = _jobset({"replicatedJobsStatus": [{**zeros, "active": 2}]})
    active["metadata"]["creationTimestamp"] = CREATED
    assert plan(trainjob("rt"), RT, Observed(jobset=active)).status_changed
    suspended = _jobset({"replicatedJobsStatus": [zeros]}, suspend=True)
    suspended["metadata"]["creationTimestamp"] = CREATED
    assert plan(trainjob("rt"), RT, Observed(jobset=suspended)).status_changed


def test_a_running_jobsets_pass_builds_nothing() -> None:
    """While its JobSet runs, a pass of a TrainJob whose runtime makes nothing beside
    the JobSet builds nothing: a snapshot it could not be built from (an mlPolicy
    tfjob cannot apply) fails it only while its JobSet is to be made."""
    snapshot = applied(plan(trainjob("rt"), RT), "ConfigMap")
    assert "torch: {}" in snapshot["data"]["runtime"]
    snapshot["data"]["runtime"] = snapshot["data"]["runtime"].replace("torch: {}", "flux: {}")
    running = plan(trainjob("rt"), RT, Observed(jobset=_jobset(), snapshot=snapshot))
    assert running.actions == [] and not running.status.conditions
    to_make = plan(trainjob("rt"), RT, Observed(snapshot=snapshot))
    assert _conditions(to_make)[0][2] == "InvalidTrainingRuntime"


def test_jobset_completed_and_failed_become_the_trainjobs() -> None:
    done = {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": "2026-12-01T10:00:20Z",
            }
        ]
    }
    result = plan(trainjob("rt"), RT, Observed(jobset=_jobset(done)))
    assert _conditions(result) == [
        ("Complete", "True", "AllJobsCompleted", "jobset completed successfully")
    ]
    assert result.status.conditions[0].last_transition_time == "2026-12-01T10:00:20Z"
    failed = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "lastTransitionTime": "2026-12-01T10:00:25Z",
            }
        ]
    }
    result = plan(trainjob("rt"), RT, Observed(jobset=_jobset(failed)))
    assert _conditions(result) == [
        ("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures")
    ]


def test_a_finished_trainjob_writes_nothing() -> None:
    job = _with_status(
        trainjob("rt"),
        {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "AllJobsCompleted",
                    "message": "m",
                    "lastTransitionTime": CREATED,
                }
            ]
        },
    )
    result = plan(
        job,
        RT,
        Observed(
            jobset=_jobset(
                {
                    "conditions": [
                        {
                            "type": "Completed",
                            "status": "True",
                            "reason": "AllJobsCompleted",
                            "message": "m",
                            "lastTransitionTime": CREATED,
                        }
                    ]
                }
            )
        ),
    )
    assert result.actions == []
    assert not result.status_changed


def test_failed_kept_when_its_jobset_is_gone() -> None:
    """Deliberate deviation: Trainer v2.3.0 drops a JobSet's Failed once the JobSet is
    deleted; tfjob keeps the finished TrainJob failed and makes no new JobSet."""
    job = _with_status(
        trainjob("rt"),
        {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedJobs",
                    "message": "m",
                    "lastTransitionTime": CREATED,
                }
            ]
        },
    )
    result = plan(job, RT)
    assert _conditions(result) == [("Failed", "True", "FailedJobs", "m")]
    assert result.actions == []


def test_suspend_and_resume() -> None:
    suspended = plan(trainjob("rt", suspend=True), RT)
    assert _conditions(suspended) == [("Suspended", "True", "Suspended", "TrainJob is suspended")]
    assert applied(suspended, "JobSet")["spec"]["suspend"] is True
    snapshot = applied(suspended, "ConfigMap")
    # Still suspended with its JobSet: the JobSet is applied again, suspended.
    job = _with_status(trainjob("rt", suspend=True), msgspec.to_builtins(suspended.status))
    again = plan(job, RT, Observed(jobset=_jobset(suspend=True), snapshot=snapshot))
    assert applied(again, "JobSet")["spec"]["suspend"] is True
    assert not again.status_changed
    # Resumed: Suspended=False (Resumed) and the JobSet applied unsuspended.
    job = _with_status(trainjob("rt", suspend=False), msgspec.to_builtins(suspended.status))
    later = NOW + timedelta(minutes=5)
    resumed = plan(job, RT, Observed(jobset=_jobset(suspend=True), snapshot=snapshot), now=later)
    assert _conditions(resumed) == [("Suspended", "False", "Resumed", "TrainJob is resumed")]
    assert resumed.status.conditions[0].last_transition_time == "2026-12-01T10:05:30Z"
    assert applied(resumed, "JobSet")["spec"]["suspend"] is False


def test_deadline_requeues_then_fails_and_deletes_the_jobset() -> None:
    job = trainjob("rt", activeDeadlineSeconds=60)
    early = plan(job, RT)
    assert early.requeue_after == 30.0  # created 30 s before NOW
    late = plan(job, RT, Observed(jobset=_jobset()), now=NOW + timedelta(seconds=31))
    assert _conditions(late) == [
        ("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")
    ]
    assert late.actions[-1] == DeleteOwned(kind=late.actions[-1].kind, name="tj")
    assert late.actions[-1].kind.kind == "JobSet"
    assert late.requeue_after is None
    # The deadline's Failed stays; nothing more is built.
    after = plan(
        _with_status(job, msgspec.to_builtins(late.status)), RT, now=NOW + timedelta(seconds=40)
    )
    assert after.actions == []
    assert _conditions(after) == _conditions(late)


def test_deadline_counts_from_the_resume() -> None:
    resumed_at = "2026-12-01T11:00:00Z"
    job = _with_status(
        trainjob("rt", activeDeadlineSeconds=60),
        {
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "False",
                    "reason": "Resumed",
                    "message": "TrainJob is resumed",
                    "lastTransitionTime": resumed_at,
                }
            ]
        },
    )
    result = plan(job, RT, Observed(jobset=_jobset()), now=NOW + timedelta(hours=1, seconds=20))
    assert result.requeue_after == 10.0
    assert (
        plan(
            trainjob("rt", activeDeadlineSeconds=60, suspend=True), RT, now=NOW + timedelta(hours=2)
        ).requeue_after
        is None
    )


def test_missing_runtime_fails_with_a_reason_until_it_exists() -> None:
    """Deliberate deviation: Trainer v2.3.0 only records an Event and retries forever."""
    missing = plan(trainjob("nope"), None)
    message = 'not found ClusterTrainingRuntime specified in TrainJob: ClusterTrainingRuntime.trainer.kubeflow.org "nope" not found'
    assert _conditions(missing) == [("Failed", "True", "TrainingRuntimeNotFound", message)]
    assert missing.actions == []
    # The Event Trainer records, word for word (seen from a running Trainer).
    assert [(e.type, e.reason, e.message) for e in missing.events] == [
        (
            "Warning",
            "TrainJobResourcesCreationFailed",
            f"TrainJob resources reconciliation failed: {message}",
        )
    ]
    namespaced = plan(
        trainjob("nope", runtimeRef={"name": "nope", "kind": "TrainingRuntime"}), None
    )
    assert (
        namespaced.status.conditions[0].message
        == 'TrainingRuntime specified in TrainJob is not found: TrainingRuntime.trainer.kubeflow.org "nope" not found'
    )
    # Created later: the Failed goes and the objects are made.
    job = _with_status(trainjob("rt"), msgspec.to_builtins(missing.status))
    found = plan(job, RT)
    assert found.status.conditions == []
    assert _kinds(found.actions) == ["ConfigMap", "JobSet"]


def test_unknown_runtime_kind_fails_instead_of_panicking() -> None:
    """Deliberate deviation: Trainer v2.3.0 panics (nil runtime) on every reconcile."""
    result = plan(trainjob("rt", runtimeRef={"name": "rt", "kind": "FancyRuntime"}), RT)
    assert _conditions(result) == [
        (
            "Failed",
            "True",
            "TrainingRuntimeNotSupported",
            "unsupported runtime: FancyRuntime.trainer.kubeflow.org",
        )
    ]
    assert result.actions == []


def test_managed_elsewhere_is_left_alone() -> None:
    result = plan(trainjob("rt", managedBy="kueue.x-k8s.io/multikueue"), RT)
    assert result.actions == [] and not result.status_changed


def _edited(image: str) -> Any:
    spec = msgspec.to_builtins(RT.spec)
    spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["image"] = image
    return runtime(spec)


def test_snapshot_holds_the_runtime_as_first_used() -> None:
    snapshot = applied(plan(trainjob("rt"), RT), "ConfigMap")
    assert snapshot["metadata"]["name"] == "tj-runtime-snapshot"
    assert snapshot["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    saved = fast_yaml.load(snapshot["data"]["runtime"])
    assert saved["kind"] == "ClusterTrainingRuntime" and saved["metadata"]["name"] == "rt"
    # A suspended JobSet re-applied while the job runs on: built from the snapshot.
    job = trainjob("rt")
    result = plan(job, _edited("v2"), Observed(jobset=_jobset(suspend=True), snapshot=snapshot))
    assert node_container(applied(result, "JobSet"))["image"] == "v1"
    assert _kinds(result.actions) == ["JobSet"]


def test_a_runtime_fixed_while_suspended_is_used_on_resume() -> None:
    """Deliberate deviation: Trainer v2.3.0 keeps the first snapshot, so the fix is
    never used; tfjob takes the snapshot again while the TrainJob is suspended."""
    snapshot = applied(plan(trainjob("rt", suspend=True), RT), "ConfigMap")
    result = plan(
        trainjob("rt", suspend=True),
        _edited("fixed"),
        Observed(jobset=_jobset(suspend=True), snapshot=snapshot),
    )
    assert _kinds(result.actions) == ["ConfigMap", "JobSet"]
    assert "fixed" in applied(result, "ConfigMap")["data"]["runtime"]
    assert node_container(applied(result, "JobSet"))["image"] == "fixed"


def test_a_suspended_trainjob_keeps_its_snapshot_of_an_unchanged_runtime(
    shipped: Callable[[str], TrainingRuntime],
) -> None:
    """A snapshot holds the runtime as Go's typed round trip writes it (`metadata: {}`,
    `resources: {}`, which the live runtime lacks): that is no change of the runtime,
    so a pass of a suspended TrainJob (one Trainer suspended too, after a swap)
    writes only its JobSet, not the snapshot again."""
    for name in ("torch-distributed", "deepspeed-distributed"):
        live = shipped(name)
        job = trainjob(name, suspend=True)
        snapshot = applied(plan(job, live), "ConfigMap", "tj-runtime-snapshot")
        observed = Observed(jobset=_jobset(suspend=True), snapshot=snapshot)
        observed.mpi_secret = {"metadata": {"name": "tj-mpi-ssh-auth"}}
        observed.mpi_hostfile = _hostfile(plan(job, live)) if "deepspeed" in name else None
        assert _kinds(plan(job, live, observed).actions) == ["JobSet"], name


def _hostfile(result: Any) -> dict[str, Any] | None:
    found = [
        a.manifest
        for a in result.actions
        if getattr(a, "manifest", {}).get("metadata", {}).get("name", "").endswith("hostfile")
    ]
    return found[0] if found else None


def test_a_snapshot_not_this_trainjobs_fails_it() -> None:
    snapshot = applied(plan(trainjob("rt"), RT), "ConfigMap")
    snapshot["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    result = plan(trainjob("rt"), RT, Observed(snapshot=snapshot))
    assert result.status.conditions[0].reason == "InvalidTrainingRuntime"
    assert "owned by another object" in result.status.conditions[0].message
    assert result.actions == []


def test_unsupported_mlpolicy_source_fails() -> None:
    rt = runtime({"mlPolicy": {"flux": {}}, "template": {"spec": {"replicatedJobs": []}}})
    result = plan(trainjob("rt"), rt)
    assert _conditions(result) == [
        ("Failed", "True", "InvalidTrainingRuntime", "mlPolicy.flux is not supported by tfjob")
    ]


def test_same_inputs_same_plan() -> None:
    assert plan(trainjob("rt"), RT) == plan(trainjob("rt"), RT)


def test_a_runtime_with_a_bad_quantity_fails_the_trainjob() -> None:
    spec = msgspec.to_builtins(RT.spec)
    spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["resources"] = {"limits": {"cpu": "lots"}}
    result = plan(trainjob("rt"), runtime(spec))
    assert result.status.conditions[0].reason == "InvalidTrainingRuntime"
    assert "lots" in result.status.conditions[0].message
    assert result.actions == []


def test_every_kind_a_plan_writes_is_watched(shipped: Any) -> None:
    from tfjob.core.trainjob.plan import watched_kinds

    kinds = {(k.api_version, k.kind) for k in watched_kinds()}
    written = plan(
        trainjob("deepspeed-distributed", suspend=True), shipped("deepspeed-distributed")
    ).actions
    coscheduled = runtime({**msgspec.to_builtins(RT.spec), "podGroupPolicy": {"coscheduling": {}}})
    written += plan(trainjob("rt"), coscheduled).actions
    assert {(a.kind.api_version, a.kind.kind) for a in written} <= kinds
    assert {a.kind.kind for a in written} == {"ConfigMap", "Secret", "JobSet", "PodGroup"}


def test_snapshot_text_is_the_runtime_as_go_writes_it() -> None:
    rt = runtime(
        {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "template": {
                "metadata": {"annotations": {"a": "y"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "i",
                                                    "args": [],
                                                    "resources": {
                                                        "limits": {"cpu": 4},
                                                        "requests": {"cpu": "1000m"},
                                                    },
                                                }
                                            ]
                                        }
                                    }
                                }
                            },
                        }
                    ]
                },
            },
        }
    )
    text = applied(plan(trainjob("rt"), rt), "ConfigMap")["data"]["runtime"]
    assert text == (
        "apiVersion: trainer.kubeflow.org/v1alpha1\n"
        "kind: ClusterTrainingRuntime\n"
        "metadata:\n"
        "  name: rt\n"
        "spec:\n"
        "  mlPolicy:\n"
        "    numNodes: 2\n"
        "    torch: {}\n"
        "  template:\n"
        "    metadata:\n"
        "      annotations:\n"
        '        a: "y"\n'
        "    spec:\n"
        "      replicatedJobs:\n"
        "      - name: node\n"
        "        template:\n"
        "          metadata: {}\n"
        "          spec:\n"
        "            template:\n"
        "              metadata: {}\n"
        "              spec:\n"
        "                containers:\n"
        "                - image: i\n"
        "                  name: node\n"
        "                  resources:\n"
        "                    limits:\n"
        '                      cpu: "4"\n'
        "                    requests:\n"
        '                      cpu: "1"\n'
    )
