"""A rank lost mid-training: 4 processes train with DDP over the weft
backend (fault_worker.py, each a real `python3` process that exits as a
script does); once every rank has taken a few steps, one is SIGKILLed (or
SIGSTOPped). Every survivor must raise a RuntimeError naming the lost rank
within the group's timeout + 1 s of the signal, and then exit (no hang at
exit)."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

harness.skip_unless_torch()

SIZE = 4
TIMEOUT_S = 4.0       # init_process_group(timeout=...)
STEPS_BEFORE = 3      # every rank has taken this many steps when the signal comes
EXIT_WITHIN_S = 10.0  # a survivor's process is gone this long after it raised


class Worker:
    def __init__(self, rank, port):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(SIZE), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), FAULT_TIMEOUT_S=str(TIMEOUT_S), OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fault_worker.py")], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.steps = 0
        self.failed = None  # (time, "Type: message")
        self.exited_at = None
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if line.startswith("step "):
                self.steps += 1
            elif line.startswith("FAILED "):
                _, at, what = line.rstrip().split(" ", 2)
                self.failed = (float(at), what)
        self.proc.wait()
        self.exited_at = time.time()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()  # also a stopped one: SIGKILL needs no SIGCONT
        self.proc.wait()
        self.reader.join(5)
        self.proc.stdout.close()


def lose_a_rank(victim, sig):
    """Returns the workers after `victim` got `sig`, the time it did, and the
    reason the run could not get that far (or None)."""
    port = harness.free_port()
    workers = [Worker(r, port) for r in range(SIZE)]
    try:
        deadline = time.monotonic() + 120
        while min(w.steps for w in workers) < STEPS_BEFORE:
            if time.monotonic() > deadline or any(w.proc.poll() is not None for w in workers):
                return workers, None, "not every rank started training:\n" + "\n".join(
                    f"rank {r}: " + " | ".join(w.lines[-5:]) for r, w in enumerate(workers))
            time.sleep(0.01)
        os.kill(workers[victim].proc.pid, sig)
        lost_at = time.time()
        survivors = [w for r, w in enumerate(workers) if r != victim]
        end = time.monotonic() + TIMEOUT_S + EXIT_WITHIN_S + 10
        while time.monotonic() < end and any(w.exited_at is None for w in survivors):
            time.sleep(0.01)
        return workers, lost_at, None
    finally:
        for w in workers:
            w.kill()


class LostRank(unittest.TestCase):
    def check(self, victim, sig):
        workers, lost_at, why = lose_a_rank(victim, sig)
        self.assertIsNone(why, why)
        for r, w in enumerate(workers):
            if r == victim:
                continue
            tail = "\n".join(w.lines[-3:])
            self.assertIsNotNone(w.failed, f"rank {r} did not raise:\n{tail}")
            at, what = w.failed
            self.assertTrue(what.startswith("RuntimeError: "), f"rank {r} raised {what}")
            # The library's words for a lost rank (docs/collectives.md "Faults").
            self.assertRegex(what, rf"\brank {victim} (\(pid \d+\) died|stalled|closed)",
                             f"rank {r}'s error does not name rank {victim} as lost")
            self.assertLessEqual(at - lost_at, TIMEOUT_S + 1.0,
                                 f"rank {r} raised {at - lost_at:.2f} s after the signal: {what}")
            self.assertIsNotNone(w.exited_at, f"rank {r} did not exit after raising")
            self.assertLessEqual(w.exited_at - at, EXIT_WITHIN_S, f"rank {r} took {w.exited_at - at:.1f} s to exit")
            print(f"rank {r}: raised {at - lost_at:.3f} s after the signal, exited {w.exited_at - at:.2f} s later: "
                  f"{what}", flush=True)

    def test_rank_2_killed(self):
        self.check(2, signal.SIGKILL)

    def test_rank_0_killed(self):
        # Rank 0 also serves the rendezvous store (TCPStore): it dies with it.
        self.check(0, signal.SIGKILL)

    def test_rank_2_stopped(self):
        # Alive but silent: only the timeout can tell (the library's stall
        # resolution then names it, docs/collectives.md "Faults").
        self.check(2, signal.SIGSTOP)


if __name__ == "__main__":
    unittest.main()
