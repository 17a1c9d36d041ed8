// The order a route plan's gates impose, seen in the trace (HD's and
// hybrid's rounds tests): every send with the schedule step its rank was
// in, then per gate {j, a, d, j'} the flow into d of step j' sent before
// d's token to a, and that token before a's data of step j.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "weft/collectives/communicator.h"
#include "weft/routing/gates.h"
#include "weft/routing/schedule.h"

namespace weft::coll::testing {

// The schedule step of an HD trace step event (HD on L.ranks ranks); -1 for
// phases that are not HD's (hybrid's intra-host ones).
inline int hd_sched_step(const routing::HdLayout& L, std::string_view phase, int distance) {
  int k = 0;
  while ((1 << k) < distance) ++k;
  if (phase == "fold") return routing::hd_fold_step(L);
  if (phase == "unfold") return routing::hd_unfold_step(L);
  if (phase == "rs") return routing::hd_rs_step(L, k);
  if (phase == "ag") return routing::hd_ag_step(L, k);
  return -1;
}

class SendLog {
 public:
  SendLog(int ranks, routing::HdLayout layout)
      : layout_(layout), sent_(static_cast<size_t>(ranks)), step_of_(static_cast<size_t>(ranks), -1) {}

  // CommConfig::trace.
  void trace(int rank, const TraceEvent& e) {
    const auto at = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> l(mu_);
    const auto r = static_cast<size_t>(rank);
    if (e.kind == TraceEvent::kStep) {
      step_of_[r] = hd_sched_step(layout_, e.phase, e.distance);
    } else if (e.kind == TraceEvent::kSend) {
      sent_[r].push_back({step_of_[r], e.peer, e.bytes, at});
    }
  }

  // Every gate's data in <= token <= data out; `sched` (global ranks) says
  // whose data flows into the token's sender and out of the waiter.
  void expect_order(const std::vector<routing::Gate>& gates, const routing::Schedule& sched) const {
    for (const routing::Gate& g : gates) {
      SCOPED_TRACE(::testing::Message() << "gate: rank " << g.waiter << " at step " << g.step << " waits for rank "
                                        << g.from << " after step " << g.after_step);
      int src = -1;
      for (const routing::Flow& f : sched.steps[static_cast<size_t>(g.after_step)].flows) {
        if (f.dst == g.from) src = f.src;
      }
      ASSERT_GE(src, 0);
      int dst = -1;
      for (const routing::Flow& f : sched.steps[static_cast<size_t>(g.step)].flows) {
        if (f.src == g.waiter) dst = f.dst;
      }
      ASSERT_GE(dst, 0);
      const auto data_in = when(src, g.after_step, g.from, false);
      const auto token = when(g.from, g.after_step, g.waiter, true);
      const auto data_out = when(g.waiter, g.step, dst, false);
      ASSERT_TRUE(data_in && token && data_out);
      EXPECT_LE(*data_in, *token) << "the token left before the data it vouches for was sent";
      EXPECT_LE(*token, *data_out) << "the gated rank sent before its token was sent";
    }
  }

 private:
  struct Sent {
    int step, peer;
    size_t bytes;
    std::chrono::steady_clock::time_point at;
  };
  std::optional<std::chrono::steady_clock::time_point> when(int rank, int step, int peer, bool token) const {
    for (const Sent& s : sent_[static_cast<size_t>(rank)]) {
      if (s.step == step && s.peer == peer && (s.bytes == 0) == token) return s.at;
    }
    return std::nullopt;
  }

  routing::HdLayout layout_;
  std::mutex mu_;
  std::vector<std::vector<Sent>> sent_;  // by rank
  std::vector<int> step_of_;             // by rank: the schedule step it is in
};

}  // namespace weft::coll::testing
