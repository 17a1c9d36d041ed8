"""A small MLP trained with DistributedDataParallel twice in the same
processes, from the same seed and data: once over the weft backend (the
default group), once over a gloo group. After every step each rank checks
that the two models' parameters match within the tolerance below and that
every rank holds the same weft model.

Run by ddp_test.py through the spawn harness, and as a script under torchrun
(rendezvous through torchrun's store):

    torchrun --standalone --nproc_per_node=4 -r 1 -t 1 ddp_train.py   # -r/-t: docs/torch.md

Tolerance: the gradients are summed over 4 ranks in different orders by
weft and Gloo (float32: each sum within 3 u sum|g| of the exact one, u =
2^-24); 20 SGD steps carry such differences into the parameters, where they
stay near 1e-7 here. A parameter may differ by at most ATOL + RTOL |p|.
"""

import copy
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 20
ATOL, RTOL = 1e-5, 1e-5


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 8))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)


def train(rank, size, steps=STEPS):
    """Returns the largest parameter difference weft - gloo after each step;
    raises AssertionError at the first step that breaks the tolerance."""
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(1234 + rank)  # different initial weights per rank: DDP must broadcast rank 0's
    model = mlp()
    # Small buckets: several allreduces per step, overlapping the backward pass.
    on_weft = DDP(copy.deepcopy(model), bucket_cap_mb=0.004)
    on_gloo = DDP(copy.deepcopy(model), process_group=gloo, bucket_cap_mb=0.004)
    assert dist.get_backend() == "weft", dist.get_backend()
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (on_weft, on_gloo)]
    diffs = []
    for step in range(steps):
        x, y = batch(step, rank)
        for m, opt in zip((on_weft, on_gloo), opts):
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
        worst = 0.0
        for (name, pw), pg in zip(on_weft.module.named_parameters(), on_gloo.module.parameters()):
            d = (pw - pg).abs()
            worst = max(worst, d.max().item())
            bad = d > ATOL + RTOL * pg.abs()
            assert not bad.any(), (f"rank {rank} step {step}: {name} differs from gloo's by {d.max().item():.3g} "
                                   f"(tolerance {ATOL} + {RTOL} |p|)")
        # Every rank holds the same weft model (DDP's promise).
        flat = torch.cat([p.detach().reshape(-1) for p in on_weft.module.parameters()])
        first = flat.clone()
        dist.broadcast(first, src=0, group=gloo)
        assert torch.equal(flat, first), f"rank {rank} step {step}: weft model differs from rank 0's"
        diffs.append(worst)
    dist.barrier()
    return diffs


def main():
    import weft_torch  # noqa: F401
    dist.init_process_group("weft", timeout=timedelta(seconds=60))  # torchrun's env:// store
    rank, size = dist.get_rank(), dist.get_world_size()
    diffs = train(rank, size)
    print(f"rank {rank} of {size}: {len(diffs)} steps, weft == gloo, largest difference {max(diffs):.3g}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
