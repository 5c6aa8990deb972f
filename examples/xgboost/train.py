"""Distributed XGBoost training, one process per XGBoostJob replica.

The Master starts XGBoost's tracker at MASTER_ADDR:MASTER_PORT (its own port) and
then trains as rank 0; every Worker joins it with its RANK, and WORLD_SIZE
processes build each tree together over XGBoost's collective (`xgboost.collective`):
each holds its own rows of a synthetic data set and the gradient histograms of all
are summed, so the model is the one a single process would build on all the rows.

Without the env (plain `python train.py`) it runs as a single process on the whole
data set: the reference the distributed run must match.

Each process prints one line `XGBOOST_REPORT {json}` with its rank, the number of
trees and the model's RMSE and predictions on the whole data set.
"""

from __future__ import annotations

import json
import os

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

SAMPLES, FEATURES, ROUNDS = 2000, 6, 20
PARAMS = {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": 4, "nthread": 1}


def data() -> tuple[np.ndarray, np.ndarray]:
    """The same synthetic regression problem in every process (fixed seed)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, size=(SAMPLES, FEATURES))
    y = np.sin(3 * x[:, 0]) + x[:, 1] ** 2 - x[:, 2] * x[:, 3] + 0.05 * rng.normal(size=SAMPLES)
    return x, y


def train(rank: int, world: int) -> xgb.Booster:
    x, y = data()
    rows = np.array_split(np.arange(SAMPLES), world)[rank]
    return xgb.train(PARAMS, xgb.DMatrix(x[rows], label=y[rows]), num_boost_round=ROUNDS)


def main() -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        tracker = None
        if rank == 0:  # the Master: the tracker every process reports to
            tracker = RabitTracker(host_ip=host, n_workers=world, port=port)
            tracker.start()
        context = {"dmlc_tracker_uri": host, "dmlc_tracker_port": port, "dmlc_task_id": str(rank)}
        with collective.CommunicatorContext(**context):
            booster = train(rank, world)
        if tracker is not None:
            tracker.wait_for()
    else:
        booster = train(0, 1)
    x, y = data()
    predictions = booster.predict(xgb.DMatrix(x))
    report = {
        "rank": rank,
        "world": world,
        "trees": booster.num_boosted_rounds(),
        "rmse": float(np.sqrt(np.mean((predictions - y) ** 2))),
        "predictions": predictions[:20].tolist(),
    }
    print("XGBOOST_REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
