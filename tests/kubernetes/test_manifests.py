"""manifests/base against the real API server: what `kubectl apply -k` would install.

The CRD is the API users touch first, so its schema is tested the way users meet it:
what gets stored, what gets refused and with which message, what `kubectl get` shows.
RBAC is tested with the operator's own identity, by making real requests.
"""

from __future__ import annotations

import contextlib
import copy
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Pod, Secret, Service
from lightkube.resources.events_v1 import Event as EventsV1Event
from lightkube.resources.rbac_authorization_v1 import ClusterRole
from lightkube.types import PatchType

from testkit import helpers
from testkit.controlplane import (
    MANIFESTS_BASE,
    OPERATOR_USER,
    ControlPlane,
    apply_documents,
    kustomization_files,
    load_manifest,
)
from testkit.tfjob_cli import TFJOB
from tfjob.core.trainjob import plan as trainjob_plan

TFJOB_PATH = "/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs"


def tfjob(name: str, **spec: Any) -> dict[str, Any]:
    """A minimal valid TFJob; ``spec`` keys override or add to the defaults."""
    worker = helpers.replica(2, "OnFailure", [helpers.container("tensorflow/tensorflow:2.16.1")])
    return helpers.tfjob(name, None, {"Worker": worker}, **spec)


def create(crd: Any, kube: Client, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = kube.create(crd.from_dict(body), namespace=namespace).to_dict()
    return created


def rejection(crd: Any, kube: Client, namespace: str, body: dict[str, Any]) -> str:
    """The API server's message refusing ``body``; fails the test if it is accepted."""
    with pytest.raises(ApiError) as refused:
        kube.create(crd.from_dict(body), namespace=namespace)
    assert refused.value.status.code == 422, refused.value.status
    return str(refused.value.status.message)


@pytest.fixture(scope="module")
def installed(kube: Client) -> Iterator[list[Any]]:
    """Everything in manifests/base, applied in kustomization order (each file as it
    is, not as kustomize renders it). The Deployment goes afterwards: its image and
    env as the raw file has them would otherwise conflict with the README's
    `kubectl apply -k` of the same Deployment later in the session."""
    applied = []
    for path in kustomization_files():
        applied += apply_documents(kube, load_manifest(path))
    yield applied
    with contextlib.suppress(ApiError):
        kube.delete(Deployment, "tfjob-operator", namespace="tfjob-system")


@pytest.fixture(scope="module")
def operator_client(control_plane: ControlPlane, installed: list[Any]) -> Iterator[Client]:
    """A client authenticated as the operator's ServiceAccount; RBAC applies."""
    client = Client(KubeConfig.from_file(control_plane.operator_kubeconfig_path))
    yield client
    client.close()


# -- the files ---------------------------------------------------------------------------


def test_kustomization_lists_every_manifest_and_nothing_else() -> None:
    """A file missing from kustomization.yaml is silently not installed by `apply -k`."""
    listed = {p.name for p in kustomization_files()}
    present = {p.name for p in MANIFESTS_BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present
    assert {"crd.yaml", "rbac.yaml", "service-account.yaml", "deployment.yaml"} <= listed


def test_every_manifest_applies_and_is_stored(kube: Client, installed: list[Any]) -> None:
    for path in kustomization_files():
        for doc in load_manifest(path):
            meta = doc["metadata"]
            obj = next(
                o for o in installed if o.kind == doc["kind"] and o.metadata.name == meta["name"]
            )
            assert obj.metadata.uid, f"{path.name}: {doc['kind']}/{meta['name']} not stored"
            assert obj.metadata.namespace == meta.get("namespace")


# -- the CRD ---------------------------------------------------------------------------


def test_crd_is_established_with_upstream_names(kube: Client, crd_installed: Any) -> None:
    crd = kube.get(CustomResourceDefinition, "tfjobs.kubeflow.org")
    names = crd.spec.names
    assert (crd.spec.group, crd.spec.scope) == ("kubeflow.org", "Namespaced")
    assert (names.kind, names.listKind, names.plural, names.singular) == (
        "TFJob",
        "TFJobList",
        "tfjobs",
        "tfjob",
    )
    assert not names.shortNames
    [version] = crd.spec.versions
    assert (version.name, version.served, version.storage) == ("v1", True, True)
    subresources = version.subresources.to_dict()
    assert subresources == {"status": {}}  # status only: no scale subresource
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)


def test_printer_columns_show_the_last_condition_type(
    control_plane: ControlPlane, kube: Client, crd_installed: Any, namespace: str
) -> None:
    """`kubectl get tfjobs` shows State = the type of the last condition, and Age."""
    crd = kube.get(CustomResourceDefinition, "tfjobs.kubeflow.org")
    columns = {c.name: (c.jsonPath, c.type) for c in crd.spec.versions[0].additionalPrinterColumns}
    assert columns == {
        "State": (".status.conditions[-1:].type", "string"),
        "Age": (".metadata.creationTimestamp", "date"),
    }

    create(crd_installed, kube, namespace, tfjob("shown"))
    now = "2026-01-01T00:00:00Z"
    conditions = [
        {"type": "Created", "status": "True", "lastUpdateTime": now, "lastTransitionTime": now},
        {"type": "Running", "status": "False", "lastUpdateTime": now, "lastTransitionTime": now},
        {"type": "Failed", "status": "True", "lastUpdateTime": now, "lastTransitionTime": now},
    ]
    kube.patch(
        crd_installed.Status,
        "shown",
        {"status": {"conditions": conditions}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    # The server renders the table kubectl prints.
    status, table = control_plane.request(
        "GET",
        TFJOB_PATH.format(ns=namespace) + "/shown",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
    )
    assert status == 200, table
    headers = [c["name"] for c in table["columnDefinitions"]]
    assert headers == ["Name", "State", "Age"]
    assert table["rows"][0]["cells"][:2] == ["shown", "Failed"]


def test_run_policy_is_always_stored(kube: Client, crd_installed: Any, namespace: str) -> None:
    """Kubeflow's SDK cannot read a TFJob without spec.runPolicy, so the CRD defaults it."""
    stored = create(crd_installed, kube, namespace, tfjob("no-run-policy"))
    assert stored["spec"]["runPolicy"] == {"suspend": False}
    # And as read back, not just as returned by the create.
    again = kube.get(crd_installed, "no-run-policy", namespace=namespace).to_dict()
    assert again["spec"]["runPolicy"] == {"suspend": False}

    explicit = create(
        crd_installed,
        kube,
        namespace,
        tfjob("with-run-policy", runPolicy={"cleanPodPolicy": "All", "backoffLimit": 3}),
    )
    assert explicit["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All",
        "backoffLimit": 3,
        "suspend": False,
    }
    # Upstream's in-memory defaults are not persisted: no cleanPodPolicy, no replicas.
    assert "cleanPodPolicy" not in stored["spec"]["runPolicy"]


def test_unknown_restart_policy_is_refused_naming_the_field(
    kube: Client, crd_installed: Any, namespace: str
) -> None:
    body = tfjob("bad-restart")
    body["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    message = rejection(crd_installed, kube, namespace, body)
    assert "spec.tfReplicaSpecs.Worker.restartPolicy" in message
    assert '"Sometimes"' in message and '"ExitCode"' in message


def test_schema_refuses_bad_values(kube: Client, crd_installed: Any, namespace: str) -> None:
    no_replicas = tfjob("no-specs")
    del no_replicas["spec"]["tfReplicaSpecs"]
    assert "spec.tfReplicaSpecs: Required value" in rejection(
        crd_installed, kube, namespace, no_replicas
    )

    bad_clean = tfjob("bad-clean", runPolicy={"cleanPodPolicy": "Sometimes"})
    assert "spec.runPolicy.cleanPodPolicy" in rejection(crd_installed, kube, namespace, bad_clean)

    bad_quantity = tfjob(
        "bad-quantity", runPolicy={"schedulingPolicy": {"minResources": {"cpu": "lots"}}}
    )
    assert "minResources" in rejection(crd_installed, kube, namespace, bad_quantity)

    bad_type = tfjob("bad-type", runPolicy={"backoffLimit": "three"})
    assert "spec.runPolicy.backoffLimit" in rejection(crd_installed, kube, namespace, bad_type)


def test_scheduling_policy_accepts_quantities(
    kube: Client, crd_installed: Any, namespace: str
) -> None:
    policy = {
        "minAvailable": 3,
        "queue": "research",
        "minResources": {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": "1"},
        "priorityClass": "high",
        "scheduleTimeoutSeconds": 60,
    }
    stored = create(
        crd_installed, kube, namespace, tfjob("gang", runPolicy={"schedulingPolicy": policy})
    )
    assert stored["spec"]["runPolicy"]["schedulingPolicy"] == policy


def test_queue_is_immutable(kube: Client, crd_installed: Any, namespace: str) -> None:
    create(
        crd_installed,
        kube,
        namespace,
        tfjob("queued", runPolicy={"schedulingPolicy": {"queue": "research"}}),
    )
    with pytest.raises(ApiError) as refused:
        kube.patch(
            crd_installed,
            "queued",
            {"spec": {"runPolicy": {"schedulingPolicy": {"queue": "production"}}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
    assert refused.value.status.code == 422
    assert "spec.runPolicy.schedulingPolicy.queue is immutable" in refused.value.status.message

    # The rule is about the queue only: other changes, and an unchanged queue, pass.
    updated = kube.patch(
        crd_installed,
        "queued",
        {"spec": {"runPolicy": {"backoffLimit": 5, "schedulingPolicy": {"queue": "research"}}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    ).to_dict()
    assert updated["spec"]["runPolicy"]["backoffLimit"] == 5


def test_spec_managed_by_is_kept_and_immutable(
    kube: Client, crd_installed: Any, namespace: str
) -> None:
    """spec.managedBy (tfjob's extension, where Kueue's MultiKueue reads it) is
    stored, not pruned; once a job exists it can be neither changed, removed nor
    added, so a job cannot slip between controllers; and it has a label's length."""
    mk = "kueue.x-k8s.io/multikueue"
    stored = create(crd_installed, kube, namespace, tfjob("handed", managedBy=mk))
    assert stored["spec"]["managedBy"] == mk
    create(crd_installed, kube, namespace, tfjob("plain"))
    for name, spec in (
        ("handed", {"managedBy": "example.com/other"}),
        ("handed", {"managedBy": None}),
        ("plain", {"managedBy": mk}),
    ):
        with pytest.raises(ApiError) as refused:
            kube.patch(
                crd_installed,
                name,
                {"spec": spec},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        assert refused.value.status.code == 422, (name, spec)
        assert "spec.managedBy is immutable" in refused.value.status.message, (name, spec)
    too_long = tfjob("long", managedBy="example.com/" + "x" * 60)
    assert "spec.managedBy" in rejection(crd_installed, kube, namespace, too_long)


def test_template_round_trips_and_unknown_fields_are_pruned(
    kube: Client, crd_installed: Any, namespace: str
) -> None:
    """Pod templates carry Kubernetes' PodTemplateSpec schema: what a user wrote is
    stored as written (no defaults added), and a field unknown to the API server's
    pod schema is dropped like any unknown field of spec (`kubectl apply` refuses
    both, with its strict field validation)."""
    body = tfjob("verbatim", notAField=True)
    template = body["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    template["metadata"] = {"annotations": {"sidecar.istio.io/inject": "false"}}
    template["spec"]["containers"][0]["resources"] = {"limits": {"memory": "1Gi", "cpu": 2}}
    template["spec"]["nodeSelector"] = {"disk": "ssd"}
    original = copy.deepcopy(template)
    template["spec"]["futurePodField"] = {"nested": [1, "two", {"three": 3.5}]}

    create(crd_installed, kube, namespace, body)
    stored = kube.get(crd_installed, "verbatim", namespace=namespace).to_dict()
    assert stored["spec"]["tfReplicaSpecs"]["Worker"]["template"] == original
    assert "notAField" not in stored["spec"]


def test_status_is_written_only_through_the_subresource(
    kube: Client, crd_installed: Any, namespace: str
) -> None:
    body = tfjob("statusful")
    body["status"] = {"restartCount": 9}
    created = create(crd_installed, kube, namespace, body)
    assert "status" not in created or not created["status"]  # dropped on create

    status = {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "TFJobCreated",
                "message": "TFJob statusful is created.",
                "lastUpdateTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
        "replicaStatuses": {"Worker": {}, "PS": {"active": 1, "failed": 2}},
        "startTime": "2026-01-01T00:00:01Z",
        "restartCount": 3,
    }
    kube.patch(
        crd_installed.Status,
        "statusful",
        {"status": status},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    stored = kube.get(crd_installed, "statusful", namespace=namespace).to_dict()
    assert stored["status"] == status

    # A main-resource update leaves status alone.
    kube.patch(
        crd_installed,
        "statusful",
        {"status": {"restartCount": 0}, "metadata": {"labels": {"touched": "yes"}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    stored = kube.get(crd_installed, "statusful", namespace=namespace).to_dict()
    assert stored["status"]["restartCount"] == 3
    assert stored["metadata"]["labels"] == {"touched": "yes"}


# -- the operator's deployment -----------------------------------------------------------


def test_deployment_runs_the_operator_as_non_root(kube: Client, installed: list[Any]) -> None:
    deployment = kube.get(Deployment, "tfjob-operator", namespace="tfjob-system")
    pod_spec = deployment.spec.template.spec
    [container] = pod_spec.containers
    assert pod_spec.serviceAccountName == "tfjob-operator"
    assert container.image == "tfjob"  # kustomization.yaml's `images:` pins the version
    assert container.args[0] == "operator"
    assert {p.name: p.containerPort for p in container.ports} == {"metrics": 8080, "health": 8081}
    assert "--metrics-port=8080" in container.args and "--health-port=8081" in container.args
    assert "--leader-elect" in container.args  # rolling updates overlap two pods
    assert container.livenessProbe.httpGet.path == "/healthz"
    assert container.readinessProbe.httpGet.path == "/readyz"
    assert {container.livenessProbe.httpGet.port, container.readinessProbe.httpGet.port} == {
        "health"
    }
    assert pod_spec.securityContext.runAsNonRoot is True


def test_deployment_command_line_is_accepted_by_tfjob_operator() -> None:
    """A flag the CLI does not know would crash-loop the operator's pod.

    click parses every argument before it acts on the eager ``--help``, so an unknown
    flag fails here exactly as it would in the container.
    """
    [deployment] = load_manifest(MANIFESTS_BASE / "deployment.yaml")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["tfjob"]
    run = subprocess.run(
        [*TFJOB, *container["args"], "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "Usage: " in run.stdout and " operator " in run.stdout


def test_operator_pod_passes_restricted_pod_security(kube: Client, installed: list[Any]) -> None:
    """tfjob-system enforces the `restricted` Pod Security level; the operator's pod
    must be admitted there (checked by the real admission plugin, dry-run)."""
    deployment = kube.get(Deployment, "tfjob-operator", namespace="tfjob-system")
    template = deployment.spec.template
    pod = Pod(metadata=ObjectMeta(name="operator-probe", labels=template.metadata.labels))
    pod.spec = template.spec
    kube.create(pod, namespace="tfjob-system", dry_run=True)

    privileged = copy.deepcopy(pod)
    privileged.spec.containers[0].securityContext.allowPrivilegeEscalation = True
    with pytest.raises(ApiError) as refused:
        kube.create(privileged, namespace="tfjob-system", dry_run=True)
    assert "restricted" in refused.value.status.message


# -- RBAC, as the operator ---------------------------------------------------------------


def test_cluster_role_grants_no_secrets_and_no_wildcards(
    kube: Client, installed: list[Any]
) -> None:
    role = kube.get(ClusterRole, "tfjob-operator")
    for rule in role.rules:
        assert "*" not in rule.verbs and "*" not in rule.resources, rule
        assert "secrets" not in rule.resources


def test_cluster_role_covers_every_kind_and_its_crd_is_installed(
    kube: Client, installed: list[Any]
) -> None:
    """Each kind tfjob serves has its CRD in the manifests and its grants: jobs read
    and deleted, status written, finalizers set (for blockOwnerDeletion), patched (a
    queued job's suspend, --kueue-integration=external) but never created or
    replaced."""
    from tfjob.frameworks.registry import FRAMEWORKS

    role = kube.get(ClusterRole, "tfjob-operator")
    granted = {
        (resource, verb)
        for rule in role.rules
        if "kubeflow.org" in (rule.apiGroups or [])
        for resource in rule.resources or []
        for verb in rule.verbs
    }
    crds = {o.metadata.name for o in installed if o.kind == "CustomResourceDefinition"}
    for kind in FRAMEWORKS.values():
        plural = kind.plural
        assert f"{plural}.kubeflow.org" in crds, kind.kind
        for verb in ("get", "list", "watch", "delete", "patch"):
            assert (plural, verb) in granted, (plural, verb)
        assert (f"{plural}/status", "update") in granted, plural
        assert (f"{plural}/finalizers", "update") in granted, plural
        assert not {(plural, v) for v in ("create", "update")} & granted, plural


def test_operator_identity_can_do_its_job(
    operator_client: Client, kube: Client, crd_installed: Any, namespace: str
) -> None:
    ops = operator_client
    # Watch and manage replicas.
    assert list(ops.list(Pod, namespace=namespace)) == []
    ops.create(
        Pod(
            metadata=ObjectMeta(name="worker-0"),
            spec={"containers": [{"name": "tensorflow", "image": "tf"}]},  # type: ignore[arg-type]
        ),
        namespace=namespace,
    )
    ops.delete(Pod, "worker-0", namespace=namespace)
    assert list(ops.list(Service, namespace=namespace)) == []
    # Read TFJobs and write their status (but never create them: users do).
    create(crd_installed, kube, namespace, tfjob("owned"))
    assert ops.get(crd_installed, "owned", namespace=namespace).metadata.name == "owned"
    ops.patch(
        crd_installed.Status,
        "owned",
        {"status": {"restartCount": 1}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    with pytest.raises(ApiError) as refused:
        ops.create(crd_installed.from_dict(tfjob("sneaky")), namespace=namespace)
    assert refused.value.status.code == 403
    # Record events.
    ops.create(
        Event.from_dict(
            {
                "metadata": {"name": "owned.1"},
                "involvedObject": {"kind": "TFJob", "name": "owned", "namespace": namespace},
                "reason": "SuccessfulCreatePod",
                "message": "Created pod: owned-worker-0",
                "type": "Normal",
            }
        ),
        namespace=namespace,
    )
    # Leader election, in its own namespace only.
    ops.create(Lease(metadata=ObjectMeta(name="tfjob-operator")), namespace="tfjob-system")
    with pytest.raises(ApiError) as elsewhere:
        ops.create(Lease(metadata=ObjectMeta(name="tfjob-operator")), namespace=namespace)
    assert elsewhere.value.status.code == 403


def test_operator_identity_has_no_grant_the_operator_does_not_use(
    operator_client: Client, kube: Client, crd_installed: Any, namespace: str
) -> None:
    """The operator never patches pods or services, never replaces a TFJob (it only
    patches a queued one's suspend, with --kueue-integration=external), and records
    Events through the core API only: none of that is granted."""
    kube.create(
        Pod(
            metadata=ObjectMeta(name="worker-0"),
            spec={"containers": [{"name": "tensorflow", "image": "tf"}]},  # type: ignore[arg-type]
        ),
        namespace=namespace,
    )
    create(crd_installed, kube, namespace, tfjob("mine"))
    label = {"metadata": {"labels": {"touched": "yes"}}}
    for attempt in (
        lambda: operator_client.patch(
            Pod, "worker-0", label, namespace=namespace, patch_type=PatchType.MERGE
        ),
        lambda: operator_client.replace(
            operator_client.get(crd_installed, "mine", namespace=namespace)
        ),
        lambda: operator_client.create(
            EventsV1Event.from_dict(
                {
                    "metadata": {"name": "mine.1"},
                    "eventTime": "2026-01-01T00:00:00.000000Z",
                    "reportingController": "tfjob-operator",
                    "reportingInstance": "tfjob-operator",
                    "action": "Create",
                    "reason": "SuccessfulCreatePod",
                    "type": "Normal",
                }
            ),
            namespace=namespace,
        ),
    ):
        with pytest.raises(ApiError) as refused:
            attempt()
        assert refused.value.status.code == 403, refused.value.status


def test_cluster_role_grants_the_owned_objects_exactly_what_the_operator_uses() -> None:
    """The objects kinds own besides pods and services (an MPIJob's ServiceAccount,
    Role, RoleBinding and ConfigMap, a PyTorchJob's HPA) get what the operator does
    with them: list and watch (its informers), create, get and update (a take-over,
    the owned fields), delete only for kinds it ever deletes; and pods/exec create,
    which an MPIJob's launcher Role grants (nobody may grant what they lack)."""
    from tfjob.frameworks.registry import FRAMEWORKS

    (role,) = [d for d in load_manifest(MANIFESTS_BASE / "rbac.yaml") if d["kind"] == "ClusterRole"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    used: dict[tuple[str, str], set[str]] = {("", "pods/exec"): {"create"}}
    for kind in FRAMEWORKS.values():
        for owned in kind.owned_kinds:
            verbs = {"get", "list", "watch", "create", "update"}
            if owned.prune or owned.deleted_when_suspended:
                verbs.add("delete")
            used.setdefault((owned.group, owned.plural), set()).update(verbs)
    for kind in trainjob_plan.watched_kinds():  # a TrainJob's ConfigMaps, applied too
        if (kind.group, kind.plural) in used:
            used[(kind.group, kind.plural)].add("patch")
    assert {key: granted.get(key) for key in used} == used


def test_cluster_role_lets_the_trainjob_controller_apply_what_its_plans_write() -> None:
    """Every object a TrainJob's plan writes but its Secret is server-side applied,
    a PATCH (its JobSet, runtime snapshot, MPI hostfile, a coscheduling or Volcano
    PodGroup); its JobSets are watched and deleted past the deadline."""
    (role,) = [d for d in load_manifest(MANIFESTS_BASE / "rbac.yaml") if d["kind"] == "ClusterRole"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    for kind in trainjob_plan.watched_kinds():
        if kind.kind != "Secret":
            assert "patch" in granted.get((kind.group, kind.plural), set()), kind
    assert {"list", "watch", "patch", "delete"} <= granted[("jobset.x-k8s.io", "jobsets")]


def test_operator_identity_can_make_an_mpijob_launchers_objects(
    operator_client: Client, kube: Client, namespace: str
) -> None:
    """With its own identity the operator can create what an MPIJob's launcher needs,
    the Role granting pods/exec included (RBAC refuses a grant its maker lacks), and
    a PyTorchJob's HPA."""
    from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
    from lightkube.resources.core_v1 import ConfigMap, ServiceAccount
    from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

    ops = operator_client
    ops.create(ServiceAccount(metadata=ObjectMeta(name="pi-launcher")), namespace=namespace)
    ops.create(
        Role.from_dict(
            {
                "metadata": {"name": "pi-launcher"},
                "rules": [
                    {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
                    {
                        "verbs": ["create"],
                        "apiGroups": [""],
                        "resources": ["pods/exec"],
                        "resourceNames": ["pi-worker-0"],
                    },
                ],
            }
        ),
        namespace=namespace,
    )
    ops.create(
        RoleBinding.from_dict(
            {
                "metadata": {"name": "pi-launcher"},
                "subjects": [
                    {"kind": "ServiceAccount", "name": "pi-launcher", "namespace": namespace}
                ],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "pi-launcher",
                },
            }
        ),
        namespace=namespace,
    )
    config = ops.create(
        ConfigMap(metadata=ObjectMeta(name="pi-config"), data={"hostfile": ""}), namespace=namespace
    )
    config.data = {"hostfile": "pi-worker-0 slots=1\n"}
    ops.replace(config, namespace=namespace)
    hpa = HorizontalPodAutoscaler.from_dict(
        {
            "metadata": {"name": "elastic"},
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "elastic",
                },
                "maxReplicas": 3,
            },
        }
    )
    ops.create(hpa, namespace=namespace)
    assert {m.metadata.name for m in ops.list(HorizontalPodAutoscaler, namespace=namespace)} == {
        "elastic"
    }
    ops.delete(HorizontalPodAutoscaler, "elastic", namespace=namespace)
    with pytest.raises(ApiError) as refused:  # never deleted: the garbage collector does
        ops.delete(ConfigMap, "pi-config", namespace=namespace)
    assert refused.value.status.code == 403


def test_operator_identity_cannot_read_secrets(
    operator_client: Client, kube: Client, namespace: str
) -> None:
    kube.create(
        Secret(metadata=ObjectMeta(name="creds"), stringData={"k": "v"}), namespace=namespace
    )
    for attempt in (
        lambda: operator_client.get(Secret, "creds", namespace=namespace),
        lambda: list(operator_client.list(Secret, namespace=namespace)),
    ):
        with pytest.raises(ApiError) as refused:
            attempt()
        assert refused.value.status.code == 403
        assert OPERATOR_USER in refused.value.status.message
