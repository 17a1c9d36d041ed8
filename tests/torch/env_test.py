"""The environment of a weft process group (docs/torch.md "Environment"):
WEFT_TRANSPORT, WEFT_HOST (which ranks share memory), WEFT_PLAN (the route
plan's ports on every TCP connection of the default group), and bad values
failing init_process_group with a message naming the variable."""

import json
import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.skip_unless_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def ports_of_sockets():
    """(local port, remote port, listening) of every TCP socket of this process."""
    port = lambda a: int(a.rsplit(":", 1)[1])  # noqa: E731
    return [(port(local), port(remote), state == "0A") for local, remote, state in harness.tcp_sockets()]


def sums_right(group=None, count=262147):
    size = dist.get_world_size(group)
    t = torch.full((count,), float(dist.get_rank() + 1))
    dist.all_reduce(t, group=group)
    ranks = range(size) if group is None else dist.get_process_group_ranks(group)
    assert torch.equal(t, torch.full((count,), float(sum(r + 1 for r in ranks)))), t[:3]
    outs = [torch.empty(5) for _ in range(size)]
    dist.all_gather(outs, torch.full((5,), float(dist.get_rank())), group=group)
    assert [o[0].item() for o in outs] == [float(r) for r in ranks], outs


def transports(rank, size):
    harness.init("weft", rank, size)
    sums_right()
    return dist.group.WORLD._peer_transports()


def bad_value(rank, size):
    # Rank 0 serves the store from init_process_group, which raises: the
    # backend holds it until every rank failed (store_adapter.h), or rank 1
    # would time out connecting instead of reading the reason.
    try:
        harness.init("weft", rank, size, timeout_s=20)
    except RuntimeError as e:
        return str(e)
    return "init_process_group succeeded"


def planned(rank, size, plan):
    harness.init("weft", rank, size)
    sums_right()
    socks = ports_of_sockets()
    sub = dist.new_group(list(range(size)))  # not the plan's: ephemeral ports next to the planned ones
    sums_right(sub)
    return socks


def plan_for(size, base):
    """Every directed pair over TCP: sport = base + 1 + 16 src + dst, every
    flow into rank d on dport base + 1000 + d (docs/route-plan.md)."""
    flows = [{"src_rank": s, "dst_rank": d, "src_host": f"h{s}", "dst_host": f"h{d}", "protocol": "tcp",
              "sport": base + 1 + 16 * s + d, "dport": base + 1000 + d, "path": [], "steps": []}
             for s in range(size) for d in range(size) if s != d]
    return {"version": 1, "collective": "allreduce-hd", "topology": "test", "ranks": size, "flows": flows, "steps": []}


class Environment(unittest.TestCase):
    def test_weft_transport_tcp_serves_every_peer_over_tcp(self):
        for r in harness.run(self, transports, 3, env={"WEFT_TRANSPORT": "tcp"}, timeout=90):
            self.assertEqual(r.value, ["" if p == r.rank else "tcp" for p in range(3)])

    def test_one_host_shares_memory_by_default(self):
        for r in harness.run(self, transports, 3, timeout=90):
            self.assertEqual(r.value, ["" if p == r.rank else "shm" for p in range(3)])

    def test_weft_host_makes_hosts_shm_within_tcp_across(self):
        # Ranks 0, 1 on "a", 2, 3 on "b": the ranks of one host share memory,
        # the hosts talk TCP, and AllReduce runs hybrid.
        def two_hosts(rank, size):
            os.environ["WEFT_HOST"] = "a" if rank < 2 else "b"
            return transports(rank, size)
        for r in harness.run(self, two_hosts, 4, timeout=90):
            want = ["" if p == r.rank else ("shm" if p // 2 == r.rank // 2 else "tcp") for p in range(4)]
            self.assertEqual(r.value, want)

    def test_bad_values_fail_init_naming_the_variable(self):
        for env, words in [({"WEFT_TRANSPORT": "rdma"}, ["WEFT_TRANSPORT=rdma", "expected auto, tcp or shm"]),
                           ({"WEFT_PLAN": "/nonexistent/plan.json"}, ["WEFT_PLAN=/nonexistent/plan.json"]),
                           ({"WEFT_LISTEN_ADDR": "10.255.255.254"}, ["10.255.255.254", "WEFT_LISTEN_ADDR"])]:
            for r in harness.run(self, bad_value, 2, env=env, timeout=60):
                for w in words:
                    self.assertIn(w, r.value, f"{env}: rank {r.rank}")

    def test_weft_plan_sets_the_ports_of_every_tcp_connection(self):
        size = 4
        for attempt in range(3):
            # A random base keeps parallel runs apart; a port someone else holds
            # fails the bind, and the test tries another base.
            base = random.randrange(20000, 50000)
            with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
                json.dump(plan_for(size, base), f)
                f.flush()
                results = harness.spawn(planned, size, args=(f.name,), timeout=90,
                                        env={"WEFT_PLAN": f.name, "WEFT_TRANSPORT": "tcp"})
            if all(r.ok for r in results) or not any("bind" in r.error for r in results):
                break
        self.assertTrue(all(r.ok for r in results), harness.failures(results))
        for r in results:
            me = r.rank
            self.assertIn((base + 1000 + me, 0, True), r.value, f"rank {me} does not listen on its planned port")
            for p in range(size):
                if p != me:
                    self.assertIn((base + 1 + 16 * me + p, base + 1000 + p, False), r.value,
                                  f"rank {me}'s connection to rank {p} is not on the planned ports")


if __name__ == "__main__":
    unittest.main()
