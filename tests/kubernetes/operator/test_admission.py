"""Bad TFJobs are refused at the door, the same way by a cluster and by `tfjob run`.

Every file of the malformed corpus (tests/fixtures/malformed) is applied with the
kubectl built from the API server's own module while the operator runs, and given to
`tfjob run`: a job is either refused by `kubectl apply`, naming its field, or reaches
Failed within 5 s; `tfjob run` exits 2 exactly for the jobs the API server refuses.
Each `tfjob run` is a process of its own, forked from one that imported the CLI once
(testkit/forked_cli.py): 0.01 CPU-s a run instead of 0.25.
Valid jobs interleaved with the bad ones still run to success. Jobs whose pods only
the API server's pod validation refuses are failed by the operator's dry run.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from testkit import fast_yaml
from testkit.controlplane import ControlPlane
from testkit.corpus import Case, cases
from testkit.forked_cli import ForkedCli
from testkit.helpers import IMAGE, tfjob, wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, RunningOperator, replica

FAILED_WITHIN = 5.0


def _valid_job(name: str) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": IMAGE, "command": ["python3", "-c", "pass"]}
    return tfjob(name, None, {"Worker": replica(1, "Never", [container])})


def _kubectl(plane: ControlPlane, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    kubectl = plane.assets.tool("kubectl")
    command = [str(kubectl), "--kubeconfig", str(plane.kubeconfig_path), "-n", namespace, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _warm_up(path: Path) -> str:
    """What every `tfjob run` of a file builds first: its modules and the schemas."""
    return (
        "import contextlib\n"
        "from tfjob.interfaces import run_command\n"
        "from pathlib import Path\n"
        "from tfjob.interfaces.job_files import read_jobs\n"
        "with contextlib.suppress(Exception):\n"
        f"    read_jobs(Path({str(path)!r}), require_image=False)\n"
    )


def test_every_malformed_job_gets_the_same_verdict_on_both_runtimes(
    control_plane: ControlPlane,
    operator: RunningOperator,
    jobs: Jobs,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    corpus = cases()
    valid: list[Path] = []
    for index in range(0, len(corpus), 15):
        path = tmp_path / f"good-{index}.yaml"
        path.write_text(yaml.safe_dump(_valid_job(f"good-{index}")))
        valid.append(path)
    # Each cluster verdict is a kubectl process and a short wait: four at a time, the
    # local runtime's runs beside them.
    with ThreadPoolExecutor(max_workers=4) as pool, ForkedCli(_warm_up(valid[0])) as local_cli:
        local = {
            case.path: local_cli.submit("run", str(case.path), cwd=tmp_path) for case in corpus
        }
        local_valid = [local_cli.submit("run", str(path), cwd=tmp_path) for path in valid]
        applied = [
            pool.submit(_kubectl, control_plane, jobs.namespace, "apply", "-f", str(path))
            for path in valid  # valid jobs among the bad ones
        ]
        verdicts = {
            case.path: pool.submit(_cluster_verdict, control_plane, jobs, case) for case in corpus
        }
        for done in applied:
            assert done.result().returncode == 0, done.result().stderr
        problems = [
            problem
            for case in corpus
            if (
                problem := _local_problem(
                    case, verdicts[case.path].result(), local[case.path].result()
                )
            )
        ]
        assert not problems, "\n".join(problems)
        for run in local_valid:
            assert run.result().returncode == 0, run.result().stderr
    names = [f"good-{index * 15}" for index in range(len(valid))]
    for name in names:
        pod = f"{name}-worker-0"
        wait_for(lambda pod=pod: pod in jobs.pods(), message=f"pod {pod}")
        kubelet.succeed(jobs.namespace, pod)
    for name in names:
        jobs.wait_condition(name, "Succeeded", timeout=20)
    log = operator.log_path.read_text(errors="replace")
    assert "reconcile failed" not in log and "Traceback" not in log, operator.log_tail()


def _cluster_verdict(plane: ControlPlane, jobs: Jobs, case: Case) -> bool:
    """True if the API server refused the file (naming the field); otherwise the job
    must be Failed, with a message, within 5 s."""
    applied = _kubectl(plane, jobs.namespace, "apply", "-f", str(case.path))
    if applied.returncode != 0:
        assert case.field in applied.stderr, f"{case.id}: {applied.stderr}"
        return True
    name = fast_yaml.load(case.path.read_text().split("\n", 2)[2])["metadata"]["name"]
    failed = jobs.wait_condition(name, "Failed", timeout=FAILED_WITHIN)
    assert failed.get("message"), f"{case.id}: Failed without a message"
    return False


def _local_problem(case: Case, refused: bool, run: subprocess.CompletedProcess[str]) -> str:
    """What is wrong with `tfjob run`'s answer on this file, or "" if nothing."""
    output = run.stdout + run.stderr
    expected = 2 if refused else 1
    if run.returncode != expected:
        return f"{case.id}: tfjob run exited {run.returncode}, not {expected}: {output[-400:]}"
    if "Traceback" in output:
        return f"{case.id}: tfjob run printed a traceback: {output[-400:]}"
    if case.field not in run.stderr:
        return f"{case.id}: tfjob run does not name {case.field!r}: {run.stderr[-400:]}"
    if refused and "Created pod" in output:
        return f"{case.id}: tfjob run started something before refusing the job"
    return ""


def _pod_level_job(name: str, container: dict[str, Any]) -> dict[str, Any]:
    job = _valid_job(name)
    worker = job["spec"]["tfReplicaSpecs"]["Worker"]
    worker["template"]["spec"]["containers"][0].update(container)
    return job


def test_a_job_whose_pods_the_api_server_refuses_fails_at_once(
    control_plane: ControlPlane, operator: RunningOperator, jobs: Jobs, tmp_path: Path
) -> None:
    """What only pod validation catches (the CRD's schema cannot express it) ends the
    job Failed with the API server's own message, before any pod is created."""
    cases_ = {
        "more-than-limit": (
            {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
            "must be less than or equal to cpu limit",
        ),
        "mount-without-volume": (
            {"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            "volumeMounts[0].name",
        ),
    }
    for name, (container, _) in cases_.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(_pod_level_job(name, container)))
        applied = _kubectl(control_plane, jobs.namespace, "apply", "-f", str(path))
        assert applied.returncode == 0, applied.stderr
    for name, (_, said) in cases_.items():
        failed = jobs.wait_condition(name, "Failed", timeout=FAILED_WITHIN)
        assert failed["reason"] == "InvalidTFJobSpec"
        assert said in failed["message"], failed["message"]
        assert "TFJobFailedValidation" in wait_for(
            lambda name=name: jobs.reasons(name) or None, timeout=5
        )
    assert jobs.pods() == {}
    assert "reconcile failed" not in operator.log_path.read_text(errors="replace")
