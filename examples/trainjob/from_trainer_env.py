"""Run a v1 example's training script with the env of a Trainer v2 runtime.

The scripts of examples/jax and examples/xgboost read the env their v1 kind gives
(a JAXJob's COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID; an
XGBoostJob's MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK). Trainer's runtimes name the
same facts otherwise: jax-distributed gives JAX_COORDINATOR_ADDRESS (`host:port`),
JAX_NUM_PROCESSES and JAX_PROCESS_ID; xgboost-distributed gives DMLC_TRACKER_URI,
DMLC_TRACKER_PORT, DMLC_NUM_WORKER and DMLC_TASK_ID. This sets the former from the
latter and runs the script named first on the command line, unchanged.

    python3 from_trainer_env.py ../jax/train.py
"""

from __future__ import annotations

import os
import runpy
import sys


def v1_env(env: dict[str, str]) -> dict[str, str]:
    """The v1 kind's variables for whichever Trainer runtime's env is present."""
    if "JAX_COORDINATOR_ADDRESS" in env:
        host, port = env["JAX_COORDINATOR_ADDRESS"].rsplit(":", 1)
        return {
            "COORDINATOR_ADDRESS": host,
            "COORDINATOR_PORT": port,
            "NUM_PROCESSES": env["JAX_NUM_PROCESSES"],
            "PROCESS_ID": env["JAX_PROCESS_ID"],
        }
    if "DMLC_TRACKER_URI" in env:
        return {
            "MASTER_ADDR": env["DMLC_TRACKER_URI"],
            "MASTER_PORT": env["DMLC_TRACKER_PORT"],
            "WORLD_SIZE": env["DMLC_NUM_WORKER"],
            "RANK": env["DMLC_TASK_ID"],
        }
    return {}


if __name__ == "__main__":
    script = sys.argv[1]
    os.environ.update(v1_env(dict(os.environ)))
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
