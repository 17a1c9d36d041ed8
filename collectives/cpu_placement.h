// Where the ranks of a host go when they outnumber its CPUs (internal), for
// communicators whose every peer is over TCP.
//
// Why: over loopback TCP each byte is copied twice by a CPU (into the
// socket's buffer by the sender, out of it by the receiver), and with more
// ranks than CPUs every CPU is busy anyway: two partners on different CPUs
// gain no parallelism, only the receiver's copy reading lines that sit in
// the other CPU's cache. Consecutive ranks are the ones that exchange the
// most: halving-doubling's first reduce-scatter step and last allgather step
// (half the vector each) pair v with v ^ 1, and the ring sends to rank + 1.
// Measured here (4 ranks, 2 CPUs, HD over loopback TCP, busbw, two runs
// each, every rank pinned with taskset): 64 KiB 1.49 with {0,1}{2,3} against
// 1.26-1.27 with {0,3}{1,2} and 0.92-0.95 left to the scheduler; 256 KiB
// 2.53-2.55 / 2.09-2.10 / 1.44-1.55; 1 MiB 2.61-2.64 / 2.01-2.24 /
// 2.00-2.31. The scheduler keeps a balanced placement (its load balancer
// moves tasks only between unequal CPUs), so one move at setup is enough.
#pragma once

#include <vector>

namespace weft::coll::internal {

// The CPU of the index-th (0-based) of `count` ranks, among the `allowed`
// CPUs (ascending): blocks of consecutive ranks, sizes as even as the counts
// allow (index * allowed / count). -1 when allowed is empty.
int block_cpu(int index, int count, const std::vector<int>& allowed);

// Moves the calling thread onto block_cpu(index, count, the CPUs it may use)
// and gives it its whole mask back (migrate_now, idle_wait.h: the move is
// done when it returns; the kernel may move it again later). Returns that
// CPU, or -1 when there was nothing to do (at most one CPU allowed, or no
// more ranks than CPUs).
int move_to_block_cpu(int index, int count);

}  // namespace weft::coll::internal
