"""TrainJobs train for real across pods on the node, all at once in one namespace,
through the operator from its image, JobSet v0.12.0's real controller and webhooks
(testkit/node_jobset.py), the node's Job controller, kubelet and containerd. Every
rendezvous address is a JobSet host name (`<trainjob>-<job>-0-<i>.<trainjob>`) that
CoreDNS resolves through the JobSet's headless Service. Two groups:

- Examples of examples/trainjob with the host's frameworks: torch DDP on Trainer's
  `torch-distributed` and Paddle collective on tfjob's `paddle-distributed`, each with
  2 nodes, and TensorFlow's ParameterServerStrategy on tfjob's `tensorflow-distributed`
  (a chief, its 2 PS, 1 worker, an evaluator; the TrainJob ends with its chief, and
  JobSet removes the PS and worker, which serve until stopped).
- The TensorFlow cluster examples (examples/tensorflow/cluster/: MultiWorkerMirrored
  with 2 workers, with a chief and 2 workers, and the parameter-server job with its
  evaluator and model volume) as `tfjob convert` prints them, each on the
  TrainingRuntime of its own it gets, in the examples' image (TensorFlow inside), as
  a user moving to Trainer v2 would apply them. They must reach what the TFJobs reach
  in test_tensorflow.py: the same checks (tf_results.py), at JobSet host names.

The workers-only TrainJob of examples/trainjob/tensorflow.yaml is not run here: the
converted MultiWorkerMirrored examples train across pods on the cluster, and that
file runs (as tensorflow-ps.yaml does too) with `tfjob run` in
tests/tensorflow/test_trainjob.py.

The host's frameworks, not an image: no registry is reachable here, a torch image
from PyPI pulls ~3 GB of CUDA wheels, and download.pytorch.org (the CPU wheel index)
is not reachable. So those pods run the local Debian base image (scripts/image.sh
base: bookworm, the host's release, with its C and C++ libraries) with the test's own
Python prefix (torch, tensorflow-cpu, paddlepaddle) mounted read-only at its own path
(the interpreter finds libpython there), and the host's libgomp, which paddle loads
and the base lacks. The examples' code is mounted from the repository at /examples,
where the TrainJobs' `../<framework>/...` commands point. Those mounts (a runtime
patch, as a user adds volumes), the image, the interpreter's path and HOME are all
that is changed in the example files, but for torch running one process per node
(`numProcPerNode: 1`, the example has 2) and the parameter-server TrainJob one
worker (`numNodes: 1`, the example has 2) to keep the test short, and its name
(tf-ps-distributed: the converted example is tf-parameter-server); its pods also
mount one host folder at /models (MODEL_DIR), where the evaluator reads the chief's
checkpoints, and stop within 2 s when deleted (the program, the container's PID 1,
ignores SIGTERM), and their PYTHONPATH hides jax and IPython, which the host's prefix
has for other suites and TensorFlow would import (testkit/hidden_modules.py)."""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client

from testkit.cluster_cli import Cli, Running
from testkit.controlplane import ControlPlaneError, ControlPlaneUnavailable
from testkit.helpers import wait_for
from testkit.hidden_modules import NOT_IN_A_TENSORFLOW_IMAGE, hiding
from testkit.jobset import JobSetManager
from testkit.node import Node
from testkit.node_jobset import as_control_plane, start_jobset
from testkit.tfjob_cli import tfjob
from testkit.trainjobs import TrainJobs
from tests.node.conftest import REPO, kubectl, unavailable
from tests.node.tf_results import (
    CLUSTER,
    check_multi_worker,
    check_parameter_server,
    model_volume,
    replica_counts,
)
from tests.node.tf_results import reports as tf_reports

EXAMPLES = REPO / "examples"
TRAINJOB_EXAMPLES = EXAMPLES / "trainjob"
FRAMEWORKS = ("torch", "tensorflow", "paddle")
#: The replicated jobs of tensorflow-distributed (manifests/overlays/tfjob-runtimes).
PS_JOBS_BY_TASK = {"chief": "chief", "ps": "ps", "worker": "node", "evaluator": "evaluator"}
PS_JOBS = tuple(PS_JOBS_BY_TASK.values())
PATCH_MANAGER = "tfjob.test/host-python"
FINISH_LIMIT = 600.0
#: The TensorFlow cluster examples, run as the TrainJobs `tfjob convert` makes of them.
CONVERTED = ("multi_worker.yaml", "multi_worker_chief.yaml", "parameter_server.yaml")


def host_python() -> Path:
    """The test's own Python prefix, when it holds the three frameworks."""
    if sys.prefix != sys.base_prefix:
        unavailable(f"the pods mount the interpreter's prefix; run outside a venv ({sys.prefix})")
    missing = [m for m in FRAMEWORKS if importlib.util.find_spec(m) is None]
    if missing:
        unavailable(f"{', '.join(missing)} not installed for {sys.executable}")
    return Path(sys.prefix)


def host_libgomp() -> Path:
    found = sorted(glob.glob("/usr/lib/*-linux-gnu/libgomp.so.1"))
    if not found:
        unavailable("no libgomp.so.1 on the host (paddle needs it)")
    return Path(found[0])


@pytest.fixture(scope="module")
def trainjob_cluster(
    node: Node, kube: Client, request: pytest.FixtureRequest
) -> Iterator[JobSetManager]:
    """What tfjob serves TrainJobs with: JobSet's controller, Trainer's CRDs (the README's
    install), both runtime overlays, and an operator that serves TrainJob."""
    try:
        jobset = start_jobset(node, kube)
    except ControlPlaneUnavailable as exc:
        unavailable(f"no JobSet controller: {exc}")
    except ControlPlaneError as exc:
        pytest.fail(f"JobSet did not start:\n{exc}", pytrace=False)
    try:
        request.getfixturevalue("installed_operator")
        kubectl(
            node, "wait", "--for=condition=Established",
            "crd/clustertrainingruntimes.trainer.kubeflow.org",
        )  # fmt: skip
        for overlay in ("trainer-runtimes", "tfjob-runtimes"):
            kubectl(node, "apply", "--server-side", "-k", f"manifests/overlays/{overlay}")
        # The operator decides what it serves when it starts: one started before
        # JobSet's CRD was installed (an earlier test's) serves no TrainJob.
        if not _serves_trainjob(node):
            kubectl(node, "-n", "tfjob-system", "rollout", "restart", "deployment/tfjob-operator")
            kubectl(
                node, "-n", "tfjob-system", "rollout", "status", "deployment/tfjob-operator",
                "--timeout=180s", timeout=200,
            )  # fmt: skip
        yield jobset
    finally:
        jobset.stop()


def _serves_trainjob(node: Node) -> bool:
    logs = kubectl(node, "-n", "tfjob-system", "logs", "deployment/tfjob-operator", check=False)
    for line in logs.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "serving":
                return "TrainJob" in entry.get("kinds", [])
    return False


def on_node(
    path: Path,
    image: str,
    prefix: Path,
    libgomp: Path,
    jobs: tuple[str, ...] = ("node",),
    models: Path | None = None,
    hidden: Path | None = None,
) -> dict[str, Any]:
    """The example's TrainJob, run with the host's frameworks (module docstring), on
    the pods of replicated jobs `jobs`; with `models`, that host folder is every pod's
    /models and MODEL_DIR (one folder for the chief's checkpoints and the evaluator);
    with `hidden`, that folder of testkit/hidden_modules.py first on PYTHONPATH."""
    trainjob: dict[str, Any] = next(
        d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == "TrainJob"
    )
    trainer = trainjob["spec"]["trainer"]
    python = str(prefix / "bin" / "python3")
    command: list[str] = []
    for word in trainer["command"]:
        if word == "python3":
            command.append(python)
        elif word == "torchrun":  # its script's shebang names the host path: run the module
            command += [python, "-m", "torch.distributed.run"]
        elif word.startswith("../"):
            command.append("/examples/" + word.removeprefix("../"))
        else:
            command.append(word)
    trainer["command"] = command
    trainer["image"] = image
    trainer["env"] = [*trainer.get("env", []), {"name": "HOME", "value": "/tmp"}]
    mounts = [
        ("host-python", str(prefix), str(prefix), "Directory"),
        ("examples", str(EXAMPLES), "/examples", "Directory"),
        ("libgomp", str(libgomp), str(libgomp), "File"),
    ]
    if models is not None:
        mounts.append(("models", str(models), "/models", "Directory"))
        trainer["env"].append({"name": "MODEL_DIR", "value": "/models"})
    if hidden is not None:
        mounts.append(("hidden", str(hidden), str(hidden), "Directory"))
        trainer["env"].append({"name": "PYTHONPATH", "value": str(hidden)})
    pod = {
        "volumes": [
            {"name": name, "hostPath": {"path": host, "type": kind}}
            for name, host, _, kind in mounts
        ],
        "containers": [
            {
                "name": "node",
                "volumeMounts": [
                    {"name": name, "mountPath": at, "readOnly": name != "models"}
                    for name, _, at, _ in mounts
                ],
            }
        ],
    }
    replicated = [{"name": job, "template": {"spec": {"template": {"spec": pod}}}} for job in jobs]
    trainjob["spec"]["runtimePatches"] = [
        {
            "manager": PATCH_MANAGER,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
        }
    ]
    return trainjob


def reports(
    kube: Client, jobs: TrainJobs, name: str, prefix: str, only: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """The last `<prefix> {json}` line of each pod's log (of replicated jobs `only`,
    if given), by pod name without its suffix (the pod's host name)."""
    found: dict[str, dict[str, Any]] = {}
    for pod in jobs.pods(name):
        pod_name = pod["metadata"]["name"]
        if only and not pod_name.startswith(tuple(f"{name}-{job}-" for job in only)):
            continue
        text = "\n".join(kube.log(pod_name, namespace=jobs.namespace, container="node"))
        lines = [line for line in text.splitlines() if line.startswith(prefix + " ")]
        assert lines, f"{pod_name} printed no {prefix}:\n{text[-3000:]}"
        found[pod_name.rsplit("-", 1)[0]] = json.loads(lines[-1].split(" ", 1)[1])
    return found


@pytest.mark.timeout(1200)
def test_torch_tensorflow_and_paddle_trainjobs_train_across_pods(
    node: Node,
    kube: Client,
    trainjob_cluster: JobSetManager,
    base_image: str,
    examples_image: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    prefix, libgomp = host_python(), host_libgomp()
    jobs = TrainJobs(as_control_plane(node), namespace)

    def example(file: str) -> dict[str, Any]:
        return on_node(TRAINJOB_EXAMPLES / file, base_image, prefix, libgomp)

    torch = example("torch-ddp.yaml")
    torch["spec"]["trainer"]["numProcPerNode"] = 1  # one rank per pod: world size 2
    paddle = example("paddle.yaml")
    models = tmp_path / "models"
    models.mkdir()
    # Its TensorFlow processes without jax and IPython, as in a TensorFlow image.
    hidden = hiding(tmp_path / "tensorflow-alone", NOT_IN_A_TENSORFLOW_IMAGE)
    ps = on_node(
        TRAINJOB_EXAMPLES / "tensorflow-ps.yaml",
        base_image, prefix, libgomp, PS_JOBS, models, hidden,
    )  # fmt: skip
    ps["metadata"]["name"] = "tf-ps-distributed"  # the converted example is tf-parameter-server
    ps["spec"]["trainer"]["numNodes"] = 1  # one worker (the runtime fixes 2 PS)
    for patch in ps["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"
    ]:
        # The program is the container's PID 1, which ignores SIGTERM: without this, the
        # PS and worker pods JobSet deletes would take the default 30 s to go.
        patch["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 2
    # The cluster examples as `tfjob convert` prints them, each with its own runtime,
    # created as they are (strict field validation: Trainer's CRDs take every field).
    model_volume(node, kube, namespace)
    converted = {example: convert(CLUSTER / example) for example in CONVERTED}
    # Their output followed as it comes with `tfjob logs -f`, as for the TFJobs: a
    # JobSet that succeeds with its chief deletes the Jobs still active, and with them
    # the pods (and logs) of replicas that have not yet been seen ending.
    cli = Cli(node.kubeconfig_path, namespace, tmp_path)
    followers: dict[str, Running] = {}
    started = time.monotonic()
    try:
        for trainjob in (torch, paddle, ps):
            jobs.create(trainjob)
        for runtime, trainjob in converted.values():
            jobs.create_runtime(runtime)
            jobs.create(trainjob)
            name = trainjob["metadata"]["name"]
            followers[name] = cli.start("logs", "-f", f"trainjob/{name}")
        names = [
            t["metadata"]["name"] for t in (torch, paddle, ps, *(t for _, t in converted.values()))
        ]
        outcomes = {
            name: jobs.wait_finished(
                name, timeout=max(1.0, FINISH_LIMIT - (time.monotonic() - started))
            )
            for name in names
        }
        print(f"{len(names)} TrainJobs finished in {time.monotonic() - started:.0f} s")
        for name, condition in outcomes.items():
            assert condition["type"] == "Complete", f"{name}: {condition}\n{_logs(jobs, name)}"
        for follower in followers.values():
            assert follower.wait(timeout=120) == 0, follower.output()[-3000:]
    finally:
        for follower in followers.values():
            if follower.process.poll() is None:
                follower.process.kill()
                follower.process.wait()
    logs = {name: follower.output() for name, follower in followers.items()}

    # Each node in a pod of its own, with an address of its own.
    for name in (torch["metadata"]["name"], paddle["metadata"]["name"]):
        pods = jobs.pods(name)
        assert [p["metadata"]["name"].rsplit("-", 1)[0] for p in pods] == [
            f"{name}-node-0-0",
            f"{name}-node-0-1",
        ]
        assert len({p["status"]["podIP"] for p in pods}) == 2, name
        assert {p["status"]["phase"] for p in pods} == {"Succeeded"}, name

    # torch: torchrun on each pod met node 0 at its JobSet host name; DDP's all-reduce
    # made both ranks take the same steps, so both end with the same weights and loss.
    name = torch["metadata"]["name"]
    found = reports(kube, jobs, name, "PYTORCH_REPORT")
    assert {r["rank"] for r in found.values()} == {0, 1}
    assert found[f"{name}-node-0-0"]["rank"] == 0
    for report in found.values():
        assert report["world_size"] == 2
        assert report["master"] == f"{name}-node-0-0.{name}:29500"
        assert report["losses"][-1] < report["losses"][0]
    first, second = found.values()
    assert first["checksum"] == second["checksum"]
    assert first["final_loss"] == second["final_loss"]

    # Paddle: the launchers met at node 0's host name and ran one trainer each; the
    # gradient all-reduce left both with the same weights.
    name = paddle["metadata"]["name"]
    found = reports(kube, jobs, name, "PADDLE_REPORT")
    assert sorted(r["rank"] for r in found.values()) == [0, 1]
    first, second = found.values()
    assert first["trainers"] == second["trainers"] == 2
    assert first["weights"] == second["weights"]
    assert first["loss"] == second["loss"] < 0.1
    env = _env_of(jobs.pods(name)[0])
    assert env["PADDLE_MASTER"] == f"{name}-node-0-0.{name}:36543"

    # Parameter servers: the TrainJob completed with its chief (the runtime's success
    # policy); JobSet then deleted the Jobs still running, PS and worker, with their
    # pods. The chief (and the evaluator, which ends as soon as it has scored the final
    # checkpoint, so most likely before the chief) ended by themselves.
    name = ps["metadata"]["name"]
    serving = (f"{name}-ps-", f"{name}-node-")

    def only_chief_and_evaluator() -> list[dict[str, Any]] | None:
        # The Jobs go once their pods have (foreground deletion: a moment later).
        pods = jobs.pods(name)
        if any(p["metadata"]["name"].startswith(serving) for p in pods):
            return None
        if any(j["metadata"]["name"].startswith(serving) for j in jobs.jobs(name)):
            return None
        return pods

    left = wait_for(
        only_chief_and_evaluator,
        timeout=120,
        interval=0.5,
        message=f"{name}'s PS and worker Jobs and pods to go",
    )
    ended = datetime.fromisoformat(outcomes[name]["lastTransitionTime"]).timestamp()
    print(f"PS and worker pods gone {time.time() - ended:.0f} s after the TrainJob ended")
    assert f"{name}-chief-0-0" in [p["metadata"]["name"].rsplit("-", 1)[0] for p in left]
    assert {p["status"]["phase"] for p in left} == {"Succeeded"}
    chief = reports(kube, jobs, name, "TFJOB_REPORT")[f"{name}-chief-0-0"]
    tasks = {"chief": 1, "evaluator": 1, "ps": 2, "worker": 1}
    assert chief["cluster_spec"] == {
        task: [f"{name}-{PS_JOBS_BY_TASK[task]}-0-{i}.{name}:2222" for i in range(n)]
        for task, n in tasks.items()
    }
    # The chief's variables lived on both PS, steps ran on the worker and the loss fell;
    # the evaluator, reading the shared folder, scored the final checkpoint.
    assert chief["variable_devices"] == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0",
    ]
    assert chief["losses"][-1] < chief["losses"][0] / 10, chief["losses"]
    assert chief["all_workers_in_last_round"] is True
    assert len(chief["steps_per_pipeline"]) == 1  # the one worker's input pipeline
    assert chief["global_step"] == sum(chief["steps_per_pipeline"].values())
    assert chief["checkpoint"].startswith("/models/")
    assert chief["final_eval_step"] == chief["global_step"]
    assert chief["final_eval_loss"] < 0.05

    # The converted cluster examples reach what their TFJobs reach (tf_results.py, the
    # checks test_tensorflow.py makes of the originals), at JobSet host names.
    for example in ("multi_worker.yaml", "multi_worker_chief.yaml"):
        name = converted[example][1]["metadata"]["name"]
        counts = replica_counts(example)
        replicas = [f"{task}-{i}" for task, n in counts.items() for i in range(n)]
        found = tf_reports(logs[name])
        assert sorted(found) == sorted(replicas), (example, logs[name][-3000:])
        check_multi_worker(found, f".{name}:2222")
        for replica, report in found.items():
            # TFJOB_POD_NAME (metadata.name in the TFJob) is the pod's host name.
            task, index = replica.split("-")
            assert report["pod_name"] == f"{name}-{task}-0-{index}"
            assert report["cluster_spec"] == _cluster(name, counts)
            assert report["num_replicas_in_sync"] == len(replicas)
        assert len({tuple(r["final_weights"]) for r in found.values()}) == 1
        # Each replica in a pod of its own; none left running. With a chief, the
        # JobSet ends with it and deletes the Jobs still active, as cleanPodPolicy
        # Running does: a worker's pod may be gone then, as a TFJob's.
        pods = _settled(jobs, name)
        assert len({p["status"]["podIP"] for p in pods}) == len(pods), example
        assert {p["status"]["phase"] for p in pods} == {"Succeeded"}, example
        kept = {p["metadata"]["name"].rsplit("-", 1)[0] for p in pods}
        if "chief" in counts:
            assert f"{name}-chief-0-0" in kept, example  # its Job completed: not deleted
        else:
            assert len(pods) == len(replicas), example
    # The converted parameter-server job ended with its chief, as the TFJob does (its
    # success policy); JobSet stops the PS and workers, which serve until stopped.
    name = converted["parameter_server.yaml"][1]["metadata"]["name"]
    found = tf_reports(logs[name])
    run = {"chief-0": found["chief-0"], "evaluator-0": found["evaluator-0"]}
    check_parameter_server(run)
    assert run["chief-0"]["cluster_spec"] == _cluster(name, replica_counts("parameter_server.yaml"))
    assert run["chief-0"]["pod_name"] == f"{name}-chief-0-0"
    # One checkpoint folder for the run, named after the job: the host names say it.
    assert run["chief-0"]["model_dir"].startswith(f"/models/{name}-")
    serving = (f"{name}-ps-", f"{name}-worker-")
    wait_for(
        lambda: (
            not [
                j
                for j in jobs.jobs(name)
                if j["metadata"]["name"].startswith(serving)
                and not j["metadata"].get("deletionTimestamp")
            ]
        ),
        timeout=60,
        interval=0.5,
        message=f"JobSet to stop {name}'s PS and workers",
    )


def convert(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """`tfjob convert PATH`: the TrainingRuntime and the TrainJob it prints."""
    done = tfjob("convert", str(path))
    assert done.returncode == 0, done.stderr
    runtime, trainjob = yaml.safe_load_all(done.stdout)
    assert (runtime["kind"], trainjob["kind"]) == ("TrainingRuntime", "TrainJob")
    return runtime, trainjob


def _cluster(name: str, counts: dict[str, int]) -> dict[str, list[str]]:
    """The TF_CONFIG cluster of a converted job: every task at its JobSet host name."""
    return {
        task: [f"{name}-{task}-0-{i}.{name}:2222" for i in range(n)] for task, n in counts.items()
    }


def _settled(jobs: TrainJobs, name: str) -> list[dict[str, Any]]:
    """The JobSet's pods once none is Pending or Running (a pod that ended is reported
    a moment later)."""

    def settled() -> list[dict[str, Any]] | None:
        pods = jobs.pods(name)
        return None if {"Pending", "Running"} & {p["status"]["phase"] for p in pods} else pods

    return wait_for(settled, timeout=60, interval=0.5, message=f"{name}'s pods to end")


def _logs(jobs: TrainJobs, name: str, lines: int = 40) -> str:
    """Each pod's phase, restarts and log tail (and its previous container's)."""
    out = []
    for pod in jobs.pods(name):
        pod_name = pod["metadata"]["name"]
        statuses = pod.get("status", {}).get("containerStatuses") or [{}]
        out.append(
            f"--- {pod_name}: {pod['status'].get('phase')}, "
            f"restarts {statuses[0].get('restartCount')}"
        )
        for previous in ("true", "false"):
            path = f"/api/v1/namespaces/{jobs.namespace}/pods/{pod_name}/log"
            status, text = jobs.plane.request("GET", f"{path}?container=node&previous={previous}")
            if status == 200:
                tail = "\n".join(str(text).splitlines()[-lines:])
                out.append(("(previous container)\n" if previous == "true" else "") + tail)
    return "\n".join(out)


def _env_of(pod: dict[str, Any]) -> dict[str, str]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}
