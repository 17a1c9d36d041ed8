// nccl-ring planner tests' shared cases: the shapes, NIC addresses, and a
// plan judged by the link-load checker over a fresh model table.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {

struct Shape {
  int channels;
  int qps;
};

inline std::string shape_name(const ::testing::TestParamInfo<Shape>& i) {
  return fmt::format("C{}xQ{}", i.param.channels, i.param.qps);
}

inline std::vector<Shape> all_shapes() {
  std::vector<Shape> out;
  for (int c : {1, 2, 4, 8}) {
    for (int q : {1, 2, 4}) out.push_back({c, q});
  }
  return out;
}

// A NIC address per NIC, as a topology file would give it.
inline void give_addresses(topo::Fabric& f) {
  for (size_t i = 0; i < f.nics.size(); ++i) f.nics[i].address = fmt::format("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
}

struct Judged {
  RoutePlan plan;
  LoadReport rep;
};

inline Result<Judged> plan_and_judge(const topo::Fabric& f, const ranking::RankOrder& order, const Shape& shape,
                              uint32_t seed) {
  const NcclRingShape ns{shape.channels, shape.qps};
  WEFT_ASSIGN_OR_RETURN(auto s, build_schedule(Collective::kNcclRing, order.size(), 1 << 16, 4, ns));
  auto table = make_model_path_table(f, make_hash("crc32", seed).value(), seed);
  PlannerOptions opt;
  opt.ports_per_pair = nccl_ring_ports_per_pair(ns, 64);
  WEFT_ASSIGN_OR_RETURN(auto planned, plan_routes(f, order, s, *table, opt));
  auto fresh = make_model_path_table(f, make_hash("crc32", seed).value(), seed);
  WEFT_ASSIGN_OR_RETURN(auto router, make_table_router(f, order, planned.plan, *fresh));
  WEFT_ASSIGN_OR_RETURN(auto rep, check_link_load(f, order, s, *router));
  return Judged{std::move(planned.plan), std::move(rep)};
}

}  // namespace weft::routing
