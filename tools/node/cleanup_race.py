"""What cleanPodPolicy Running does to workers that end just after worker 0, on the
real node, under tfjob's operator or Kubeflow's training-operator v1.9.4: the
evidence of docs/decisions/0026. Prints each pod's phase changes, seconds from the
job's creation, and which pods are left.

    tools/node/node.sh up
    PYTHONPATH=src python3 tools/node/cleanup_race.py tfjob      # this checkout's operator
    PYTHONPATH=src python3 tools/node/cleanup_race.py kubeflow   # v1.9.4 (tools/envtest)
    tools/node/node.sh down

Each run uses a namespace of its own, watched by that operator only (`--namespace`),
and a TFJob of 3 Workers where worker i sleeps 8 + i seconds and exits 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lightkube import Client, KubeConfig, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from testkit.controlplane import load_manifest  # noqa: E402
from testkit.node import DEFAULT_FOLDER, Node, entered  # noqa: E402
from testkit.training_operator import Kubeflow, stop  # noqa: E402
from tests.node.jobs import SHELL_IMAGE, shell_job, submit  # noqa: E402


def main(which: str) -> None:
    node = Node.attach(DEFAULT_FOLDER)
    with entered(node.netns):
        if SHELL_IMAGE not in node.images():
            node.import_buildah_image(SHELL_IMAGE)
        kube = Client(config=KubeConfig.from_file(str(node.kubeconfig_path)), field_manager="race")
        for doc in load_manifest(ROOT / "manifests" / "base" / "crd.yaml"):
            kube.apply(codecs.from_dict(doc), force=True)
        namespace = f"race-{which}-{os.urandom(2).hex()}"
        kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
        time.sleep(2)  # the namespace's default ServiceAccount
        folder = Path(tempfile.mkdtemp(prefix="race-"))
        if which == "kubeflow":
            running = Kubeflow(kube, node.kubeconfig_path, namespace, folder).start()
            operator = running.process
        else:
            operator = subprocess.Popen(
                [sys.executable, "-c", "from tfjob.interfaces.cli import main; main()",
                 "operator", "--kubeconfig", str(node.kubeconfig_path), "--namespace", namespace,
                 "--metrics-port=-1", "--health-port=-1"],
                stdout=(folder / "operator.log").open("w"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            time.sleep(4)
        script = "i=${HOSTNAME##*-}; echo start $i; sleep $((8 + i)); echo finished $i"
        submit(
            kube, shell_job("race", namespace, workers=3, clean_pod_policy="Running", script=script)
        )
        began, seen = time.monotonic(), {}
        while time.monotonic() - began < 40:
            for pod in kube.list(Pod, namespace=namespace):
                state = (pod.status.phase, pod.metadata.deletionTimestamp is not None)
                if seen.get(pod.metadata.name) != state:
                    seen[pod.metadata.name] = state
                    deleting = " (being deleted)" if state[1] else ""
                    at = time.monotonic() - began
                    print(f"{at:5.1f} s  {pod.metadata.name}  {state[0]}{deleting}")
            time.sleep(0.1)
        left = sorted(p.metadata.name for p in kube.list(Pod, namespace=namespace))
        print(f"left: {left}")
        if which == "kubeflow":
            stop(running)
        else:
            operator.terminate()
            operator.wait()
        kube.delete(Namespace, namespace)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("tfjob", "kubeflow"):
        sys.exit(__doc__)
    main(sys.argv[1])
