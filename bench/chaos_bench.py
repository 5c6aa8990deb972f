"""The chaos tests (tests/kubernetes/chaos), larger: crashes, API faults, a restart.

Each scenario runs on a fresh control plane (testkit/controlplane.py) with
`tfjob operator` as a subprocess and a thread playing the kubelet for every pod
(testkit/auto_kubelet.py). It prints how long the jobs took to converge and
a verdict on what must hold exactly:
1. kill - N TFJobs x 2 workers created in 4 batches while the operator is SIGKILLed
   3 times at random moments and restarted: every job Succeeded, exactly 2N pods and
   2N services, no pod created twice, no restart counted.
2. faults - the operator behind the fault proxy (testkit/fault_proxy.py): 10% of
   requests get 500, 429, a reset before or after forwarding, or a delay, and every
   watch is cut at a random moment within 10 s; each job's worker 1 fails once
   with 137 (restartPolicy ExitCode, backoffLimit 3, successPolicy AllWorkers): every
   job Succeeded with restartCount exactly 1, exactly its pods and services.
3. restart - N/2 jobs, the API server restarted (2 s down) while they run, N/2 more
   created after: all Succeeded, exact pods and services, the operator still up.

Run: python bench/chaos_bench.py [--jobs 200] [--only kill,faults,restart] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightkube import Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.core_v1 import Namespace, Pod, Service

from testkit import helpers
from testkit.auto_kubelet import playing_kubelet
from testkit.controlplane import (
    MANIFESTS_BASE,
    ControlPlane,
    apply_documents,
    find_assets,
    load_manifest,
    tfjob_resource,
)
from testkit.fault_proxy import FaultProxy, Rule, writes
from testkit.helpers import free_port

NAMESPACE = "chaos"


@contextlib.contextmanager
def cluster() -> Iterator[tuple[ControlPlane, Client]]:
    plane = ControlPlane(find_assets(build=False)).start()
    kube = Client(KubeConfig.from_file(plane.kubeconfig_path), field_manager="chaos-bench")
    try:
        apply_documents(kube, load_manifest(MANIFESTS_BASE / "crd.yaml"))
        time.sleep(2)  # CRD established
        kube.create(
            codecs.from_dict(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            )
        )
        yield plane, kube
    finally:
        kube.close()
        plane.stop()


class Operator:
    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.health = free_port()
        args = [
            sys.executable, "-c", "from tfjob.interfaces.cli import main; main()",
            "operator", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE,
            "--metrics-port", str(free_port()), "--health-port", str(self.health),
            "--bind-address", "127.0.0.1",
        ]  # fmt: skip
        with log.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def tfjob(name: str, policy: str, success_policy: str = "", **run_policy: Any) -> Any:
    extra = {"successPolicy": success_policy} if success_policy else {}
    specs = {"Worker": helpers.replica(2, policy)}
    return codecs.from_dict(helpers.tfjob(name, NAMESPACE, specs, **extra, runPolicy=run_policy))


def statuses(kube: Client) -> dict[str, dict[str, Any]]:
    with contextlib.suppress(Exception):
        return {
            j.metadata.name: (j.to_dict().get("status") or {})
            for j in kube.list(tfjob_resource(), namespace=NAMESPACE)
        }
    return {}


def succeeded(status: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Succeeded" and c["status"] == "True" for c in status.get("conditions", [])
    )


def wait_all(kube: Client, names: list[str], within: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        found = statuses(kube)
        if all(succeeded(found.get(n, {})) for n in names):
            return time.monotonic() - started
        time.sleep(0.5)
    done = sum(succeeded(s) for s in statuses(kube).values())
    raise TimeoutError(f"{done}/{len(names)} jobs Succeeded after {within:.0f} s")


def exact_objects(kube: Client, names: list[str]) -> list[str]:
    """Problems with the pods and services: missing, extra or terminating."""
    wanted = {f"{n}-worker-{i}" for n in names for i in range(2)}
    pods = {p.metadata.name for p in kube.list(Pod, namespace=NAMESPACE)}
    services = {s.metadata.name for s in kube.list(Service, namespace=NAMESPACE)}
    problems = []
    for kind, found in (("pods", pods), ("services", services)):
        if found != wanted:
            problems.append(
                f"{kind}: {len(wanted - found)} missing, {len(found - wanted)} unexpected"
            )
    return problems


FIGURES: dict[str, Any] = {}  # each scenario's verdict, for bench/results.py


def verdict(name: str, seconds: float, problems: list[str]) -> None:
    FIGURES[name] = {"converged, s": seconds, "ok": not problems, "problems": problems}
    result = "OK" if not problems else "FAILED: " + "; ".join(problems)
    print(f"  {name}: converged in {seconds:.1f} s - {result}", flush=True)


# -- scenarios --------------------------------------------------------------------------


def kill(jobs: int, rng: random.Random, folder: Path) -> None:
    with cluster() as (plane, kube), playing_kubelet(kube, NAMESPACE) as kubelet:
        operator = Operator(plane.kubeconfig_path, folder / "kill.log")
        names = [f"k{i}" for i in range(jobs)]
        batches = [names[i::4] for i in range(4)]
        started = time.monotonic()
        for number, batch in enumerate(batches):
            for name in batch:
                kube.create(tfjob(name, "OnFailure"))
            if number < 3:
                time.sleep(rng.uniform(0.5, 4.0))
                operator.kill()
                operator = Operator(plane.kubeconfig_path, folder / "kill.log")
        wait_all(kube, names, 300 + jobs)
        seconds = time.monotonic() - started
        found = statuses(kube)
        problems = exact_objects(kube, names)
        twice = [n for n, uids in kubelet.uids.items() if len(uids) > 1]
        if twice:
            problems.append(f"{len(twice)} pods created twice")
        counted = [n for n in names if found[n].get("restartCount", 0)]
        if counted:
            problems.append(f"{len(counted)} jobs with restarts counted")
        if operator.stop() != 0:
            problems.append("the operator did not exit 0 on SIGTERM")
        verdict(f"kill ({jobs} jobs, 3 SIGKILLs)", seconds, problems)


def faults(jobs: int, rng: random.Random, folder: Path) -> None:
    with cluster() as (plane, kube):
        proxy = FaultProxy(plane.server, plane.ca_path, seed=rng.randrange(2**31))
        proxy.rules = [
            Rule("500", 0.025),
            Rule("429", 0.025),
            Rule("reset-before", 0.02),
            Rule("reset-after", 0.02, writes()),
            Rule("delay", 0.01, delay=0.5),
        ]
        proxy.watch_lifetime = 10.0
        names = [f"f{i}" for i in range(jobs)]
        fail_first = {f"{n}-worker-1" for n in names}
        with proxy, playing_kubelet(kube, NAMESPACE, fail_first=fail_first, hold=1.0):
            kubeconfig = proxy.write_kubeconfig(folder / "proxied.kubeconfig", token=plane.token)
            operator = Operator(kubeconfig, folder / "faults.log")
            started = time.monotonic()
            for name in names:
                # AllWorkers: the job waits for worker 1's replacement, not only worker 0.
                kube.create(tfjob(name, "ExitCode", "AllWorkers", backoffLimit=3))
            wait_all(kube, names, 300 + 2 * jobs)
            seconds = time.monotonic() - started
            found = statuses(kube)
            problems = exact_objects(kube, names)
            wrong = [n for n in names if found[n].get("restartCount") != 1]
            if wrong:
                problems.append(f"{len(wrong)} jobs without restartCount 1: {wrong[:5]}")
            proxy.rules = []
            if operator.stop() != 0:
                problems.append("the operator did not exit 0 on SIGTERM")
            print(f"    faults injected: {dict(proxy.injected)}")
        verdict(f"faults ({jobs} jobs, ~10% of requests, watches cut)", seconds, problems)


def restart(jobs: int, _rng: random.Random, folder: Path) -> None:
    with cluster() as (plane, kube), playing_kubelet(kube, NAMESPACE, hold=2.0):
        operator = Operator(plane.kubeconfig_path, folder / "restart.log")
        before = [f"b{i}" for i in range(jobs // 2)]
        after = [f"a{i}" for i in range(jobs - jobs // 2)]
        started = time.monotonic()
        for name in before:
            kube.create(tfjob(name, "OnFailure"))
        time.sleep(2.0)
        plane.restart_apiserver(down=2.0)
        _retry(lambda: kube.get(Namespace, NAMESPACE))
        for name in after:
            _retry(lambda n=name: kube.create(tfjob(n, "OnFailure")))  # type: ignore[misc]
        wait_all(kube, before + after, 300 + jobs)
        seconds = time.monotonic() - started
        problems = exact_objects(kube, before + after)
        if operator.process.poll() is not None:
            problems.append(f"the operator exited {operator.process.returncode}")
        elif operator.stop() != 0:
            problems.append("the operator did not exit 0 on SIGTERM")
        verdict(f"restart ({jobs} jobs, API server down 2 s)", seconds, problems)


def _retry(call: Callable[[], object], attempts: int = 60) -> None:
    for attempt in range(attempts):
        try:
            call()
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)


SCENARIOS = {"kill": kill, "faults": faults, "restart": restart}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--only", default="kill,faults,restart")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tfjob-chaos-"))
    print(f"logs in {folder}", flush=True)
    rng = random.Random(args.seed)
    for name in args.only.split(","):
        SCENARIOS[name](args.jobs, rng, folder)

    from results import record  # bench/ is the script's folder, first on sys.path

    record("chaos_bench", FIGURES)


if __name__ == "__main__":
    main()
