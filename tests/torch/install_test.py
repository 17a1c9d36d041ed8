"""`cmake --install` puts the weft_torch package where the docs say, and a
Python that finds it only there (no build tree on its path) registers the
backend and runs a collective on 2 ranks.

    /usr/bin/python3 install_test.py <build dir> <package dir relative to the prefix>
"""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.skip_unless_torch()

BUILD, RELATIVE = sys.argv[1], sys.argv[2]
del sys.argv[1:3]

PROBE = """
import os, sys
sys.path.insert(0, {harness_dir!r})
import harness, torch, torch.distributed as dist
import weft_torch
assert weft_torch.__file__.startswith({prefix!r}), weft_torch.__file__

def run(rank, size):
    harness.init("weft", rank, size)
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    return t[0].item()

results = harness.spawn(run, 2, timeout=60)
assert all(r.ok for r in results), harness.failures(results)
print("sums", [r.value for r in results], "from", os.path.dirname(weft_torch.__file__))
"""


class InstalledPackage(unittest.TestCase):
    def test_installed_package_registers_the_backend(self):
        with tempfile.TemporaryDirectory() as prefix:
            subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], check=True, capture_output=True)
            site = os.path.join(prefix, RELATIVE)
            self.assertTrue(os.path.isfile(os.path.join(site, "weft_torch", "__init__.py")), os.listdir(prefix))
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = site
            code = PROBE.format(harness_dir=os.path.dirname(os.path.abspath(__file__)), prefix=prefix)
            p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr[-3000:])
            self.assertIn("sums [3.0, 3.0] from " + os.path.join(site, "weft_torch"), p.stdout)


if __name__ == "__main__":
    unittest.main()
