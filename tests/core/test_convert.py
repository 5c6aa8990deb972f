"""`convert`: every v1 example becomes a TrainJob (and runtime) Trainer's CRDs accept,
whose JobSet, as tfjob's TrainJob core makes it, runs each v1 pod's command and image
with an equivalent env; and what has no TrainJob form is named, with its path."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import fast_yaml
from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.training_runtime import decode_runtime
from tfjob.api.trainjob import decode_trainjob
from tfjob.core.convert import Conversion, convert
from tfjob.core.convert.env import address_rewriter
from tfjob.core.objects import desired_objects
from tfjob.core.settings import Settings
from tfjob.core.trainjob.plan import ApplyObject, Observed
from tfjob.core.trainjob.reconcile import reconcile_trainjob
from tfjob.frameworks.load import load_jobs
from tfjob.frameworks.mlpolicy.base import KeyPair
from tfjob.frameworks.registry import with_defaults

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "manifests" / "overlays" / "trainer-runtimes"
EXAMPLES = sorted(
    p
    for p in [*REPO.glob("examples/**/*.yaml"), *REPO.glob("tests/fixtures/*.yaml")]
    if "kind: " in p.read_text() and "kubeflow.org/v1\n" in p.read_text()
)
INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
#: An MPI runtime's ssh key pair (its Secret's content is not compared).
KEY_PAIR = KeyPair(private_pem=b"private", public_authorized_key=b"public")


def expand(value: str, known: dict[str, str]) -> str:
    return re.sub(r"\$\((\w+)\)", lambda m: known.get(m[1], m[0]), value)


def load(text: str) -> Any:
    [job] = load_jobs(text, "job.yaml", require_image=True)
    return job


def converted(path: Path) -> list[tuple[Any, Conversion]]:
    jobs = load_jobs(path.read_text(), str(path), require_image=True)
    return [(job, convert(job)) for job in jobs]


def test_every_kind_has_an_example() -> None:
    kinds = {job.kind for p in EXAMPLES for job, _ in converted(p)}
    assert kinds == {"TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_trainer_crds_accept_the_conversion(path: Path) -> None:
    for _, conversion in converted(path):
        assert schema_rules.check(conversion.trainjob, schema_rules.TRAINJOB_SCHEMA) == []
        if conversion.runtime is not None:
            errors = schema_rules.check(conversion.runtime, schema_rules.TRAININGRUNTIME_SCHEMA)
            assert errors == []


# -- the JobSet tfjob's TrainJob core makes, pod by pod, against the v1 pods ----------


def jobset_for(conversion: Conversion) -> dict[str, Any]:
    trainjob = decode_trainjob(conversion.trainjob)
    trainjob.metadata.uid = "uid-1"
    if conversion.runtime is not None:
        runtime = decode_runtime(conversion.runtime)
    else:
        name = conversion.trainjob["spec"]["runtimeRef"]["name"]
        runtime = decode_runtime(fast_yaml.load((SHIPPED / f"{name}.yaml").read_text()))
    plan = reconcile_trainjob(
        trainjob, runtime, Observed(), datetime(2026, 1, 1, tzinfo=UTC), KEY_PAIR
    )
    [jobset] = [
        a.manifest for a in plan.actions if isinstance(a, ApplyObject) and a.kind.kind == "JobSet"
    ]
    return jobset


def jobset_pods(jobset: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """(replicated job, completion index) -> the pod's spec, with each env var read
    from the completion index resolved as the kubelet resolves it."""
    pods = {}
    for job in jobset["spec"]["replicatedJobs"]:
        spec = job["template"]["spec"]
        assert spec["parallelism"] == spec["completions"]
        for k in range(spec["parallelism"]):
            pod = fast_yaml.load(yaml.safe_dump(spec["template"]["spec"]))
            for container in pod["containers"]:
                known: dict[str, str] = {}
                for var in container.get("env") or []:
                    ref = (var.get("valueFrom") or {}).get("fieldRef") or {}
                    if ref.get("fieldPath") == INDEX_PATH:
                        var.pop("valueFrom")
                        var["value"] = str(k)
                    elif "value" in var:  # `$(V)` of an earlier V, as the kubelet expands it
                        var["value"] = expand(var["value"], known)
                    if "value" in var:
                        known[var["name"]] = var["value"]
            pods[(job["name"], k)] = pod
    return pods


def v1_pods(job: Any) -> list[tuple[str, int, dict[str, Any]]]:
    """(type, index, pod spec) of every pod the v1 operator would create."""
    return [
        (
            o["metadata"]["labels"][c.LABEL_REPLICA_TYPE],
            int(o["metadata"]["labels"].get(c.LABEL_REPLICA_INDEX, 0)),
            o["spec"],
        )
        for o in desired_objects(with_defaults(job), Settings())
        if o["kind"] == "Pod"
    ]


def where_each_pod_goes(job: Any, jobset: dict[str, Any]) -> dict[tuple[str, int], Any]:
    """A v1 pod -> the JobSet pod it becomes: node k in master-first order on a node
    runtime, an MPIJob's Worker i node i beside its launcher, else the same index in
    the replicated job named after its type."""
    pods = v1_pods(job)
    if job.kind == "MPIJob" and any(j["name"] == "node" for j in jobset["spec"]["replicatedJobs"]):
        return {(t, i): ("node" if t == "worker" else t, i) for t, i, _ in pods}
    if any(j["name"] == "node" for j in jobset["spec"]["replicatedJobs"]):
        return {(t, i): ("node", k) for k, (t, i, _) in enumerate(pods)}
    return {(t, i): (t, i) for t, i, _ in pods}


#: An MPIJob's launcher reaches its Workers over ssh in its TrainJob, not by kubexec.sh:
#: the v1 variables naming kubexec.sh are not set (ssh is Open MPI's and Intel MPI's
#: default), and the MPI runtime's are, besides the hostfile's path, the same as v1's.
MPI_KUBEXEC_ENV = ("OMPI_MCA_plm_rsh_agent", "I_MPI_HYDRA_BOOTSTRAP", "I_MPI_HYDRA_BOOTSTRAP_EXEC")
#: What a Worker without a command runs: v1's `sleep 365d` (kubectl exec reaches it)
#: becomes sshd, as in Trainer's MPI runtimes.
MPI_SSHD = {"command": ["/usr/sbin/sshd"], "args": ["-De", "-f", "/home/mpiuser/.sshd_config"]}


def as_converted(job: Any, replica_type: str, old: dict[str, Any]) -> dict[str, Any]:
    """The v1 pod's training container as its TrainJob's should be: the same but for
    an MPIJob's ssh in place of kubexec.sh (and, for the other kinds, nothing)."""
    if job.kind != "MPIJob":
        return old
    want = dict(old)
    if replica_type == "worker":
        template = job.spec.mpi_replica_specs["Worker"].template["spec"]["containers"][0]
        if not template.get("command"):
            want.update(MPI_SSHD)
        return want
    slots = str(job.spec.slots_per_worker or 1)
    env = [v for v in old.get("env") or [] if v["name"] not in MPI_KUBEXEC_ENV]
    assert [v["value"] for v in env if v["name"] == "OMPI_MCA_orte_default_hostfile"] == [
        "/etc/mpi/hostfile"
    ]
    env += [
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": slots},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
    ]
    want["env"] = env
    return want


def expected_value(value: str, job: Any, where: dict[tuple[str, int], Any], own: str) -> str:
    """A v1 value with each v1 pod name (and its `.ns.svc` suffix) replaced by the
    JobSet pod's `<job>-<rjob>-0-<k>.<job>`, and `$(POD_IP_DUMMY)` by the pod itself."""
    name = job.metadata.name
    for (t, i), (rjob, k) in sorted(where.items(), key=lambda e: -len(f"{e[0][0]}{e[0][1]}")):
        value = re.sub(
            rf"\b{name}-{t}-{i}(\.[a-z0-9-]*\.svc)?\b(?!-)", f"{name}-{rjob}-0-{k}.{name}", value
        )
    return value.replace("$(POD_IP_DUMMY)", own)


def container_of(pod: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return next(c for c in pod["containers"] if c["name"] in names)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_each_pod_runs_the_same_command_and_image_with_an_equivalent_env(path: Path) -> None:
    for job, conversion in converted(path):
        jobset = jobset_for(conversion)
        pods = jobset_pods(jobset)
        where = where_each_pod_goes(job, jobset)
        node = any(rjob == "node" for rjob, _ in where.values())
        lost = {
            m.group(1) for loss in conversion.losses if (m := re.search(r"env\[(\w+)\]", loss.path))
        }
        ports = {"2222", "23456", "6666", "9999", "36543"}
        container_name = {"TFJob": "tensorflow", "PyTorchJob": "pytorch", "JAXJob": "jax"}.get(
            job.kind, job.kind.removesuffix("Job").lower()
        )
        for t, i, v1 in v1_pods(job):
            rjob, k = where[(t, i)]
            own = f"{job.metadata.name}-{rjob}-0-{k}.{job.metadata.name}"
            old = next(
                c for c in v1["containers"] if c["name"] in (container_name, "mpi", "xgboost")
            )
            new = container_of(pods[(rjob, k)], ("node", old["name"]))
            old = as_converted(job, t, old)
            if job.kind == "MPIJob":
                assert not set(MPI_KUBEXEC_ENV) & {v["name"] for v in new.get("env") or []}
            assert new["image"] == old["image"]
            assert new.get("command") == old.get("command")
            assert new.get("args") == old.get("args")
            assert new.get("workingDir") == old.get("workingDir")
            got = {v["name"]: v for v in new.get("env") or []}
            for var in old.get("env") or []:
                if var["name"] in lost and job.kind != "MPIJob":
                    continue
                want = dict(var)
                if "value" in want:
                    want["value"] = expected_value(want["value"], job, where, own)
                    if node and var["name"].endswith("_PORT") and want["value"] in ports:
                        want["value"] = "29500"  # the rendezvous port the runtime opens
                assert got.get(var["name"]) == want, (t, i, var["name"])


def test_ddp_ranks_and_master_as_trainer_nodes() -> None:
    [(_, conversion)] = converted(REPO / "examples/pytorch/ddp.yaml")
    pods = jobset_pods(jobset_for(conversion))
    assert sorted(pods) == [("node", 0), ("node", 1), ("node", 2)]
    for k in range(3):
        env = {v["name"]: v.get("value") for v in pods[("node", k)]["containers"][0]["env"]}
        assert env["RANK"] == env["PET_NODE_RANK"] == str(k)
        assert env["WORLD_SIZE"] == env["PET_NNODES"] == "3"
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "pytorch-ddp-node-0-0.pytorch-ddp"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"


# -- which runtime ---------------------------------------------------------------------

PLAIN_PYTORCH = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: plain, namespace: team, labels: {kueue.x-k8s.io/queue-name: q}}
spec:
  runPolicy: {activeDeadlineSeconds: 600, suspend: true}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.local/train:1
              command: [torchrun, train.py]
              resources: {limits: {nvidia.com/gpu: 1}}
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.local/train:1
              command: [torchrun, train.py]
              resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_a_template_the_trainjob_can_say_runs_on_the_shipped_runtime() -> None:
    conversion = convert(load(PLAIN_PYTORCH))
    assert conversion.runtime is None
    # the one difference: a Job's default of 6 retries, where v1 restarts without limit
    assert paths(conversion) == ["spec.pytorchReplicaSpecs.Master.restartPolicy"]
    spec = conversion.trainjob["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["trainer"]["numNodes"] == 4
    assert spec["trainer"]["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 1}}
    assert spec["suspend"] is True
    assert spec["activeDeadlineSeconds"] == 600
    assert conversion.trainjob["metadata"] == {
        "name": "plain",
        "namespace": "team",
        "labels": {"kueue.x-k8s.io/queue-name": "q"},
    }
    # the runtime's own PET_* are not repeated (Trainer refuses them in the TrainJob)
    assert not [v for v in spec["trainer"]["env"] if v["name"].startswith("PET_")]


def test_a_per_replica_image_gets_a_runtime_of_its_own() -> None:
    text = PLAIN_PYTORCH.replace("image: registry.local/train:1", "image: registry.local/w:1", 1)
    conversion = convert(load(text))
    assert conversion.runtime is not None
    assert conversion.trainjob["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    jobs = conversion.runtime["spec"]["template"]["spec"]["replicatedJobs"]
    images = {
        j["name"]: j["template"]["spec"]["template"]["spec"]["containers"][0]["image"] for j in jobs
    }
    assert images == {"master": "registry.local/w:1", "worker": "registry.local/train:1"}
    # the Master decides, as in the v1 job
    success = conversion.runtime["spec"]["template"]["spec"]["successPolicy"]
    assert success == {"operator": "All", "targetReplicatedJobs": ["master"]}


# -- what is lost ------------------------------------------------------------------------


def paths(conversion: Conversion) -> list[str]:
    return [loss.path for loss in conversion.losses]


def test_parameter_server_losses_name_each_field() -> None:
    [(_, conversion)] = converted(REPO / "examples/tensorflow/parameter_server.yaml")
    assert paths(conversion) == [
        "spec.runPolicy.cleanPodPolicy",
        "spec.tfReplicaSpecs.PS.restartPolicy",
        "spec.tfReplicaSpecs.Worker.restartPolicy",
    ]  # TF_CONFIG is not lost: the runtime is tensorflow's, which gives each pod its own
    assert conversion.runtime is not None
    labels = conversion.runtime["metadata"]["labels"]
    assert labels == {"trainer.kubeflow.org/framework": "tensorflow"}
    jobs = conversion.runtime["spec"]["template"]["spec"]["replicatedJobs"]  # type: ignore[index]
    ps = next(j for j in jobs if j["name"] == "ps")["template"]["spec"]
    assert ps["template"]["spec"]["restartPolicy"] == "Never"
    assert ps["backoffLimit"] == 0


def test_a_pod_name_read_from_the_pod_becomes_its_stable_host_name() -> None:
    # A TFJob's pod is `<job>-<type>-<i>` in every run, which the cluster example's
    # program names its checkpoint folder by; a Job's pod name ends in a random suffix.
    [(_, conversion)] = converted(REPO / "examples/tensorflow/cluster/parameter_server.yaml")
    assert [p for p in paths(conversion) if "TFJOB_POD_NAME" in p] == [
        f"spec.tfReplicaSpecs.{t}.env[TFJOB_POD_NAME]"
        for t in ("Chief", "Evaluator", "PS", "Worker")
    ]
    pods = jobset_pods(jobset_for(conversion))
    assert len(pods) == 6
    for (rjob, k), pod in pods.items():
        env = {v["name"]: v.get("value") for v in container_of(pod, ("node",))["env"]}
        assert env["TFJOB_POD_NAME"] == f"tf-parameter-server-{rjob}-0-{k}"
        assert env["JOB_COMPLETION_INDEX"] == str(k)  # declared: Kubernetes adds no other
        assert list(env).index("JOB_COMPLETION_INDEX") < list(env).index("TFJOB_POD_NAME")


ELASTIC = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: elastic}
spec:
  runPolicy: {ttlSecondsAfterFinished: 60, backoffLimit: 3, schedulingPolicy: {minAvailable: 2}}
  nprocPerNode: auto
  elasticPolicy: {minReplicas: 1, maxReplicas: 4, rdzvBackend: c10d}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - {name: pytorch, image: registry.local/train:1, command: [torchrun, train.py]}
"""


def test_run_policy_and_kind_fields_without_a_trainjob_form_are_lost() -> None:
    conversion = convert(load(ELASTIC))
    assert conversion.runtime is None  # torch-distributed still serves it
    assert paths(conversion) == [
        "spec.runPolicy.ttlSecondsAfterFinished",
        "spec.runPolicy.backoffLimit",
        "spec.runPolicy.schedulingPolicy",
        "spec.elasticPolicy",
        "spec.nprocPerNode",
        # what the runtime sets instead: the CPU count, the fixed node count 2
        "spec.pytorchReplicaSpecs.env[PET_NPROC_PER_NODE]",
        "spec.pytorchReplicaSpecs.env[PET_NNODES]",
        "spec.pytorchReplicaSpecs.Worker.restartPolicy",
    ]
    env = {v["name"]: v for v in conversion.trainjob["spec"]["trainer"]["env"]}
    # the rendezvous env has a TrainJob form: Worker 0 is node 0 (its port as in v1)
    assert env["PET_RDZV_ENDPOINT"]["value"] == "elastic-node-0-0.elastic:23456"
    assert env["PET_RDZV_BACKEND"]["value"] == "c10d"


def test_multikueue_is_kept_and_a_v1_only_manager_is_lost() -> None:
    kept = convert(
        load(PLAIN_PYTORCH.replace("suspend: true", "managedBy: kueue.x-k8s.io/multikueue"))
    )
    assert kept.trainjob["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert "spec.runPolicy.managedBy" not in paths(kept)
    lost = convert(
        load(PLAIN_PYTORCH.replace("suspend: true", "managedBy: kubeflow.org/training-operator"))
    )
    assert "managedBy" not in lost.trainjob["spec"]
    assert "spec.runPolicy.managedBy" in paths(lost)


def test_an_mpijob_becomes_an_mpi_runtime_reached_over_ssh() -> None:
    [(_, conversion)] = converted(REPO / "examples/mpi/job.yaml")
    assert conversion.runtime is not None
    assert conversion.runtime["spec"]["mlPolicy"] == {
        "mpi": {
            "numProcPerNode": 2,  # slotsPerWorker
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runLauncherAsNode": False,  # the launcher has no GPU: not in the hostfile
        }
    }
    assert paths(conversion) == [
        "spec.runPolicy.cleanPodPolicy",
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].securityContext.runAsUser",
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].securityContext.runAsUser",
        "spec.mpiReplicaSpecs.Launcher.env[OMPI_MCA_plm_rsh_agent]",
        "spec.mpiReplicaSpecs.Launcher.env[I_MPI_HYDRA_BOOTSTRAP]",
        "spec.mpiReplicaSpecs.Launcher.env[I_MPI_HYDRA_BOOTSTRAP_EXEC]",
    ]
    # The controller's objects: the hostfile of the Workers' slots, and the ssh key.
    trainjob = decode_trainjob(conversion.trainjob)
    trainjob.metadata.uid = "uid-1"
    plan = reconcile_trainjob(
        trainjob,
        decode_runtime(conversion.runtime),
        Observed(),
        datetime(2026, 1, 1, tzinfo=UTC),
        KEY_PAIR,
    )
    made = {
        (a.kind.kind, a.manifest["metadata"]["name"]): a.manifest
        for a in plan.actions
        if isinstance(a, ApplyObject)
    }
    hostfile = made[("ConfigMap", "mpi-regression-mpi-hostfile")]["data"]["hostfile"]
    assert hostfile == (
        "mpi-regression-node-0-0.mpi-regression slots=2\n"
        "mpi-regression-node-0-1.mpi-regression slots=2\n"
    )


MPI_HOROVOD = """
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {name: hvd}
spec:
  slotsPerWorker: 1
  mainContainer: trainer
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
            - name: trainer
              image: registry.local/hvd:1
              command: [horovodrun, --host-discovery-script, /etc/mpi/discover_hosts.sh,
                        -H, "hvd-worker-0:1,hvd-worker-1:1", python3, train.py]
              env: [{name: I_MPI_HYDRA_BOOTSTRAP, value: ssh}]
              resources: {limits: {nvidia.com/gpu: 1}}
    Worker:
      replicas: 2
      template:
        spec:
          securityContext: {runAsUser: 2000}
          containers:
            - name: trainer
              image: registry.local/hvd:1
              command: [python3, serve.py]
              resources: {limits: {nvidia.com/gpu: 4}}
"""


def test_what_an_mpijob_says_that_ssh_cannot_is_named() -> None:
    conversion = convert(load(MPI_HOROVOD))
    assert conversion.runtime is not None
    assert conversion.runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] is True
    launcher = "spec.mpiReplicaSpecs.Launcher"
    worker = "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]"
    assert paths(conversion) == [
        "spec.mainContainer",
        f"{launcher}.template.spec.containers[0].securityContext.runAsUser",
        f"{launcher}.template.spec.containers[0].command",  # discover_hosts.sh, v1 pods
        f"{worker}.securityContext.runAsUser",  # 2000: not the key's user
        f"{worker}.command",  # not sshd
        "spec.mpiReplicaSpecs.Launcher.env[OMPI_MCA_plm_rsh_agent]",
        # I_MPI_HYDRA_BOOTSTRAP is the template's own: kept, not lost
        "spec.mpiReplicaSpecs.Launcher.env[I_MPI_HYDRA_BOOTSTRAP_EXEC]",
        "spec.slotsPerWorker",  # 1 with 4 GPUs: the runtime gives 4 slots
        launcher,  # a GPU launcher is a node, but last in the hostfile
    ]
    found = next(
        str(loss) for loss in conversion.losses if loss.path.endswith("containers[0].command")
    )
    assert "/etc/mpi/discover_hosts.sh, hvd-worker-0, hvd-worker-1" in found


def test_addresses_are_rewritten_whole_names_only() -> None:
    rewrite = address_rewriter("j", {("Worker", 1): "j-worker-0-1.j", ("Worker", 10): "X"})
    assert rewrite("j-worker-1:2222,j-worker-10.ns.svc.cluster.local:2222,xj-worker-1") == (
        "j-worker-0-1.j:2222,X:2222,xj-worker-1"
    )


def test_a_sidecar_gets_the_kinds_env_as_the_v1_operator_gives_it() -> None:
    text = PLAIN_PYTORCH.replace(
        "              resources: {limits: {nvidia.com/gpu: 1}}\n",
        "              resources: {limits: {nvidia.com/gpu: 1}}\n"
        "            - {name: sidecar, image: registry.local/side:1}\n",
    )
    conversion = convert(load(text))
    pods = jobset_pods(jobset_for(conversion))
    for k in range(4):
        sidecar = container_of(pods[("node", k)], ("sidecar",))
        env = {v["name"]: v["value"] for v in sidecar["env"]}
        assert env["RANK"] == str(k)
        assert env["MASTER_ADDR"] == "plain-node-0-0.plain"
