"""Synchronous data-parallel training with tf.distribute.MultiWorkerMirroredStrategy.

Run by every replica of `multi_worker.yaml` (2 workers) and `multi_worker_chief.yaml`
(Chief + 2 workers). Every replica trains: each reads a different shard of a synthetic
linear-regression set, gradients are summed across processes with an explicit
all-reduce, and every replica applies the same update. The chief (or worker 0 when
there is no chief) writes the final checkpoint.

Proof that training really crossed processes, in the TFJOB_REPORT line:
- `step1_diff_vs_global_batch`: the weights after step 1 minus what plain gradient
  descent on the *union of all shards' first batches* gives (rebuilt locally from the
  shared seed). About 1e-7 when the all-reduce ran.
- `step1_diff_vs_own_shard`: the same against this replica's shard alone, i.e. what an
  isolated single-process run would have done. Clearly non-zero.
- `global_batch_all_reduced`: per-step example counts summed by all-reduce; equals the
  global batch size only if every replica contributed.
- `final_weights`: identical on every replica although each saw different data.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import tensorflow as tf
from tfjob_example import (
    FEATURES,
    base_parser,
    cluster_facts,
    model_dir,
    regression_data,
    report,
    resolve_cluster,
    say,
)


def _sgd_step(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray, lr: float
) -> tuple[np.ndarray, np.ndarray]:
    """One mean-squared-error gradient-descent step in NumPy: the reference to compare to."""
    residual = x @ w + b - y
    grad_w = 2.0 * x.T @ residual / len(x)
    grad_b = 2.0 * residual.sum(axis=0) / len(x)
    return w - lr * grad_w, b - lr * grad_b


def main() -> None:
    """Train, prove the all-reduce, checkpoint on the chief, report."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--global-batch", type=int, default=60, help="divisible by #replicas")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    args = parser.parse_args()

    resolver = resolve_cluster()
    facts = cluster_facts(resolver)
    say(f"TF_CONFIG parsed: {facts['task_type']}:{facts['task_id']} of {facts['cluster_spec']}")

    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    replicas = strategy.num_replicas_in_sync
    say(f"MultiWorkerMirroredStrategy ready: {replicas} replicas in sync")

    x, y, true_w = regression_data()
    lr = args.learning_rate
    pipelines: list[tf.distribute.InputContext] = []

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        """Shard by input pipeline so every process reads different examples."""
        pipelines.append(ctx)
        batch = ctx.get_per_replica_batch_size(args.global_batch)
        data = tf.data.Dataset.from_tensor_slices((x, y))
        data = data.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return data.repeat().batch(batch, drop_remainder=True)

    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    me, shards = pipelines[0].input_pipeline_id, pipelines[0].num_input_pipelines
    per_replica = args.global_batch // replicas

    with strategy.scope():
        # The gradients are all-reduced explicitly below; every replica then applies
        # the same (already global) update to its own copy.
        only_first = tf.VariableAggregation.ONLY_FIRST_REPLICA
        w = tf.Variable(tf.zeros([FEATURES, 1]), aggregation=only_first, name="w")
        b = tf.Variable(tf.zeros([1]), aggregation=only_first, name="b")
        step = tf.Variable(0, dtype=tf.int64, aggregation=only_first, name="step")

    @tf.function
    def train_step(iterator: Any) -> tuple[tf.Tensor, tf.Tensor]:
        def replica_fn(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            with tf.GradientTape() as tape:
                per_example = tf.square(tf.matmul(xb, w) + b - yb)[:, 0]
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=args.global_batch)
            grads = tape.gradient(loss, [w, b])
            ctx = tf.distribute.get_replica_context()
            grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
            seen = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.shape(xb)[0], tf.float32))
            w.assign_sub(lr * grads[0])
            b.assign_sub(lr * grads[1])
            step.assign_add(1)
            return loss, seen

        loss, seen = strategy.run(replica_fn, args=next(iterator))
        return (
            strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
            strategy.experimental_local_results(seen)[0],
        )

    def one() -> tf.Tensor:
        return tf.constant(1.0)

    @tf.function
    def barrier() -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(one), axis=None)

    iterator = iter(dataset)
    w0, b0 = w.numpy(), b.numpy()
    losses: list[float] = []
    seen_counts: set[float] = set()
    step1: dict[str, float] = {}
    for i in range(args.steps):
        loss, seen = train_step(iterator)
        losses.append(float(loss))
        seen_counts.add(float(seen))
        if i == 0:
            # Reference updates computed here, without any collective.
            firsts = [
                (x[p::shards][:per_replica], y[p::shards][:per_replica]) for p in range(shards)
            ]
            gx = np.concatenate([f[0] for f in firsts])
            gy = np.concatenate([f[1] for f in firsts])
            global_w, global_b = _sgd_step(gx, gy, w0, b0, lr)
            own_w, own_b = _sgd_step(*firsts[me], w0, b0, lr)
            got = np.concatenate([w.numpy().ravel(), b.numpy().ravel()])
            step1 = {
                "vs_global": float(np.abs(got - np.r_[global_w.ravel(), global_b]).max()),
                "vs_own": float(np.abs(got - np.r_[own_w.ravel(), own_b]).max()),
            }
        if i == 0 or (i + 1) % 10 == 0:
            say(f"step {i + 1}: global loss {losses[-1]:.5f}")

    # Saving is done by every worker (the TF guidance for MWMS); only the chief's copy
    # is kept, the others write to a scratch folder that is removed again.
    out = model_dir(args.model_dir)
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    chief = strategy.extended.should_checkpoint
    target = out / "final" if chief else out / f"scratch-{facts['task_type']}-{facts['task_id']}"
    saved = checkpoint.write(str(target / "ckpt"))
    if chief:
        say(f"checkpoint written to {saved}")
    else:
        shutil.rmtree(target, ignore_errors=True)

    final = np.concatenate([w.numpy().ravel(), b.numpy().ravel()])
    report(
        facts,
        strategy="MultiWorkerMirroredStrategy",
        num_replicas_in_sync=replicas,
        input_pipeline_id=me,
        num_input_pipelines=shards,
        global_batch=args.global_batch,
        global_batch_all_reduced=sorted(seen_counts),
        step1_diff_vs_global_batch=step1["vs_global"],
        step1_diff_vs_own_shard=step1["vs_own"],
        losses=losses,
        final_weights=[float(v) for v in final],
        true_weights=[float(v) for v in true_w.ravel()] + [0.5],
        should_checkpoint=bool(chief),
        checkpoint=saved if chief else None,
        model_dir=str(out),
    )
    # One last collective as a barrier: nobody exits before every replica has printed
    # its report. The job succeeds as soon as the chief (or worker 0) exits, and the
    # replicas still running are then stopped, which could cut a slower one's report.
    barrier()


if __name__ == "__main__":
    main()
