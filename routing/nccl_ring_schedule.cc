// nccl-ring (schedule.h): NCCL's inter-node ring as weft's NCCL net plugin
// carries it, one flow per QP.
//
// NCCL's ring AllReduce runs on every channel at once, each channel a ring in
// rank order over its own slice of the buffer (channel c: elements
// ring_chunk(C, c, count)); on a channel, rank r sends to r+1 over one net
// connection, which the plugin spreads over Q QPs, splitting every message
// evenly (nccl_net/transfer.cc). All C x Q QPs of every edge carry data at
// the same time for the whole collective, so a *step* here is every QP flow
// of every edge of every channel at once: the link-load checker then counts
// what is really on a link together, and its lower bound is the one the plan
// must meet. The two steps, reduce-scatter and allgather, have the same flows
// (as allreduce-ring's) and are planned as one class; their bytes are the
// ring's, per channel slice and QP share.
//
// Flow::conn is the channel and Flow::qp the QP within the connection: the
// plugin looks a QP up by (its NIC address, the peer's, the listener's
// connection serial, QP index), and the serial is how many connections the
// receiving process accepted on that NIC before; NCCL sets up a ring's
// receive side channel by channel in increasing order, so with one rank per
// host (the only net peer of a NIC on a channel is its ring predecessor) the
// serial of channel c's edge is c (docs/nccl.md).
#include <algorithm>

#include <fmt/format.h>

#include "weft/routing/schedule.h"

namespace weft::routing {

Status validate(const NcclRingShape& shape) {
  if (shape.channels < 1 || shape.channels > kMaxNcclChannels) {
    return invalid_argument(
        fmt::format("{} channels: NCCL runs 1..{} (MAXCHANNELS)", shape.channels, kMaxNcclChannels));
  }
  if (shape.qps < 1 || shape.qps > kMaxNcclQps) {
    return invalid_argument(
        fmt::format("{} QPs per connection: the weft NCCL plugin opens 1..{} (WEFT_NCCL_QPS)", shape.qps, kMaxNcclQps));
  }
  return ok_status();
}

int nccl_ring_ports_per_pair(const NcclRingShape& shape, int at_least) {
  return std::max(at_least, 16 * shape.channels * shape.qps);
}

Schedule build_nccl_ring(int ranks, const NcclRingShape& shape, uint64_t count, uint32_t es) {
  Schedule s{Collective::kNcclRing, ranks, count, es, {}};
  if (ranks < 2) return s;
  const size_t per_step = static_cast<size_t>(ranks) * static_cast<size_t>(shape.channels) * static_cast<size_t>(shape.qps);
  for (int phase = 0; phase < 2; ++phase) {
    Step st{phase == 0 ? "nccl-rs" : "nccl-ag", 1, ranks - 1, {}};
    st.flows.reserve(per_step);
    for (int c = 0; c < shape.channels; ++c) {
      const uint64_t slice = ring_chunk(shape.channels, c, count).size();
      for (int r = 0; r < ranks; ++r) {
        // As allreduce-ring (schedule.cc) on the channel's slice: every
        // chunk but the one rank r skips in this phase.
        const int skipped = (r + 1 + phase) % ranks;
        const uint64_t sent = (slice - ring_chunk(ranks, skipped, slice).size()) * es;
        for (int q = 0; q < shape.qps; ++q) {
          Flow fl{r, (r + 1) % ranks, ring_chunk(shape.qps, q, sent).size(), 0, c, q};
          st.flows.push_back(fl);
        }
      }
    }
    s.steps.push_back(std::move(st));
  }
  return s;
}

}  // namespace weft::routing
