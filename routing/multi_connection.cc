#include "weft/routing/multi_connection.h"

#include <algorithm>

#include <fmt/format.h>

namespace weft::routing {

Status validate_connections_per_pair(int q) {
  if (q < 1 || q > kMaxConnectionsPerPair) {
    return invalid_argument(fmt::format("{} connections per directed pair: the TCP transport opens 1..{} "
                                        "(connections_per_peer)",
                                        q, kMaxConnectionsPerPair));
  }
  return ok_status();
}

Result<Schedule> with_connections(const Schedule& s, int q) {
  WEFT_RETURN_IF_ERROR(validate_connections_per_pair(q));
  if (q == 1) return s;
  Schedule out{s.collective, s.ranks, s.count, s.elem_size, {}};
  out.steps.reserve(s.steps.size());
  for (const Step& st : s.steps) {
    Step split{st.phase, st.distance, st.repeat, {}};
    split.flows.reserve(st.flows.size() * static_cast<size_t>(q));
    for (const Flow& f : st.flows) {
      if (f.conn != 0 || f.qp != 0) {
        return invalid_argument(fmt::format("flow {} -> {} of step {} is connection {} QP {} already: its schedule "
                                            "has connections of its own",
                                            f.src, f.dst, split.phase, f.conn, f.qp));
      }
      for (int c = 0; c < q; ++c) {
        // The transport stripes a message evenly over the connections.
        split.flows.push_back({f.src, f.dst, ring_chunk(q, c, f.bytes).size(), f.round, c, 0});
      }
    }
    out.steps.push_back(std::move(split));
  }
  return out;
}

int plan_connections(const RoutePlan& plan) {
  int q = 1;
  for (const PlanFlow& f : plan.flows) q = std::max(q, f.conn + 1);
  return q;
}

}  // namespace weft::routing
