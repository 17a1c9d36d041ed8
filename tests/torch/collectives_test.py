"""Every collective of the weft backend against Gloo's, in the same
processes: op x dtype x sizes {0, 1, 7, 1023, 262147} elements, for the rank
count given on the command line (ctest runs 1, 2, 3, 4 and 7).

    /usr/bin/python3 collectives_test.py 4      # PYTHONPATH=<build>/python

Integers must be equal exactly. Floating-point sums and products may differ
by the order of their rounding steps: each result is within
(P - 1) u sum_r |x_r| of the exact one (Higham, Accuracy and Stability of
Numerical Algorithms, 2nd ed., section 4.2: recursive summation; the same
bound for products of factors near 1), so two results are within twice that,
with u the unit roundoff of the type (f16 and bf16 are reduced in f32 and
rounded after every step, by Gloo and weft alike). MIN and MAX round
nothing: equal exactly.

Where Gloo 1.13 has no such collective, the reference is what Gloo computes
that is equivalent (all measured with Debian's torch 1.13):
  bfloat16 (Gloo: "Invalid scalar type")  the values as float32 through Gloo;
                                          broadcast/allgather as float16 bits
  _allgather_base                         Gloo's allgather into a list
  reduce_scatter, _reduce_scatter_base    Gloo's allreduce of the whole input,
                                          block `rank` of it
  all_gather of 0 elements                an empty tensor (Gloo's dies of SIGFPE)
"""

import os
import sys
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.skip_unless_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8]
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
SIZES = [0, 1, 7, 1023, 262147]
UNIT_ROUNDOFF = {torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53, torch.float16: 2.0 ** -11,
                 torch.bfloat16: 2.0 ** -8}


def values(rank, count, dtype, op, salt):
    """Rank `rank`'s input: sums of values in [-1, 1], products of factors in
    [0.5, 1.5] (nothing overflows or vanishes), integers small enough that
    int32 products of 7 ranks stay exact; uint8 wraps alike in both."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{rank} {count} {dtype} {op} {salt}".encode()))
    if dtype.is_floating_point:
        x = torch.rand(count, generator=g, dtype=torch.float64)
        x = x + 0.5 if op == "prod" else 2 * x - 1
        return x.to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 256, (count,), generator=g, dtype=torch.int64).to(dtype)
    lo, hi = (-3, 4) if op == "prod" else (-1000, 1001)
    return torch.randint(lo, hi, (count,), generator=g, dtype=torch.int64).to(dtype)


class Checker:
    def __init__(self, rank, size, gloo):
        self.rank, self.size, self.gloo = rank, size, gloo
        self.errors = []

    def gloo_allreduce(self, x, op):
        """Gloo's result for x reduced with op, and the error bound of a
        float result: 2 (P - 1) u times sum_r |x_r| (or prod_r |x_r|)."""
        ref = x.float() if x.dtype == torch.bfloat16 else x.clone()
        dist.all_reduce(ref, op=OPS[op], group=self.gloo)
        if not x.dtype.is_floating_point or op in ("min", "max"):
            return ref, None
        mag = x.double().abs()
        dist.all_reduce(mag, op=OPS["prod" if op == "prod" else "sum"], group=self.gloo)
        return ref, 2 * (self.size - 1) * UNIT_ROUNDOFF[x.dtype] * mag + 1e-300

    def compare(self, what, got, want, tol=None):
        got, want = got.reshape(-1), want.reshape(-1)
        if got.shape != want.shape:
            self.errors.append(f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}")
            return
        if tol is None:
            if not torch.equal(got, want.to(got.dtype)):
                i = int((got != want.to(got.dtype)).nonzero()[0])
                self.errors.append(f"{what}: element {i} is {got[i].item()}, Gloo's {want[i].item()}")
            return
        diff = (got.double() - want.double()).abs()
        bad = diff > tol.reshape(-1)
        if bad.any():
            i = int(bad.nonzero()[0])
            self.errors.append(f"{what}: element {i} is {got[i].item()}, Gloo's {want[i].item()} "
                               f"(difference {diff[i].item():.3g} > bound {tol.reshape(-1)[i].item():.3g})")

    def as_gloo_bits(self, t):
        """bfloat16 through Gloo as float16 bits (moved, not interpreted)."""
        return t.view(torch.float16) if t.dtype == torch.bfloat16 else t

    def run(self, dtype, count):
        n, r = self.size, self.rank
        tag = f"{self.size} ranks, {dtype}, {count} elements"
        for op in OPS:
            x = values(r, count, dtype, op, "allreduce")
            got = x.clone()
            dist.all_reduce(got, op=OPS[op])
            want, tol = self.gloo_allreduce(x, op)
            self.compare(f"all_reduce {op}, {tag}", got, want, tol)

            full = values(r, n * count, dtype, op, "reduce_scatter")
            want, tol = self.gloo_allreduce(full, op)
            block = slice(r * count, (r + 1) * count)
            want, tol = want[block], (tol[block] if tol is not None else None)
            got = torch.empty(count, dtype=dtype)
            dist.reduce_scatter(got, list(full.chunk(n)) if count else [torch.empty(0, dtype=dtype)] * n, op=OPS[op])
            self.compare(f"reduce_scatter {op}, {tag}", got, want, tol)
            got = torch.empty(count, dtype=dtype)
            dist.reduce_scatter_tensor(got, full, op=OPS[op])
            self.compare(f"reduce_scatter_tensor {op}, {tag}", got, want, tol)

        x = values(r, count, dtype, "sum", "broadcast")
        root = count % n
        got, want = x.clone(), self.as_gloo_bits(x.clone())
        dist.broadcast(got, src=root)
        dist.broadcast(want, src=root, group=self.gloo)
        self.compare(f"broadcast from {root}, {tag}", self.as_gloo_bits(got), want)

        want = [self.as_gloo_bits(torch.empty(count, dtype=dtype)) for _ in range(n)]
        if count > 0:  # Gloo's all_gather of 0 elements dies of SIGFPE
            dist.all_gather(want, self.as_gloo_bits(x), group=self.gloo)
        want = torch.cat(want)
        got = [torch.empty(count, dtype=dtype) for _ in range(n)]
        dist.all_gather(got, x)
        self.compare(f"all_gather, {tag}", self.as_gloo_bits(torch.cat(got)), want)
        got = torch.empty(n * count, dtype=dtype)
        dist.all_gather_into_tensor(got, x)
        self.compare(f"all_gather_into_tensor, {tag}", self.as_gloo_bits(got), want)


def matrix(rank, size):
    harness.init("weft", rank, size)
    gloo = dist.new_group(backend="gloo")
    c = Checker(rank, size, gloo)
    for dtype in DTYPES:
        for count in SIZES:
            c.run(dtype, count)
    dist.barrier()
    dist.barrier(group=gloo)
    return c.errors


class CollectivesEqualGloo(unittest.TestCase):
    ranks = 2
    maxDiff = None

    def test_every_op_dtype_and_size(self):
        results = harness.run(self, matrix, self.ranks, timeout=240)
        errors = [e for r in results for e in r.value]
        self.assertEqual(errors[:20], [], f"{len(errors)} results differ from Gloo's")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].isdigit():
        CollectivesEqualGloo.ranks = int(sys.argv.pop(1))
    unittest.main()
