"""A small regression model trained with DistributedDataParallel over gloo, on CPU.

Run as a PyTorchJob replica (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK from the
operator, or from torchrun in the elastic job), or alone (no WORLD_SIZE: one process,
the whole of every batch), which is the reference the distributed runs must match:
each step's global batch is split evenly across the ranks and DDP averages their
gradients, so every rank takes the same steps as a single process over the same data.

Data: 768 rows made here from a fixed seed (no download). Prints one line
`PYTORCH_REPORT {json}` at the end (read by tests/pytorch), e.g.
PYTORCH_REPORT {"rank": 0, "world_size": 3, "final_loss": 0.0101, ...}
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

ROWS, FEATURES, GLOBAL_BATCH, EPOCHS, LEARNING_RATE = 768, 8, 96, 6, 0.05


def data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, FEATURES, generator=generator)
    weights = torch.randn(FEATURES, 1, generator=generator)
    y = torch.tanh(x @ weights) + 0.05 * torch.randn(ROWS, 1, generator=generator)
    return x, y


def model() -> nn.Module:
    torch.manual_seed(1)  # the same initial weights in every process
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.Tanh(), nn.Linear(16, 1))


def main() -> None:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        # env:// reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE.
        dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank() if distributed else 0
    if GLOBAL_BATCH % world_size:
        raise SystemExit(f"WORLD_SIZE {world_size} must divide the batch of {GLOBAL_BATCH}")
    net = model()
    trained: nn.Module = nn.parallel.DistributedDataParallel(net) if distributed else net
    optimizer = torch.optim.SGD(trained.parameters(), lr=LEARNING_RATE)
    x, y = data()
    losses = []
    for epoch in range(EPOCHS):
        for start in range(0, ROWS, GLOBAL_BATCH):
            # This rank's share of the global batch: every world_size-th row.
            rows = slice(start + rank, start + GLOBAL_BATCH, world_size)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(trained(x[rows]), y[rows])
            loss.backward()  # DDP all-reduces (averages) the gradients here
            optimizer.step()
        with torch.no_grad():
            losses.append(nn.functional.mse_loss(net(x), y).item())
        print(f"rank {rank}/{world_size} epoch {epoch}: loss {losses[-1]:.6f}")
    checksum = float(sum(p.detach().double().sum() for p in net.parameters()))
    report = {
        "rank": rank,
        "world_size": world_size,
        "final_loss": losses[-1],
        "losses": losses,
        "checksum": checksum,
        "pod_name": os.environ.get("TFJOB_POD_NAME"),
        "master": f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
        # Set by torchrun's elastic agent only (examples/pytorch/elastic.yaml).
        "torchrun": "TORCHELASTIC_RUN_ID" in os.environ,
        "rdzv_endpoint": os.environ.get("PET_RDZV_ENDPOINT"),
        "pid": os.getpid(),
    }
    print("PYTORCH_REPORT " + json.dumps(report), flush=True)
    if distributed:
        dist.barrier()  # every rank has reported before the Master's exit ends the job
        dist.destroy_process_group()
        # torch's C++ teardown at interpreter exit can abort the process ("terminate
        # called without an active exception", SIGABRT; seen once in a few hundred
        # runs on torch 2.15 with gloo), failing a rank whose work is done, and then
        # its torchrun waits for a rendezvous the finished ranks never join. The work
        # is done and reported: leave without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
