"""Helpers shared by the TensorFlow examples: cluster report, synthetic data, model dir.

Every replica of every example prints one machine-readable line,

    TFJOB_REPORT {"task_type": ..., "task_id": ..., "cluster_spec": {...}, ...}

built from what TensorFlow itself parsed out of TF_CONFIG (TFConfigClusterResolver),
so a test or a user can check what each process believed about the cluster without
trusting the operator's own bookkeeping. The data is generated here, from a fixed
seed, because the examples must run without network access and every worker has to be
able to rebuild any other worker's shard to prove that gradients were all-reduced.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

REPORT_PREFIX = "TFJOB_REPORT "
# Not TFJOB_*: tfjob run does not pass variables of that prefix on to replicas.
MODEL_DIR_ENV = "MODEL_DIR"
#: Overrides the run id (`run_id`), e.g. with a value the submitter makes per run.
RUN_ID_ENV = "RUN_ID"

FEATURES = 8
EXAMPLES = 4096
SEED = 1234


def resolve_cluster() -> tf.distribute.cluster_resolver.TFConfigClusterResolver:
    """Let TensorFlow parse TF_CONFIG, exactly as a training program on a cluster would."""
    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


def cluster_facts(
    resolver: tf.distribute.cluster_resolver.TFConfigClusterResolver,
) -> dict[str, Any]:
    """What this process learnt from TF_CONFIG, in JSON-ready form.

    `is_chief` is TensorFlow's own rule (multi_worker_util.is_chief): the chief, or
    worker 0 when the cluster has no chief. TensorFlow also calls the evaluator a chief
    "of its own", since it is outside the training cluster.
    """
    from tensorflow.python.distribute import multi_worker_util

    spec = resolver.cluster_spec()
    task_type = resolver.task_type
    task_id = resolver.task_id
    return {
        "task_type": task_type,
        "task_id": task_id,
        "cluster_spec": {job: list(spec.job_tasks(job)) for job in spec.jobs},
        "is_chief": bool(multi_worker_util.is_chief(spec, task_type, task_id)),
        "rpc_layer": resolver.rpc_layer,
        # Not parsed by TensorFlow: the runtime's own view, to cross-check the above.
        "pod_name": os.environ.get("TFJOB_POD_NAME"),
        "tfjob_port": os.environ.get("TFJOB_PORT"),
        "pid": os.getpid(),
    }


def report(facts: dict[str, Any], **results: Any) -> None:
    """Print the one-line machine-readable report, then a short human summary."""
    payload = {**facts, **results}
    print(REPORT_PREFIX + json.dumps(payload, sort_keys=True), flush=True)
    losses = results.get("losses") or []
    summary = f"{facts['task_type']}:{facts['task_id']} is_chief={facts['is_chief']}"
    if losses:
        summary += f" loss {losses[0]:.4f} -> {losses[-1]:.4f} ({len(losses)} values)"
    print(summary, flush=True)


def say(message: str) -> None:
    """A human-readable progress line, tagged with the replica so merged logs stay legible."""
    who = os.environ.get("TFJOB_POD_NAME", "local")
    print(f"[{who}] {message}", flush=True)


def regression_data(
    examples: int = EXAMPLES, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A noisy linear problem `y = x @ w + 0.5`, the same in every process.

    Returns (x, y, true_w). Float32 throughout so a local NumPy/TensorFlow computation
    matches the distributed one to round-off.
    """
    rng = np.random.default_rng(seed)
    true_w = np.linspace(-2.0, 2.0, FEATURES, dtype=np.float32).reshape(FEATURES, 1)
    x = rng.normal(size=(examples, FEATURES)).astype(np.float32)
    noise = rng.normal(scale=0.1, size=(examples, 1)).astype(np.float32)
    y = (x @ true_w + 0.5 + noise).astype(np.float32)
    return x, y, true_w


def model_dir(explicit: str | None) -> Path:
    """This run's folder for checkpoints: `<base>/<job>-<run id>`.

    `<base>` is the flag, else $MODEL_DIR, else `<tmp>/tfjob-examples`. The sub-folder
    must be the same for every replica of one run (the evaluator reads what the chief
    writes) and new for each run (the evaluator must not score an earlier run's
    checkpoints, nor the chief report an earlier run's loss): see `run_id`.
    """
    base = explicit or os.environ.get(MODEL_DIR_ENV)
    root = Path(base) if base else Path(tempfile.gettempdir()) / "tfjob-examples"
    pod = os.environ.get("TFJOB_POD_NAME") or socket.gethostname()
    # A TFJob's pod is `<job>-<type>-<index>`, a TrainJob's `<job>-<type>-0-<index>`.
    job = re.sub(r"-[a-z]+(-0)?-[0-9]+$", "", pod)
    return root / f"{job}-{run_id()}"


def run_id(wait_seconds: float = 120.0) -> str:
    """The same for every replica of one run, new for each run; $RUN_ID if set.

    A hash of TF_CONFIG's cluster and of the address the lead task (the chief, else
    worker 0) resolves to. Locally the cluster alone would do: the runtime picks fresh
    ports per run. On Kubernetes it would not: the addresses are Service names, the
    same every time a job of that name runs in that namespace. There the lead's name
    resolves to its pod's IP, new with each pod, which every replica looks up through
    the cluster's DNS (waiting until the name is known, as a pod's record appears once
    the pod has its address).
    """
    if os.environ.get(RUN_ID_ENV):
        return os.environ[RUN_ID_ENV]
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    lead = (cluster.get("chief") or cluster.get("worker") or [""])[0]
    host = lead.rsplit(":", 1)[0]
    address = ""
    deadline = time.monotonic() + wait_seconds
    while host:
        try:
            address = socket.gethostbyname(host)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    key = json.dumps({"cluster": cluster, "lead": address}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def base_parser(description: str) -> argparse.ArgumentParser:
    """Flags every example accepts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--model-dir",
        default=None,
        help=f"base folder for checkpoints (default: ${MODEL_DIR_ENV}, else <tmp>/tfjob-examples)",
    )
    return parser


def fail(message: str) -> None:
    """Exit 1 (a non-retryable failure under restartPolicy ExitCode) with a reason."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)
