"""Data-parallel linear regression in PaddlePaddle, one process per PaddleJob Worker.

A PaddleJob gives each replica PADDLE_MASTER (Worker 0's endpoint in collective mode)
and PADDLE_NNODES, not a rank. So in a replica (PADDLE_MASTER set) this script starts
Paddle's launcher, `python3 -m paddle.distributed.launch train.py`, which meets the
other replicas' launchers at PADDLE_MASTER, agrees on the ranks, and runs this script
again as the trainer with PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM and the collective's
endpoints (on ports it finds free; `--gloo_port` is for parameter-server mode only).
The launcher copies the trainer's output to its own and also to files in its
`--log_dir` (default `./log`): here a temporary folder, removed when it exits, so
nothing is written beside the script and two replicas never share a folder. The trainer
keeps its own shard of a synthetic data set and wraps the model in
`paddle.DataParallel`, which averages the gradients of all trainers after every
backward pass (an all-reduce, over gloo on CPU): with shards of equal size that is
the gradient over all rows, so every trainer takes the step one process would.

Without the launcher (plain `python3 train.py`) it runs as a single process on the
whole data set: the reference the distributed run must match.

Each trainer prints one line `PADDLE_REPORT {json}` with its rank, the final weights
and the loss on the whole data set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import paddle
import paddle.distributed as dist

SAMPLES, FEATURES, STEPS, RATE = 1200, 8, 60, 0.1


def data() -> tuple[np.ndarray, np.ndarray]:
    """The same synthetic regression problem in every process (fixed seed)."""
    rng = np.random.default_rng(20)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    w = rng.normal(size=(FEATURES, 1)).astype(np.float32)
    y = x @ w + 0.1 * rng.normal(size=(SAMPLES, 1)).astype(np.float32)
    return x, y


def launch() -> int:
    """Paddle's launcher on this script, its log folder a temporary one."""
    with tempfile.TemporaryDirectory(prefix="paddle-launch-") as logs:
        argv = [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", logs, __file__]
        launcher = subprocess.Popen(argv)
        # SIGTERM (the pod deleted) goes on to the launcher, which stops its trainer.
        signal.signal(signal.SIGTERM, lambda *_: launcher.terminate())
        return launcher.wait()


def train() -> None:
    paddle.set_device("cpu")
    trainers = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
    rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    if trainers > 1:
        dist.init_parallel_env()
    x, y = data()
    shard = np.array_split(np.arange(SAMPLES), trainers)[rank]
    xs, ys = paddle.to_tensor(x[shard]), paddle.to_tensor(y[shard])
    model = paddle.nn.Linear(
        FEATURES,
        1,
        weight_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.0)),
        bias_attr=False,
    )
    trained = paddle.DataParallel(model) if trainers > 1 else model
    optimizer = paddle.optimizer.SGD(learning_rate=RATE, parameters=model.parameters())
    for _ in range(STEPS):
        loss = paddle.nn.functional.mse_loss(trained(xs), ys)
        loss.backward()  # under DataParallel: the mean of every trainer's gradient
        optimizer.step()
        optimizer.clear_grad()
    with paddle.no_grad():
        total = paddle.nn.functional.mse_loss(model(paddle.to_tensor(x)), paddle.to_tensor(y))
    report = {
        "rank": rank,
        "trainers": trainers,
        "weights": model.weight.numpy().ravel().tolist(),
        "loss": float(total),
    }
    print("PADDLE_REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    if "PADDLE_MASTER" in os.environ and "PADDLE_TRAINER_ID" not in os.environ:
        sys.exit(launch())
    train()
