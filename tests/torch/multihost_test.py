"""docs/torch.md's launch, as written, on two hosts: network namespaces of a
2-spine, 2-leaf fabric (scripts/netns-fabric.sh), one host per leaf, each
rank process in its own UTS namespace with its host's name (the library
tells hosts apart by hostname). `weft topo gen`, `weft rank --format
torchrun`, `weft route --protocol tcp`, then torchrun on each host with
WEFT_PLAN (2 ranks per host) running multihost_rank.py.

Checks: exact results; the ranks of a host share memory and the hosts talk
TCP; every cross-host flow of the plan is a connection from the host's
fabric address (the one towards MASTER_ADDR, as the library picks it) on the
planned source port to the peer host's planned listen port.

    /usr/bin/python3 multihost_test.py <weft binary>      # as root; label netns
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

harness.skip_unless_torch()

WEFT = sys.argv.pop(1)
FABRIC = os.path.join(HERE, "..", "..", "scripts", "netns-fabric.sh")
PER_HOST = 2
JOB_TIMEOUT_S = 150


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "nsenter", "unshare", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


class MultiHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = skip_reason()
        if why:
            print(f"SKIPPED: {why}")
            sys.exit(harness.SKIP)
        cls.env = dict(os.environ, WEFT_FABRIC_PREFIX=f"wt{os.getpid() % 100000}-")
        cls.state = tempfile.mkdtemp(prefix="weft-torch-fabric-")
        cls.env["WEFT_FABRIC_STATE"] = cls.state
        subprocess.run(["bash", FABRIC, "up", "2", "2", "1"], env=cls.env, check=True, capture_output=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["bash", FABRIC, "down"], env=cls.env, capture_output=True, timeout=120)
        shutil.rmtree(cls.state, ignore_errors=True)

    def fabric(self, *args):
        return subprocess.run(["bash", FABRIC, *args], env=self.env, check=True, capture_output=True, text=True,
                              timeout=60).stdout

    def test_docs_launch_rank_route_torchrun_on_two_hosts(self):
        ip = {}
        for line in self.fabric("hosts").splitlines():  # "namespace ip leaf index"
            ns, addr = line.split()[:2]
            ip[ns[len(self.env["WEFT_FABRIC_PREFIX"]):]] = addr
        with tempfile.TemporaryDirectory() as d:
            run = lambda *a: subprocess.run([WEFT, *a], check=True, capture_output=True, text=True)  # noqa: E731
            run("topo", "gen", "clos", "--spines", "2", "--leaves", "2", "--hosts", "1", "--nics", str(PER_HOST),
                "-o", f"{d}/fabric.json")
            with open(f"{d}/hosts", "w") as f:  # the allocation, in the scheduler's order
                f.write("".join(f"{h}:eth{k}\n" for h in ("h2-1", "h1-1") for k in range(PER_HOST)))
            run("rank", "--topology", f"{d}/fabric.json", "--hosts", f"{d}/hosts", "--algo", "clos", "--format",
                "torchrun", "-o", f"{d}/order.txt")
            run("route", "--topology", f"{d}/fabric.json", "--ranks", f"{d}/order.txt", "--protocol", "tcp",
                "--dport", "29600", "-o", f"{d}/plan.json")
            nodes = [line.split()[1] for line in open(f"{d}/order.txt") if line[0].isdigit()]
            self.assertEqual(sorted(nodes), ["h1-1", "h2-1"], open(f"{d}/order.txt").read())
            plan = json.load(open(f"{d}/plan.json"))
            master = ip[nodes[0]]
            os.makedirs(f"{d}/out")
            procs = []
            for k, host in enumerate(nodes):
                launch = (f"hostname {host} && exec env WEFT_PLAN={d}/plan.json OMP_NUM_THREADS=1 "
                          f"{sys.executable} -m torch.distributed.run --nnodes={len(nodes)} "
                          f"--nproc_per_node={PER_HOST} --node_rank={k} --master_addr={master} --master_port=29500 "
                          f"-r 1 -t 1 {HERE}/multihost_rank.py {d}/out")
                procs.append(subprocess.Popen(["bash", FABRIC, "exec", host, "unshare", "--uts", "sh", "-c", launch],
                                              env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                              text=True))
            outputs = []
            deadline = time.monotonic() + JOB_TIMEOUT_S
            for p in procs:
                try:
                    out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                outputs.append(out)
            log = "\n".join(o[-3000:] for o in outputs)
            self.assertEqual([p.returncode for p in procs], [0] * len(procs), log)
            reports = {}
            for name in os.listdir(f"{d}/out"):
                r = json.load(open(f"{d}/out/{name}"))
                reports[r["rank"]] = r
        size = len(nodes) * PER_HOST
        self.assertEqual(sorted(reports), list(range(size)), log)
        host_of = lambda r: nodes[r // PER_HOST]  # noqa: E731: torchrun: node_rank * nproc_per_node + local_rank
        for r, rep in reports.items():
            self.assertEqual(rep["wrong"], 0, f"rank {r}")
            self.assertEqual(rep["host"], host_of(r))
            want = ["" if p == r else ("shm" if host_of(p) == host_of(r) else "tcp") for p in range(size)]
            self.assertEqual(rep["transports"], want, f"rank {r}")
        cross = 0
        for f in plan["flows"]:
            a, b = f["src_rank"], f["dst_rank"]
            if host_of(a) == host_of(b):
                continue  # shared memory: no socket
            cross += 1
            conn = [f"{ip[host_of(a)]}:{f['sport']}", f"{ip[host_of(b)]}:{f['dport']}"]
            self.assertIn(conn, reports[a]["sockets"], f"rank {a} has no connection {conn[0]} -> {conn[1]}")
            self.assertIn(conn[::-1], reports[b]["sockets"], f"rank {b} has no connection {conn[1]} <- {conn[0]}")
        self.assertGreater(cross, 0, "the plan has no cross-host flows")


if __name__ == "__main__":
    unittest.main()
