"""One rank of multihost_test.py, started by torchrun inside a host's network
namespace: an AllReduce and an AllGather over the weft backend (exact), then
what the rank sees of its connections, written to <outdir>/rank<R>.json:
the transport serving each peer and every IPv4 TCP socket the process holds
(/proc/net/tcp, proc(5)), taken while the connections are up."""

import json
import os
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def main():
    import weft_torch  # noqa: F401
    dist.init_process_group("weft", timeout=timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((1 << 20,), float(rank + 1))
    dist.all_reduce(t)
    wrong = int((t != size * (size + 1) / 2).sum())
    outs = [torch.empty(3) for _ in range(size)]
    dist.all_gather(outs, torch.full((3,), float(rank)))
    wrong += sum(int((o != r).sum()) for r, o in enumerate(outs))
    report = {"rank": rank, "host": socket.gethostname(), "wrong": wrong,
              "transports": dist.group.WORLD._peer_transports(),
              "sockets": [[local, remote] for local, remote, state in harness.tcp_sockets() if state == "01"]}
    dist.barrier()  # every rank has looked before any closes
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
