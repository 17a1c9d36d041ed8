// Runs AllReduce calls under a route plan with rounds and counts the tokens
// (zero-byte sends) they took: shared by the HD and the ring rounds tests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness.h"
#include "weft/routing/plan.h"

namespace weft::coll::testing {

// `calls` in-place i32 sum AllReduces of `count` elements with `algorithm`
// on `n` ranks of `transport` under `plan` (segments of `segment` bytes, 0 =
// the default), every element of every call checked exactly (each call's
// input differs, so a call that moved nothing is caught). Returns the
// zero-byte sends of all ranks: the tokens, where no data message is empty.
// `also` edits each rank's config further (host names).
inline int gated_allreduces(const std::string& transport, int n, const routing::RoutePlan& plan, Algorithm algorithm,
                            size_t count, size_t segment, int calls,
                            const std::function<void(CommConfig&)>& also = {}) {
  std::atomic<int> zero_byte{0};
  run_ranks(
      n,
      [&](Communicator& comm) {
        std::vector<int32_t> v(count);
        CollectiveOptions o;
        o.algorithm = algorithm;
        o.segment_bytes = segment;
        for (int call = 0; call < calls; ++call) {
          for (size_t i = 0; i < count; ++i) v[i] = comm.rank() * 1000 + static_cast<int32_t>(i % 97) + call;
          Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
          ASSERT_TRUE(s) << s.to_string();
          for (size_t i = 0; i < count; ++i) {
            const int32_t want = 1000 * n * (n - 1) / 2 + n * (static_cast<int32_t>(i % 97) + call);
            ASSERT_EQ(v[i], want) << "rank " << comm.rank() << " element " << i << " call " << call;
          }
        }
      },
      [&](CommConfig& c) {
        c.transport = transport;
        c.plan = plan;
        c.timeout = std::chrono::seconds(60);
        c.trace = [&](int, const TraceEvent& e) {
          if (e.kind == TraceEvent::kSend && e.bytes == 0) ++zero_byte;
        };
        if (also) also(c);
      });
  return zero_byte.load();
}

}  // namespace weft::coll::testing
