"""The operator's HTTP client, against another tree's (docs/decisions/0037-own-http-client.md).

Two figures, each for this tree and for `--before` (a tree's `src`, e.g. the commit
before the change unpacked with `git archive`), alternated in one run:
1. ru_maxrss after the imports of `tfjob operator` with JSON logs (a fresh interpreter
   each time; what the operator's memory starts from).
2. Client CPU per request: `--requests` Event POSTs, 4 at a time (the event
   recorder's senders), to the test control plane's kube-apiserver (TLS, token), by
   `KubeClient` in a process of its own; its user+system CPU from the first request
   after a warm-up of 100 to the last answer.

Run: python bench/http_client_bench.py --before /tmp/before/src [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import record
from testkit.controlplane import ControlPlane, find_assets

SRC = Path(__file__).resolve().parents[1] / "src"

IMPORTS = """
import resource, sys
from tfjob.interfaces import operator_command
from tfjob.runtimes.kubernetes.controller import logging_setup
logging_setup.configure("info", "json")
try:  # the tree before: aiohttp imported first without its TLS contexts
    from tfjob.runtimes.kubernetes.transport.lean_aiohttp import (
        import_aiohttp_without_default_contexts,
    )
    import_aiohttp_without_default_contexts()
except ImportError:
    pass
from tfjob.runtimes.kubernetes.controller import operator
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

SENDER = """
import asyncio, json, resource, sys
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.resources import EVENTS

kubeconfig, namespace, count, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

def event(i):
    return {
        "metadata": {"name": f"{tag}-{i}", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": f"p-{i}", "namespace": namespace},
        "reason": "Created", "message": f"Created pod: p-{i}", "type": "Normal",
        "source": {"component": "tfjob-operator"}, "count": 1,
    }

async def main():
    client = KubeClient.connect(kubeconfig)
    async def send(numbers):
        for i in numbers:
            await client.create(EVENTS, namespace, event(i))
    await asyncio.gather(*(send(range(k, 100, 4)) for k in range(4)))  # warm-up
    loop = asyncio.get_running_loop()
    used, started = cpu(), loop.time()
    await asyncio.gather(*(send(range(100 + k, 100 + count, 4)) for k in range(4)))
    print(json.dumps({"cpu_us": (cpu() - used) / count * 1e6, "wall": loop.time() - started}))
    await client.close()

asyncio.run(main())
"""


def _python(src: Path, code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the other tree's src")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    trees = {"before": args.before, "after": SRC}
    rss: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds + 1):  # the first round warms the bytecode caches
        for name, src in trees.items():
            rss[name].append(float(_python(src, IMPORTS)))
    rss = {name: values[1:] for name, values in rss.items()}
    print("ru_maxrss after the operator's imports (MB):", rss)

    cpu: dict[str, list[float]] = {name: [] for name in trees}
    wall: dict[str, list[float]] = {name: [] for name in trees}
    with ControlPlane(find_assets(build=False)) as plane:
        kubeconfig = str(plane.kubeconfig_path)
        for round_ in range(args.rounds):
            for name, src in trees.items():
                tag = f"{name}-{round_}"
                load = os.getloadavg()[0]
                out = json.loads(
                    _python(src, SENDER, kubeconfig, "default", str(args.requests), tag)
                )
                cpu[name].append(out["cpu_us"])
                wall[name].append(out["wall"])
                print(
                    f"{name}: {out['cpu_us']:.0f} us CPU per request, {out['wall']:.2f} s, "
                    f"load {load:.1f}",
                    flush=True,
                )
    figures = {
        "imports_maxrss_mb": rss,
        "cpu_us_per_request": cpu,
        "wall_s": wall,
        "cpu_ratio_median": statistics.median(cpu["after"]) / statistics.median(cpu["before"]),
        "requests": args.requests,
    }
    print(json.dumps(figures, indent=1))
    print(record("http_client_bench", figures))


if __name__ == "__main__":
    main()
