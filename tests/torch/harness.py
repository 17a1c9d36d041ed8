"""Runs a function on N ranks, each a forked process, and collects what each
returned. Used by the tests of the torch backend (tests/torch/*.py).

    results = spawn(fn, 4, args=(...), timeout=120)   # fn(rank, size, *args)
    assert all(r.ok for r in results), failures(results)

Children are forked from a parent that has imported torch but run nothing
with it (no thread pools yet), so they start in milliseconds instead of
importing torch again. Every child that is still alive at the timeout, or
when the parent leaves, is killed (SIGKILL) and reaped.

A test module calls skip_unless_torch() first: without torch (Debian's
python3-torch, for /usr/bin/python3) it exits with 77, which ctest reports
as skipped, naming the reason.
"""

import multiprocessing
import os
import queue
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

SKIP = 77  # ctest SKIP_RETURN_CODE


def skip_unless_torch():
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIPPED: torch is not installed for {sys.executable} ({e}); "
              "apt-get install python3-torch (scripts/install-deps.sh)")
        sys.exit(SKIP)
    if not dist.is_available():
        print(f"SKIPPED: this torch was built without torch.distributed")
        sys.exit(SKIP)


def free_port() -> int:
    """A TCP port that was free a moment ago (the store's, MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RankResult:
    rank: int
    ok: bool = False
    value: Any = None          # what fn returned
    error: str = ""            # the traceback, when fn raised
    exitcode: Optional[int] = None
    finished_at: float = 0.0   # time.time() when fn returned or raised


def _child(fn, rank, size, port, results, args, env):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank)})
    os.environ.update(env or {})
    try:
        value = fn(rank, size, *args)
        results.put(RankResult(rank, True, value, finished_at=time.time()))
    except BaseException:  # noqa: B902: the parent reports everything
        results.put(RankResult(rank, False, error=traceback.format_exc(), finished_at=time.time()))


class Ranks:
    """The processes of one spawn: started, watched, killed and reaped."""

    def __init__(self, fn: Callable, size: int, args=(), env=None):
        ctx = multiprocessing.get_context("fork")
        self.queue = ctx.Queue()
        self.port = free_port()
        self.procs = [ctx.Process(target=_child, args=(fn, r, size, self.port, self.queue, args, env), daemon=True)
                      for r in range(size)]
        self.results = [RankResult(r) for r in range(size)]
        for p in self.procs:
            p.start()

    def collect(self, timeout: float, expect=None) -> List[RankResult]:
        """Waits until every rank in `expect` (default: all) reported or
        exited, or the timeout; then kills whatever is left."""
        want = set(range(len(self.procs)) if expect is None else expect)
        deadline = time.monotonic() + timeout
        try:
            while want and time.monotonic() < deadline:
                try:
                    r = self.queue.get(timeout=0.05)
                    self.results[r.rank] = r
                    want.discard(r.rank)
                    continue
                except queue.Empty:
                    pass
                gone = {i for i in want if not self.procs[i].is_alive()}
                if gone and self.queue.empty():
                    for i in gone:
                        self.results[i].error = f"rank {i} exited (code {self.procs[i].exitcode}) without a result"
                    want -= gone
            for i in want:
                self.results[i].error = f"rank {i} did not finish within {timeout} s"
        finally:
            self.reap(grace=5.0)
        return self.results

    def reap(self, grace: float):
        """Lets the children exit on their own for `grace` seconds, then
        kills the rest."""
        deadline = time.monotonic() + grace
        for r, p in enumerate(self.procs):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
                self.results[r].error += f" (rank {r} did not exit: killed)"
            self.results[r].exitcode = p.exitcode

    def __del__(self):
        for p in getattr(self, "procs", []):
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()


def spawn(fn: Callable, size: int, args=(), timeout: float = 120, env=None) -> List[RankResult]:
    return Ranks(fn, size, args, env).collect(timeout)


def failures(results: List[RankResult]) -> str:
    return "\n".join(f"rank {r.rank}: {r.error}" for r in results if not r.ok) or "none"


def run(test, fn: Callable, size: int, **kwargs) -> List[RankResult]:
    """spawn(), failing the unittest `test` with every rank's error unless
    every rank returned."""
    results = spawn(fn, size, **kwargs)
    test.assertTrue(all(r.ok for r in results), failures(results))
    return results


def tcp_sockets():
    """(local "ip:port", remote "ip:port", state) of every IPv4 TCP socket
    this process holds: its socket inodes (/proc/self/fd) looked up in
    /proc/net/tcp (proc(5)); state "01" is ESTABLISHED, "0A" LISTEN."""
    def address(hex_pair):
        ip, port = hex_pair.split(":")
        return f"{socket.inet_ntoa(bytes.fromhex(ip)[::-1])}:{int(port, 16)}"

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
            if col[9] in inodes:
                out.append((address(col[1]), address(col[2]), col[3]))
    return out


def init(backend: str, rank: int, size: int, timeout_s: float = 60):
    """init_process_group through the env:// store the harness set up."""
    from datetime import timedelta

    import torch.distributed as dist
    if backend == "weft":
        import weft_torch  # noqa: F401
    dist.init_process_group(backend, rank=rank, world_size=size, timeout=timedelta(seconds=timeout_s))
