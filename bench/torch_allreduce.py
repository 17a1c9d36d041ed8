#!/usr/bin/python3
"""dist.all_reduce over the weft backend against PyTorch's gloo backend, in
the same processes and the same run (interleaved, best of --rounds), and the
time of one DistributedDataParallel step of a ~25 M-parameter MLP over each.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_allreduce.py
    PYTHONPATH=build/python /usr/bin/python3 bench/torch_allreduce.py --ranks 2 --min-bytes 1M --no-ddp

Ranks are processes on this host (forked); the weft group is the default
one (shared memory between them unless WEFT_TRANSPORT=tcp), gloo a
new_group of the same ranks. Each point: float32 ones, `iters` calls timed
between two barriers on every rank (iters such that a batch takes about
--batch-seconds), the slowest rank's mean per call, best of the rounds;
busbw = 2 (P - 1) / P x bytes / time (nccl-tests' definition). Every size is
verified on both backends (an untimed call: sum of rank + 1 over the ranks).
Not a test: figures go to bench/results/.
"""

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def parse_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def agree_max(x, control):
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=control)
    return t.item()


def verify(t, group, size):
    t.fill_(dist.get_rank() + 1)
    dist.all_reduce(t, group=group)
    want = size * (size + 1) / 2
    if not bool((t == want).all()):
        raise SystemExit(f"rank {dist.get_rank()}: wrong all_reduce result on {group}: {t[:4].tolist()}, want {want}")


def time_calls(t, group, iters, control):
    dist.barrier(group=control)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    mine = (time.perf_counter() - start) / iters
    return agree_max(mine, control)


def allreduce_sweep(rank, size, args, out):
    groups = {"weft": None, "gloo": dist.new_group(backend="gloo")}
    control = groups["gloo"]
    nbytes = args.min_bytes
    while nbytes <= args.max_bytes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        best = {}
        for name, g in groups.items():
            verify(t, g, size)
            t.fill_(1)
            dist.all_reduce(t, group=g)  # warm-up (and the first call's page faults)
        # How many calls a batch of about batch_seconds holds, agreed by all.
        est = max(time_calls(t, groups[n], 1, control) for n in groups)
        for r in range(args.rounds):
            for name, g in groups.items():
                est_one = time_calls(t, g, 1, control)
                iters = int(min(max(args.batch_seconds / max(est_one, 1e-7), 3), 5000))
                iters = int(agree_max(iters, control))
                s = time_calls(t, g, iters, control)
                best[name] = min(best.get(name, s), s)
        if rank == 0:
            out.append((size, nbytes, best["weft"], best["gloo"]))
            bw = lambda s: 2 * (size - 1) / size * nbytes / s / 1e9  # noqa: E731
            print(f"{size:>5} {human(nbytes):>9} {best['weft'] * 1e6:>12.1f} {bw(best['weft']):>9.3f} "
                  f"{best['gloo'] * 1e6:>12.1f} {bw(best['gloo']):>9.3f} {best['gloo'] / best['weft']:>8.2f}", flush=True)
        del t
        nbytes *= 4


def mlp_25m():
    """Five 2240 x 2240 layers: 25.1 M parameters (100 MB of float32 gradients)."""
    layers = []
    for i in range(5):
        layers += [torch.nn.Linear(2240, 2240), torch.nn.ReLU()] if i < 4 else [torch.nn.Linear(2240, 2240)]
    return torch.nn.Sequential(*layers)


def ddp_step(rank, size, args):
    from torch.nn.parallel import DistributedDataParallel as DDP
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    base = mlp_25m()
    params = sum(p.numel() for p in base.parameters())
    models = {"weft": DDP(base), "gloo": DDP(mlp_25m(), process_group=gloo)}
    opts = {n: torch.optim.SGD(m.parameters(), lr=1e-4) for n, m in models.items()}
    x, y = torch.randn(args.batch, 2240), torch.randn(args.batch, 2240)

    def step(name, sync=True):
        m, opt = models[name], opts[name]
        dist.barrier(group=gloo)
        start = time.perf_counter()
        opt.zero_grad()
        if sync:
            torch.nn.functional.mse_loss(m(x), y).backward()
        else:
            with m.no_sync():  # the same step without its gradient AllReduce
                torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        return agree_max(time.perf_counter() - start, gloo)

    times = {"weft": [], "gloo": [], "compute only": []}
    for name in ("weft", "gloo"):
        step(name)  # warm-up
    for _ in range(args.ddp_steps):
        for name in ("weft", "gloo"):
            times[name].append(step(name))
        times["compute only"].append(step("weft", sync=False))
    if rank == 0:
        med = {n: statistics.median(v) for n, v in times.items()}
        print(f"DDP step, {params / 1e6:.1f} M parameters, batch {args.batch}, {size} ranks, median of "
              f"{args.ddp_steps}: weft {med['weft'] * 1e3:.0f} ms, gloo {med['gloo'] * 1e3:.0f} ms "
              f"(gloo / weft {med['gloo'] / med['weft']:.2f}), without the AllReduce {med['compute only'] * 1e3:.0f} ms",
              flush=True)


def run(rank, size, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(args.threads)
    import weft_torch  # noqa: F401
    dist.init_process_group("weft", rank=rank, world_size=size, timeout=timedelta(seconds=600))
    out = []
    if args.max_bytes >= args.min_bytes:
        allreduce_sweep(rank, size, args, out)
    if args.ddp:
        ddp_step(rank, size, args)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--min-bytes", type=parse_bytes, default=4 << 10)
    ap.add_argument("--max-bytes", type=parse_bytes, default=256 << 20)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved weft/gloo batches per size; best is kept")
    ap.add_argument("--batch-seconds", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    ap.add_argument("--no-ddp", dest="ddp", action="store_false")
    ap.add_argument("--ddp-steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8, help="samples per rank and DDP step")
    args = ap.parse_args()

    import multiprocessing
    import socket
    ctx = multiprocessing.get_context("fork")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}, WEFT_TRANSPORT={os.environ.get('WEFT_TRANSPORT', 'auto')}", flush=True)
    print(f"{'ranks':>5} {'size':>9} {'weft us':>12} {'weft GB/s':>9} {'gloo us':>12} {'gloo GB/s':>9} "
          f"{'gloo/weft':>8}", flush=True)
    for size in args.ranks:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = [ctx.Process(target=run, args=(r, size, port, args)) for r in range(size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(1800)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if any(p.exitcode != 0 for p in procs):
            sys.exit(f"{size} ranks: exit codes {[p.exitcode for p in procs]}")
    print(f"# load {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
