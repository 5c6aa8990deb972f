"""Asynchronous training with tf.distribute.ParameterServerStrategy, one program per role.

Run by every replica of `parameter_server.yaml`; TF_CONFIG decides the role:
- ps / worker: start a `tf.distribute.Server` and block. They never exit by themselves;
  the job is over when the chief is, and cleanPodPolicy removes them.
- chief: the coordinator. It places the variables on the PS (the weight matrix sharded
  over every PS), schedules training steps on the workers through
  `tf.distribute.experimental.coordinator.ClusterCoordinator`, checkpoints after each
  round of steps and stops once enough steps ran *and* every worker slot served the
  last round, so a worker that was killed and restarted has to be taken back before the
  job ends (the coordinator retries a dead worker's steps elsewhere meanwhile).
- evaluator: a side-car that evaluates the chief's newest checkpoint on held-out data
  until the chief's final checkpoint is done.

Each worker's input pipeline shuffles with a seed it draws itself when the coordinator
builds it on that worker (workers cannot shard by index under this strategy). The seed
also names the pipeline: every step prints `TFJOB_STEP ... pipeline <seed>` into the log
of the worker that ran it and returns the seed to the chief, so the chief's report says
how many steps each worker process ran, and a restarted worker shows up as a new
pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# The gRPC setting the TensorFlow guide recommends for fault-tolerant PS training:
# calls to a dead task fail at once instead of waiting, so the coordinator can react.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import numpy as np
import tensorflow as tf
from tfjob_example import (
    FEATURES,
    base_parser,
    cluster_facts,
    fail,
    model_dir,
    regression_data,
    report,
    resolve_cluster,
    say,
)

DONE_FILE = "DONE.json"
EVAL_DONE_FILE = "eval-final.json"


def serve(resolver: tf.distribute.cluster_resolver.TFConfigClusterResolver) -> None:
    """PS and workers: host variables or run scheduled functions until killed."""
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    say(f"tf.distribute.Server up at {server.target}; waiting for the coordinator")
    server.join()


def coordinate(
    args: argparse.Namespace,
    resolver: tf.distribute.cluster_resolver.TFConfigClusterResolver,
    facts: dict[str, Any],
) -> None:
    """Chief: build the model on the PS, schedule steps on the workers, checkpoint."""
    cluster = resolver.cluster_spec().as_dict()
    num_ps, num_workers = len(cluster.get("ps", [])), len(cluster.get("worker", []))
    # The operator lists the evaluator in every TF_CONFIG (as Kubeflow's operator does),
    # but the coordinator connects to *every* task of its cluster and would wait forever
    # for the evaluator, which runs no server. So the coordinator gets the same cluster
    # minus the evaluator.
    training_cluster = {job: tasks for job, tasks in cluster.items() if job != "evaluator"}
    coordinator_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(training_cluster),
        task_type=resolver.task_type,
        task_id=resolver.task_id,
        rpc_layer=resolver.rpc_layer or "grpc",
    )
    strategy = tf.distribute.ParameterServerStrategy(
        coordinator_resolver,
        variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(
            num_shards=num_ps
        ),
    )
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    say(f"coordinator connected: {num_workers} workers, {num_ps} parameter servers")

    with strategy.scope():
        w = tf.Variable(tf.zeros([FEATURES, 1]), name="w")
        b = tf.Variable(tf.zeros([1]), name="b")
        step = tf.Variable(0, dtype=tf.int64, name="step")
    trainable = [*getattr(w, "variables", [w]), b]
    placement = sorted({v.device for v in trainable})
    say(f"variables placed on {placement}")

    x, y, _ = regression_data()
    lr, batch = args.learning_rate, args.batch

    def dataset_fn() -> tf.data.Dataset:
        """Built on each worker; the seed is drawn there, so it differs per worker."""
        seed = tf.random.uniform([], 1, 2**31 - 1, dtype=tf.int64)
        data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed)
        data = data.repeat().batch(batch, drop_remainder=True)
        return tf.data.Dataset.zip((data, tf.data.Dataset.from_tensors(seed).repeat()))

    @tf.function
    def train_step(iterator: Any) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        (xb, yb), pipeline = next(iterator)

        def replica_fn(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(xb, w) + b - yb))
            for var, grad in zip(trainable, tape.gradient(loss, trainable), strict=True):
                var.assign_sub(lr * grad)
            return loss, step.assign_add(1)

        loss, global_step = strategy.run(replica_fn, args=(xb, yb))
        # Runs on the worker, so it lands in that worker's log.
        tf.print(
            "TFJOB_STEP step", global_step, "pipeline", pipeline, "loss", loss,
            output_stream=sys.stdout,
        )  # fmt: skip
        return loss, global_step, pipeline

    out = model_dir(args.model_dir)
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    manager = tf.train.CheckpointManager(checkpoint, str(out / "checkpoints"), max_to_keep=5)
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    started = time.monotonic()
    round_losses: list[float] = []
    steps_per_pipeline: dict[str, int] = {}
    done = 0
    complete = False
    while True:
        scheduled = [
            coordinator.schedule(train_step, args=(iterator,)) for _ in range(args.round_steps)
        ]
        coordinator.join()
        results = [r.fetch() for r in scheduled]
        done += len(results)
        round_losses.append(float(np.mean([float(r[0]) for r in results])))
        in_round = {str(int(r[2])) for r in results}
        for r in results:
            key = str(int(r[2]))
            steps_per_pipeline[key] = steps_per_pipeline.get(key, 0) + 1
        saved = manager.save(checkpoint_number=int(step.numpy()))
        say(
            f"round {len(round_losses)}: {done} steps, mean loss {round_losses[-1]:.5f}, "
            f"{len(in_round)}/{num_workers} workers active, checkpoint {Path(saved).name}"
        )
        if done >= args.min_steps and len(in_round) >= num_workers:
            complete = True
            break
        if time.monotonic() - started > args.max_seconds:
            say("giving up waiting for every worker to serve a round (--max-seconds)")
            break

    final = manager.save(checkpoint_number=int(step.numpy()))
    final_step = int(step.numpy())
    (out / DONE_FILE).write_text(json.dumps({"checkpoint": final, "step": final_step}))
    say(f"training done after {time.monotonic() - started:.1f}s; final checkpoint {final}")

    evaluation = wait_for_evaluation(out, cluster, args.eval_wait_seconds)
    report(
        facts,
        strategy="ParameterServerStrategy",
        variable_devices=placement,
        num_workers=num_workers,
        num_ps=num_ps,
        steps=done,
        global_step=final_step,
        losses=round_losses,
        steps_per_pipeline=steps_per_pipeline,
        all_workers_in_last_round=complete,
        checkpoint=final,
        final_eval_loss=evaluation.get("loss"),
        final_eval_step=evaluation.get("step"),
        model_dir=str(out),
    )


def wait_for_evaluation(out: Path, cluster: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Give the side-car evaluator time to score the final checkpoint.

    The job succeeds as soon as the chief exits, and cleanPodPolicy then stops the
    evaluator, so without this wait its verdict on the final model could be lost.
    """
    if "evaluator" not in cluster:
        return {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        marker = out / EVAL_DONE_FILE
        if marker.exists():
            result: dict[str, Any] = json.loads(marker.read_text())
            return result
        time.sleep(0.2)
    say("the evaluator did not score the final checkpoint in time")
    return {}


def evaluate(args: argparse.Namespace, facts: dict[str, Any]) -> None:
    """Side-car evaluator: score each newest checkpoint of the chief until the final one."""
    out = model_dir(args.model_dir)
    x, y, _ = regression_data(examples=1024, seed=4321)  # held out: a different draw
    w = tf.Variable(tf.zeros([FEATURES, 1]), name="w")
    b = tf.Variable(tf.zeros([1]), name="b")
    step = tf.Variable(0, dtype=tf.int64, name="step")
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    evaluations: list[dict[str, float]] = []
    seen: str | None = None
    deadline = time.monotonic() + args.max_seconds + 600
    say(f"evaluating checkpoints from {out / 'checkpoints'}")
    while time.monotonic() < deadline:
        finished = (out / DONE_FILE).exists()  # read before the checkpoint: no race
        latest = tf.train.latest_checkpoint(str(out / "checkpoints"))
        if latest and latest != seen:
            try:
                checkpoint.read(latest).expect_partial()
            except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError):
                time.sleep(0.2)  # the chief rotated it away while we read; try the next
                continue
            seen = latest
            loss = float(tf.reduce_mean(tf.square(x @ w + b - y)))
            evaluations.append({"step": int(step.numpy()), "loss": loss})
            say(f"eval of {Path(latest).name}: step {int(step.numpy())}, loss {loss:.5f}")
        if finished and seen == json.loads((out / DONE_FILE).read_text())["checkpoint"]:
            (out / EVAL_DONE_FILE).write_text(json.dumps(evaluations[-1]))
            losses = [e["loss"] for e in evaluations]
            report(facts, evaluations=evaluations, losses=losses, model_dir=str(out))
            return
        time.sleep(0.5)
    fail("no final checkpoint from the chief")


def main() -> None:
    """Dispatch on the role TensorFlow read from TF_CONFIG."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--min-steps", type=int, default=400)
    parser.add_argument("--round-steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=32, help="per-step batch of one worker")
    parser.add_argument("--learning-rate", type=float, default=0.02)
    parser.add_argument(
        "--max-seconds", type=float, default=240, help="chief: stop waiting for a lost worker"
    )
    parser.add_argument("--eval-wait-seconds", type=float, default=60)
    args = parser.parse_args()

    resolver = resolve_cluster()
    facts = cluster_facts(resolver)
    say(f"TF_CONFIG parsed: {facts['task_type']}:{facts['task_id']} of {facts['cluster_spec']}")
    if facts["task_type"] in ("ps", "worker"):
        report(facts, losses=None)  # printed before blocking: these never return
        serve(resolver)
    elif facts["task_type"] == "chief":
        coordinate(args, resolver, facts)
    elif facts["task_type"] == "evaluator":
        evaluate(args, facts)
    else:
        fail(f"unexpected task type {facts['task_type']!r} for parameter-server training")


if __name__ == "__main__":
    main()
