"""Data-parallel linear regression in JAX, one process per JAXJob Worker.

Every process calls `jax.distributed.initialize` with what the JAXJob's env gives it
(COORDINATOR_ADDRESS:COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID; process 0 hosts the
coordinator), keeps its own shard of a synthetic data set, and at each step the
gradients of all processes are averaged with a cross-process all-gather (on CPU over
gloo), so every process takes the same step as one process would on all the data.

Without the env (plain `python train.py`) it runs as a single process on the whole
data set: the reference the distributed run must match.

Each process prints one line `JAX_REPORT {json}` with its rank, the final weights and
the loss on the whole data set.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

SAMPLES, FEATURES, STEPS, RATE = 1200, 8, 60, 0.1


def data() -> tuple[np.ndarray, np.ndarray]:
    """The same synthetic regression problem in every process (fixed seed)."""
    rng = np.random.default_rng(20)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    w = rng.normal(size=(FEATURES,)).astype(np.float32)
    y = x @ w + 0.1 * rng.normal(size=(SAMPLES,)).astype(np.float32)
    return x, y


def loss(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((x @ w - y) ** 2)


def main() -> None:
    processes = int(os.environ.get("NUM_PROCESSES", "1"))
    rank = int(os.environ.get("PROCESS_ID", "0"))
    if processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        address = f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}"
        jax.distributed.initialize(address, num_processes=processes, process_id=rank)
    x, y = data()
    shard = np.array_split(np.arange(SAMPLES), processes)[rank]
    xs, ys = jnp.asarray(x[shard]), jnp.asarray(y[shard])
    grad = jax.jit(jax.grad(loss))
    w = jnp.zeros(FEATURES)
    for _ in range(STEPS):
        g = grad(w, xs, ys) * len(shard)
        if processes > 1:  # every shard's summed gradient, from every process
            g = multihost_utils.process_allgather(g).sum(axis=0)
        w = w - RATE * g / SAMPLES
    report = {
        "rank": rank,
        "processes": processes,
        "weights": np.asarray(w).tolist(),
        "loss": float(loss(w, jnp.asarray(x), jnp.asarray(y))),
    }
    print("JAX_REPORT " + json.dumps(report), flush=True)
    if processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
