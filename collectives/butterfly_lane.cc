// Butterfly AllReduce straight on the pairs, without a plan or a context,
// where every step is one ExchangePair::exchange_reduce that may reduce
// into its own send (shm, below the single-copy size): log2(P) calls, each
// of which copies this rank's vector into the peer's ring and reduces the
// peer's from the ring into it. The same steps, partners and reduce order
// as allreduce_butterfly.cc, so both give the same bits; what it leaves out
// is the per-call work of running a plan (the plan lookup, placing the
// buffers, the context, the scratch copy), which at a few hundred bytes over
// shared memory is most of a call: 2 ranks, 4 B took 0.145 us through the
// plan and 0.128 us here, Open MPI's vader 0.144 in the same minutes
// (bench/results/2026-11-26-shm-small.md).
//
// It applies to power-of-two groups (no fold) on one transport, without a
// trace (tests watch the plan's steps), once every partner's pair is
// connected (the first call runs the plan, which connects them).
#include <algorithm>
#include <array>

#include "communicator_impl.h"
#include "idle_wait.h"
#include "stall.h"

namespace weft::coll {

std::optional<Status> Communicator::Impl::butterfly_lane(const std::vector<int>& group, void* data, size_t count,
                                                         size_t bytes, DataType t, ReduceOp op,
                                                         const CollectiveOptions& o) {
  const int n = static_cast<int>(group.size());
  // A call that may be run again after an in-call switch goes through
  // execute, which keeps its input (in_call_switch.cc).
  if ((n & (n - 1)) != 0 || links.transports.size() != 1 || cfg.trace || in_call) return std::nullopt;
  const int me = static_cast<int>(std::find(group.begin(), group.end(), cfg.rank) - group.begin());
  std::array<internal::ExchangePair*, 31> partner{};  // by step: rank me ^ 2^k's pair
  int steps = 0;
  for (int d = 1; d < n; d *= 2, ++steps) {
    internal::ExchangePair* x = links.exchangers[static_cast<size_t>(group[static_cast<size_t>(me ^ d)])];
    if (x == nullptr || !x->reduces_over_send(bytes)) return std::nullopt;
    partner[static_cast<size_t>(steps)] = x;
  }
  // Where a message must wait for room in the ring, the peer's vector lands
  // in scratch until this rank's has left (shm_transport.cc, queued_exchange).
  if (Status s = ensure_scratch(bytes); !s) return fail_call(s, internal::kAllreduce, Algorithm::kButterfly, count, t, op);
  const auto timeout = call_timeout(o);
  const Deadline deadline = internal::coarse_now() + timeout;  // Impl::execute says why coarse
  HostMemory mem(data, bytes);
  const internal::ExchangePair::Reduction red{static_cast<char*>(data), t, op};
  for (int k = 0; k < steps; ++k) {
    Result<Ticket> sent =
        partner[static_cast<size_t>(k)]->exchange_reduce(mem, 0, bytes, *scratch_mem.front(), 0, bytes, red, deadline);
    if (sent) continue;
    Status s = sent.status();
    if (s.code() == StatusCode::kDeadlineExceeded) {  // as Context::exchanged: resolve the stall (stall.h)
      s = internal::resolve_stall(links, cfg.rank, group[static_cast<size_t>(me ^ (1 << k))], s,
                                  internal::stall_window(timeout));
    }
    return fail_call(s, internal::kAllreduce, Algorithm::kButterfly, count, t, op);
  }
  return ok_status();
}

}  // namespace weft::coll
