"""Stand-in for `tfjob run`, used only to develop the TensorFlow examples.

The examples were written before the local runtime existed, so this script launches a
TFJob's replicas itself, with the environment the runtime promises: TF_CONFIG in the
standard format of spec §3.5 (evaluator included, `environment: cloud`) but with
`127.0.0.1:<free port>` addresses, plus TFJOB_PORT, TFJOB_REPLICA_TYPE,
TFJOB_REPLICA_INDEX and TFJOB_POD_NAME. Logs go to `<run-dir>/<pod>.log`.

It handles only what the examples use (command/args/env of the `tensorflow` container,
restartPolicy ExitCode for exit codes >= 128, success = chief, else all workers) and is
not part of the test suite. Usage, from the repository root:

    python3 tests/tensorflow/dev_launch.py examples/tensorflow/multi_worker.yaml RUN_DIR
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml


def _free_port() -> int:
    """Ask the kernel for a port nobody listens on (the runtime does the same)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(job_path: str, run_dir: str) -> int:
    """Run every replica of the job and return 0 if it succeeded, 1 otherwise."""
    job: dict[str, Any] = yaml.safe_load(Path(job_path).read_text())
    name = job["metadata"]["name"]
    specs: dict[str, Any] = job["spec"]["tfReplicaSpecs"]
    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    ports = {
        (rtype.lower(), i): _free_port()
        for rtype, spec in specs.items()
        for i in range(spec.get("replicas", 1))
    }
    cluster: dict[str, list[str]] = {}
    for rtype, index in ports:
        cluster.setdefault(rtype, []).append(f"127.0.0.1:{ports[(rtype, index)]}")

    def start(rtype: str, index: int) -> subprocess.Popen[bytes]:
        spec = specs[next(k for k in specs if k.lower() == rtype)]
        container = next(
            c for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow"
        )
        pod = f"{name}-{rtype}-{index}"
        env = dict(os.environ)
        env.update({e["name"]: str(e.get("value", "")) for e in container.get("env", [])})
        env["TF_CONFIG"] = json.dumps(
            {
                "cluster": dict(sorted(cluster.items())),
                "task": {"type": rtype, "index": index},
                "environment": "cloud",
            },
            separators=(",", ":"),
        )
        env.update(
            TFJOB_PORT=str(ports[(rtype, index)]),
            TFJOB_REPLICA_TYPE=rtype,
            TFJOB_REPLICA_INDEX=str(index),
            TFJOB_POD_NAME=pod,
        )
        log = (out / f"{pod}.log").open("ab")
        argv = list(container.get("command", [])) + list(container.get("args", []))
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    procs = {key: start(*key) for key in ports}
    policies = {rtype.lower(): spec.get("restartPolicy", "Never") for rtype, spec in specs.items()}
    deciders = [k for k in procs if k[0] in ("chief", "master")] or [
        k for k in procs if k[0] == "worker"
    ]
    status = 1
    try:
        while True:
            time.sleep(0.2)
            for key, proc in list(procs.items()):
                code = proc.poll()
                if code is None:
                    continue
                # Popen reports a signal as -N; a pod would report 128 + N.
                exit_code = 128 - code if code < 0 else code
                if policies[key[0]] == "ExitCode" and exit_code >= 128:
                    print(f"restarting {key} after exit code {exit_code}", flush=True)
                    procs[key] = start(*key)
                elif exit_code != 0 and key in deciders:
                    return 1
            if all(procs[k].poll() == 0 for k in deciders):
                status = 0
                return status
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
