"""What torch.distributed code sees of the weft backend besides the results
(those are collectives_test.py's): asynchronous work and futures as Gloo's,
non-contiguous tensors, refusals with a message, the collectives built from
others (reduce, gather, scatter, AVG, coalesced, objects), new_group."""

import os
import sys
import time
import unittest
import warnings
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

harness.skip_unless_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def raises(fn, *words):
    """The RuntimeError's message when fn raises one containing every word."""
    try:
        fn()
    except RuntimeError as e:
        missing = [w for w in words if w not in str(e)]
        assert not missing, f"message lacks {missing}: {e}"
        return str(e)
    raise AssertionError(f"no RuntimeError (expected one with {words})")


def async_work(rank, size):
    harness.init("weft", rank, size)
    t = torch.full((1000,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    assert work.wait() is True
    assert work.is_completed()
    total = float(size * (size + 1) // 2)
    assert torch.equal(t, torch.full((1000,), total)), t[:3]
    assert fut.done() and torch.equal(fut.wait()[0], t)
    assert torch.equal(doubled.wait(), t * 2)
    assert torch.equal(work.result()[0], t)
    # Queued calls run in the order they were made; waiting on the last
    # finds every earlier one done.
    ts = [torch.full((7,), float(i * (rank + 1))) for i in range(20)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    works[-1].wait()
    assert all(w.is_completed() for w in works)
    assert all(torch.equal(x, torch.full((7,), float(i) * total)) for i, x in enumerate(ts))
    dist.barrier(async_op=True).wait()
    # wait(timeout) gives up on a call that cannot finish yet (rank 1 comes
    # 1.5 s late) and leaves it running, as Gloo's work does.
    t = torch.ones(3)
    if rank == 1:
        time.sleep(1.5)
    work = dist.all_reduce(t, async_op=True)
    if rank == 0:
        started = time.monotonic()
        raises(lambda: work.wait(timedelta(milliseconds=200)), "timed out")
        assert time.monotonic() - started < 1.0
    work.wait()
    assert torch.equal(t, torch.full((3,), float(size)))
    return True


def non_contiguous(rank, size):
    harness.init("weft", rank, size)
    total = size * (size + 1) // 2
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (rank + 1)
    view = base[:, ::2]  # every other column
    assert not view.is_contiguous()
    dist.all_reduce(view)
    want = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (rank + 1)
    want[:, ::2] *= total / (rank + 1)
    assert torch.equal(base, want), base

    x = (torch.arange(12, dtype=torch.float64).reshape(3, 4) * (rank + 1)).t()
    outs = [torch.empty(3, 4, dtype=torch.float64).t() for _ in range(size)]
    dist.all_gather(outs, x)
    for r, o in enumerate(outs):
        assert torch.equal(o, (torch.arange(12, dtype=torch.float64).reshape(3, 4) * (r + 1)).t()), (r, o)

    flat = torch.zeros(2 * size * 5, dtype=torch.int32)
    dist.all_gather_into_tensor(flat[::2], torch.full((5,), rank, dtype=torch.int32))
    assert torch.equal(flat[::2], torch.arange(size, dtype=torch.int32).repeat_interleave(5)), flat
    assert torch.equal(flat[1::2], torch.zeros(size * 5, dtype=torch.int32))

    inp = torch.zeros(2 * size * 3, dtype=torch.int64)
    inp[::2] = torch.arange(size * 3) * (rank + 1)
    out = torch.zeros(6, dtype=torch.int64)
    dist.reduce_scatter_tensor(out[::2], inp[::2])
    assert torch.equal(out[::2], torch.arange(rank * 3, rank * 3 + 3) * total), out

    # Tensors autograd tracks (parameters) are written in place as Gloo's
    # raw copies do, also where the backend divides (AVG) or copies back.
    p = torch.full((4, 6), float(rank + 1), requires_grad=True)
    dist.all_reduce(p, op=dist.ReduceOp.AVG)
    dist.all_reduce(p.t())
    assert torch.equal(p.detach(), torch.full((4, 6), total / size * size)), p
    assert p.requires_grad and p.grad_fn is None

    b = (torch.arange(20, dtype=torch.float16).reshape(4, 5) + rank).t()
    dist.broadcast(b, src=size - 1)
    assert torch.equal(b, (torch.arange(20, dtype=torch.float16).reshape(4, 5) + size - 1).t())
    return True


def refusals(rank, size):
    harness.init("weft", rank, size)
    # Debian's torch has no CUDA. A meta tensor takes a CUDA tensor's path to
    # the backend (c10d's ops are registered for both devices; inference
    # mode lets it past autograd's dispatch) and meets the same check.
    with torch.inference_mode():
        raises(lambda: dist.all_reduce(torch.ones(4, device="meta")), "on meta", "CPU tensors only")
    raises(lambda: dist.all_reduce(torch.eye(3).to_sparse()), "dense (strided) tensors only")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "cannot reduce torch.int16")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool)), "cannot reduce torch.bool")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND), "does not support ReduceOp.BAND;")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int64), op=dist.ReduceOp.AVG), "floating-point")
    raises(lambda: dist.all_to_all_single(torch.empty(2 * size), torch.ones(2 * size)), "not supported", "gloo")
    raises(lambda: dist.send(torch.ones(2), dst=1 - rank), "not supported", "gloo")
    raises(lambda: dist.recv(torch.ones(2), src=1 - rank), "not supported", "gloo")
    raises(lambda: dist.reduce_scatter_tensor(torch.empty(3), torch.ones(3 * size + 1)), "must hold")
    # A quantized tensor's values need its scale, which would stay behind.
    q = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8)
    raises(lambda: dist.broadcast(q, 0), "quantized tensor (torch.quint8)", "dequantize()")
    # Conjugate and negative views arrive resolved (torch's dispatcher
    # materialises them): the values they show are the values moved.
    z = torch.tensor([1 + 2j, 3 - 4j])
    for shown, want in ((z.conj(), z.conj().resolve_conj()), (z.conj().imag, torch.tensor([-2.0, 4.0]))):
        x = shown if rank == 0 else torch.zeros_like(want)
        dist.broadcast(x, 0)
        assert torch.equal(x, want), (x, want)
    # A refused call moved nothing: the group still works.
    t = torch.ones(5)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((5,), float(size)))
    return True


def built_from_others(rank, size):
    harness.init("weft", rank, size)
    warnings.filterwarnings("ignore", message=".*coalesced will be deprecated")
    total = size * (size + 1) // 2
    t = torch.full((9,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.equal(t, torch.full((9,), total / size, dtype=torch.float64)), t

    t = torch.full((4,), rank + 1, dtype=torch.int64)
    dist.reduce(t, dst=1)
    assert torch.equal(t, torch.full((4,), total if rank == 1 else rank + 1, dtype=torch.int64)), t

    x = torch.full((3,), rank * 10, dtype=torch.int32)
    got = [torch.empty(3, dtype=torch.int32) for _ in range(size)] if rank == size - 1 else None
    dist.gather(x, got, dst=size - 1)
    if got is not None:
        assert all(torch.equal(g, torch.full((3,), r * 10, dtype=torch.int32)) for r, g in enumerate(got)), got

    out = torch.empty(2, dtype=torch.float32)
    parts = [torch.full((2,), float(r) + 0.5) for r in range(size)] if rank == 0 else None
    dist.scatter(out, parts, src=0)
    assert torch.equal(out, torch.full((2,), rank + 0.5)), out

    a, b = torch.full((3,), float(rank + 1)), torch.full((2, 2), float(2 * (rank + 1)))
    dist.all_reduce_coalesced([a, b])
    assert torch.equal(a, torch.full((3,), float(total))) and torch.equal(b, torch.full((2, 2), 2.0 * total))
    flat = torch.full((10,), float(rank + 1))
    dist.all_reduce_coalesced(list(flat.split([4, 6])))  # consecutive views: in place
    assert torch.equal(flat, torch.full((10,), float(total))), flat

    ins = [torch.full((2,), float(rank)), torch.full((3,), float(-rank))]
    outs = [[torch.empty(2), torch.empty(3)] for _ in range(size)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(size):
        assert torch.equal(outs[r][0], torch.full((2,), float(r))) and torch.equal(outs[r][1], torch.full((3,), -float(r)))

    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": "x" * rank})
    assert objs == [{"rank": r, "name": "x" * r} for r in range(size)], objs
    lst = [rank, "from", rank] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(lst, src=1)
    assert lst == [1, "from", 1], lst

    for dt in (torch.bool, torch.int8, torch.complex64, torch.int16):  # moved as bytes
        b = (torch.arange(6) % 2 == 0) if dt == torch.bool else torch.arange(6).to(dt)
        b = b if rank == 0 else torch.zeros_like(b)
        dist.broadcast(b, src=0)
        assert torch.equal(b, (torch.arange(6) % 2 == 0) if dt == torch.bool else torch.arange(6).to(dt)), (dt, b)
    dist.barrier()
    return True


def anon_huge_kb(address, length):
    """AnonHugePages (kB) of the mappings that [address, address + length)
    overlaps (proc(5), smaps; a tensor may straddle two heap mappings)."""
    inside, total = False, 0
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo < address + length and address < hi
            elif inside and head == "AnonHugePages:":
                total += int(line.split()[1])
    return total


def huge_pages(rank, size):
    harness.init("weft", rank, size)
    n = 16 << 18  # 16 MiB of float32
    dist.all_reduce(torch.ones(n))  # the library's own scratch, on huge pages, exists from here on
    t = torch.ones(n)  # PyTorch's 4 KiB pages, touched
    before = anon_huge_kb(t.data_ptr(), n * 4)
    dist.all_reduce(t)
    after = anon_huge_kb(t.data_ptr(), n * 4)
    assert torch.equal(t, torch.full((n,), float(size)))
    return before, after


def new_groups(rank, size):
    harness.init("weft", rank, size)
    g = dist.new_group([0, 2, 3])
    h = dist.new_group([1, 3])
    gloo = dist.new_group(backend="gloo")
    t = torch.full((5,), float(rank + 1))
    if rank in (0, 2, 3):
        assert dist.get_backend(g) == "weft" and g.size() == 3
        dist.all_reduce(t, group=g)
        assert torch.equal(t, torch.full((5,), 1.0 + 3 + 4)), t
    t = torch.full((5,), float(rank + 1))
    if rank in (1, 3):
        dist.all_reduce(t, group=h)
        assert torch.equal(t, torch.full((5,), 2.0 + 4)), t
    u = torch.full((5,), float(rank + 1))
    dist.all_reduce(u, group=gloo)
    dist.all_reduce(t)  # the default group, after the others
    # "No timeout" written as a thousand years: longer than any deadline the
    # clock can hold (torch itself overflows at timedelta.max), it counts
    # as the longest one, not as one long past.
    ages = timedelta(days=365 * 1000)
    forever = dist.new_group(list(range(size)), timeout=ages)
    v = torch.full((3,), float(rank + 1))
    dist.all_reduce(v, group=forever)
    assert torch.equal(v, torch.full((3,), float(size * (size + 1) // 2))), v
    work = dist.all_reduce(v, group=forever, async_op=True)
    assert work.wait(ages) is True
    return True


def callbacks_wait(rank, size):
    """A future's callback may wait for a collective called after the one it
    follows (DDP's PowerSGD hook does): the wait runs it, also behind other
    queued calls, and the results are exact."""
    harness.init("weft", rank, size, timeout_s=20)
    total = float(size * (size + 1) // 2)

    def nested_async(fut):
        return dist.all_reduce(torch.full((2,), float(rank + 1)), async_op=True).get_future().wait()[0]

    def nested_sync(fut):
        u = torch.full((3,), float(rank + 1))
        dist.all_reduce(u)
        return u

    for cb, n in ((nested_async, 2), (nested_sync, 3)):
        got = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(cb).wait()
        assert torch.equal(got, torch.full((n,), total)), (cb.__name__, got)
    # Three calls queued before the callback's own: it runs them first.
    first = dist.all_reduce(torch.ones(4), async_op=True)
    behind = [dist.all_reduce(torch.full((5,), float(i)), async_op=True) for i in range(3)]
    got = first.get_future().then(nested_sync).wait()
    assert torch.equal(got, torch.full((3,), total)), got
    assert all(w.wait() for w in behind)
    return True


def half_average(rank, size):
    """float16 AVG of values whose sum overflows float16 (65504) but whose
    average does not: every rank gets the average (NCCL's premultiplied
    AVG), and a non-root's reduce input is left as it was."""
    harness.init("weft", rank, size)
    big = 40000.0
    t = torch.full((3,), big, dtype=torch.float16)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.equal(t, torch.full((3,), big, dtype=torch.float16)), t
    out = torch.empty(2, dtype=torch.float16)
    dist.reduce_scatter_tensor(out, torch.full((2 * size,), big, dtype=torch.float16), op=dist.ReduceOp.AVG)
    assert torch.equal(out, torch.full((2,), big, dtype=torch.float16)), out
    mine = torch.full((4,), big, dtype=torch.float16)
    dist.reduce(mine, dst=0, op=dist.ReduceOp.AVG)
    assert torch.equal(mine, torch.full((4,), big, dtype=torch.float16)), (rank, mine)
    return True


def inference_mode(rank, size):
    """Calls made under torch.inference_mode (evaluation loops) run their
    in-place updates as the caller would, whichever thread runs them."""
    harness.init("weft", rank, size)
    for i in range(20):
        with torch.inference_mode():
            loss = torch.tensor([float(rank + i)])
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
            want = i + (size - 1) / 2
            assert torch.equal(loss, torch.tensor([want])), (i, loss)
            t = torch.ones(4, 2).t() * (rank + 1)
            dist.all_reduce(t)
            assert torch.equal(t, torch.full((2, 4), float(size * (size + 1) // 2))), (i, t)
    return True


def empty_tensors_in_lists(rank, size):
    """Coalesced calls whose lists hold tensors of no elements (no memory:
    data_ptr() is 0), first or between others: exact results, no crash."""
    harness.init("weft", rank, size)
    total = float(size * (size + 1) // 2)
    none = torch.empty(0)
    assert none.data_ptr() == 0
    a, b = torch.full((3,), float(rank + 1)), torch.full((2, 2), float(rank + 1))
    dist.all_reduce_coalesced([none, a, torch.empty(0), b])
    assert torch.equal(a, torch.full((3,), total)) and torch.equal(b, torch.full((2, 2), total)), (a, b)
    flat = torch.full((5,), float(rank + 1))
    dist.all_reduce_coalesced([torch.empty(0)] + list(flat.split([2, 3])))  # in place behind an empty one
    assert torch.equal(flat, torch.full((5,), total)), flat
    dist.all_reduce_coalesced([torch.empty(0), torch.empty(0)])
    ins = [torch.empty(0), torch.full((2,), float(rank))]
    outs = [[torch.empty(0), torch.empty(2)] for _ in range(size)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(size):
        assert outs[r][0].numel() == 0 and torch.equal(outs[r][1], torch.full((2,), float(r))), (r, outs[r])
    return True


def wait_timeout_behind_a_slow_callback(rank, size):
    """wait(timeout) on a finished call whose predecessor's callback is still
    running gives up at the timeout (it returns only once earlier calls are
    done: c10d's contract for a timeout is to raise), and a wait without
    one returns after that callback. Rank 1 comes 0.5 s late, so that rank
    0's first call is still running when its callback is attached (a
    finished future runs it inline, in then())."""
    harness.init("weft", rank, size)
    if rank == 1:
        time.sleep(0.5)
    first = dist.all_reduce(torch.ones(2), async_op=True).get_future()
    slow = first.then(lambda f: time.sleep(2.0 if rank == 0 else 0.0))
    work = dist.all_reduce(torch.ones(3), async_op=True)
    if rank != 0:
        assert work.wait()
        return None
    while not work.is_completed():  # finished by the spare thread while the callback sleeps
        time.sleep(0.01)
    assert not slow.done()
    started = time.monotonic()
    raises(lambda: work.wait(timedelta(milliseconds=300)), "timed out")
    took = time.monotonic() - started
    assert took < 1.2, took
    assert work.wait() and slow.done()
    return took


def group_dropped_by_its_callback(rank, size):
    """A group destroyed while a call is in flight, whose last reference a
    callback of that call holds and drops: the group ends on its worker's
    own thread, which finishes without waiting for itself (joining there
    aborted the process), and the default group goes on. Rank 0's call
    waits for the others, which come 1 s later: its callback runs on the
    worker's thread, not inline in then()."""
    harness.init("weft", rank, size)
    g = dist.new_group(list(range(size)))
    t = torch.full((3,), float(rank + 1))
    total = float(size * (size + 1) // 2)
    if rank == 0:
        box = [g]

        def drop(fut):
            box.clear()  # the group's last reference: its backend is destroyed on this thread
            return fut.value()[0]

        fut = dist.all_reduce(t, group=g, async_op=True).get_future().then(drop)
        dist.destroy_process_group(g)
        del g
        assert torch.equal(fut.wait(), torch.full((3,), total)), fut.wait()
    else:
        time.sleep(1.0)
        dist.all_reduce(t, group=g)
        assert torch.equal(t, torch.full((3,), total)), t
        dist.destroy_process_group(g)
    u = torch.ones(2)
    dist.all_reduce(u)
    assert torch.equal(u, torch.full((2,), float(size))), u
    return True


def a_rank_local_error(rank, size):
    """Rank 1's float16 AVG throws in torch before its library call (an
    in-place divide of an inference tensor outside inference mode): the
    other ranks, already in the call, fail within seconds naming rank 1 and
    its error, not at the group's timeout."""
    harness.init("weft", rank, size, timeout_s=60)
    warm = torch.ones(4)
    dist.all_reduce(warm)  # every pair connected
    if rank == 1:
        with torch.inference_mode():
            t = torch.ones(4, dtype=torch.float16)
    else:
        t = torch.ones(4, dtype=torch.float16)
    t0 = time.monotonic()
    msg = raises(lambda: dist.all_reduce(t, op=dist.ReduceOp.AVG), "failed")
    return time.monotonic() - t0, msg


GROUP_TIMEOUT_S = 3.0


def new_group_member_missing(rank, size):
    """The last rank never calls new_group: the others raise, naming the key
    they waited for, within the group's timeout (the wait for every member
    to fail ends at the group's own deadline, not a timeout later)."""
    harness.init("weft", rank, size, timeout_s=30)
    if rank == size - 1:
        time.sleep(3 * GROUP_TIMEOUT_S)
        return None
    t0 = time.monotonic()
    msg = raises(lambda: dist.new_group(list(range(size)), timeout=timedelta(seconds=GROUP_TIMEOUT_S)),
                 "not set in time")
    return time.monotonic() - t0, msg


class WorkAndFutures(unittest.TestCase):
    def test_async_calls_futures_and_wait_timeout(self):
        harness.run(self, async_work, 2, timeout=90)

    def test_a_callback_may_wait_for_a_later_call(self):
        harness.run(self, callbacks_wait, 3, timeout=90)

    def test_a_callback_may_drop_the_last_reference_to_its_group(self):
        harness.run(self, group_dropped_by_its_callback, 2, timeout=90)

    def test_wait_with_a_timeout_gives_up_on_time_behind_a_slow_callback(self):
        took = harness.run(self, wait_timeout_behind_a_slow_callback, 2, timeout=90)[0].value
        self.assertGreaterEqual(took, 0.25)


class Tensors(unittest.TestCase):
    def test_non_contiguous_tensors_are_handled(self):
        harness.run(self, non_contiguous, 3, timeout=90)

    def test_what_the_backend_cannot_do_is_refused_with_a_message(self):
        harness.run(self, refusals, 2, timeout=90)

    def test_coalesced_lists_may_hold_tensors_of_no_elements(self):
        harness.run(self, empty_tensors_in_lists, 3, timeout=90)


class HugePages(unittest.TestCase):
    def test_a_large_tensor_is_on_huge_pages_after_a_call(self):
        # MADV_COLLAPSE: Linux 6.1, THP not "never" (torch/huge_pages.h).
        release = tuple(int(x) for x in os.uname().release.split(".")[:2])
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            never = "[never]" in f.read()
        if release < (6, 1) or never:
            self.skipTest(f"no MADV_COLLAPSE here (kernel {os.uname().release}, THP never: {never})")
        for r in harness.run(self, huge_pages, 2, timeout=90):
            before, after = r.value
            # The 2 MiB-aligned part of 16 MiB: at least 14 MiB.
            self.assertGreaterEqual(after - before, 14 * 1024, f"rank {r.rank}: AnonHugePages {before} -> {after} kB")


class Collectives(unittest.TestCase):
    def test_avg_reduce_gather_scatter_coalesced_and_objects(self):
        harness.run(self, built_from_others, 3, timeout=90)

    def test_float16_average_does_not_overflow_where_the_average_fits(self):
        harness.run(self, half_average, 3, timeout=90)

    def test_new_group_subgroups_and_a_gloo_group_side_by_side(self):
        harness.run(self, new_groups, 4, timeout=90)

    def test_calls_under_inference_mode_run_as_the_caller_would(self):
        harness.run(self, inference_mode, 2, timeout=90)

    def test_a_rank_that_fails_a_call_in_torch_fails_it_on_every_rank_at_once(self):
        for r in harness.run(self, a_rank_local_error, 3, timeout=90):
            took, msg = r.value
            self.assertIn("inference tensor", msg, f"rank {r.rank}")
            if r.rank != 1:
                self.assertIn("rank 1", msg)
                self.assertLess(took, 10.0, f"rank {r.rank} waited for rank 1: {msg}")

    def test_a_new_group_with_a_member_missing_fails_within_its_timeout(self):
        for r in harness.run(self, new_group_member_missing, 3, timeout=90):
            if r.rank == 2:
                continue
            took, msg = r.value
            self.assertGreaterEqual(took, GROUP_TIMEOUT_S - 0.1, msg)
            self.assertLess(took, 1.5 * GROUP_TIMEOUT_S, f"rank {r.rank}: {msg}")


if __name__ == "__main__":
    unittest.main()
