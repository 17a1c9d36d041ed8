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


def ip_port(hex_pair):
    ip, port = hex_pair.split(":")
    return f"{socket.inet_ntoa(bytes.fromhex(ip)[::-1])}:{int(port, 16)}"


def tcp_sockets():
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            col = line.split()
            if col[9] in inodes and col[3] == "01":  # ESTABLISHED
                out.append([ip_port(col[1]), ip_port(col[2])])
    return out


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
              "transports": dist.group.WORLD._peer_transports(), "sockets": tcp_sockets()}
    dist.barrier()  # every rank has looked before any closes
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
